"""Which model and which voice a request's `model` and `voice` mean.

OpenAI voice names map to the nine CustomVoice speakers by timbre (a male voice to a male
speaker, deep to deep, bright to bright), with every speaker used at least once; the English
male voices go to the two native-English speakers (Ryan, Aiden). The map can be extended or
changed in the config (`voice_aliases`).

    alloy -> vivian     ash -> aiden       ballad -> dylan    coral -> serena
    echo -> ryan        fable -> eric      nova -> sohee      onyx -> uncle_fu
    sage -> ono_anna    shimmer -> serena  verse -> ryan      marin -> vivian   cedar -> aiden

Voices: an OpenAI name or a preset speaker (presets model), `clone:<name>` or a library
profile's id (clone model), `design` (VoiceDesign model, described by `instructions`) and
`design:<name>` (a saved description, designs.py). Every name `list()` gives is accepted, its
display name too ("Uncle Fu", "alloy (Vivian)", "Alice (clone)"), ignoring case and spaces.

The voice decides the model: a request whose `model` cannot speak its voice (Open WebUI offers
every listed model beside every listed voice) is served by the model of the voice's role, and
the choice records the model asked for so that the request's log line says so. `model` chooses
only between models that can speak the voice. Knows nothing about HTTP or audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ownvoice.errors import InvalidInput, ModelNotFound, VoiceNotFound
from ownvoice.service.designs import DesignedVoice, DesignLibrary
from ownvoice.service.library import VoiceLibrary, VoiceProfile
from ownvoice.service.roles import ROLE_TYPES

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
    design: DesignedVoice | None = None  # design:<name>: the saved description
    prompt: object | None = None  # clone: a VoicePrompt made by the caller (in-process)
    asked_model: str | None = None  # the request's model, when another one serves the voice


class VoiceMap:
    def __init__(
        self,
        pool,
        library: VoiceLibrary,
        aliases: dict[str, str] | None = None,
        designs: DesignLibrary | None = None,
    ):
        self.pool = pool
        self.library = library
        self.designs = designs
        self.aliases = {
            **OPENAI_VOICES,
            **{k.lower(): v.lower() for k, v in (aliases or {}).items()},
        }

    def choose(self, model: str | None, voice: str) -> VoiceChoice:
        """Resolve a request's model and voice.

        Raises ModelNotFound (404), UnknownVoice or InvalidInput (400)."""
        named = self.model_worker(model)
        try:
            choice = self._by_voice(voice.strip(), named)
        except UnknownVoice:
            listed = self._listed_id(voice)  # a display name from list()
            if listed is None:
                if named is not None and self._role_of_type(named) == "design":
                    # a VoiceDesign model asked for by name, with a voice it has no use for
                    return VoiceChoice(named, "design", "design")
                raise
            choice = self._by_voice(listed, named)
        if named is not None and choice.worker is not named:
            choice = VoiceChoice(**{**choice.__dict__, "asked_model": named.name})
        return choice

    def _by_voice(self, name: str, named) -> VoiceChoice:
        low = name.lower()
        if low == "design":
            return VoiceChoice(self.serving("design", named), "design", "design")
        if low.startswith("design:"):
            worker = self.serving("design", named)
            return VoiceChoice(worker, "design", name, design=self._design(name))
        if low.startswith("clone:"):
            worker = self.serving("clone", named)
            return VoiceChoice(worker, "clone", name, profile=self._profile(name))
        presets = self._able(named, "presets") or self._role_worker("presets")
        if presets is not None:
            speaker = self.speaker_for(presets, low)
            if speaker is not None:
                return VoiceChoice(presets, "presets", name, speaker=speaker)
        if "clone" in self.pool.roles:  # a library voice named without clone:
            try:
                profile = self.library.get(name)
            except VoiceNotFound:
                pass
            else:
                return VoiceChoice(self.serving("clone", named), "clone", name, profile=profile)
        raise UnknownVoice(f"voice {name!r} is not available; {self._available()}", param="voice")

    def serving(self, role: str, named, param: str = "voice"):
        """The named model when it can speak voices of `role`, else the role's model."""
        return self._able(named, role) or self.pool.for_role(role, param=param)

    def _able(self, named, role: str):
        return named if named is not None and self._role_of_type(named) == role else None

    def _role_of_type(self, worker) -> str | None:
        kind = self.pool.types.get(worker.name)
        return next((r for r, t in ROLE_TYPES.items() if t == kind), None)

    def _listed_id(self, voice: str) -> str | None:
        """The id of the listed voice whose id or display name is `voice`, ignoring case,
        spaces and underscores."""
        key = _loose(voice)
        if not key:
            return None
        for entry in self.list():
            if key in (_loose(entry["id"]), _loose(entry["name"])):
                return entry["id"]
        return None

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

    def model_worker(self, model: str | None):
        """The worker a request's `model` names; None for a generic name (tts-1, gpt-4o-…) or
        none; ModelNotFound (404) for a model not served here."""
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

    def _design(self, name: str) -> DesignedVoice:
        if self.designs is None:
            raise UnknownVoice("this server keeps no designed voices", param="voice")
        try:
            return self.designs.get(name)
        except VoiceNotFound as e:
            raise UnknownVoice(e.message, param="voice") from e

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
            parts.append("'design' (described in instructions)")
            if self.designs is not None and self.designs.list():
                parts.append("designed: " + ", ".join(d.voice_id for d in self.designs.list()))
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
                    "name": "Voice design (describe it in instructions; a neutral voice without)",
                    "kind": "design",
                }
            )
            for d in self.designs.list() if self.designs is not None else ():
                out.append(
                    {"id": d.voice_id, "name": f"{d.name} (designed)", "kind": "design",
                     "language": d.language}
                )  # fmt: skip
        return out


def _loose(name: str) -> str:
    """A name as compared with listed ones: case, spaces and underscores do not count."""
    return re.sub(r"[\s_]+", "", name).casefold()
