// Design, then keep: describe a voice for the VoiceDesign model, listen (Stop silences it, as
// on the Speak tab), play it again or download it, and keep the result as a cloned voice (its
// audio and text become the reference), which the Base model then speaks with: the official
// "design then clone" workflow on one page.

import { describe } from "./api.js";
import { wavBlob } from "./player.js";
import { play, stopSpeaking } from "./speak.js";
import { VOICE_WORDS, addVoice, referenceProblem } from "./voices.js";

const $ = (id) => document.getElementById(id);
const DESIGN_WORDS = { instructions: "Description", input: "What it says", language: "Language", seed: "Seed" };
let designed = null; // {text, language, result} of the last design heard in full

async function design(event) {
  event.preventDefault();
  $("keep-done").textContent = "";
  $("design-speak").disabled = true;
  const body = { model: "tts-1", voice: "design", input: $("design-text").value };
  const description = $("design-description").value.trim();
  if (description) body.instructions = description; // none: the server's neutral default voice
  if ($("design-language").value) body.language = $("design-language").value;
  // the seed is shown so that a design one likes can be made again (the model invents a new
  // voice at every sampling)
  if ($("design-seed").value !== "") body.seed = Number($("design-seed").value);
  try {
    await play(body, {
      stop: $("design-stop"), stats: $("design-stats"), error: $("design-error"),
      words: DESIGN_WORDS,
      made: (result) => {
        $("design-speak").disabled = false; // another design may start while this one plays
        $("design-stats").textContent += ` · seed ${result.seed}`;
        return result.samples ? showDesign(body, result) : null;
      },
    });
  } finally {
    $("design-speak").disabled = false;
  }
}

/** The design just made: a player to hear it again, its WAV, and whether it can be kept. */
function showDesign(body, result) {
  designed = { text: body.input, language: body.language, result };
  const wav = URL.createObjectURL(wavBlob(result.player.audio()));
  const audio = $("design-audio");
  if (audio.src) URL.revokeObjectURL(audio.src);
  audio.src = wav;
  const download = $("design-download");
  download.href = wav;
  download.download = `ownvoice-design-${result.seed}.wav`;
  delete $("design-result").dataset.interrupted;
  $("design-result").hidden = false;
  // a clip the library would refuse is not offered: say why before a name is typed
  const problem = referenceProblem(result.seconds);
  $("keep-note").textContent = problem
    ? `This design cannot be kept: ${problem}. Try a longer text or another seed.`
    : "";
  $("keep").disabled = Boolean(problem);
  $("keep-form").hidden = false;
  return $("design-result");
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
    $("keep-error").textContent = describe(error, { ...VOICE_WORDS, consent: "Permission" });
  } finally {
    $("keep").disabled = false; // it runs only when Keep was enabled (a keepable design)
  }
}

export function setUpDesign() {
  $("design-form").addEventListener("submit", design);
  $("design-stop").addEventListener("click", stopSpeaking);
  $("keep-form").addEventListener("submit", keep);
}
