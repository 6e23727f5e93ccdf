// Design, then keep: describe a voice for the VoiceDesign model, listen, and keep the result as
// a cloned voice (its audio and text become the reference), which the Base model then speaks
// with: the official "design then clone" workflow on one page.

import { describe } from "./api.js";
import { wavBlob } from "./player.js";
import { speechStats, streamSpeech } from "./speak.js";
import { addVoice, referenceProblem } from "./voices.js";

const $ = (id) => document.getElementById(id);
let designed = null; // {text, language, result} of the last design heard in full

async function design(event) {
  event.preventDefault();
  $("design-error").textContent = "";
  $("keep-done").textContent = "";
  $("design-stats").textContent = "Generating…";
  $("design-speak").disabled = true;
  const body = {
    model: "tts-1",
    voice: "design",
    input: $("design-text").value,
    instructions: $("design-description").value.trim(),
  };
  if ($("design-language").value) body.language = $("design-language").value;
  // the seed is shown so that a design one likes can be made again (the model invents a new
  // voice at every sampling)
  if ($("design-seed").value !== "") body.seed = Number($("design-seed").value);
  try {
    const result = await streamSpeech(body);
    $("design-stats").textContent = `${speechStats(result)} · seed ${result.seed}`;
    designed = { text: body.input, language: body.language, result };
    // a clip the library would refuse is not offered: say why before a name is typed
    const problem = referenceProblem(result.seconds);
    $("keep-note").textContent = problem
      ? `This design cannot be kept: ${problem}. Try a longer text or another seed.`
      : "";
    $("keep").disabled = Boolean(problem);
    $("keep-form").hidden = false;
  } catch (error) {
    $("design-stats").textContent = "";
    $("design-error").textContent = describe(error);
  } finally {
    $("design-speak").disabled = false;
  }
}

async function keep(event) {
  event.preventDefault();
  $("keep-error").textContent = "";
  $("keep-done").textContent = "";
  $("keep").disabled = true;
  try {
    const voice = await addVoice({
      name: $("keep-name").value.trim(),
      audio: wavBlob(designed.result.player.audio()),
      filename: "designed.wav",
      transcript: designed.text,
      xVectorOnly: false,
      language: designed.language,
      consent: $("keep-consent").checked,
    });
    $("keep-done").textContent = `Kept as ${voice.id}: pick it under Cloned voices.`;
  } catch (error) {
    $("keep-error").textContent = describe(error);
  } finally {
    $("keep").disabled = false; // it runs only when Keep was enabled (a keepable design)
  }
}

export function setUpDesign() {
  $("design-form").addEventListener("submit", design);
  $("keep-form").addEventListener("submit", keep);
}
