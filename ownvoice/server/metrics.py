"""Prometheus metrics of the speech server, in a registry of its own (one per app).

tts_requests_total{status,format,stream}   finished speech requests by HTTP status
tts_rejected_total{reason}                 refused before generation (queue_full, ...)
tts_cancelled_total                        generations stopped because the client left
tts_queue_depth / tts_inflight             admitted and waiting / generating now
tts_time_to_first_audio_seconds            request arrival -> first audio chunk
tts_request_seconds, tts_rtf               total time; generation time / audio time
tts_audio_seconds_total                    audio produced
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

_LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30)
_RTF_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10)


class ServerMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "tts_requests", "Speech requests by outcome", ["status", "format", "stream"], registry=r
        )
        self.rejected = Counter(
            "tts_rejected", "Requests refused before generation", ["reason"], registry=r
        )
        self.cancelled = Counter(
            "tts_cancelled", "Generations stopped by a client disconnect", registry=r
        )
        self.queue_depth = Gauge(
            "tts_queue_depth", "Admitted requests waiting for a slot", registry=r
        )
        self.inflight = Gauge("tts_inflight", "Generations running now", registry=r)
        self.ttfa = Histogram(
            "tts_time_to_first_audio_seconds", "Request arrival to first audio chunk",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.request_seconds = Histogram(
            "tts_request_seconds", "Whole request time", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.rtf = Histogram(
            "tts_rtf", "Generation time / audio time", buckets=_RTF_BUCKETS, registry=r
        )
        self.audio_seconds = Counter("tts_audio_seconds", "Audio produced, in seconds", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
