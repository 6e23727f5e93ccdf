"""The service without any front end: a request's life (admission, batching in the scheduler,
cancellation, drain) driven through SpeechService over a fake engine whose steps happen only
when the test allows them, so what is checked is the order of events, never the wall clock."""

from __future__ import annotations

import threading

import pytest

from ownvoice.errors import QueueFull, ShuttingDown
from ownvoice.service.config import Limits
from ownvoice.service.planning import SpeechInput
from ownvoice.service.record import Origin
from ownvoice.service.speech import SpeechService
from tests.server.fakes import FakeEngine

TEXT = "A sentence long enough for any number of frames the test asks for."


class Caller:
    """A client of the service on its own thread: starts a request, reads every chunk."""

    def __init__(self, service: SpeechService, frames: int):
        self.run = service.speak(SpeechInput(input=TEXT, voice="ryan", max_frames=frames),
                                 Origin("test"))  # fmt: skip
        self.frames = 0
        self.status = None
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self) -> None:
        error = None
        try:
            for chunk in self.run.chunks_blocking():
                self.frames += len(chunk.codes)
        except Exception as e:
            error = e
        finally:
            self.status = self.run.finish(error)

    def join(self) -> str:
        self.thread.join(60)
        assert not self.thread.is_alive(), f"the request never ended ({self.frames} frames)"
        return self.status


@pytest.fixture
def serve():
    services = []

    def make(max_batch: int, queue_size: int = 8) -> tuple[SpeechService, FakeEngine]:
        engine = FakeEngine(gated=True, max_batch=max_batch)
        limits = Limits(max_batch=max_batch, queue_size=queue_size)
        service = SpeechService.local(engine, limits=limits, chunk_frames=1)
        services.append(service)
        return service, engine

    yield make
    for service in services:
        service.pool.close()


def wait_for(condition) -> None:
    done = threading.Event()
    for _ in range(6000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("never happened")


def test_a_newcomer_joins_at_the_next_step_and_a_third_waits_for_a_free_row(serve):
    service, engine = serve(max_batch=2)
    first = Caller(service, frames=4)
    wait_for(lambda: engine.active == 1)  # joined; its first step waits for the test
    second, third = Caller(service, frames=6), Caller(service, frames=2)
    engine.allow(100)
    assert [c.join() for c in (first, second, third)] == ["200", "200", "200"]
    assert (first.frames, second.frames, third.frames) == (4, 6, 2)
    # first alone; second beside it from the next step; third once first has left
    assert engine.batches == [1, 2, 2, 2, 2, 2, 1]


def test_a_full_queue_refuses_at_once_and_a_freed_place_is_taken(serve):
    service, engine = serve(max_batch=1, queue_size=1)
    running, queued = Caller(service, frames=3), Caller(service, frames=3)
    with pytest.raises(QueueFull) as refused:
        service.speak(SpeechInput(input=TEXT, voice="ryan"), Origin("test"))
    assert refused.value.retry_after > 0
    # the running one's three frames, then the queued one's first step (which also sends the
    # running one's last chunk): the running one has ended and its place is free
    engine.allow(4)
    assert running.join() == "200" and running.frames == 3
    later = Caller(service, frames=1)  # admitted now
    engine.allow(100)
    assert queued.join() == "200" and later.join() == "200"
    assert engine.max_active == 1


def test_a_cancelled_request_frees_its_row_for_the_next_at_the_next_step(serve):
    service, engine = serve(max_batch=1)
    long, waiting = Caller(service, frames=50), Caller(service, frames=2)
    engine.allow(2)
    wait_for(lambda: long.frames == 2)
    long.run.cancel()
    engine.allow(100)
    assert long.join() == "cancelled" and long.frames < 50
    assert waiting.join() == "200" and waiting.frames == 2
    assert engine.cancelled == 1 and engine.max_active == 1


def test_a_drain_refuses_newcomers_and_finishes_what_runs_unless_aborted(serve):
    service, engine = serve(max_batch=2)
    finishing, aborted = Caller(service, frames=3), Caller(service, frames=50)
    service.begin_drain()
    with pytest.raises(ShuttingDown):
        service.speak(SpeechInput(input=TEXT, voice="ryan"), Origin("test"))
    assert service.in_flight == 2
    engine.allow(4)  # its three frames (and one more step for its last chunk, at most)
    assert finishing.join() == "200" and finishing.frames == 3
    service.abort()  # the drain's time ran out
    engine.allow(100)
    assert aborted.join() == "503" and aborted.frames < 50  # never answered: a 503
    assert service.in_flight == 0


@pytest.mark.parametrize("rows", [3, 1])
def test_a_scripts_spans_generate_together_where_rows_are_free_and_wait_where_not(serve, rows):
    """A script's later spans start beside the one being heard while the batch has rows free
    (a dialogue's turns run together), and wait for their turn when it has none."""
    text = "First one. [pause:0.1] Second one. [pause:0.1] Third one."
    service, engine = serve(max_batch=rows)
    run = service.speak(SpeechInput(input=text, voice="ryan", max_frames=4), Origin("test"))
    chunks = []
    reader = threading.Thread(target=lambda: chunks.extend(run.chunks_blocking()))
    reader.start()
    # every span that found a row has its place before any step is allowed (the first may
    # already wait inside its first step: the others then join at the next)
    admission = run.plan.choice.worker.admission
    wait_for(lambda: admission.admitted == rows)
    engine.allow(100)
    reader.join(60)
    assert run.finish() == "200"
    assert engine.max_active == rows and sum(engine.batches) == 12, engine.batches
    samples = sum(len(c.samples) for c in chunks)
    assert samples == 3 * 4 * 1920 + 2 * 2400  # three spans of 4 frames, two pauses
