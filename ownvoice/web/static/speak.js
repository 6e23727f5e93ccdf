// Speaking: a request streamed as raw PCM and played as it arrives, with time to first audio
// and the real-time factor shown while it is made; Stop aborts the request, which frees the
// server's row at once, and silences what still plays (it stays until the audio has played);
// the page plays one sound at a time (a new Speak or design stops the one before); a history
// of the results since the page was opened, to play again and download in the format chosen
// at the time of the download.

import { api, describe } from "./api.js";
import { RATE, StreamPlayer, audioContext, wavBlob } from "./player.js";

const $ = (id) => document.getElementById(id);
let current = null; // the sound being made or played (one at a time): {controller, player, finished}

/**
 * Stream `body` (a /v1/audio/speech request) and play it. Returns the result:
 * {samples, peak, seconds, ttfaMs, totalMs, firstPlayMs, doneMs, seed, stopped}.
 */
export async function streamSpeech(body, signal, onProgress = () => {}) {
  const context = await audioContext();
  const player = new StreamPlayer(context);
  onProgress(player, null);
  const seed = body.seed ?? Math.floor(Math.random() * 2 ** 31);
  const started = performance.now();
  let firstByteMs = null;
  let stopped = false;
  try {
    const response = await api("/v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...body, seed, response_format: "pcm" }),
      signal,
    });
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (firstByteMs === null) firstByteMs = performance.now();
      player.push(value);
      onProgress(player, started);
    }
  } catch (error) {
    if (error.name !== "AbortError") throw error;
    player.stop();
    stopped = true;
  }
  const doneMs = performance.now();
  return {
    player, seed, stopped,
    samples: player.samples,
    peak: player.peak,
    seconds: player.samples / RATE,
    ttfaMs: player.firstPlayMs === null ? null : player.firstPlayMs - started,
    totalMs: doneMs - started,
    firstPlayMs: player.firstPlayMs,
    doneMs,
  };
}

/** The stats while audio is still being made (at most every 200 ms). */
function liveStats(line, player, started) {
  const now = performance.now();
  if (!started || !player.samples || now - (liveStats.last ?? 0) < 200) return;
  liveStats.last = now;
  const seconds = player.samples / RATE;
  const rtf = (now - started) / 1000 / seconds;
  line.textContent = `First audio after ${((player.firstPlayMs - started) / 1000).toFixed(2)} s · ` +
    `${seconds.toFixed(1)} s of audio so far · real-time factor ${rtf.toFixed(2)}`;
}

export function speechStats(result) {
  if (!result.samples) return result.stopped ? "Stopped before any audio." : "No audio.";
  const rtf = result.totalMs / 1000 / result.seconds;
  return `First audio after ${(result.ttfaMs / 1000).toFixed(2)} s · ${result.seconds.toFixed(1)} s of audio · ` +
    `real-time factor ${rtf.toFixed(2)}${result.stopped ? " · stopped" : ""}`;
}

function requestFromForm() {
  const body = { model: "tts-1", input: $("text").value, voice: $("voice").value };
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  if ($("language").value) body.language = $("language").value;
  const speed = Number($("speed").value);
  if (speed && speed !== 1) body.speed = speed;
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  return body;
}

async function speak(event) {
  event.preventDefault();
  const body = requestFromForm();
  const label = $("instructions-label").textContent.replace(/ \(.*\)$/, "");
  await play(body, {
    stop: $("stop"), stats: $("speak-stats"), error: $("speak-error"),
    words: { instructions: label, input: "Text", speed: "Speed", seed: "Seed" },
    made: (result) => (result.samples ? addToHistory(body, result) : null),
  });
}

/**
 * Make and play `body` as the page's one sound: whatever plays before (speech, a design) is
 * stopped first. `stop` is enabled until the audio has played (it stops both the generation
 * and the playback); `stats` shows live, then final figures; `made(result)` is called once the
 * audio is all made and may return an element, marked data-interrupted when Stop cuts its
 * playback. Returns the result, or null when it failed (the message is in `error`, in the page's
 * own words for the fields named in `words`).
 */
