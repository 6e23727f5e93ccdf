"""Text that arrives while it is spoken (service/textfeed.py) and the scheduler's parked
generations: whole sentences go out as soon as a row can take them, the last one waits for
more text or the end, and a generation waiting for text holds no row of the batch."""

from __future__ import annotations

import threading
import time

import pytest

from ownvoice.errors import InvalidInput
from ownvoice.service.admission import Admission
from ownvoice.service.generation import PENDING, Generation
from ownvoice.service.scheduler import Scheduler
from ownvoice.service.textfeed import TextFeed
from tests.server.fakes import FakeEngine


def test_whole_sentences_go_out_and_the_last_waits_for_more():
    feed = TextFeed(max_chars=300, language="english", limit=4096)
    assert feed.next_piece() is PENDING
    feed.push("Sure! The weather tomorrow")
    assert feed.next_piece() == "Sure!"
    assert feed.next_piece() is PENDING  # "The weather tomorrow" may go on
    feed.push(" is sunny. It costs 3.")
    assert feed.next_piece() == "The weather tomorrow is sunny."
    feed.push("5 euros.")  # "3." was not the end of a sentence after all
    feed.close()
    assert feed.next_piece() == "It costs 3.5 euros."
    assert feed.next_piece() is None


def test_sentences_known_together_are_packed_like_the_http_path():
    feed = TextFeed(max_chars=40, language="english", limit=4096)
    feed.push("One. Two two. Three three three. Four four four four. Five")
    assert feed.next_piece() == "One. Two two. Three three three."  # 32 characters
    assert feed.next_piece() == "Four four four four."
    assert feed.next_piece() is PENDING
    feed.close()
    assert feed.next_piece() == "Five"
    assert feed.next_piece() is None


def test_line_breaks_and_chinese_text_lose_nothing():
    feed = TextFeed(max_chars=300, language=None, limit=4096)
    feed.push("你好。今天天气很好。明天")
    assert feed.next_piece() == "你好。今天天气很好。"
    feed.push("会下雨。\n\nA new paragraph\nwrapped here. End")
    # packed across the paragraph as chunk_text packs them; the hard wrap is a space
    assert feed.next_piece() == "明天会下雨。A new paragraph wrapped here."
    feed.close()
    assert feed.next_piece() == "End" and feed.next_piece() is None


def test_the_limit_counts_all_the_text_and_each_push_wakes_the_reader():
    woken = []
    feed = TextFeed(max_chars=300, language="english", limit=10, wake=lambda: woken.append(1))
    feed.push("12345")
    feed.push("67890")
    with pytest.raises(InvalidInput, match="10 characters"):
        feed.push("x")
    feed.close()
    assert len(woken) == 3
    with pytest.raises(InvalidInput):
        feed.push("late")


def run_feed(feed: TextFeed, engine: FakeEngine):
    def pieces(eng):
        for piece in feed:
            yield piece if piece is PENDING else eng.start(piece, voice="ryan")

    return pieces


def test_a_generation_waiting_for_text_gives_its_row_to_others_and_resumes():
    engine = FakeEngine(frames_per_char=0.5, frame_delay=0.01)
    worker = Scheduler("m", loader=None, engine=engine, max_batch=1)
    worker.start(load_now=True).result(5)
    try:
        feed = TextFeed(max_chars=300, language="english", limit=4096, wake=worker.wake)
        admission = Admission(2, 0)
        streamed = Generation(run_feed(feed, engine), admission.admit(), time.monotonic() + 60)
        chunks: list = []
        done = threading.Event()

        def read():
            for chunk in streamed.chunks_blocking():
                chunks.append(chunk)
            done.set()

        feed.push("First sentence. The second")
        worker.submit(streamed)
        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 5
        while not any(c.is_last for c in chunks) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert any(c.is_last for c in chunks), "the first sentence was not spoken"
        # waiting for text: the only row of the batch is free for another request
        other = Generation(
            lambda eng: iter([eng.start("Meanwhile.", voice="vivian")]),
            admission.admit(),
            time.monotonic() + 60,
        )
        worker.submit(other)
        assert len(list(_collect(other))) > 0  # it ran to its end while the stream waited
        assert not done.is_set()
        feed.push(" one ends here.")
        feed.close()
        assert done.wait(5)
        texts = [c["text"] for c in engine.calls if c["voice"] == "ryan"]
        assert texts == ["First sentence.", "The second one ends here."]
    finally:
        worker.stop()


def test_a_cancelled_generation_waiting_for_text_ends_and_frees_its_slot():
    engine = FakeEngine()
    worker = Scheduler("m", loader=None, engine=engine, max_batch=1)
    worker.start(load_now=True).result(5)
    try:
        feed = TextFeed(max_chars=300, language="english", limit=4096, wake=worker.wake)
        admission = Admission(1, 0)
        gen = Generation(run_feed(feed, engine), admission.admit(), time.monotonic() + 60)
        worker.submit(gen)
        deadline = time.monotonic() + 5
        while not gen.started.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        gen.cancel()
        assert list(_collect(gen)) == []
        assert gen.stop_reason == "cancelled" and admission.admitted == 0
    finally:
        worker.stop()


def _collect(gen: Generation, timeout: float = 5.0):
    result: list = []
    thread = threading.Thread(target=lambda: result.extend(gen.chunks_blocking()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "the generation never ended"
    return result
