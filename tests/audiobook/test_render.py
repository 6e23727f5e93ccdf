"""End to end against a misbehaving server: retries, runaway, duration, loudness, redo, fatal errors."""

from __future__ import annotations

import numpy as np
import pyloudnorm
import pytest
import soundfile as sf

from ownvoice.audiobook import BookOptions, ServerBackend, render_book
from ownvoice.audiobook.assemble import TRIM_MARGIN_S
from ownvoice.audiobook.options import Pauses
from ownvoice.errors import InvalidInput
from tests.audiobook.conftest import STORY_CHUNK_CHARS, STORY_CHUNKS, STORY_GAPS, story_texts
from tests.audiobook.fake_server import SR, speech_samples

FAST = dict(chunk_chars=STORY_CHUNK_CHARS, backoff_s=0.01, max_backoff_s=0.05)


def _backend(server, timeout=1.0, **kw):
    return ServerBackend(server.url, voice="ryan", timeout=timeout, **kw)


def _segments(pcm: np.ndarray, min_gap_s: float = 0.2) -> list[np.ndarray]:
    """The stretches of `pcm` between runs of exact zeros at least min_gap_s long."""
    silent = np.concatenate([[True], pcm == 0, [True]]).astype(np.int8)
    starts = np.flatnonzero(np.diff(silent) == -1)  # first sample of each run of non-zeros
    ends = np.flatnonzero(np.diff(silent) == 1)  # one past its last sample
    out: list[list[int]] = []
    for a, b in zip(starts, ends, strict=True):
        if out and a - out[-1][1] < min_gap_s * SR:
            out[-1][1] = b  # a zero crossing inside speech, not a pause
        else:
            out.append([a, b])
    return [pcm[a:b] for a, b in out]


def test_story_completes_against_a_failing_and_stalling_server(story, server, tmp_path):
    server.stall_s = 2.5  # past the client's 1 s timeout
    server.script("Charlie", "500", "500")
    server.script("Foxtrot", "stall")
    server.script("India", "429")
    server.script("Lima", "runaway")
    out = tmp_path / "story.wav"
    options = BookOptions(jobs=3, **FAST)

    report = render_book(str(story), str(out), _backend(server), options, show_progress=False)

    assert report.complete, report.text()
    assert (report.chunks, report.rendered, report.failed) == (STORY_CHUNKS, STORY_CHUNKS, 0)
    assert report.retries == {"server_error": 2, "timeout": 1, "rate_limited": 1, "runaway": 1}
    assert 2 <= server.max_active <= 3  # chunks ran in parallel, never more than --jobs
    assert server.requests_for("Charlie") == 3 and server.requests_for("Lima") == 2
    # each retry drew a new seed
    lima_seeds = {b["seed"] for b in server.bodies if "Lima" in b["input"]}
    assert len(lima_seeds) == 2
    # every chunk text was asked for, in full, with our voice and the raw-PCM format
    assert set(server.counts) == set(story_texts())
    assert all(b["voice"] == "ryan" and b["response_format"] == "pcm" for b in server.bodies)

    # output = head + every chunk (trimmed to its speech + margins) + the gaps + tail
    audio, rate = sf.read(out, dtype="float32")
    pauses = Pauses()
    speech = sum(speech_samples(t) / SR + 2 * TRIM_MARGIN_S for t in story_texts())
    gaps = sum(n * getattr(pauses, kind) for kind, n in STORY_GAPS.items())
    expected = pauses.head + speech + gaps + pauses.tail
    assert rate == SR
    assert len(audio) / SR == pytest.approx(expected, abs=0.002), (len(audio) / SR, expected)
    assert report.audio_seconds == pytest.approx(len(audio) / SR, abs=1e-3)
    text = report.text()
    assert "retries     5 (rate_limited 1, runaway 1, server_error 2, timeout 1)" in text
    assert "real-time factor" in text and "LU before" in text


