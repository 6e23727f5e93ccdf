"""A fault stays with its request: whatever fails while one row joins, steps or decodes ends
that row alone, with that error, and the rows beside it make exactly the codes and samples they
make alone. Faults are injected into a real (tiny) engine where real ones arise: a row's
settings and its prefill running out of memory at join; its text and its cache growing out of
memory at a step; its decoder. A batched phase that runs out of memory once is run again and
changes nothing; one that keeps failing fails that step's rows and leaves the engine serving.

Chunks of one frame: solo and batched decode then cut the audio at the same frames, so
samples compare bit for bit (otherwise a batch's staggered chunk boundaries move the float
rounding, tests/engine/test_batching.py's 1e-5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ownvoice.engine.options import SynthesisOptions

LIKE = "0.6B-CustomVoice"
GOOD = [  # text, voice, seed, frames, step it joins at
    ("The first of the good requests, spoken all the way.", "ryan", 1, 14, 0),
    ("A second one, with another voice.", "aiden", 2, 11, 1),
    ("And a third that joins after the fault.", "vivian", 3, 9, 6),
]
BAD = ("The request that goes wrong.", "ryan", 4, 16, 2)


def opts(seed: int, frames: int) -> SynthesisOptions:
    return SynthesisOptions(seed=seed, max_frames=frames, first_chunk_frames=1, chunk_frames=1)


@pytest.fixture(scope="module")
def engine(tiny_checkpoints, kernels):
    from ownvoice.engine.engine import Engine

    engine = Engine.load(
        str(tiny_checkpoints[LIKE]), device="cpu", dtype="float32", overlap_decoder=False
    )
    assert engine.exact_batching  # the kernels: a row's codes do not depend on its batch
    return engine


@pytest.fixture(scope="module")
def alone(engine):
    """Each good request's codes and samples, run alone."""
    return [_audio(list(engine.stream(t, v, options=opts(s, f)))) for t, v, s, f, _ in GOOD]


def _audio(chunks):
    assert chunks[-1].is_last and sum(c.is_last for c in chunks) == 1
    return (
        np.concatenate([c.codes for c in chunks]).reshape(-1, 16),
        np.concatenate([c.samples for c in chunks]),
        chunks[-1].stop_reason,
    )


def run_batch(engine, hurt=lambda seq: None):
    """The good requests and the bad one through one batch; `hurt(bad)` plants the fault.
    Returns the good ones' (codes, samples, stop) and what became of the bad one."""
    reqs = [*GOOD, BAD]
    seqs = [engine.start(t, v, options=opts(s, f)) for t, v, s, f, _ in reqs]
    bad = seqs[-1]
    hurt(bad)
    chunks = {id(s): [] for s in seqs}
    join_error = None
    for step in range(200):
        for (*_, at), seq in zip(reqs, seqs, strict=True):
            if at == step:
                try:
                    engine.join(seq)
                except Exception as e:
                    assert seq is bad, e
                    join_error = e
        for seq, chunk in engine.step():
            chunks[id(seq)].append(chunk)
        if step > 6 and not engine.running:
            break
    assert not engine.running and not engine._out.pending and not engine._loop.rows
    good = [_audio(chunks[id(s)]) for s in seqs[:-1]]
    return good, bad, chunks[id(bad)], join_error


def assert_same(good, alone):
    for (codes, samples, stop), (want_codes, want_samples, want_stop) in zip(
        good, alone, strict=True
    ):
        np.testing.assert_array_equal(codes, want_codes)
        np.testing.assert_array_equal(samples, want_samples)  # bit for bit
        assert stop == want_stop


def test_without_a_fault_the_batch_is_the_solo_runs(engine, alone):
    good, bad, bad_chunks, join_error = run_batch(engine)
    assert_same(good, alone)
    assert join_error is None and bad.error is None and bad_chunks[-1].stop_reason == "max_frames"


def _fail_at_join(engine, monkeypatch, where: str, error: Exception):
    loop = engine._loop
    target = loop if where == "_configure" else loop.backend
    real = getattr(target, where)
    state = {}

    def failing(*args):
        if where == "_configure" and args[1] is state["bad"]:
            raise error
        if where == "prefill" and loop.rows[args[0]] is state["bad"]:
            raise error
        return real(*args)

    monkeypatch.setattr(target, where, failing)
    return lambda bad: state.update(bad=bad)


@pytest.mark.parametrize(
    "where, error",
    [
        # a sampling set-up that overflowed float32 (temperature 1e39) failed here
        ("_configure", RuntimeError("value cannot be converted to type float without overflow")),
        ("prefill", torch.OutOfMemoryError("CUDA out of memory (injected)")),
    ],
)
def test_a_row_failing_as_it_joins_leaves_the_batch_as_it_was(
    engine, alone, monkeypatch, where, error
):
    good, bad, bad_chunks, join_error = run_batch(
        engine, _fail_at_join(engine, monkeypatch, where, error)
    )
    assert join_error is error and bad.slot is None and not bad_chunks
    assert_same(good, alone)


def test_a_row_whose_text_fails_at_a_step_ends_alone(engine, alone):
    def hurt(bad):
        real = bad.text_row

        def text_row(k):
            if k == 4:
                raise UnicodeError("its text broke (injected)")
            return real(k)

        bad.text_row = text_row

    good, bad, bad_chunks, _ = run_batch(engine, hurt)
    assert_same(good, alone)
    assert isinstance(bad.error, UnicodeError) and bad_chunks[-1].stop_reason == "error"
    assert sum(c.num_frames for c in bad_chunks) == 5  # its frames before the fault were heard


