// The page's wiring: tabs (arrow keys move between them), the API key dialog, the instructions
// field that follows the chosen voice, and start-up.

import { describe, whenKeyNeeded } from "./api.js";
import { setUpDesign } from "./design.js";
import { setUpSpeak } from "./speak.js";
import { loadStatus } from "./status.js";
import { loadVoices, setUpVoices, voices } from "./voices.js";

const $ = (id) => document.getElementById(id);
const STATUS_EVERY_MS = 2000;

function selectTab(tab) {
  for (const other of document.querySelectorAll('[role="tab"]')) {
    const on = other === tab;
    other.setAttribute("aria-selected", String(on));
    other.tabIndex = on ? 0 : -1;
    $(other.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
  if (tab.id === "tab-status") loadStatus();
}

function setUpTabs() {
  const tabs = [...document.querySelectorAll('[role="tab"]')];
  for (const tab of tabs) {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
      if (!step) return;
      event.preventDefault();
      selectTab(tabs[(tabs.indexOf(tab) + step + tabs.length) % tabs.length]);
    });
  }
}

function askForKey(reason) {
  const dialog = $("key-dialog");
  $("key-reason").textContent = reason;
  $("key-input").value = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok" && $("key-input").value ? $("key-input").value : null);
    }, { once: true });
    dialog.showModal();
    $("key-input").focus();
  });
}

function followVoice() {
  // instructions describe the voice for VoiceDesign, and style the speech for presets
  const voice = voices.find((v) => v.id === $("voice").value);
  const kind = voice ? voice.kind : "";
  const describing = voice && voice.id === "design";
  $("instructions-field").hidden = kind === "clone";
  $("instructions-label").textContent = describing ? "Voice description (optional)" : "Style instructions (optional)";
}

async function start() {
  whenKeyNeeded(askForKey);
  setUpTabs();
  setUpSpeak();
  setUpVoices();
  setUpDesign();
  $("voice").addEventListener("change", followVoice);
  $("badge").addEventListener("click", () => selectTab($("tab-status")));
  try {
    await loadVoices();
  } catch (error) {
    $("speak-error").textContent = describe(error);
  }
  await loadStatus();
  setInterval(() => { if (!document.hidden) loadStatus(); }, STATUS_EVERY_MS);
  document.body.dataset.ready = "true";
}

start();
