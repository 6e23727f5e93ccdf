"""The web page in real headless Chromium against a real server on tiny checkpoints: speak and
hear it as it streams, stop, add a voice by upload and by microphone, delete it, design a voice
and keep it, the API key, another origin, errors, keyboard and a phone-sized screen."""

from __future__ import annotations

import http.server
import io
import re
import threading
import time

import httpx
import numpy as np
import pytest
import soundfile as sf
import soxr
from selenium.webdriver.common.by import By  # a pinned test dependency: missing is a failure
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.web.conftest import MIC_RATE, chromium, reference_clip

LONG_TEXT = " ".join(
    f"Sentence number {n} of a long text, read while the rest is still being made."
    for n in range(2)
)


def open_page(driver, base: str) -> None:
    driver.get(f"{base}/")
    wait(driver, lambda d: d.execute_script("return document.body.dataset.ready") == "true")


def wait(driver, condition, timeout: float = 120):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition)


def tab(driver, name: str) -> None:
    driver.find_element(By.ID, f"tab-{name}").click()


def fill(driver, element_id: str, text: str) -> None:
    """Set a field's value as typing would (long texts: at once, then an input event)."""
    driver.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('input', {bubbles: true}));",
        element_id,
        text,
    )


def history(driver) -> list:
    return driver.find_elements(By.CSS_SELECTOR, "#history li")


def speak(driver, text: str, voice: str = "ryan", seed: int | None = 7):
    """Speak with the form; the new history item (or None when an error was shown)."""
    before = len(history(driver))
    fill(driver, "text", text)
    Select(driver.find_element(By.ID, "voice")).select_by_value(voice)
    fill(driver, "seed", "" if seed is None else str(seed))
    driver.find_element(By.ID, "speak").click()
    wait(driver, lambda d: len(history(d)) > before or d.find_element(By.ID, "speak-error").text)
    items = history(driver)
    return items[0] if len(items) > before else None


def download(driver, button, target, timeout: float = 60) -> bytes:
    """Click a download button or link; the bytes of the file it saves as `target`."""
    target.unlink(missing_ok=True)
    button.click()
    wait(driver, lambda d: target.is_file() and target.stat().st_size > 44, timeout=timeout)
    time.sleep(0.2)  # the file is renamed into place once complete
    return target.read_bytes()


def page_audio(driver, item, downloads) -> bytes:
    """The WAV the page made of what it played, through its Download button."""
    Select(driver.find_element(By.ID, "format")).select_by_value("wav")
    button = item.find_element(By.XPATH, ".//button[starts-with(text(), 'Download')]")
    return download(driver, button, downloads / f"ownvoice-{item.get_attribute('data-seed')}.wav")


def http_pcm(
    base: str, text: str, voice: str, seed: int, key: str | None = None, **fields
) -> bytes:
    body = {"model": "tts-1", "input": text, "voice": voice, "seed": seed, "response_format": "pcm",
            **fields}  # fmt: skip
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(f"{base}/v1/audio/speech", json=body, headers=headers, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


def health(base: str) -> dict:
    return httpx.get(f"{base}/health").json()


def test_speak_plays_the_audio_as_it_streams(browser, site, screenshots, downloads):
    base, _, _ = site
    open_page(browser, base)
    groups = [
        g.get_attribute("label") for g in browser.find_elements(By.CSS_SELECTOR, "#voice optgroup")
    ]
    assert groups[:2] == ["Built-in speakers", "OpenAI names"] and "Designed voices" in groups

    item = speak(browser, LONG_TEXT, "ryan", seed=7)
    assert item is not None, browser.find_element(By.ID, "speak-error").text
    samples = int(item.get_attribute("data-samples"))
    # what played is the response: the same samples as the API gives for the same request
    wav = page_audio(browser, item, downloads)
    expected = http_pcm(base, LONG_TEXT, "ryan", 7)
    assert samples == len(expected) // 2 > 24000
    assert wav[44:] == expected
    assert float(item.get_attribute("data-peak")) > 0.01  # not silence
    # the first audio played before the generation had ended
    assert float(item.get_attribute("data-first-play-ms")) < float(
        item.get_attribute("data-done-ms")
    )
    stats = browser.find_element(By.ID, "speak-stats").text
    assert re.match(
        r"First audio after \d+\.\d\d s · \d+\.\d s of audio · real-time factor \d", stats
    )
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(screenshots / "speak.png"))


