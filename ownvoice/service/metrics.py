"""Prometheus metrics of the service and its front ends, in a registry of their own.

tts_requests_total{status,format,stream,endpoint}   finished speech requests by outcome and
                                           front end (speech, voice-clone, speech-batch,
                                           websocket, wyoming, book, say)
tts_rejected_total{reason}                 refused before generation (queue_full, ...)
tts_cancelled_total                        generations stopped because the client left
tts_queue_depth{model} / tts_inflight{model}   admitted and waiting / generating now
tts_batch_rows{model}                      rows per engine step (batch occupancy, histogram)
tts_batch_occupancy{model}                 rows in the engine's batch now
tts_queue_wait_seconds                     admission -> joining the batch
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
_ROW_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "tts_requests",
            "Speech requests by outcome and front end",
            ["status", "format", "stream", "endpoint"],
            registry=r,
        )
        self.rejected = Counter(
            "tts_rejected", "Requests refused before generation", ["reason"], registry=r
        )
        self.cancelled = Counter(
            "tts_cancelled", "Generations stopped by a client disconnect", registry=r
        )
        self.queue_depth = Gauge(
            "tts_queue_depth", "Admitted requests waiting for a row", ["model"], registry=r
        )
        self.inflight = Gauge("tts_inflight", "Generations running now", ["model"], registry=r)
        self.batch_rows = Histogram(
            "tts_batch_rows", "Rows advanced by one engine step", ["model"],
            buckets=_ROW_BUCKETS, registry=r,
        )  # fmt: skip
        self.occupancy = Gauge(
            "tts_batch_occupancy", "Rows in the engine's batch now", ["model"], registry=r
        )
        self.queue_wait = Histogram(
            "tts_queue_wait_seconds", "Admission to joining the batch",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
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