def test_chunks_with_a_6_db_spread_come_out_within_1_lu(story, server, tmp_path):
    texts = story_texts()
    server.gain_db = lambda text: 3.0 if texts.index(text) % 2 else -3.0
    out = tmp_path / "story.wav"
    report = render_book(
        str(story), str(out), _backend(server), BookOptions(**FAST), show_progress=False
    )

    assert report.spread_before == pytest.approx(6.0, abs=0.5), report.text()
    assert report.spread_after <= 1.0
    # measured independently on the output file: every chunk near -18 LUFS, peaks under -1 dBFS
    audio, _ = sf.read(out, dtype="float64")
    meter = pyloudnorm.Meter(SR)
    chunks = _segments(audio)
    assert len(chunks) == STORY_CHUNKS
    margin = round(TRIM_MARGIN_S * SR)  # the output keeps each chunk's quiet margins; the
    levels = [
        meter.integrated_loudness(np.pad(c, margin)) for c in chunks
    ]  # short title needs them
    assert max(levels) - min(levels) <= 1.0, levels
    assert all(abs(lv + 18.0) <= 0.5 for lv in levels), levels
    assert 20 * np.log10(np.abs(audio).max()) <= -1.0


def test_rerun_requests_nothing_and_redo_regenerates_one_chunk(story, server, tmp_path):
    out = tmp_path / "story.wav"
    render_book(str(story), str(out), _backend(server), BookOptions(**FAST), show_progress=False)
    assert sum(server.counts.values()) == STORY_CHUNKS
    first = sf.read(out)[0]

    server.counts.clear()
    report = render_book(
        str(story), str(out), _backend(server), BookOptions(**FAST), show_progress=False
    )
    assert sum(server.counts.values()) == 0
    assert (report.reused, report.rendered) == (STORY_CHUNKS, 0)
    assert np.array_equal(sf.read(out)[0], first)

    report = render_book(
        str(story), str(out), _backend(server), BookOptions(**FAST), redo=[3], show_progress=False
    )
    assert dict(server.counts) == {story_texts()[2]: 1}
    assert (report.reused, report.rendered) == (STORY_CHUNKS - 1, 1)
    seeds = [b["seed"] for b in server.bodies if b["input"] == story_texts()[2]]
    assert len(set(seeds)) == 2  # the redo drew a new seed


def test_changed_voice_or_text_renders_only_what_changed(story, server, tmp_path):
    out = tmp_path / "story.wav"
    render_book(str(story), str(out), _backend(server), BookOptions(**FAST), show_progress=False)
    story.write_text(story.read_text().replace("Delta light", "Delta lamplight"))
    server.counts.clear()
    render_book(str(story), str(out), _backend(server), BookOptions(**FAST), show_progress=False)
    assert list(server.counts) == ["Delta lamplight spilled across the dark water."]

    server.counts.clear()
    other = ServerBackend(server.url, voice="vivian", timeout=1.0)
    render_book(str(story), str(out), other, BookOptions(**FAST), show_progress=False)
    assert sum(server.counts.values()) == STORY_CHUNKS


def test_chunk_failing_every_attempt_leaves_no_output_but_keeps_the_rest(story, server, tmp_path):
    server.script("Golf", *["500"] * 3)
    out = tmp_path / "story.wav"
    options = BookOptions(retries=2, **FAST)
    report = render_book(str(story), str(out), _backend(server), options, show_progress=False)
    assert not report.complete and not out.exists()
    assert report.failed == 1 and report.failures[0]["chunk"] == 8
    assert "server_error" in report.failures[0]["error"]
    assert "FAILED      chunk 8" in report.text()

    server.counts.clear()  # the server recovered: a rerun only asks for the failed chunk
    report = render_book(str(story), str(out), _backend(server), options, show_progress=False)
    assert report.complete and dict(server.counts) == {story_texts()[7]: 1}


