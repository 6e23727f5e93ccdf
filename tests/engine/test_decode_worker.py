"""Decoding on a worker thread while the next frame generates (EngineConfig.overlap_decoder).

What users rely on: the overlap changes no sample, no code and no chunk boundary; a newcomer's
first audio never waits for the worker; a row that ends has all its audio out by the step that
ended it; a decoder's error on the worker ends its own row alone; and the two threads share the
cores instead of both taking all of them.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from tests.engine.test_batching import MIXES, batched
from tests.parity.scenarios import TEXT

LIKE = "0.6B-CustomVoice"


@pytest.fixture(scope="module")
def engines(tiny_checkpoints, kernels):
    from ownvoice.engine.engine import Engine

    cache = {}

    def get(overlap, quantize="int8", like=LIKE, **kw):
        key = (overlap, quantize, like, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = Engine.load(
                str(tiny_checkpoints[like]), device="cpu", dtype="float32", quantize=quantize,
                num_threads=kw.pop("num_threads", 2), overlap_decoder=overlap, **kw,
            )  # fmt: skip
        return cache[key]

    yield get
    torch.set_num_threads(2)


def _opts(**kw):
    return SynthesisOptions(first_chunk_frames=2, chunk_frames=3, **kw)


def _chunks(engine, text, voice, options):
    return [
        (c.index, c.start_frame, c.is_last, c.stop_reason, c.codes, c.samples)
        for c in engine.stream(text, voice, options=options)
    ]


def test_the_overlap_changes_nothing_a_listener_gets(engines):
    """Same chunks (boundaries, codes, ends; samples within 1e-5) with and without the worker,
    alone and in a batch of rows joining, leaving and cancelled mid-flight."""
    on, off = engines(True), engines(False)
    assert on.overlap == "on" and off.overlap == "off"
    for options in (
        _opts(seed=3, max_frames=23),
        _opts(sampling=SamplingOptions.greedy(), max_frames=9),
    ):
        got, want = _chunks(on, TEXT, "ryan", options), _chunks(off, TEXT, "ryan", options)
        assert [c[:4] for c in got] == [c[:4] for c in want]
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g[4], w[4])
            # (torch's own ops in the decoder round differently on 1 thread than on 2)
            np.testing.assert_allclose(g[5], w[5], atol=1e-5)
    reqs = MIXES["1.7B-CustomVoice"]
    on, off = engines(True, like="1.7B-CustomVoice"), engines(False, like="1.7B-CustomVoice")
    together_on, sizes = batched(on, reqs)
    together_off, _ = batched(off, reqs)
    assert max(sizes) >= 3
    for (codes, audio, end), (want_codes, want_audio, want_end) in zip(
        together_on, together_off, strict=True
    ):
        assert end == want_end and np.array_equal(codes, want_codes)
        np.testing.assert_allclose(audio, want_audio, atol=1e-5)
    assert not on.running


def test_float_weights_decode_beside_the_generation_only_in_batches(engines):
    """Auto with float weights: a stream alone decodes in line, on every thread (beside the
    generation it lost time on one of two VMs); while two or more rows play their chunks go to
    the worker, and back in line when one is left. A listener gets the same chunks."""
    auto, off = engines(None, quantize=None), engines(False, quantize=None)
    assert auto.overlap == "batches" and off.overlap == "off"
    decoded = []

    def watched(seq):
        real = seq.decoder

        def decoder(codes):
            decoded.append((seq, threading.current_thread().name))
            return real(codes)

        seq.decoder = decoder
        return seq

    alone = watched(auto.start(TEXT, "ryan", options=_opts(seed=1, max_frames=20)))
    assert list(_drive(auto, alone))[-1][1].is_last
    assert {name for _, name in decoded} == {"MainThread"}
    decoded.clear()
    long = watched(auto.start(TEXT, "ryan", options=_opts(seed=1, max_frames=40)))
    short = watched(auto.start(TEXT, "aiden", options=_opts(seed=2, max_frames=14)))
    got = {long: [], short: []}
    auto.join(long)
    auto.join(short)
    while auto.running:
        for seq, chunk in auto.step():
            got[seq].append(chunk)
    last_short = max(i for i, (seq, _) in enumerate(decoded) if seq is short)
    assert any(name.startswith("ownvoice-decode") for _, name in decoded[:last_short])
    after = [name for seq, name in decoded[last_short + 1 :]]
    assert after and set(after) == {"MainThread"}
    for seq in (long, short):
        assert got[seq][-1].is_last and sum(c.num_frames for c in got[seq]) == seq.max_frames

    reqs = MIXES["1.7B-CustomVoice"]
    auto = engines(None, quantize=None, like="1.7B-CustomVoice")
    off = engines(False, quantize=None, like="1.7B-CustomVoice")
    for (codes, audio, end), (want_codes, want_audio, want_end) in zip(
        batched(auto, reqs)[0], batched(off, reqs)[0], strict=True
    ):
        assert end == want_end and np.array_equal(codes, want_codes)
        np.testing.assert_allclose(audio, want_audio, atol=1e-5)


class _Held:
    """A decoder that waits, on the worker, until the test lets it go."""

    def __init__(self, decoder):
        self.decoder, self.release, self.waited_out = decoder, threading.Event(), False
        self.threads = []

    def __call__(self, codes):
        self.threads.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            self.waited_out = not self.release.wait(timeout=20)
        return self.decoder(codes)


def test_a_newcomers_first_chunk_does_not_wait_for_the_worker(engines):
    engine = engines(True)
    playing = engine.start(TEXT, "ryan", options=_opts(seed=1, max_frames=30))
    held = playing.decoder = _Held(playing.decoder)
    engine.join(playing)
    step_chunks = []
    while not held.threads or held.threads[-1] == "MainThread":  # until it is on the worker
        step_chunks += list(engine.step())
    assert [c.index for _, c in step_chunks] == [0]  # the first chunk on this thread

    newcomer = engine.start("Me too.", "aiden", options=_opts(seed=2, max_frames=10))
    engine.join(newcomer)
    got = list(engine.ready_chunks()) + list(engine.step())
    firsts = [(s, c) for s, c in got if s is newcomer]
    assert firsts and firsts[0][1].index == 0  # out while the worker still holds the other's
    assert not held.release.is_set() and all(s is not playing for s, _ in got)
    held.release.set()
    out = {playing: [], newcomer: [c for _, c in firsts]}
    while engine.running:
        for s, c in engine.step():
            out[s].append(c)
    assert not held.waited_out
    for chunks in out.values():
        assert chunks[-1].is_last and [c.index for c in chunks] == list(
            range(chunks[0].index, chunks[0].index + len(chunks))
        )
    assert "ownvoice-decode_0" in held.threads  # the later chunks were the worker's


def test_a_row_that_ends_has_all_its_audio_out_by_that_step(engines):
    """Callers that step `while engine.running` (the bench, the tests' drivers) lose nothing:
    the step that ends a row also hands out its last chunks."""
    engine = engines(True)
    seqs = [
        engine.start(TEXT, "ryan", options=_opts(seed=i, max_frames=7 + 5 * i)) for i in range(3)
    ]
    for seq in seqs:
        engine.join(seq)
    got = {seq: [] for seq in seqs}
    while engine.running:
        ended = [s for s in seqs if s.slot is not None]
        for s, c in engine.step():
            got[s].append(c)
        for s in ended:
            if s.done:
                assert got[s] and got[s][-1].is_last, "its audio must be out in this step"
    for seq in seqs:
        assert sum(c.num_frames for c in got[seq]) == seq.frames == seq.max_frames


def test_a_decoder_error_on_the_worker_ends_its_row_alone(engines):
    """A row whose decoder fails on the worker ends with that error (an empty last chunk,
    stop_reason "error"); the row beside it gets exactly the chunks it gets alone."""
    engine = engines(True)
    other_options = _opts(seed=2, max_frames=20)
    want = _chunks(engine, "Another voice, beside it.", "aiden", other_options)
    seq = engine.start(TEXT, "ryan", options=_opts(seed=1, max_frames=20))
    other = engine.start("Another voice, beside it.", "aiden", options=other_options)
    real = seq.decoder
    calls = []

    def failing(codes):
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise RuntimeError("decoder broke")
        return real(codes)

    seq.decoder = failing
    got = {seq: [], other: []}
    engine.join(other)
    for s, c in _drive(engine, seq):
        got[s].append(c)
    assert calls[2].startswith("ownvoice-decode")
    assert [c.is_last for c in got[seq]].count(True) == 1 and got[seq][-1].is_last
    assert got[seq][-1].stop_reason == "error" and got[seq][-1].num_frames == 0
    assert str(seq.error) == "decoder broke" and len(got[seq]) == 3  # two chunks, then its end
    beside = [(c.index, c.start_frame, c.is_last, c.stop_reason) for c in got[other]]
    assert beside == [w[:4] for w in want]
    for c, w in zip(got[other], want, strict=True):  # (decoded on other threads: 1e-5)
        np.testing.assert_array_equal(c.codes, w[4])
        np.testing.assert_allclose(c.samples, w[5], atol=1e-5)
    assert not engine.running and not engine._out.pending  # nothing left behind
    assert _chunks(engine, "Again.", "ryan", _opts(seed=4, max_frames=6))[-1][2]


def _drive(engine, seq):
    engine.join(seq)
    yield from engine.ready_chunks()
    while engine.running:
        yield from engine.step()


def test_the_worker_and_the_generation_share_the_cores(engines, monkeypatch):
    """While the worker decodes (on half the threads), the engine's thread generates on the rest;
    on every thread otherwise; the caller's thread count is as it was afterwards."""
    engine = engines(True)
    seen = {"step": [], "decode": []}
    loop = engine._loop
    real_step = loop.step

    def step():
        seen["step"].append((engine._worker.busy, torch.get_num_threads()))
        return real_step()

    monkeypatch.setattr(loop, "step", step)
    seq = engine.start(TEXT, "ryan", options=_opts(seed=1, max_frames=30))
    real = seq.decoder

    def decoder(codes):
        out = real(codes)  # (the kernels' first call on a thread must not reset its count)
        seen["decode"].append((threading.current_thread().name, torch.get_num_threads()))
        return out

    seq.decoder = decoder
    list(_drive(engine, seq))
    assert torch.get_num_threads() == 2
    assert {n for name, n in seen["decode"] if name != "MainThread"} == {1}
    assert {n for busy, n in seen["step"] if busy} == {1}
    assert {n for busy, n in seen["step"] if not busy} == {2}


def test_kernels_set_a_threads_count_that_their_first_call_keeps(kernels):
    """torch resets a thread's count on its first parallel call in each library to the count
    last set anywhere; the kernels' set_num_threads initialises both first."""
    from ownvoice.engine.fast.packed import to_panels

    w, x = to_panels(torch.randn(64, 32)), torch.randn(3, 32)
    ready, go, seen = threading.Event(), threading.Event(), []

    def worker():
        kernels.set_num_threads(1)
        ready.set()
        go.wait(10)
        kernels.linear(x, w, None, None, 64)  # this thread's first call into the kernels
        torch.ones(4096).sum()  # and into torch's own parallel ops
        seen.append(torch.get_num_threads())

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(10)
    torch.set_num_threads(2)  # another thread sets its own count (and torch's global one)
    go.set()
    t.join()
    assert seen == [1]


def test_when_the_worker_is_used(engines, caplog):
    """Auto: on for integer weights on the CPU kernels with 2+ threads, where it was measured
    to pay; for float32 only in batches (see above); off with one thread; False turns it off."""
    assert engines(None).overlap == engines(None, quantize="int4").overlap == "on"
    assert engines(None, quantize=None).overlap == "batches"
    assert engines(True, quantize=None).overlap == "on"
    assert engines(False).overlap == "off"
    assert engines(None, num_threads=1).overlap == "off"
    with caplog.at_level(logging.WARNING):
        assert engines(True, num_threads=1).overlap == "off"
    assert "overlap_decoder needs" in caplog.text
    torch.set_num_threads(2)