def test_a_row_whose_cache_runs_out_of_memory_ends_alone(engine, alone, monkeypatch):
    loop = engine._loop
    real = loop.backend.ensure
    state = {}

    def ensure(slot, needed):
        if loop.rows[slot] is state.get("bad") and state["bad"].frames == 7:
            raise torch.OutOfMemoryError("out of memory growing its cache (injected)")
        return real(slot, needed)

    monkeypatch.setattr(loop.backend, "ensure", ensure)
    good, bad, bad_chunks, _ = run_batch(engine, lambda bad: state.update(bad=bad))
    assert_same(good, alone)
    assert isinstance(bad.error, torch.OutOfMemoryError) and bad_chunks[-1].stop_reason == "error"


def test_a_row_whose_decoder_fails_ends_alone(engine, alone):
    def hurt(bad):
        real, calls = bad.decoder, []

        def decoder(codes):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("decoder broke (injected)")
            return real(codes)

        bad.decoder = decoder

    good, bad, bad_chunks, _ = run_batch(engine, hurt)
    assert_same(good, alone)
    assert str(bad.error) == "decoder broke (injected)"
    assert [c.stop_reason for c in bad_chunks] == [None, None, "error"]


def _talker_failing(engine, monkeypatch, times: int):
    """The batched talker phase raises out of memory `times` times, from the batch's 6th step."""
    loop = engine._loop
    real, calls = loop.backend.talker, []

    def talker(*args):
        calls.append(1)
        if len(calls) >= 6 and len([c for c in calls if c == "failed"]) < times:
            calls.append("failed")
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real(*args)

    monkeypatch.setattr(loop.backend, "talker", talker)
    return calls


def test_a_batched_step_that_runs_out_of_memory_once_is_run_again(engine, alone, monkeypatch):
    calls = _talker_failing(engine, monkeypatch, times=1)
    good, bad, bad_chunks, _ = run_batch(engine)
    assert calls.count("failed") == 1
    assert_same(good, alone)
    assert bad.error is None and bad_chunks[-1].stop_reason == "max_frames"


def test_a_batched_step_that_keeps_failing_ends_its_rows_and_the_engine_serves_on(
    engine, alone, monkeypatch
):
    _talker_failing(engine, monkeypatch, times=2)
    seqs = [engine.start(t, v, options=opts(s, f)) for t, v, s, f, _ in GOOD[:2]]
    for seq in seqs:
        engine.join(seq)
    with pytest.raises(torch.OutOfMemoryError):
        for _ in range(10):
            list(engine.step())
    engine.cancel_all()  # what the scheduler does when a step fails
    assert not engine.running and all(seq.done for seq in seqs)
    monkeypatch.undo()
    t, v, s, f, _ = GOOD[0]
    codes, samples, stop = _audio(list(engine.stream(t, v, options=opts(s, f))))
    np.testing.assert_array_equal(codes, alone[0][0])
    np.testing.assert_array_equal(samples, alone[0][1])


def test_through_the_service_the_failing_request_alone_hears_its_error(
    engine, alone, monkeypatch, caplog
):
    """The same through the speech service every front end uses: the good requests, running at
    once beside the bad one, get their solo audio; the bad one's run raises its error and its
    record says 500."""
    import logging
    import threading

    from ownvoice.service.config import Limits
    from ownvoice.service.planning import SpeechInput
    from ownvoice.service.record import Origin
    from ownvoice.service.speech import SpeechService

    start = engine.start

    def start_hurting_the_bad_one(text, *args, **kwargs):
        seq = start(text, *args, **kwargs)
        if text == BAD[0]:
            real, calls = seq.decoder, []

            def decoder(codes):
                calls.append(1)
                if len(calls) == 4:
                    raise RuntimeError("decoder broke (injected)")
                return real(codes)

            seq.decoder = decoder
        return seq

    monkeypatch.setattr(engine, "start", start_hurting_the_bad_one)
    service = SpeechService.local(engine, name="faults", limits=Limits(max_batch=4), chunk_frames=1)
    got: dict[str, object] = {}
    status: dict[str, str] = {}

    def speak(text, voice, seed, frames):
        request = SpeechInput(input=text, voice=voice, seed=seed, max_frames=frames)
        run = service.speak(request, Origin("test"))
        error = None
        try:
            got[text] = _audio(list(run.chunks_blocking()))
        except Exception as e:
            got[text] = error = e
        finally:
            status[text] = run.finish(error)

    threads = [threading.Thread(target=speak, args=r[:4]) for r in [*GOOD, BAD]]
    with caplog.at_level(logging.INFO, logger="ownvoice.requests"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    try:
        assert_same([got[text] for text, *_ in GOOD], alone)
        assert str(got[BAD[0]]) == "decoder broke (injected)" and status[BAD[0]] == "500"
        assert [status[text] for text, *_ in GOOD] == ["200"] * 3
        lines = [m for m in caplog.messages if m.startswith("test 200 ")]
        assert len(lines) == 3 and all("stop=max_frames" in line for line in lines), lines
    finally:
        service.pool.close()