def test_stop_frees_the_servers_row_at_once(browser, site):
    base, _, _ = site
    open_page(browser, base)
    fill(browser, "text", LONG_TEXT * 4)
    fill(browser, "seed", "7")  # a long generation, whatever the random model's EOS does
    browser.find_element(By.ID, "speak").click()
    wait(browser, lambda d: health(base)["queue"]["generating"] == 1, timeout=60)
    wait(browser, lambda d: d.find_element(By.ID, "stop").is_enabled())
    browser.find_element(By.ID, "stop").click()
    # one row (max_batch 1): the next request can start only once the stopped one left it
    t0 = time.monotonic()
    wait(browser, lambda d: health(base)["queue"]["generating"] == 0, timeout=10)
    freed = time.monotonic() - t0
    with httpx.stream("POST", f"{base}/v1/audio/speech", timeout=60,
                      json={"model": "tts-1", "input": "Next.", "voice": "ryan",
                            "response_format": "pcm"}) as r:  # fmt: skip
        assert r.status_code == 200
        next(r.iter_bytes())
    assert freed < 5, freed
    wait(browser, lambda d: not d.find_element(By.ID, "stop").is_enabled())
    assert browser.find_element(By.ID, "speak").is_enabled()


def playing(driver) -> bool:
    return driver.execute_script("return document.body.dataset.playing") == "true"


def test_stats_show_while_the_audio_is_made(browser, site):
    base, _, _ = site
    open_page(browser, base)
    fill(browser, "text", LONG_TEXT * 4)
    fill(browser, "seed", "7")
    browser.find_element(By.ID, "speak").click()
    live = wait(browser, lambda d: re.match(
        r"First audio after \d+\.\d\d s · \d+\.\d s of audio so far · real-time factor \d",
        d.find_element(By.ID, "speak-stats").text,
    ), timeout=60)  # fmt: skip
    assert live and health(base)["queue"]["generating"] == 1  # while it is being made
    browser.find_element(By.ID, "stop").click()
    wait(browser, lambda d: not d.find_element(By.ID, "stop").is_enabled())


@pytest.mark.alone  # the audio must be made faster than it plays
def test_stop_stays_while_the_audio_plays_and_silences_it(browser, site):
    """Generation ends before playback (faster than real time): Stop is for what still plays."""
    base, _, _ = site
    open_page(browser, base)
    item = speak(browser, LONG_TEXT, "ryan", seed=7)  # returns once the audio is all made
    assert item is not None, browser.find_element(By.ID, "speak-error").text
    assert playing(browser) and browser.find_element(By.ID, "stop").is_enabled()
    browser.find_element(By.ID, "stop").click()
    wait(browser, lambda d: item.get_attribute("data-interrupted") == "true", timeout=5)
    assert not playing(browser) and not browser.find_element(By.ID, "stop").is_enabled()
    assert browser.find_element(By.ID, "speak-stats").text.endswith("· stopped")


@pytest.mark.alone  # the audio must be made faster than it plays
def test_a_second_speak_stops_the_first(browser, site):
    base, _, _ = site
    open_page(browser, base)
    first = speak(browser, LONG_TEXT, "ryan", seed=7)
    assert first is not None and playing(browser)
    second = speak(browser, "Another one.", "ryan", seed=8)
    assert second is not None and second != first
    assert first.get_attribute("data-interrupted") == "true"  # silenced, not played over


def start_a_voice(driver, base: str, name: str, clip_path) -> None:
    """Open the Voices tab with a name and a reference clip filled in."""
    clip_path.write_bytes(reference_clip())
    open_page(driver, base)
    tab(driver, "voices")
    fill(driver, "voice-name", name)
    driver.find_element(By.ID, "voice-file").send_keys(str(clip_path))


