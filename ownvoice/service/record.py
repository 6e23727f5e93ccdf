"""One speech request's record: its log line and its metrics, the same for every front end.

    record = SpeechRecord(metrics, origin, log_text)   # made when the request arrives
    record.plan = plan; record.job = generation         # as they become known
    record.chunk(chunk)                                  # each audio chunk made
    record.finish("200", delivered_s)                    # once: one log line, the counters

The status is a string: an HTTP-style number for a request refused before its audio ("400",
"429", "503"; errors.describe gives it for every front end), else how it ended: "200",
"cancelled" (the client left), "stalled" (it stopped reading), "timeout" (limits.
request_timeout_s), "idle" (its streamed text stopped, limits.idle_timeout_s), "aborted" (the
server shut down mid-stream) or "error". Metrics carry the front end as `endpoint`; refusals
get no log line here (the HTTP edge's refusal log has one; other front ends log their errors).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger("ownvoice.requests")  # one line per speech request


@dataclass(frozen=True)
class Origin:
    """Where a request came from: its front end and the ids that find it in the log."""

    endpoint: str  # speech | voice-clone | speech-batch | websocket | wyoming | book | say
    request_id: str = "-"
    peer: str | None = None  # the client's address, where the front end has no request id
    text: str | None = None  # the text as sent (logged with log_text; streamed text: None)


class SpeechRecord:
    def __init__(self, metrics, origin: Origin, log_text: bool = False):
        self.metrics = metrics
        self.origin = origin
        self.log_text = log_text
        self.t0 = time.monotonic()
        self.plan = None  # service.planning.SpeechPlan, once planned
        self.job = None  # service.generation.Generation, once admitted
        self.frames = 0
        self.seconds = 0.0  # audio made (before any speed change)
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.stop: str | None = None  # the engine's stop reason: eos, max_frames, cancelled
        self.status: str | None = None  # once finished

    def chunk(self, chunk) -> None:
        now = time.monotonic()
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.frames += chunk.num_frames
        self.seconds += len(chunk.samples) / chunk.sample_rate
        if chunk.is_last and chunk.stop_reason:
            self.stop = chunk.stop_reason

    @property
    def finished(self) -> bool:
        return self.status is not None

    def finish(self, status: str, delivered: float) -> None:
        """Count the request and write its line (once; later calls do nothing). `delivered`:
        the seconds of audio sent, after any speed change."""
        if self.status is not None:
            return
        self.status = status
        now = time.monotonic()
        plan, metrics = self.plan, self.metrics
        fmt = plan.response_format if plan else ""
        stream = plan.stream_format if plan else ""
        if metrics is not None:
            metrics.requests.labels(status, fmt, stream, self.origin.endpoint).inc()
            metrics.request_seconds.observe(now - self.t0)
            metrics.audio_seconds.inc(delivered)
            if status == "cancelled":
                metrics.cancelled.inc()
        if status.isdigit() and int(status) >= 400:
            return  # refused before any audio: the front end says why
        origin = self.origin
        fields = [f"{origin.endpoint} {status} id={origin.request_id}"]
        if origin.peer:
            fields.append(f"peer={origin.peer}")
        if plan is not None:
            choice = plan.choice
            fields += [f"voice={choice.label}", f"model={choice.worker.name}"]
            if choice.asked_model:
                fields.append(f"asked_model={choice.asked_model}")
            fields += [f"chars={plan.chars}", f"pieces={plan.piece_count}"]
            if plan.streamed:
                fields.append("input=streamed")
        fields.append(f"audio={delivered:.2f}s")
        started = getattr(self.job, "t_started", None)
        if self.seconds > 0 and started is not None and self.t_last is not None:
            rtf = (self.t_last - started) / self.seconds  # generation speed, before any stretch
            fields.append(f"rtf={rtf:.2f}")
            if metrics is not None:
                metrics.rtf.observe(rtf)
        if self.t_first is not None:
            fields.append(f"ttfa={self.t_first - self.t0:.2f}s")
            if metrics is not None:
                metrics.ttfa.observe(self.t_first - self.t0)
        fields.append(f"total={now - self.t0:.2f}s")
        if plan is not None:
            fields += [f"fmt={fmt}", f"stream={stream}"]
            if plan.speed != 1.0:
                fields.append(f"speed={plan.speed:g}")
            if plan.ignored:
                fields.append(f"ignored={','.join(plan.ignored)}")
        # why the service stopped it (shutdown, stalled, timeout, idle) says more than the
        # engine's "cancelled", which is all the engine knows
        stop = getattr(self.job, "stop_reason", None) or self.stop
        if stop:
            fields.append(f"stop={stop}")
        if self.log_text and origin.text is not None:
            fields.append(f"text={origin.text[:500]!r}")
        log.info(" ".join(fields))
