"""`ownvoice bench --batch 1,2,4,8`: what batching buys, one engine process per batch size.

Per batch size B (full-size random checkpoint, --no-eos, so every row makes exactly --frames):
  1) throughput: B requests joined at once and stepped to the end, speech decoding included:
     ms per step, aggregate frames per second, each stream's real-time factor, the split into
     talker, code predictor and decoder, weight bytes read per step and GFLOP/s achieved;
  2) time to first audio of a request that arrives at a random moment while B-1 others run,
     through the service's scheduler (what a server does), p50 and p95 over several arrivals;
  3) peak memory.
"""

from __future__ import annotations

import random
import statistics
import threading
import time

import numpy as np
import torch

from ownvoice.bench.common import TEXT, busy_warning, peak_rss_bytes, sync, voice_for


def run_batch(spec: dict) -> dict:
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast.timing import PhaseTimer
    from ownvoice.engine.options import SynthesisOptions

    B, frames = spec["batch_size"], spec["frames"]
    engine = Engine.load(
        spec["model"], device=spec["device"], dtype=spec["dtype"], max_batch=B,
        use_cuda_graphs=spec.get("cuda_graphs", True), quantize=spec.get("quantize"),
        decoder_dtype=spec.get("decoder_dtype"), overlap_decoder=spec.get("overlap_decoder"),
    )  # fmt: skip
    kw = voice_for(engine)
    text = spec.get("text") or TEXT
    # the server's streaming schedule: a one-frame first chunk, then chunks of 8 frames
    opts = SynthesisOptions(
        language="english", max_frames=frames, first_chunk_frames=1, chunk_frames=8
    )
    # warm-up: every kernel shape of this batch size (and graph capture on CUDA)
    _run_rows(engine, text, kw, opts.with_(max_frames=4), B)

    # 1) throughput
    timer = PhaseTimer(torch.device(engine.device))
    engine.phase_timer = timer
    sync(engine.device)
    t0 = time.perf_counter()
    steps, decode_s = _run_rows(engine, text, kw, opts, B)
    sync(engine.device)
    wall = time.perf_counter() - t0
    engine.phase_timer = None
    info = engine.weight_info()
    step_s = wall / steps
    result = dict(
        batch=B,
        frames=frames,
        step_ms=1e3 * step_s,
        frames_per_s=B * frames / wall,
        rtf=wall / (frames * 0.08),
        talker_ms=1e3 * timer.totals["talker"] / steps,
        code_predictor_ms=1e3 * timer.totals["code_predictor"] / steps,
        decoder_ms=1e3 * decode_s / steps,
        prefill_ms=1e3 * timer.totals["prefill"] / B,
        gb_per_step=info.bytes_per_frame / 1e9,
        gflops=2 * B * info.params_per_frame / 1e9 / step_s,
        dtype=info.label,
        device=engine.device,
        backend=engine.backend,
        overlap=engine.overlap,
    )
    # 2) a late arrival's time to first audio, through the scheduler
    ttfa = _late_arrivals(engine, text, kw, opts, B, probes=spec.get("probes", 5), step_s=step_s)
    result.update(
        ttfa_p50_ms=1e3 * statistics.median(ttfa),
        ttfa_p95_ms=1e3 * float(np.percentile(ttfa, 95)),
        peak_rss=peak_rss_bytes(),
    )
    return result


def _run_rows(engine, text, kw, opts, rows: int) -> tuple[int, float]:
    """Join `rows` requests at once and step until all end; (steps, seconds spent decoding)."""
    decode = [0.0]

    def timed(decoder):
        def push(codes):
            t = time.perf_counter()
            out = decoder(codes)
            decode[0] += time.perf_counter() - t
            return out

        return push

    seqs = [engine.start(text, **kw, options=opts.with_(seed=i)) for i in range(rows)]
    for seq in seqs:
        seq.decoder = timed(seq.decoder)
        engine.join(seq)
    steps = 0
    while engine.running:
        for _ in engine.step():
            pass
        steps += 1
    return steps, decode[0]