def test_upload_a_voice_speak_with_it_and_delete_it(
    browser, site, tmp_path, screenshots, downloads
):
    base, _, voices = site
    start_a_voice(browser, base, "Alice", tmp_path / "alice.wav")
    fill(browser, "voice-transcript", "This is how Alice sounds when she reads.")
    browser.find_element(By.ID, "voice-consent").click()
    browser.find_element(By.ID, "voice-save").click()
    wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#library li[data-voice="clone:Alice"]')
    )
    assert (voices / "Alice" / "reference.wav").is_file()
    assert "Added clone:Alice." in browser.find_element(By.ID, "voice-done").text
    browser.save_screenshot(str(screenshots / "voices.png"))

    tab(browser, "speak")
    item = speak(browser, "Alice speaks now.", "clone:Alice", seed=3)
    assert item is not None, browser.find_element(By.ID, "speak-error").text
    assert page_audio(browser, item, downloads)[44:] == http_pcm(
        base, "Alice speaks now.", "clone:Alice", 3
    )

    tab(browser, "voices")
    browser.find_element(
        By.CSS_SELECTOR,
        '#library li[data-voice="clone:Alice"] button[aria-label="Delete clone:Alice"]',
    ).click()
    wait(
        browser, lambda d: d.find_element(By.ID, "confirm-dialog").get_attribute("open") is not None
    )
    browser.find_element(By.ID, "confirm-no").click()  # a second thought keeps it
    assert (voices / "Alice").is_dir()
    browser.find_element(By.CSS_SELECTOR, 'button[aria-label="Delete clone:Alice"]').click()
    wait(
        browser, lambda d: d.find_element(By.ID, "confirm-dialog").get_attribute("open") is not None
    )
    browser.find_element(By.ID, "confirm-yes").click()
    wait(
        browser,
        lambda d: not d.find_elements(By.CSS_SELECTOR, '#library li[data-voice="clone:Alice"]'),
    )
    assert not (voices / "Alice").exists()
    values = [
        o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#voice option")
    ]
    assert "clone:Alice" not in values


