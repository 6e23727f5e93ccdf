"""Scheduler threads, admission, timeouts, lazy loading and voice aliases."""

from __future__ import annotations

import time

import httpx
import pytest

from ownvoice.errors import QueueFull
from ownvoice.service.admission import Admission
from ownvoice.service.scheduler import Scheduler
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve


def test_admission_counts_and_estimates_retry_after():
    admission = Admission(rows=2, queue_size=1)
    slots = [admission.admit() for _ in range(3)]
    slots[0].start()
    with pytest.raises(QueueFull) as e:
        admission.admit()
    assert e.value.retry_after >= 1.0 and "limits.queue_size=1" in e.value.message
    assert (admission.running, admission.waiting) == (1, 2)
    slots[1].release()
    slots[1].release()  # idempotent: a slot is freed once
    assert admission.admitted == 2
    admission.admit()  # room again


def test_worker_loads_on_its_thread_and_keeps_the_gpu_awake(monkeypatch):
    engine = FakeEngine()
    loaded_on = []

    def loader():
        import threading

        loaded_on.append(threading.current_thread().name)
        return engine

    worker = Scheduler("m", loader=loader, keepalive_s=0.02)
    calls = []
    monkeypatch.setattr(worker, "_keepalive", lambda: calls.append(time.monotonic()))
    worker.start(load_now=True).result(5)
    assert worker.ready and engine.warmed == 1 and loaded_on == ["ownvoice-engine-m"]
    time.sleep(0.2)
    worker.stop()
    assert len(calls) >= 3  # idle: the keep-alive ran every interval


def test_a_failed_load_is_reported_and_retried():
    attempts = []

    def loader():
        attempts.append(1)
        raise OSError("disk on fire")

    worker = Scheduler("m", loader=loader)
    future = worker.start(load_now=True)
    with pytest.raises(Exception, match="disk on fire"):
        future.result(5)
    assert worker.state == "failed"
    with pytest.raises(Exception, match="unavailable"):
        worker.call(lambda e: None).result(5)
    worker.stop()
    assert len(attempts) == 2


BODY = {"model": "tts-1", "voice": "alloy", "input": "x" * 100, "response_format": "pcm"}


def test_generation_stops_at_the_request_timeout(tmp_path):
    engine = FakeEngine("custom_voice", frame_delay=0.05)  # 50 frames: 2.5 s
    settings = make_settings(tmp_path, device="cpu", limits={"request_timeout_s": 0.6})
    with serve(settings, engines={"cv": engine}) as (base, app):
        r = httpx.post(f"{base}/v1/audio/speech", json=BODY, timeout=10)
    assert r.status_code == 200  # the audio so far, cut at the deadline
    assert 5 <= engine.frames_generated < 30 and engine.cancelled == 1
    assert len(r.content) == engine.frames_generated * 1920 * 2


def test_queued_request_times_out_even_behind_a_stuck_engine(tmp_path):
    stuck = FakeEngine("custom_voice", frame_delay=0.05, ignore_stop=True)
    limits = {"request_timeout_s": 0.6, "max_batch": 1}  # one row: the second request waits
    settings = make_settings(tmp_path, device="cpu", limits=limits)
    with serve(settings, engines={"cv": stuck}) as (base, app):
        with httpx.stream("POST", f"{base}/v1/audio/speech", json=BODY, timeout=10) as running:
            chunks = running.iter_raw()
            next(chunks)
            t0 = time.monotonic()
            queued = httpx.post(f"{base}/v1/audio/speech", json=BODY, timeout=10)
            waited = time.monotonic() - t0
            b"".join(chunks)
    assert queued.status_code == 503 and queued.json()["error"]["code"] == "queue_timeout"
    assert waited < 1.2, f"answered after {waited:.2f} s"
    assert len(stuck.calls) == 1  # the timed-out request never generated


def test_lazy_models_load_on_first_use(tmp_path):
    engine = FakeEngine()
    settings = make_settings(tmp_path, device="cpu", lazy_load=True)
    with serve(settings, engines={"cv": engine}) as (base, app):
        assert httpx.get(f"{base}/ready").status_code == 200  # lazy models count as ready
        assert engine.warmed == 0
        r = httpx.post(
            f"{base}/v1/audio/speech",
            json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm"},
        )
        assert r.status_code == 200 and engine.warmed == 1


def test_voice_aliases_from_the_config(tmp_path):
    engine = FakeEngine()
    settings = make_settings(
        tmp_path, device="cpu", voice_aliases={"alloy": "Serena", "narrator": "ryan"}
    )
    with serve(settings, engines={"cv": engine}) as (base, app):
        for voice in ("alloy", "narrator", "echo"):
            r = httpx.post(
                f"{base}/v1/audio/speech",
                json={"model": "tts-1", "voice": voice, "input": "Hi.", "response_format": "pcm"},
            )
            assert r.status_code == 200
        assert [c["voice"] for c in engine.calls] == ["serena", "ryan", "ryan"]
        listed = {v["id"]: v["name"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]}
        assert listed["narrator"] == "narrator (Ryan)"


class OutOfMemoryOnce(FakeEngine):
    """Raises torch's out-of-memory error on its first join (the prefill), like a long input on
    a small GPU."""

    def join(self, seq):
        import torch

        if len(self.calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        super().join(seq)


def test_out_of_memory_is_a_503_for_that_request_only(tmp_path):
    engine = OutOfMemoryOnce()
    with serve(make_settings(tmp_path, device="cpu"), engines={"cv": engine}) as (base, app):
        first = httpx.post(f"{base}/v1/audio/speech", json=BODY, timeout=10)
        second = httpx.post(f"{base}/v1/audio/speech", json=BODY, timeout=10)
    assert first.status_code == 503 and first.headers["retry-after"] == "1"
    assert first.json()["error"]["code"] == "insufficient_resources"
    assert second.status_code == 200
