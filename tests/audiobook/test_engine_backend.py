"""The in-process path: an object with the Engine's batch interface makes the chunks."""

from __future__ import annotations

import dataclasses
import math
import threading
import time

import numpy as np
import pytest
import torch

from ownvoice.audiobook import BookOptions, EngineBackend, render_book
from ownvoice.audiobook.cast import parse_cast
from ownvoice.engine.options import SamplingOptions
from ownvoice.errors import InvalidInput, VoiceNotFound
from tests.audiobook.conftest import STORY_CHUNK_CHARS, STORY_CHUNKS
from tests.audiobook.fake_server import SR, speech


class FakeEngine:
    """Speaks like the fake server through the engine's batch API (start / join / step);
    misbehaves on the first call for chosen words. Each chunk's audio comes out whole at the
    step after it joined."""

    model_type = "custom_voice"
    supported_speakers = ["ryan", "serena"]
    supported_languages = ["auto", "english", "german"]
    instruct_supported = False
    default_sampling = SamplingOptions()
    device = "cpu"

    def __init__(self, runaway=(), truncate=(), max_batch=4):
        self.runaway, self.truncate = set(runaway), set(truncate)
        self.max_batch = max_batch
        self.calls: list[tuple[str, object]] = []
        self.rows: list = []
        self.audio: list = []  # ended sequences whose chunk was not read yet
        self.max_active = 0
        self._lock = threading.Lock()

    def start(self, text, voice=None, instruct=None, options=None, tag=None):
        from ownvoice.engine.sequence import Sequence

        with self._lock:
            self.calls.append((text, voice, options))
            first = sum(t == text for t, _, _ in self.calls) == 1
        if voice not in ("ryan", "serena", None):
            raise VoiceNotFound(f"speaker {voice!r} not found; available: ryan")
        if first and any(w in text for w in self.runaway):  # never ends: hits the frame cap
            audio, stop = np.full(options.max_frames * 1920, 0.1, np.float32), "max_frames"
        elif first and any(w in text for w in self.truncate):  # stops almost at once
            audio, stop = speech(text)[: SR // 10], "eos"
        else:
            audio, stop = speech(text), "eos"
        seq = Sequence(None, None, 1, None, decoder=lambda codes: audio, first_chunk_frames=1)
        seq.fake_stop = stop
        return seq

    def join(self, seq):
        assert len(self.rows) < self.max_batch
        self.rows.append(seq)
        self.max_active = max(self.max_active, len(self.rows))

    @property
    def running(self):
        return list(self.rows)

    @property
    def first_chunks_due(self) -> bool:
        return bool(self.audio)  # each sequence's one chunk is its first

    def step(self):
        """Like Engine.step: every row's whole audio in this step, handed out as read; what
        is not read stays for the next step."""
        time.sleep(0.01)  # long enough for the other threads' chunks to join
        rows, self.rows = self.rows, []
        for seq in rows:
            seq.add(torch.zeros(16, dtype=torch.long), seq.fake_stop)
            self.audio.append(seq)
        return self._chunks()

    def ready_chunks(self):
        return self._chunks()

    def _chunks(self):
        while self.audio:
            seq = self.audio.pop(0)
            yield seq, seq.chunk()

    def cancel_all(self):
        rows, self.rows = self.rows, []
        out = [(seq, seq.take(None, "cancelled")) for seq in rows]
        out += [(seq, seq.chunk()) for seq in self.audio]
        self.audio = []
        return out


def test_in_process_render_caps_frames_retries_runaways_and_batches(story, tmp_path):
    engine = FakeEngine(runaway=["Bravo"], truncate=["Golf"])
    backend = EngineBackend(engine, model_id="/models/tiny", voice="ryan")
    options = BookOptions(chunk_chars=STORY_CHUNK_CHARS, jobs=4, backoff_s=0.0, language="english")
    report = render_book(
        str(story), str(tmp_path / "b.flac"), backend, options, show_progress=False
    )

    assert report.complete, report.text()
    assert report.chunks == STORY_CHUNKS
    assert report.retries == {"runaway": 1, "truncated": 1}
    assert 2 <= engine.max_active <= 4  # chunks shared the engine's steps, up to --jobs
    for text, voice, opts in engine.calls:
        assert voice == "ryan" and opts.language == "english"
        shortest, longest = _limits(text, options)
        assert opts.max_frames == math.ceil(longest * 12.5) + 1  # a runaway costs bounded time
    bravo_seeds = [o.seed for t, _, o in engine.calls if "Bravo" in t]
    assert len(bravo_seeds) == 2 and bravo_seeds[0] != bravo_seeds[1]
    # the report says how full the batch was, from the scheduler's own step counts
    steps = backend.scheduler.steps
    assert report.batch_size == 4 and steps > 0
    assert report.batch_rows == pytest.approx(backend.scheduler.row_steps / steps)
    assert 1 < report.batch_rows <= 4
    assert f"batch       {report.batch_rows:.1f} rows per step on average, of 4" in report.text()
    assert report.speed == pytest.approx(report.new_audio_seconds / report.synth_seconds)
    assert f"{report.speed:.2f} audio minutes per minute" in report.text()


def _limits(text, options):
    from ownvoice.audiobook.render import length_limits

    return length_limits(text, options)


def test_same_seeds_on_a_rerun_of_a_fresh_work_dir(story, tmp_path):
    seeds = []
    for run in range(2):
        engine = FakeEngine()
        backend = EngineBackend(engine, model_id="m", voice="ryan")
        options = BookOptions(chunk_chars=STORY_CHUNK_CHARS, seed=7)
        render_book(str(story), str(tmp_path / f"{run}.wav"), backend, options, show_progress=False)
        seeds.append(sorted((t, o.seed) for t, _, o in engine.calls))  # chunks run in parallel
    assert seeds[0] == seeds[1] and len({s for _, s in seeds[0]}) == STORY_CHUNKS


def test_engine_user_errors_stop_the_book(story, tmp_path):
    """A voice the service does not know stops the book at once, as a voice the engine itself
    refuses does (no retries: every chunk would fail alike)."""
    backend = EngineBackend(FakeEngine(), model_id="m", voice="nobody")
    with pytest.raises(InvalidInput, match="voice 'nobody' is not available"):
        render_book(
            str(story), str(tmp_path / "b.wav"), backend, BookOptions(), show_progress=False
        )
    engine = FakeEngine()
    engine.supported_speakers = ["ryan", "serena", "ghost"]  # listed, but the engine refuses it
    backend = EngineBackend(engine, model_id="m", voice="ghost")
    with pytest.raises(VoiceNotFound, match="speaker 'ghost' not found"):
        render_book(
            str(story), str(tmp_path / "c.wav"), backend, BookOptions(), show_progress=False
        )


def test_real_tiny_engine_through_the_cli_wiring(tiny_checkpoints, tmp_path):
    """The in-process path against the real Engine (a tiny random CustomVoice checkpoint).

    A random model ends (EOS) or runs to the frame cap by chance, so the tight runaway limit
    makes the cap ~10 frames and either outcome is accepted; what must hold is that our
    options reach the engine and its result comes back as a chunk or a reported runaway."""
    import argparse

    from ownvoice.cli.book import _engine_backend
    from ownvoice.engine.engine import Engine
    from ownvoice.errors import InvalidInput

    path = tiny_checkpoints["0.6B-CustomVoice"]
    engine = Engine.load(str(path), device="cpu", dtype="float32")
    args = argparse.Namespace(
        model=str(path), device="cpu", dtype="float32", voice=None, instruct=None,
        ref_audio=None, ref_text=None, x_vector_only=False,
    )  # fmt: skip
    with pytest.raises(InvalidInput, match="--voice is required .* speakers: .*ryan"):
        _engine_backend(args, engine)
    args.voice = "ryan"
    backend = _engine_backend(args, engine)
    assert backend.identity()["model"] == str(path.resolve())

    text = tmp_path / "one.txt"
    text.write_text("Hi.")
    options = BookOptions(retries=0, runaway_factor=1.0, runaway_slack_s=0.4, language="english")
    report = render_book(
        str(text), str(tmp_path / "one.wav"), backend, options, show_progress=False
    )
    assert report.chunks == 1
    if report.complete:
        assert report.rendered == 1 and report.audio_seconds > 0
    else:
        assert report.failures[0]["error"].startswith("runaway")

    # a cast's voices reach the real engine as its speakers (names matched ignoring case)
    said, start = [], engine.start

    def spy(text, voice=None, **kw):
        said.append((text, voice))
        return start(text, voice=voice, **kw)

    engine.start = spy
    text.write_text("Hi. “Yo.”")
    cast = parse_cast({"dialogue": "Serena"})
    render_book(str(text), str(tmp_path / "two.wav"), backend,
                dataclasses.replace(options, cast=cast), show_progress=False)  # fmt: skip
    assert sorted(said) == [("Hi.", "ryan"), ("“Yo.”", "serena")]