def _late_arrivals(engine, text, kw, opts, rows: int, probes: int, step_s: float) -> list[float]:
    """Seconds from arrival to first audio for `probes` requests that each arrive at a random
    moment while rows-1 long requests generate (the probe is cancelled after its first chunk),
    through the speech service as a server runs them."""
    from ownvoice.service.config import Limits
    from ownvoice.service.planning import SpeechInput
    from ownvoice.service.speech import Origin, SpeechService

    limits = Limits(max_batch=rows, queue_size=rows, max_input_chars=1 << 30,
                    request_timeout_s=float("inf"))  # fmt: skip
    service = SpeechService.local(engine, name="bench", limits=limits,
                                  chunk_frames=opts.chunk_frames)  # fmt: skip
    scheduler = service.pool.workers["bench"]
    rng = random.Random(0)
    voice = kw.get("voice")

    def request(seed: int):
        return service.speak(
            SpeechInput(
                input=text,
                voice="design" if voice is None else (voice if isinstance(voice, str) else ""),
                voice_prompt=None if isinstance(voice, str | None) else voice,
                instructions=kw.get("instruct"),
                language=opts.language,
                seed=seed,
                max_frames=100_000,
                first_chunk_frames=opts.first_chunk_frames,
                response_format="pcm",
            ),
            Origin("bench"),
        )

    background = [request(100 + i) for i in range(rows - 1)]
    drains = [threading.Thread(target=lambda r=r: list(r.chunks_blocking())) for r in background]
    for t in drains:
        t.start()
    try:
        _wait(lambda: scheduler.occupancy == rows - 1)
        time.sleep(2 * step_s)  # every background row is past its prefill
        out = []
        for i in range(probes):
            time.sleep(rng.uniform(0, step_s))  # arrive anywhere within a step
            t0 = time.perf_counter()
            probe = request(i)
            next(probe.chunks_blocking())
            out.append(time.perf_counter() - t0)
            probe.finish()
            _wait(lambda: scheduler.occupancy == rows - 1)
        return out
    finally:
        for r in background:
            r.cancel()
        for t in drains:
            t.join(60)
        for r in background:
            r.finish()
        service.pool.close()


def _wait(condition, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the scheduler did not reach the expected state")
        time.sleep(0.002)


def format_batch_table(result: dict) -> str:
    spec = result["spec"]
    rows = result["batch_rows"]
    head = (
        f"ownvoice bench --batch: {spec['model']} on {spec['device']} ({spec['threads']} "
        f"threads), {spec['frames']} frames per request, decoding included, memory bandwidth "
        f"{result['bandwidth_gbs']:.1f} GB/s"
    )
    cols = [
        ("B", 3), ("overlap", 7), ("ms/step", 8), ("talker", 7), ("code pred", 9), ("decoder", 8),
        ("frames/s", 8), ("x B=1", 6), ("RTF/stream", 10), ("GB/step", 7), ("GFLOP/s", 7),
        ("TTFA p50", 8), ("p95", 6), ("peak RSS", 8),
    ]  # fmt: skip
    lines = [head, " ".join(n.rjust(w) for n, w in cols)]
    base = {}  # B=1 (the smallest B) of each overlap setting
    for r in rows:
        base.setdefault(r["overlap"], r["frames_per_s"])
    for r in rows:
        cells = [
            r["batch"], r["overlap"], f"{r['step_ms']:.0f}", f"{r['talker_ms']:.0f}",
            f"{r['code_predictor_ms']:.0f}", f"{r['decoder_ms']:.0f}",
            f"{r['frames_per_s']:.1f}", f"{r['frames_per_s'] / base[r['overlap']]:.2f}", f"{r['rtf']:.2f}",
            f"{r['gb_per_step']:.2f}", f"{r['gflops']:.0f}", f"{r['ttfa_p50_ms']:.0f}",
            f"{r['ttfa_p95_ms']:.0f}", f"{r['peak_rss'] / 2**30:.2f}G",
        ]  # fmt: skip
        lines.append(" ".join(str(c).rjust(w) for c, (_, w) in zip(cells, cols, strict=True)))
    lines.append(
        "ms/step: one frame for every row; frames/s: all rows together; RTF/stream: wall time "
        "/ audio time of each stream; TTFA: a request arriving while B-1 others generate; "
        "decoder: time spent decoding (with overlap, on the worker beside the generation); "
        "overlap 'batches': beside the generation while two or more rows play"
    )
    warning = busy_warning(result.get("machine"))
    return "\n".join([*lines, warning] if warning else lines)