export async function play(body, { stop, stats, error, words = {}, made = () => null }) {
  const previous = current;
  if (previous) { // a new sound stops the one before, heard or still being made
    stopSpeaking();
    await previous.finished;
  }
  error.textContent = "";
  stats.textContent = "Generating…";
  let release;
  const session = current = {
    controller: new AbortController(), player: null, stop,
    finished: new Promise((resolve) => { release = resolve; }),
  };
  stop.disabled = false;
  let result = null;
  try {
    result = await streamSpeech(body, session.controller.signal, (player, started) => {
      session.player = player;
      document.body.dataset.playing = "true";
      if (current === session) liveStats(stats, player, started);
    });
    stats.textContent = speechStats(result);
    const item = made(result);
    await result.player.whenPlayed(); // Stop stays for what still plays
    if (result.player.stopped && !result.stopped && item) {
      item.dataset.interrupted = "true";
      if (current === session) stats.textContent = `${speechStats(result)} · stopped`;
    }
  } catch (failure) {
    stats.textContent = "";
    error.textContent = describe(failure, words);
  } finally {
    if (current === session) {
      current = null;
      document.body.dataset.playing = "false";
    }
    stop.disabled = true;
    release();
  }
  return result;
}

/** Stop whatever this page is playing or generating. */
export function stopSpeaking() {
  if (!current) return;
  current.controller.abort();
  if (current.player) current.player.stop();
}

function addToHistory(body, result) {
  const item = document.createElement("li");
  item.dataset.samples = String(result.samples);
  item.dataset.peak = String(result.peak);
  item.dataset.firstPlayMs = String(result.firstPlayMs);
  item.dataset.doneMs = String(result.doneMs);
  item.dataset.seed = String(result.seed);
  item.dataset.stopped = String(result.stopped);
  const title = document.createElement("p");
  const text = body.input.length > 80 ? `${body.input.slice(0, 77)}…` : body.input;
  title.textContent = `${body.voice}: “${text}” (${result.seconds.toFixed(1)} s)`;
  const audio = document.createElement("audio");
  audio.controls = true;
  const wav = URL.createObjectURL(wavBlob(result.player.audio()));
  audio.src = wav;
  audio.setAttribute("aria-label", `Play “${text}”`);
  const buttons = document.createElement("div");
  buttons.className = "buttons";
  const download = document.createElement("button");
  download.type = "button";
  download.className = "download";
  download.textContent = `Download ${formatName()}`;
  // the format is the one chosen when the button is pressed, not when the audio was made
  download.addEventListener("click", () => downloadAs(body, result, $("format").value, wav, download));
  buttons.append(download);
  item.append(title, audio, buttons);
  $("history").prepend(item);
  return item;
}

async function downloadAs(body, result, format, wav, button) {
  // WAV is made here from what was played; other formats are the same request (same seed,
  // hence the same audio) asked of the server in that format
  let url = wav;
  if (format !== "wav") {
    button.disabled = true;
    try {
      const response = await api("/v1/audio/speech", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ ...body, seed: result.seed, response_format: format }),
      });
      url = URL.createObjectURL(await response.blob());
    } catch (error) {
      $("speak-error").textContent = describe(error, { response_format: "Download format" });
      return;
    } finally {
      button.disabled = false;
    }
  }
  const link = document.createElement("a");
  link.href = url;
  link.download = `ownvoice-${result.seed}.${format === "opus" ? "ogg" : format}`;
  document.body.append(link);
  link.click();
  link.remove();
}

function formatName() {
  return $("format").selectedOptions[0].textContent.replace(/ \(.*\)$/, "");
}

function hint() {
  const n = $("text").value.length;
  $("text-hint").textContent = `${n} character${n === 1 ? "" : "s"}` +
    (n > 400 ? " · long texts are spoken sentence by sentence, starting at once" : "");
}

export function setUpSpeak() {
  $("speak-form").addEventListener("submit", speak);
  $("stop").addEventListener("click", stopSpeaking);
  $("text").addEventListener("input", hint);
  $("format").addEventListener("change", () => {
    for (const button of document.querySelectorAll("#history button.download")) {
      button.textContent = `Download ${formatName()}`;
    }
  });
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) speak(event);
  });
  hint();
}
