"""One side of a benchmark, run in its own process so its memory peak is its own.

    python -m ownvoice.bench.worker '<json spec>'   ->   prints one JSON result line

Sides: "ownvoice" (our engine, fast path unless told otherwise) and "reference" (the official
qwen-tts package on the same checkpoint). Both generate a fixed number of frames with sampling
(seeded); checkpoints built with `--no-eos` never stop early.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch

from ownvoice.bench.common import TEXT, peak_rss_bytes, rss_bytes, sync, voice_for


def run_ours(spec: dict) -> dict:
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast.timing import PhaseTimer
    from ownvoice.engine.options import SynthesisOptions

    t0 = time.perf_counter()
    engine = Engine.load(
        spec["model"],
        device=spec["device"],
        dtype=spec["dtype"],
        fast=spec.get("fast", True),
        use_cuda_graphs=spec.get("cuda_graphs", True),
        quantize=spec.get("quantize"),
        decoder_dtype=spec.get("decoder_dtype"),
        overlap_decoder=spec.get("overlap_decoder"),
    )
    load_s = time.perf_counter() - t0
    kw = voice_for(engine)
    frames = spec["frames"]
    opts = SynthesisOptions(language="english", seed=0, max_frames=frames)
    t0 = time.perf_counter()
    text = spec.get("text") or TEXT
    engine.synthesize(text, **kw, options=opts.with_(max_frames=8))  # warm-up, graph capture
    warmup_s = time.perf_counter() - t0

    # 1) the split: generation phases with a timer, then the decoder alone
    result: dict = {"load_s": load_s, "warmup_s": warmup_s}
    timed = engine.backend != "eager"
    if timed:
        engine.phase_timer = PhaseTimer(torch.device(engine.device))
    chunks = list(engine.stream(text, **kw, options=opts.with_(first_chunk_frames=8)))
    codes = np.concatenate([c.codes for c in chunks])
    n = len(codes)
    if timed:
        totals = engine.phase_timer.totals
        result["talker_ms"] = 1e3 * totals["talker"] / max(n - 1, 1)
        result["code_predictor_ms"] = 1e3 * totals["code_predictor"] / n
        result["prefill_ms"] = 1e3 * totals["prefill"]
        engine.phase_timer = None
    decoder = engine.new_decoder()
    codes_t = torch.from_numpy(codes)
    sync(engine.device)
    t0 = time.perf_counter()
    for i in range(0, n, 8):
        decoder(codes_t[i : i + 8])
    sync(engine.device)
    result["decoder_ms"] = 1e3 * (time.perf_counter() - t0) / n

    # 2) end to end, streaming, untimed phases: time to first audio and real-time factor
    t0 = time.perf_counter()
    first = None
    total_frames = 0
    rss_after_first = rss_max = 0
    for chunk in engine.stream(
        text, **kw, options=opts.with_(first_chunk_frames=spec["first_chunk"])
    ):
        if first is None:
            first = time.perf_counter() - t0
            rss_after_first = rss_max = rss_bytes()  # every cache is allocated by now
        total_frames += chunk.num_frames
        rss_max = max(rss_max, rss_bytes())
    wall = time.perf_counter() - t0
    result.update(
        frames=total_frames,
        total_ms=1e3 * wall / total_frames,
        rtf=wall / (total_frames * 0.08),
        ttfa_ms=1e3 * first,
        frames_per_s=total_frames / wall,
        peak_rss=peak_rss_bytes(),
        rss_growth=rss_max - rss_after_first,  # should stay ~0 however long the output
        dtype=engine.weight_info().label,
        device=engine.device,
        bytes_per_frame=engine.weight_info().bytes_per_frame,
        overlap=engine.overlap,
    )
    if engine.device.startswith("cuda"):
        result["peak_gpu"] = torch.cuda.max_memory_allocated()
    return result


def run_reference(spec: dict) -> dict:
    from ownvoice.bench.reference import import_qwen_tts

    qwen_tts = import_qwen_tts()
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        spec["dtype"]
    ]
    t0 = time.perf_counter()
    kwargs = dict(dtype=dtype)
    if spec["device"].startswith("cuda"):
        kwargs["device_map"] = spec["device"]
    model = qwen_tts.Qwen3TTSModel.from_pretrained(spec["model"], **kwargs)
    load_s = time.perf_counter() - t0
    speakers = sorted(model.model.get_supported_speakers())
    frames = spec["frames"]
    decode_time = [0.0]
    original = model.model.speech_tokenizer.decode

    def timed_decode(*a, **k):
        sync(spec["device"])
        t = time.perf_counter()
        out = original(*a, **k)
        sync(spec["device"])
        decode_time[0] += time.perf_counter() - t
        return out

    model.model.speech_tokenizer.decode = timed_decode

    def generate(n):
        torch.manual_seed(0)
        return model.generate_custom_voice(
            spec.get("text") or TEXT, speaker=speakers[0], language="english", max_new_tokens=n + 1
        )

    generate(8)
    decode_time[0] = 0.0
    t0 = time.perf_counter()
    wavs, _ = generate(frames)
    sync(spec["device"])
    wall = time.perf_counter() - t0
    n = len(wavs[0]) // 1920
    gen = wall - decode_time[0]
    return dict(
        load_s=load_s,
        frames=n,
        generation_ms=1e3 * gen / n,
        decoder_ms=1e3 * decode_time[0] / n,
        total_ms=1e3 * wall / n,
        rtf=wall / (n * 0.08),
        frames_per_s=n / wall,
        peak_rss=peak_rss_bytes(),
        dtype=spec["dtype"],
        device=spec["device"],
    )


def run_quality(spec: dict) -> dict:
    """Both engines in one process: the quantized one (spec["quantize"]) against the
    unquantized one."""
    from ownvoice.bench.quality import PROMPTS, quantized_quality
    from ownvoice.engine.engine import Engine

    kw = dict(device=spec["device"], dtype=spec["dtype"])
    reference = Engine.load(spec["model"], **kw)
    quantized = Engine.load(
        spec["model"], quantize=spec["quantize"], decoder_dtype=spec.get("decoder_dtype"), **kw
    )
    prompts = (spec["text"],) if spec.get("text") else PROMPTS
    return quantized_quality(
        reference, quantized, spec["quantize"], frames=min(spec["frames"], 24),
        prompts=prompts, voice=voice_for(reference),
    ).as_dict()  # fmt: skip


def run_batch(spec: dict) -> dict:
    from ownvoice.bench.batch import run_batch as run

    return run(spec)


SIDES = {
    "reference": run_reference,
    "ownvoice": run_ours,
    "quality": run_quality,
    "batch": run_batch,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(spec["threads"])
    import logging

    logging.basicConfig(level=logging.WARNING)
    result = SIDES[spec["side"]](spec)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