def test_a_chunk_whose_seeds_ran_away_gets_fresh_ones_on_a_rerun(story, server, tmp_path):
    """A seed that runs away does so every time it is drawn: a rerun without --redo must not
    draw the seeds that failed, or the chunk fails again (and again)."""
    options = BookOptions(retries=1, **FAST)
    out = tmp_path / "story.wav"
    server.script("Golf", "runaway", "runaway")
    report = render_book(str(story), str(out), _backend(server), options, show_progress=False)
    assert report.failed == 1 and report.failures[0]["chunk"] == 8
    failed = {b["seed"] for b in server.bodies if "Golf" in b["input"]}
    assert len(failed) == 2
    server.runaway_seeds = {("Golf", seed) for seed in failed}  # those seeds always run away

    server.bodies.clear()
    report = render_book(str(story), str(out), _backend(server), options, show_progress=False)
    assert report.complete, report.text()
    seeds = [b["seed"] for b in server.bodies if "Golf" in b["input"]]
    assert len(seeds) == 1 and not set(seeds) & failed
    # the seed that worked is kept: a third run asks for nothing
    server.bodies.clear()
    assert render_book(str(story), str(out), _backend(server), options,
                       show_progress=False).reused == STORY_CHUNKS  # fmt: skip
    assert not server.bodies


def test_an_error_every_chunk_would_share_stops_at_once(story, server, tmp_path):
    server.script("The Lighthouse", "400")
    with pytest.raises(InvalidInput, match="voice 'ryan' not found"):
        render_book(
            str(story), str(tmp_path / "o.wav"), _backend(server), BookOptions(jobs=1, **FAST),
            show_progress=False,
        )  # fmt: skip
    assert sum(server.counts.values()) < STORY_CHUNKS


def test_unreachable_server_is_a_clear_error(story, tmp_path):
    backend = ServerBackend("http://127.0.0.1:9", voice="ryan", timeout=1.0, connect_timeout=0.5)
    with pytest.raises(InvalidInput, match="cannot reach the server"):
        render_book(
            str(story), str(tmp_path / "o.wav"), backend, BookOptions(**FAST), show_progress=False
        )


def test_progress_line_has_counts_eta_and_retries():
    import io

    from ownvoice.audiobook.progress import Progress

    stream = io.StringIO()
    progress = Progress(4, 400, stream=stream, interval=0.0)
    progress.advance(100)
    progress.retried()
    progress.advance(100, failed=True)
    progress.close()
    last = stream.getvalue().strip().splitlines()[-1]
    assert "2/4 chunks" in last and " 50%" in last and "ETA " in last
    assert "1 retries" in last and "1 failed" in last


def test_how_full_the_servers_batch_was_comes_from_its_metrics():
    """ServerBackend.batch_steps reads the server's tts_batch_rows histogram for its model."""
    import httpx

    metrics = iter([5, 25])  # steps before and after

    def answer(request):
        if request.url.path == "/metrics":
            n = next(metrics)
            text = (f'tts_batch_rows_count{{model="other"}} 100.0\n'
                    f'tts_batch_rows_sum{{model="other"}} 100.0\n'
                    f'tts_batch_rows_count{{model="tts-1"}} {n}.0\n'
                    f'tts_batch_rows_sum{{model="tts-1"}} {3 * n}.0\n')  # fmt: skip
            return httpx.Response(200, text=text)
        return httpx.Response(404)

    backend = ServerBackend("http://x", voice="ryan", model="tts-1",
                            transport=httpx.MockTransport(answer))  # fmt: skip
    before = backend.batch_steps()
    after = backend.batch_steps()
    assert (before.steps, before.rows) == (5, 15)
    assert after.since(before).mean_rows == pytest.approx(3.0)  # 60 rows in 20 steps
    silent = ServerBackend("http://x", voice="ryan",
                           transport=httpx.MockTransport(lambda r: httpx.Response(404)))  # fmt: skip
    assert silent.batch_steps() is None  # a server without metrics: no figure, no error