def test_a_voice_recorded_from_the_microphone_is_stored_as_heard(browser, site, mic_wav):
    base, _, voices = site
    open_page(browser, base)
    tab(browser, "voices")
    # a recording too short to clone says so at once
    browser.find_element(By.ID, "record").click()
    wait(browser, lambda d: d.find_element(By.ID, "record-stop").is_enabled())
    time.sleep(1.0)
    browser.find_element(By.ID, "record-stop").click()
    wait(browser, lambda d: d.find_element(By.ID, "record-status").text.startswith("Recorded"))
    status = browser.find_element(By.ID, "record-status").text
    assert re.fullmatch(r"Recorded, but too short \(\d\.\d s; a voice needs 3–30 s of speech\): "
                        r"record again\.", status), status  # fmt: skip
    browser.find_element(By.ID, "record").click()
    wait(browser, lambda d: d.find_element(By.ID, "record-stop").is_enabled())
    time.sleep(4.5)
    browser.find_element(By.ID, "record-stop").click()
    status = wait(browser, lambda d: d.find_element(By.ID, "record-status").text.startswith("Recorded")
                  or d.find_element(By.ID, "voice-error").text)  # fmt: skip
    assert browser.find_element(By.ID, "record-status").text.startswith("Recorded "), status
    fill(browser, "voice-name", "Mic")
    browser.find_element(By.ID, "voice-xvector").click()
    browser.find_element(By.ID, "voice-consent").click()
    browser.find_element(By.ID, "voice-save").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '#library li[data-voice="clone:Mic"]')
         or d.find_element(By.ID, "voice-error").text)  # fmt: skip
    assert not browser.find_element(By.ID, "voice-error").text
    stored, rate = sf.read(voices / "Mic" / "reference.wav", dtype="float32")
    heard, _ = sf.read(mic_wav, dtype="float32")
    assert 3.5 <= len(stored) / rate <= 6.0
    # the stored clip is a stretch of what the microphone played: locate it, compare
    a = soxr.resample(stored, rate, 8000)
    b = soxr.resample(np.concatenate([heard, heard]), MIC_RATE, 8000)  # the file loops
    a = a[len(a) // 4 : len(a) // 4 + 8000]  # one second from inside the recording
    scores = np.correlate(b, a, mode="valid")
    energy = np.sqrt(np.convolve(b**2, np.ones(len(a)), mode="valid") * np.sum(a**2))
    assert np.max(scores / np.maximum(energy, 1e-9)) > 0.95


def design(driver, seed: int) -> str:
    """Design with the form; the stats line."""
    fill(driver, "design-description", "A calm, low voice that speaks slowly.")
    fill(driver, "design-seed", str(seed))
    driver.execute_script("document.getElementById('design-stats').textContent = ''")
    driver.find_element(By.ID, "design-speak").click()
    wait(driver, lambda d: " · seed " in d.find_element(By.ID, "design-stats").text
         or d.find_element(By.ID, "design-error").text)  # fmt: skip
    assert not driver.find_element(By.ID, "design-error").text
    return driver.find_element(By.ID, "design-stats").text


def test_design_then_keep_speaks_through_the_base_model(browser, site, screenshots):
    base, app, voices = site
    open_page(browser, base)
    tab(browser, "design")
    # the tiny random model ends this one after 0.6 s: too short to keep, said before a name
    # is typed (the library's bounds come from the server's voice list)
    assert design(browser, seed=10).endswith(" · seed 10")
    note = browser.find_element(By.ID, "keep-note").text
    assert note.startswith("This design cannot be kept: too short (0.6 s; a voice needs 3–30 s")
    assert not browser.find_element(By.ID, "keep").is_enabled()
    # a text twice as long runs to its cap, past the 30 s a voice may be
    short_text = browser.find_element(By.ID, "design-text").get_attribute("value")
    fill(browser, "design-text", f"{short_text} {short_text}")
    design(browser, seed=7)
    note = browser.find_element(By.ID, "keep-note").text
    assert note.startswith("This design cannot be kept: too long ("), note
    assert not browser.find_element(By.ID, "keep").is_enabled()
    fill(browser, "design-text", short_text)
    # another seed runs to the frame cap (22 s): this one can be kept
    stats = design(browser, seed=7)
    assert re.search(r" (\d+\.\d) s of audio .* · seed 7$", stats), stats
    assert 3 <= float(re.search(r" (\d+\.\d) s of audio", stats).group(1)) <= 30
    assert browser.find_element(By.ID, "keep-note").text == ""
    assert browser.find_element(By.ID, "keep").is_enabled()
    browser.save_screenshot(str(screenshots / "design.png"))
    fill(browser, "keep-name", "Calm")
    browser.find_element(By.ID, "keep-consent").click()
    browser.find_element(By.ID, "keep").click()
    wait(
        browser,
        lambda d: (
            d.find_element(By.ID, "keep-done").text or d.find_element(By.ID, "keep-error").text
        ),
    )
    assert browser.find_element(By.ID, "keep-error").text == ""
    assert "clone:Calm" in browser.find_element(By.ID, "keep-done").text
    meta = voices / "Calm" / "voice.json"
    assert meta.is_file() or (voices / "Calm" / "reference.wav").is_file()

    steps = app.state.service.pool.workers["base"].steps
    http_pcm(base, "The kept voice speaks.", "clone:Calm", 5)
    assert app.state.service.pool.workers["base"].steps > steps  # the Base model spoke it


def test_the_api_key_is_asked_once_and_other_origins_cannot_write(
    browser, site, tiny_checkpoints, tmp_path, mic_wav
):
    from tests.server.helpers import make_settings, serve

    settings = make_settings(
        tmp_path / "voices", device="cpu", dtype="float32",
        models={"cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])}},
        server={"api_key": "sekrit"},
    )  # fmt: skip
    with serve(settings) as (keyed, _):
        open_page(browser, keyed)
        browser.execute_script("sessionStorage.clear()")
        fill(browser, "text", "With a key.")
        browser.find_element(By.ID, "speak").click()
        dialog = wait(
            browser, lambda d: d.find_element(By.ID, "key-dialog").get_attribute("open") is not None
        )
        assert dialog and "needs its API key" in browser.find_element(By.ID, "key-reason").text
        browser.find_element(By.ID, "key-input").send_keys("wrong")
        browser.find_element(By.ID, "key-ok").click()
        wait(browser, lambda d: "not accepted" in d.find_element(By.ID, "key-reason").text)
        browser.find_element(By.ID, "key-input").send_keys("sekrit")
        browser.find_element(By.ID, "key-ok").click()
        wait(browser, lambda d: len(history(d)) == 1)
        # kept for the tab: the next request does not ask
        assert speak(browser, "Again.", "ryan") is not None
        assert browser.find_element(By.ID, "key-dialog").get_attribute("open") is None

    # a page of another origin (another port) cannot create or delete voices on the server
    base, _, voices = site
    httpx.post(f"{base}/v1/audio/voices", files={"audio_sample": ("b.wav", reference_clip())},
               data={"name": "Bob", "consent": "true"}).raise_for_status()  # fmt: skip
    with _other_origin() as other:
        browser.get(f"{other}/")
        outcome = browser.execute_async_script(
            "const [base, done] = arguments; const form = new FormData();"
            "form.append('name', 'Mallory'); form.append('consent', 'true');"
            "form.append('audio_sample', new Blob([new Uint8Array(1000)]), 'm.wav');"
            "const tries = [fetch(base + '/v1/audio/voices', {method: 'POST', body: form}),"
            "  fetch(base + '/v1/audio/voices/clone:Bob', {method: 'DELETE'})];"
            "Promise.allSettled(tries).then(r => done(r.map(x => x.status)));",
            base,
        )
    assert outcome == ["rejected", "rejected"]  # the browser saw no answer it may read
    assert not (voices / "Mallory").exists()
    assert (voices / "Bob").is_dir()
    httpx.delete(f"{base}/v1/audio/voices/clone:Bob").raise_for_status()


class _Blank(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>elsewhere</title><p>another site"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _other_origin:
    def __enter__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Blank)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_errors_show_the_servers_message_and_the_page_stays_usable(browser, site, tmp_path):
    base, _, _ = site
    open_page(browser, base)
    assert speak(browser, "", "ryan") is None
    empty = browser.find_element(By.ID, "speak-error").text
    assert empty.startswith("Text: ") and "input" not in empty, empty  # the field as labelled
    browser.execute_script(
        "const s = document.getElementById('voice'); s.append(new Option('nobody', 'nobody'));"
    )
    assert speak(browser, "Hello.", "nobody") is None
    unknown = browser.find_element(By.ID, "speak-error").text
    expected = httpx.post(f"{base}/v1/audio/speech",
                          json={"model": "tts-1", "input": "Hello.", "voice": "nobody"}).json()  # fmt: skip
    assert unknown == expected["error"]["message"]

    not_audio = tmp_path / "notes.wav"
    not_audio.write_text("these are not sounds")
    tab(browser, "voices")
    fill(browser, "voice-name", "Broken")
    browser.find_element(By.ID, "voice-file").send_keys(str(not_audio))
    browser.find_element(By.ID, "voice-consent").click()
    browser.find_element(By.ID, "voice-save").click()
    message = wait(browser, lambda d: d.find_element(By.ID, "voice-error").text)
    assert message.startswith("Reference audio: "), message  # the page's word for audio_sample
    assert browser.find_element(By.ID, "voice-save").is_enabled()

    tab(browser, "speak")
    assert speak(browser, "Still working.", "ryan") is not None  # the page is still usable
    assert browser.find_element(By.ID, "speak-error").text == ""


def test_keyboard_labels_and_a_phone_sized_screen(site, mic_wav, screenshots):
    base, _, _ = site
    phone = chromium(mic_wav, width=360, height=780)
    try:
        open_page(phone, base)
        tops = phone.execute_script(
            "return [...document.querySelectorAll('[role=tab]')].map(t => t.getBoundingClientRect().top)"
        )
        assert len(tops) == 4 and len(set(tops)) == 1, f"the tabs wrap: {tops}"
        for name in ("speak", "voices", "design", "status"):
            tab(phone, name)
            time.sleep(0.2)
            width = phone.execute_script("return document.documentElement.scrollWidth")
            assert width <= 360, f"the {name} tab is {width} px wide"
            phone.save_screenshot(str(screenshots / f"phone-{name}.png"))
        status = phone.find_element(By.ID, "models").text
        assert "cv" in status and "cpu" in status and "0 of 1" in status

        # every control has a name a screen reader can say
        unnamed = phone.execute_script(
            "return [...document.querySelectorAll('input, select, textarea, button')].filter(e => {"
            "  const label = e.id && document.querySelector(`label[for='${e.id}']`);"
            "  return !(label || e.getAttribute('aria-label') || e.textContent.trim());"
            "}).map(e => e.id || e.outerHTML.slice(0, 60));"
        )
        assert unnamed == []

        # by keyboard: arrows move between tabs, Ctrl+Enter in the text speaks
        tab(phone, "speak")
        phone.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
        assert phone.switch_to.active_element.get_attribute("id") == "tab-voices"
        assert not phone.find_element(By.ID, "panel-voices").get_attribute("hidden")
        phone.switch_to.active_element.send_keys(Keys.ARROW_LEFT)
        text = phone.find_element(By.ID, "text")
        text.click()
        text.send_keys("Spoken from the keyboard.")
        text.send_keys(Keys.CONTROL, Keys.ENTER)
        wait(phone, lambda d: len(history(d)) == 1)
    finally:
        phone.quit()


DESCRIPTION = "A calm, low voice that speaks slowly."


@pytest.mark.alone  # the audio must be made faster than it plays
def test_a_design_can_be_stopped_heard_again_and_downloaded(browser, site, downloads):
    base, _, _ = site
    open_page(browser, base)
    tab(browser, "design")
    stats = design(browser, seed=7)  # 22 s of audio, made faster than it plays
    result = browser.find_element(By.ID, "design-result")
    assert result.is_displayed() and playing(browser)
    assert browser.find_element(By.ID, "design-stop").is_enabled()
    assert browser.find_element(By.ID, "design-audio").get_attribute("src").startswith("blob:")
    link = browser.find_element(By.ID, "design-download")
    saved = download(browser, link, downloads / "ownvoice-design-7.wav")
    text = browser.find_element(By.ID, "design-text").get_attribute("value")
    expected = http_pcm(base, text, "design", 7, instructions=DESCRIPTION)
    assert saved[44:] == expected  # what was heard, as the API makes it
    browser.find_element(By.ID, "design-stop").click()
    wait(browser, lambda d: result.get_attribute("data-interrupted") == "true", timeout=5)
    assert not playing(browser) and not browser.find_element(By.ID, "design-stop").is_enabled()
    assert stats.endswith(" · seed 7")


def test_the_download_format_is_the_one_chosen_when_downloading(browser, site, downloads):
    base, _, _ = site
    open_page(browser, base)
    Select(browser.find_element(By.ID, "format")).select_by_value("wav")
    item = speak(browser, "Saved in another format.", "ryan", seed=4)
    assert item is not None, browser.find_element(By.ID, "speak-error").text
    Select(browser.find_element(By.ID, "format")).select_by_value("flac")
    button = item.find_element(By.CSS_SELECTOR, "button.download")
    assert button.text == "Download FLAC"
    saved = download(browser, button, downloads / "ownvoice-4.flac")
    audio, rate = sf.read(io.BytesIO(saved), dtype="int16")
    pcm = np.frombuffer(http_pcm(base, "Saved in another format.", "ryan", 4), "<i2")
    assert rate == 24000 and np.array_equal(audio, pcm)


def test_refusals_use_the_pages_words_and_the_transcript_box_reopens(browser, site, tmp_path):
    base, _, _ = site
    start_a_voice(browser, base, "Bob", tmp_path / "bob.wav")
    browser.find_element(By.ID, "voice-xvector").click()
    assert not browser.find_element(By.ID, "voice-transcript").is_enabled()
    browser.find_element(By.ID, "voice-save").click()  # the consent box left empty
    message = wait(browser, lambda d: d.find_element(By.ID, "voice-error").text)
    assert message.startswith("Consent: required: confirm that the speaker agreed"), message
    assert "consent=" not in message and "consent id" not in message
    browser.find_element(By.ID, "voice-consent").click()
    browser.find_element(By.ID, "voice-save").click()
    wait(browser, lambda d: d.find_element(By.ID, "voice-done").text == "Added clone:Bob.")
    # the form is cleared for the next voice, the "No transcript" box with it
    assert not browser.find_element(By.ID, "voice-xvector").is_selected()
    assert browser.find_element(By.ID, "voice-transcript").is_enabled()
    httpx.delete(f"{base}/v1/audio/voices/clone:Bob").raise_for_status()


def test_a_warning_is_one_click_from_what_to_do(browser, site):
    base, app, _ = site
    warning = "model cv runs on the CPU (device: auto); set `device: cpu` to silence this warning"
    app.state.warnings.append(warning)
    try:
        open_page(browser, base)
        badge = browser.find_element(By.ID, "badge")
        assert badge.text == "degraded · cpu · 1 warning: see Status", badge.text
        badge.click()
        assert browser.find_element(By.ID, "panel-status").is_displayed()
        assert browser.find_element(By.ID, "warnings").text == warning
        summary = browser.find_element(By.ID, "status-summary").text
        assert "degraded: it works, but each warning below says what to change" in summary
    finally:
        app.state.warnings.remove(warning)


def test_the_page_is_served_with_a_strict_policy_and_no_outside_urls(site):
    from ownvoice.web import static_files

    base, _, _ = site
    page = httpx.get(f"{base}/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe" not in policy and "frame-ancestors 'none'" in policy
    for name in static_files():
        r = httpx.get(f"{base}/static/{name}")
        assert r.status_code == 200 and r.headers["content-security-policy"] == policy
    assert httpx.get(f"{base}/static/..%2Fserver%2Fapp.py").status_code == 404
    assert httpx.get(f"{base}/static/nothing.js").status_code == 404
    for name, path in static_files().items():
        text = path.read_text()
        assert not re.search(r"https?://|(?:src|href)=[\"']//", text), name
    assert "<script>" not in static_files()["index.html"].read_text()  # no inline script
