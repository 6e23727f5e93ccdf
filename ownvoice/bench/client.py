"""`ownvoice bench --server URL --concurrency 1,4,8`: drive a running server as clients would.

For each concurrency level, that many clients each stream `requests` speech requests one after
another (raw PCM, a fixed seed and frame cap), all at once. Reported per level: audio produced
per wall second (aggregate), each stream's real-time factor, and time to first audio (p50, p95).
Runs against any OpenAI-compatible server; `max_frames` and `seed` are ownvoice extensions.
"""

from __future__ import annotations

import concurrent.futures
import statistics
import time

import numpy as np

from ownvoice.bench.common import TEXT


def run_client(url: str, levels: list[int], frames: int, requests: int, voice: str, api_key=None):
    import httpx

    base = url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    rows = []
    with httpx.Client(timeout=600, headers=headers) as client:

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

        one(0)  # warm-up
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
    return dict(url=base, frames=frames, rows=rows)


def format_client_table(result: dict) -> str:
    lines = [
        f"ownvoice bench --server {result['url']}: {result['frames']} frames per request",
        "clients  requests  audio s/s  x 1 client  RTF/stream  TTFA p50  TTFA p95",
    ]
    base = result["rows"][0]["audio_per_s"] if result["rows"] else 1.0
    for r in result["rows"]:
        lines.append(
            f"{r['concurrency']:>7} {r['requests']:>9} {r['audio_per_s']:>10.2f} "
            f"{r['audio_per_s'] / base:>11.2f} {r['stream_rtf']:>11.2f} "
            f"{r['ttfa_p50_ms']:>7.0f}ms {r['ttfa_p95_ms']:>7.0f}ms"
        )
    return "\n".join(lines)
