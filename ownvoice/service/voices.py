"""Which model and which voice a request's `model` and `voice` mean.

OpenAI voice names map to the nine CustomVoice speakers by timbre (a male voice to a male
speaker, deep to deep, bright to bright), with every speaker used at least once; the English
male voices go to the two native-English speakers (Ryan, Aiden). The map can be extended or
changed in the config (`voice_aliases`).

    alloy -> vivian     ash -> aiden       ballad -> dylan    coral -> serena
    echo -> ryan        fable -> eric      nova -> sohee      onyx -> uncle_fu
    sage -> ono_anna    shimmer -> serena  verse -> ryan      marin -> vivian   cedar -> aiden

Voices: an OpenAI name or a preset speaker (presets model), `clone:<name>` or a library
profile's id (clone model), `design` (VoiceDesign model, described by `instructions`).
Knows nothing about HTTP or audio.
"""

from __future__ import annotations

from dataclasses import dataclass

from ownvoice.errors import InvalidInput, ModelNotFound, VoiceNotFound
from ownvoice.voices import VoiceLibrary, VoiceProfile

OPENAI_VOICES = {
    "alloy": "vivian",
    "ash": "aiden",
    "ballad": "dylan",
    "coral": "serena",
    "echo": "ryan",
    "fable": "eric",
    "nova": "sohee",
    "onyx": "uncle_fu",
    "sage": "ono_anna",
    "shimmer": "serena",
    "verse": "ryan",
    "marin": "vivian",
    "cedar": "aiden",
}
# the speakers of the official CustomVoice checkpoints, for listing before a lazy model loads
DEFAULT_SPEAKERS = (
    "aiden",
    "dylan",
    "eric",
    "ono_anna",
    "ryan",
    "serena",
    "sohee",
    "uncle_fu",
    "vivian",
)
# model names any client may send; the voice decides which model serves them
GENERIC_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "qwen3-tts", "ownvoice")


class UnknownVoice(InvalidInput):
    code = "voice_not_found"


@dataclass(frozen=True)
class VoiceChoice:
    worker: object  # the Scheduler of the model that speaks it
    role: str  # presets | design | clone
    label: str  # for logs: the voice as asked
    speaker: str | None = None  # presets: the engine's speaker name
    profile: VoiceProfile | None = None  # clone: the library profile


class VoiceMap:
    def __init__(self, pool, library: VoiceLibrary, aliases: dict[str, str] | None = None):
        self.pool = pool
        self.library = library
        self.aliases = {
            **OPENAI_VOICES,
            **{k.lower(): v.lower() for k, v in (aliases or {}).items()},
        }

    def choose(self, model: str | None, voice: str) -> VoiceChoice:
        """Resolve a request's model and voice.

        Raises ModelNotFound (404), UnknownVoice or InvalidInput (400)."""
        worker = self._model_worker(model)
        role = self.pool.role_of(worker) if worker is not None else None
        name = voice.strip()
        low = name.lower()
        if role == "design" or (worker is None and low == "design"):
            return VoiceChoice(worker or self.pool.for_role("design"), "design", "design")
        if role == "clone" or low.startswith("clone:"):
            worker = worker or self.pool.for_role("clone")
            return VoiceChoice(worker, "clone", name, profile=self._profile(name))
        presets = worker or self._role_worker("presets")
        if presets is not None:
            speaker = self.speaker_for(presets, low)
            if speaker is not None:
                return VoiceChoice(presets, "presets", name, speaker=speaker)
        if worker is None and "clone" in self.pool.roles:  # a library voice named without clone:
            try:
                return VoiceChoice(
                    self.pool.for_role("clone"), "clone", name, profile=self.library.get(name)
                )
            except VoiceNotFound:
                pass
        raise UnknownVoice(f"voice {voice!r} is not available; {self._available()}", param="voice")

    def speaker_for(self, worker, name: str) -> str | None:
        """The engine's speaker for a speaker or alias name (case-insensitive), or None."""
        speakers = self.speakers(worker)
        by_lower = {s.lower(): s for s in speakers}
        target = name.lower()
        if target in by_lower:
            return by_lower[target]
        alias = self.aliases.get(target)
        return by_lower.get(alias) if alias else None

    def speakers(self, worker) -> list[str]:
        engine = worker.engine
        if engine is None:  # lazily loaded and not loaded yet: the official list
            return list(DEFAULT_SPEAKERS)
        return list(engine.supported_speakers)

    def _model_worker(self, model: str | None):
        if model is None or model.lower() in GENERIC_MODELS or model.lower().startswith("gpt-4o"):
            return None
        worker = self.pool.find_model(model)
        if worker is None:
            served = ", ".join([*GENERIC_MODELS, *self.pool.workers])
            raise ModelNotFound(
                f"model {model!r} is not served here; use one of: {served}", param="model"
            )
        return worker

    def _role_worker(self, role: str):
        name = self.pool.roles.get(role)
        return self.pool.workers[name] if name is not None else None

    def _profile(self, name: str) -> VoiceProfile:
        try:
            return self.library.get(name)
        except VoiceNotFound as e:
            raise UnknownVoice(e.message, param="voice") from e

    def _available(self) -> str:
        parts = []
        presets = self._role_worker("presets")
        if presets is not None:
            parts.append("speakers: " + ", ".join(self.speakers(presets)))
            parts.append("OpenAI names: " + ", ".join(self.aliases))
        if "clone" in self.pool.roles:
            clones = [p.voice_id for p in self.library.profiles()]
            parts.append("clones: " + (", ".join(clones) or "none yet"))
        if "design" in self.pool.roles:
            parts.append("'design' with instructions")
        return "; ".join(parts) or "this server has no voices configured"

    def list(self) -> list[dict]:
        """Every voice a client can ask for, in the shape Open WebUI reads ({id, name})."""
        out = []
        presets = self._role_worker("presets")
        if presets is not None:
            speakers = self.speakers(presets)
            for s in speakers:
                out.append({"id": s, "name": s.replace("_", " ").title(), "kind": "preset"})
            for alias in self.aliases:
                speaker = self.speaker_for(presets, alias)
                if speaker is not None:
                    label = speaker.replace("_", " ").title()
                    out.append({"id": alias, "name": f"{alias} ({label})", "kind": "alias"})
        if "clone" in self.pool.roles:
            for p in self.library.profiles():
                out.append(
                    {
                        "id": p.voice_id,
                        "name": f"{p.name} (clone)",
                        "kind": "clone",
                        "language": p.language,
                    }
                )
        if "design" in self.pool.roles:
            out.append(
                {
                    "id": "design",
                    "name": "Voice design (describe it in instructions)",
                    "kind": "design",
                }
            )
        return out
