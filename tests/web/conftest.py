"""A real server on tiny checkpoints (CustomVoice, VoiceDesign, Base) and a real headless
Chromium (Debian's chromium and chromium-driver, driven by Selenium; never downloaded), whose
fake microphone plays a WAV file written here. Screenshots go to $OWNVOICE_SCREENSHOTS (default:
a temporary folder)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.server.helpers import make_settings, serve, speech_clip
from tests.tools import need

MIC_RATE = 48000
MIC_SECONDS = 8.0


@pytest.fixture(scope="session")
def mic_wav(tmp_path_factory) -> Path:
    """What the fake microphone hears (Chromium loops it): a speech-like clip, no two seconds
    alike (a chirped pitch), so a recording can be located in it."""
    t = np.arange(int(MIC_SECONDS * MIC_RATE)) / MIC_RATE
    pitch = 110 + 15 * t  # rises through the clip
    phase = 2 * np.pi * np.cumsum(pitch) / MIC_RATE
    tone = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.3 * t)
    x = (0.3 * tone * envelope / np.abs(tone * envelope).max()).astype(np.float32)
    path = tmp_path_factory.mktemp("mic") / "mic.wav"
    sf.write(path, x, MIC_RATE, subtype="PCM_16")
    return path


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("OWNVOICE_SCREENSHOTS") or tmp_path_factory.mktemp("screens"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium(mic: Path, width: int = 1280, height: int = 1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = need("chromium")
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
        f"--window-size={width},{height}", "--autoplay-policy=no-user-gesture-required",
        "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={mic}", "--no-first-run", "--disable-extensions",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(need("chromedriver")), options=options)
    if width < 500:  # a window is never that narrow: emulate the phone's screen instead
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 2,
                                "mobile": True})  # fmt: skip
    return driver


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(mic_wav, downloads):
    driver = chromium(mic_wav)
    driver.set_script_timeout(60)
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tiny_checkpoints, tmp_path_factory):
    """(base URL, app, voices folder): every role, one row per model (a Stop must free it)."""
    voices = tmp_path_factory.mktemp("voices")
    settings = make_settings(
        voices,
        device="cpu",
        dtype="float32",
        models={
            "cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])},
            "design": {"source": str(tiny_checkpoints["1.7B-VoiceDesign"])},
            "base": {"source": str(tiny_checkpoints["0.6B-Base"])},
        },
        limits={"max_batch": 1, "queue_size": 2},
        optimization={"streaming": {"emit_every_frames": 4}},
    )
    with serve(settings) as (base, app):
        yield base, app, voices


def reference_clip(seconds: float = 5.0) -> bytes:
    from tests.server.helpers import wav_bytes

    return wav_bytes(speech_clip(seconds, rate=24000), rate=24000)
