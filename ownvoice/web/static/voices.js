// The voice picker (grouped as the server lists its voices) and the library of cloned voices:
// a short preview of each, add one from a file or from the microphone, delete with a
// confirmation. Every change is made through the API; the list is read back after it.

import { api, describe, json } from "./api.js";
import { wavBlob } from "./player.js";
import { MicRecorder } from "./recorder.js";
import { speechStats, streamSpeech } from "./speak.js";

const $ = (id) => document.getElementById(id);
const GROUPS = [
  ["preset", "Built-in speakers"],
  ["alias", "OpenAI names"],
  ["clone", "Cloned voices"],
  ["design", "Designed voices"],
];
const PREVIEW = "Hello! This is a short preview of my voice.";
// the page's names for the fields of an upload, for refusals (api.js describe)
export const VOICE_WORDS = {
  name: "Name", audio_sample: "Reference audio", ref_text: "Transcript", language: "Language",
  consent: "Consent",
};
export let voices = [];
let referenceSeconds = null; // {min, max}: how long a clip the library takes
let recorder = null;
let recorded = null; // a Blob (WAV) recorded here, used instead of a file

export async function loadVoices() {
  const list = await json("/v1/audio/voices");
  voices = list.voices;
  referenceSeconds = list.reference_seconds ?? null;
  fillPicker($("voice"), voices);
  for (const id of ["language", "voice-language", "design-language"]) {
    fillLanguages($(id), list.languages);
  }
  showLibrary(voices.filter((v) => v.kind === "clone"));
  return list;
}

function fillPicker(select, list) {
  const chosen = select.value;
  select.replaceChildren();
  for (const [kind, label] of GROUPS) {
    const members = list.filter((v) => v.kind === kind);
    if (!members.length) continue;
    const group = document.createElement("optgroup");
    group.label = label;
    for (const v of members) group.append(new Option(v.name, v.id));
    select.append(group);
  }
  if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
  select.dispatchEvent(new Event("change"));
}

function fillLanguages(select, languages) {
  const chosen = select.value;
  select.replaceChildren(new Option("Auto", ""));
  for (const name of languages) select.append(new Option(name[0].toUpperCase() + name.slice(1), name));
  select.value = chosen;
}

function showLibrary(clones) {
  $("library-empty").hidden = clones.length > 0;
  $("library").replaceChildren(...clones.map((voice) => {
    const item = document.createElement("li");
    item.dataset.voice = voice.id;
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = voice.name.replace(/ \(clone\)$/, "") + (voice.language ? ` · ${voice.language}` : "");
    const preview = button("Preview", `Preview ${voice.id}`, () => previewVoice(voice.id, preview));
    const remove = button("Delete", `Delete ${voice.id}`, () => deleteVoice(voice.id));
    item.append(name, preview, remove);
    return item;
  }));
}

function button(text, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

async function previewVoice(id, previewButton) {
  $("library-error").textContent = "";
  previewButton.disabled = true;
  try {
    const result = await streamSpeech({ model: "tts-1", input: PREVIEW, voice: id });
    previewButton.title = speechStats(result);
  } catch (error) {
    $("library-error").textContent = describe(error);
  } finally {
    previewButton.disabled = false;
  }
}

export function confirmDialog(text) {
  const dialog = $("confirm-dialog");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.showModal();
    $("confirm-no").focus();
  });
}

async function deleteVoice(id) {
  $("library-error").textContent = "";
  if (!(await confirmDialog(`Delete the voice ${id}? Its reference audio is removed from the server.`))) return;
  try {
    await api(`/v1/audio/voices/${encodeURIComponent(id)}`, { method: "DELETE" });
    await loadVoices();
  } catch (error) {
    $("library-error").textContent = describe(error);
  }
}

/** Why a clip this long cannot become a voice, or "" when it can (as the server checks it). */
export function referenceProblem(seconds) {
  if (!referenceSeconds) return "";
  const { min, max } = referenceSeconds;
  if (seconds >= min && seconds <= max) return "";
  return `too ${seconds < min ? "short" : "long"} (${seconds.toFixed(1)} s; ` +
    `a voice needs ${min}–${max} s of speech)`;
}

/** Add a voice to the library: fields as POST /v1/audio/voices takes them. */
export async function addVoice({ name, audio, filename, transcript, xVectorOnly, language, consent }) {
  const form = new FormData();
  form.append("name", name);
  form.append("audio_sample", audio, filename);
  form.append("consent", consent ? "true" : "false");
  if (transcript && !xVectorOnly) form.append("ref_text", transcript);
  if (xVectorOnly) form.append("x_vector_only_mode", "true");
  if (language) form.append("language", language);
  const voice = await json("/v1/audio/voices", { method: "POST", body: form });
  await loadVoices();
  return voice;
}

async function saveVoice(event) {
  event.preventDefault();
  $("voice-error").textContent = "";
  $("voice-done").textContent = "";
  const file = $("voice-file").files[0];
  const audio = recorded || file;
  if (!audio) {
    $("voice-error").textContent = "Choose an audio file or record one.";
    return;
  }
  $("voice-save").disabled = true;
  try {
    const voice = await addVoice({
      name: $("voice-name").value.trim(),
      audio,
      filename: recorded ? "recording.wav" : file.name,
      transcript: $("voice-transcript").value.trim(),
      xVectorOnly: $("voice-xvector").checked,
      language: $("voice-language").value,
      consent: $("voice-consent").checked,
    });
    $("voice-done").textContent = `Added ${voice.id}.`;
    $("voice-form").reset();
    clearRecording();
  } catch (error) {
    $("voice-error").textContent = describe(error, VOICE_WORDS);
  } finally {
    $("voice-save").disabled = false;
  }
}

async function startRecording() {
  $("voice-error").textContent = "";
  clearRecording();
  try {
    recorder = new MicRecorder();
    await recorder.start();
  } catch (error) {
    recorder = null;
    $("voice-error").textContent = `The microphone cannot be used: ${error.message || error}`;
    return;
  }
  $("record").disabled = true;
  $("record-stop").disabled = false;
  $("record-status").textContent = "Recording… speak now, then press Stop recording.";
}

async function stopRecording() {
  if (!recorder) return;
  const { samples, rate } = await recorder.stop();
  recorder = null;
  $("record").disabled = false;
  $("record-stop").disabled = true;
  recorded = wavBlob(samples, rate);
  const problem = referenceProblem(samples.length / rate);
  $("record-status").textContent = problem
    ? `Recorded, but ${problem}: record again.`
    : `Recorded ${(samples.length / rate).toFixed(1)} s; it is used instead of a file.`;
  $("record-audio").src = URL.createObjectURL(recorded);
  $("record-audio").hidden = false;
}

function clearRecording() {
  recorded = null;
  $("record-audio").hidden = true;
  $("record-audio").removeAttribute("src");
  $("record-status").textContent = "";
}

export function setUpVoices() {
  $("voice-form").addEventListener("submit", saveVoice);
  $("record").addEventListener("click", startRecording);
  $("record-stop").addEventListener("click", stopRecording);
  $("voice-file").addEventListener("change", clearRecording);
  const followXVector = () => { $("voice-transcript").disabled = $("voice-xvector").checked; };
  $("voice-xvector").addEventListener("change", followXVector);
  // a reset unticks the box without a change event: the transcript box must open again
  $("voice-form").addEventListener("reset", () => setTimeout(followXVector));
}
