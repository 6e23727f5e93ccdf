"""`ownvoice bench --server URL --concurrency 1,4,8`: drive a running server as clients would.

For each concurrency level, that many clients each stream `requests` speech requests one after
another (raw PCM, a fixed seed and frame cap), all at once. Reported per level: audio produced
per wall second (aggregate), each stream's real-time factor, and time to first audio (p50, p95).
Runs against any OpenAI-compatible server; `max_frames` and `seed` are ownvoice extensions.

With `--clone CLIP` (and `--clone-text`, its transcript) the same rows are measured for that
clip cloned both ways, the voice people install this for: ICL (the transcript and the clip's
codes in every prompt, a long prefill that no prefix cache can skip) and x-vector only. The
clip is uploaded as two library voices for the run (the server encodes each once, on the
warm-up request) and deleted after.
"""

from __future__ import annotations

import concurrent.futures
import os
import statistics
import time

import numpy as np

from ownvoice.bench.common import TEXT


def run_client(url: str, levels: list[int], frames: int, requests: int, voice: str,
               api_key=None, clone: tuple[bytes, str | None] | None = None) -> dict:  # fmt: skip
    """The rows for `voice`; with `clone` (the clip's bytes and its transcript), also for the
    clip cloned with ICL (when there is a transcript) and with its x-vector only."""
    import httpx

    base = url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=600, headers=headers) as client:
        result = dict(url=base, frames=frames, voice=voice,
                      rows=_rows(client, base, voice, levels, frames, requests))  # fmt: skip
        if clone is not None:
            result["clones"] = {}
            for mode, voice_id in _upload(client, base, *clone):
                try:
                    rows = _rows(client, base, voice_id, levels, frames, requests)
                    result["clones"][mode] = rows
                finally:
                    client.delete(f"{base}/v1/audio/voices/{voice_id}")
    return result


def _upload(client, base: str, clip: bytes, transcript: str | None):
    """(mode, voice id: clone:<name>) of the clip uploaded once per mode: ICL needs its
    transcript."""
    modes = ([("icl", {"ref_text": transcript})] if transcript else []) + [
        ("x-vector", {"x_vector_only_mode": "true"})
    ]
    for mode, fields in modes:
        name = f"bench-{mode}-{os.getpid()}"
        data = {"name": name, "consent": "true", **fields}
        r = client.post(f"{base}/v1/audio/voices", data=data,
                        files={"audio_sample": ("clip.wav", clip)})  # fmt: skip
        if r.status_code != 200:
            raise RuntimeError(f"uploading the clip failed: HTTP {r.status_code}: {r.text[:300]}")
        yield mode, r.json()["id"]


def _rows(client, base: str, voice: str, levels: list[int], frames: int, requests: int):
    def one(i: int) -> tuple[float, float, float]:
        body = {
            "model": "tts-1", "voice": voice, "input": TEXT, "response_format": "pcm",
            "seed": i, "max_frames": frames,
        }  # fmt: skip
        t0 = time.perf_counter()
        first, size = None, 0
        with client.stream("POST", f"{base}/v1/audio/speech", json=body) as r:
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:200]!r}")
            for data in r.iter_bytes():
                if first is None and data:
                    first = time.perf_counter() - t0
                size += len(data)
        return first or 0.0, time.perf_counter() - t0, size / 2 / 24000

    one(0)  # warm-up (a clone's prompt is encoded here, once)
    rows = []
    for level in levels:
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(level) as pool:
            results = list(pool.map(one, range(level * requests)))
        wall = time.perf_counter() - t0
        ttfa = [r[0] for r in results]
        audio = sum(r[2] for r in results)
        rows.append(
            dict(
                concurrency=level,
                requests=len(results),
                audio_per_s=audio / wall,
                stream_rtf=statistics.median(r[1] / r[2] for r in results if r[2]),
                ttfa_p50_ms=1e3 * statistics.median(ttfa),
                ttfa_p95_ms=1e3 * float(np.percentile(ttfa, 95)),
            )
        )
    return rows


def format_client_table(result: dict) -> str:
    lines = [f"ownvoice bench --server {result['url']}: {result['frames']} frames per request"]
    tables = [(result.get("voice", ""), result["rows"])]
    tables += [
        (f"the clip, cloned ({mode})", rows) for mode, rows in result.get("clones", {}).items()
    ]
    for title, rows in tables:
        lines += ["", f"voice: {title}",
                  "clients  requests  audio s/s  x 1 client  RTF/stream  TTFA p50  TTFA p95"]  # fmt: skip
        base = rows[0]["audio_per_s"] if rows else 1.0
        for r in rows:
            lines.append(
                f"{r['concurrency']:>7} {r['requests']:>9} {r['audio_per_s']:>10.2f} "
                f"{r['audio_per_s'] / base:>11.2f} {r['stream_rtf']:>11.2f} "
                f"{r['ttfa_p50_ms']:>7.0f}ms {r['ttfa_p95_ms']:>7.0f}ms"
            )
    return "\n".join(lines)
