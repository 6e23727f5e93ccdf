"""`ownvoice bench --text-rate 20,60`: speech while an LLM still writes its answer.

Words arrive at an LLM's pace (tokens per second; a token is taken as up to five characters
with the space before them, about what a BPE tokenizer makes of English) and are spoken two ways,
each on one engine, through the service's own text feeds:

  word-level      the answer's first piece starts on its first stable words (LiveText +
                  Engine.start_open, the streaming text mode) and takes the rest as it comes;
  sentence-level  vLLM-Omni's way: a sentence is spoken once it is whole (TextFeed), as a request
                  of its own in the model's default text mode -- what an HTTP request sent at the
                  end of the first sentence gets.

Reported per rate and way: time to first audio counted from the first word, when the first
sentence was whole, the steps the row sat out waiting for text (word-level), and ms per frame
over `frames` frames of the first piece (a --no-eos checkpoint makes exactly that many).
"""

from __future__ import annotations

import re
import threading
import time

from ownvoice.engine.opentext import TextSoFar
from ownvoice.engine.options import SynthesisOptions

ANSWER = (
    "Sure, I can help with that: tomorrow in Berlin it will be mostly sunny, with highs around "
    "twenty-two degrees and a light breeze from the west in the afternoon. You will not need an "
    "umbrella, but take a jacket for the evening."
)


def llm_tokens(text: str) -> list[str]:
    """The answer cut as an LLM would send it, roughly: runs of up to 5 characters."""
    return re.findall(r"\s*[^\s]{1,5}", text)


class Writer(threading.Thread):
    """Pushes tokens into a feed at `rate` per second."""

    def __init__(self, feed, tokens: list[str], rate: float):
        super().__init__(daemon=True)
        self.feed, self.tokens, self.rate = feed, tokens, rate
        self.t_first: float | None = None
        ends = [i for i, t in enumerate(tokens) if re.search(r"[.!?]$", t)]
        # when the first sentence is whole, counted from the first word (by the schedule)
        self.first_sentence_s = ends[0] / rate if ends else None
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.perf_counter()
        for i, token in enumerate(self.tokens):
            delay = start + i / self.rate - time.perf_counter()
            if delay > 0 and self.stop.wait(delay):
                return
            self.feed.push(token)
            if self.t_first is None:
                self.t_first = time.perf_counter()
        self.feed.close()


def run_text_stream(engine, voice: dict, rates: list[float], frames: int,
                    text: str = ANSWER) -> list[dict]:  # fmt: skip
    """One row per (rate, way); see the module doc. `voice`: start()'s voice / instruct."""
    rows = []
    for rate in rates:
        rows.append(_word_level(engine, voice, rate, frames, text))
        rows.append(_sentence_level(engine, voice, rate, frames, text))
    return rows


def _word_level(engine, voice, rate, frames, text) -> dict:
    from ownvoice.service.livetext import LiveText

    live = LiveText(max_chars=300, language="english", limit=len(text) + 1)
    writer = Writer(live, llm_tokens(text), rate)
    options = SynthesisOptions(language="english", max_frames=frames, first_chunk_frames=1,
                               chunk_frames=8, seed=0)  # fmt: skip

    def source():
        now = live.piece(0)
        return now if isinstance(now, TextSoFar) else TextSoFar("", False)

    writer.start()
    seq = engine.start_open(source, options=options, **voice)
    while not engine.startable(seq):
        time.sleep(0.002)
    engine.join(seq)
    result = _drive(engine, seq, writer, "word-level", rate)
    result["waited_steps"] = seq.text.waited if seq.text else 0
    return result


def _sentence_level(engine, voice, rate, frames, text) -> dict:
    from ownvoice.service.generation import PENDING
    from ownvoice.service.textfeed import TextFeed

    feed = TextFeed(max_chars=300, language="english", limit=len(text) + 1)
    writer = Writer(feed, llm_tokens(text), rate)
    options = SynthesisOptions(language="english", max_frames=frames, first_chunk_frames=1,
                               chunk_frames=8, seed=0)  # fmt: skip
    writer.start()
    while (piece := feed.next_piece()) is PENDING:
        time.sleep(0.002)
    seq = engine.start(piece, options=options, **voice)
    engine.join(seq)
    result = _drive(engine, seq, writer, "sentence-level", rate)
    result["waited_steps"] = 0
    return result


def _drive(engine, seq, writer: Writer, way: str, rate: float) -> dict:
    t_audio = None
    t_start = time.perf_counter()
    chunks = engine.ready_chunks()
    try:
        while True:
            done = False
            for _, chunk in chunks:
                if t_audio is None and len(chunk.samples):
                    t_audio = time.perf_counter()
                done = done or chunk.is_last
            if done:
                break
            chunks = engine.step()
            if engine.waiting_for_text:
                time.sleep(0.002)
    finally:
        writer.stop.set()
        writer.join()
    wall = time.perf_counter() - t_start
    return dict(
        way=way,
        rate=rate,
        ttfa_s=(t_audio - writer.t_first) if t_audio and writer.t_first else None,
        first_sentence_s=writer.first_sentence_s,
        frames=seq.frames,
        ms_per_frame=1e3 * wall / max(1, seq.frames),
    )


def format_text_stream_table(rows: list[dict]) -> str:
    lines = [
        "tok/s  way             TTFA from 1st word  1st sentence whole  waited steps  ms/frame",
    ]
    for r in rows:
        ttfa = f"{r['ttfa_s']:.2f} s" if r["ttfa_s"] is not None else "-"
        sentence = f"{r['first_sentence_s']:.2f} s" if r["first_sentence_s"] is not None else "-"
        lines.append(
            f"{r['rate']:5g}  {r['way']:<14}  {ttfa:>18}  {sentence:>18}  {r['waited_steps']:>12}"
            f"  {r['ms_per_frame']:8.0f}"
        )
    return "\n".join(lines)
