"""Designed voices kept by name: `design:narrator` = a saved VoiceDesign description.

Clients such as Open WebUI and SillyTavern send a voice name but no `instructions`: the plain
`design` voice then speaks with DEFAULT_DESCRIPTION (a voice they picked from the list should
speak, not refuse). A designed voice saves a description, and optionally a language and a seed,
under a name any client can send.

VoiceDesign samples a new voice for every request unless the seed is fixed: a designed voice
with a `seed` sounds the same each time (for the same text), one without is only the same kind
of voice. For one stable voice across all texts, design it, then keep a sample of it as a cloned
voice (the voice library).

Designs come from the config (`designs:`, read-only) and from the API, which keeps them in
`<voices_dir>/designs.json` (written atomically; a config entry of the same name wins).
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ownvoice.errors import InvalidInput, VoiceNotFound
from ownvoice.languages import check_language
from ownvoice.service.library import NAME_PATTERN

DESIGNS_FILE = "designs.json"
PREFIX = "design:"
_NAME_RE = re.compile(NAME_PATTERN)  # the rule cloned voices' names follow
MAX_DESCRIPTION = 4096
# the plain `design` voice without `instructions`: an unremarkable voice, so that a client that
# cannot send a description still hears speech (a new sample of it at every request, unless
# the request fixes a seed)
DEFAULT_DESCRIPTION = (
    "A clear, natural adult voice, calm and friendly, speaking at a moderate pace."
)


@dataclass(frozen=True)
class DesignedVoice:
    name: str
    instructions: str  # the voice, described as VoiceDesign expects it
    language: str | None = None  # used when a request leaves the language to the model
    seed: int | None = None  # fixed: the same voice every time; None: a new sample each time
    source: str = "api"  # config | api

    @property
    def voice_id(self) -> str:
        return f"{PREFIX}{self.name}"


def check_design(name: str, instructions: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(
            "a designed voice's name is 1-64 letters, digits, spaces, '_', '.' or '-'",
            param="name",
        )
    if not isinstance(instructions, str) or not instructions.strip():
        raise InvalidInput("instructions (the description of the voice) are required",
                           param="instructions")  # fmt: skip
    if len(instructions) > MAX_DESCRIPTION:
        raise InvalidInput(
            f"instructions are limited to {MAX_DESCRIPTION} characters", param="instructions"
        )


class DesignLibrary:
    def __init__(self, root: Path, configured: dict[str, DesignedVoice] | None = None):
        self.path = Path(root) / DESIGNS_FILE
        self.configured = dict(configured or {})
        self._lock = threading.Lock()

    def list(self) -> list[DesignedVoice]:
        saved = {k: v for k, v in self._read().items() if k.lower() not in self._config_keys()}
        merged = [*self.configured.values(), *saved.values()]
        return sorted(merged, key=lambda d: d.name.lower())

    def get(self, key: str) -> DesignedVoice:
        """By name, with or without `design:`, case-insensitively."""
        wanted = key.strip()
        if wanted.lower().startswith(PREFIX):
            wanted = wanted[len(PREFIX) :].strip()
        for design in self.list():
            if design.name.lower() == wanted.lower():
                return design
        known = ", ".join(d.voice_id for d in self.list()) or "none yet"
        raise VoiceNotFound(f"no designed voice {key!r} (designed voices: {known})")

    def add(
        self, name: str, instructions: str, language: str | None = None, seed: int | None = None
    ) -> DesignedVoice:
        name = name.strip() if isinstance(name, str) else name
        check_design(name, instructions)
        if language is not None and language.strip():  # refused now, not when it speaks
            check_language(language)
        if name.lower() in self._config_keys():
            raise InvalidInput(
                f"designed voice {name!r} is set in the config; change it there", param="name"
            )
        design = DesignedVoice(name, instructions.strip(), language, seed)
        with self._lock:
            saved = self._read()
            saved = {k: v for k, v in saved.items() if k.lower() != name.lower()}
            saved[name] = design
            self._write(saved)
        return design

    def remove(self, key: str) -> DesignedVoice:
        design = self.get(key)
        if design.source == "config":
            raise InvalidInput(
                f"designed voice {design.name!r} is set in the config; remove it there",
                param="voice",
            )
        with self._lock:
            saved = {k: v for k, v in self._read().items() if k.lower() != design.name.lower()}
            self._write(saved)
        return design

    def _config_keys(self) -> set[str]:
        return {k.lower() for k in self.configured}

    def _read(self) -> dict[str, DesignedVoice]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise InvalidInput(f"{self.path} is unreadable: {e}", param="voice") from e
        out = {}
        for entry in data.get("designs", []) if isinstance(data, dict) else []:
            try:
                check_design(entry["name"], entry["instructions"])
                seed = entry.get("seed")
                out[entry["name"]] = DesignedVoice(
                    entry["name"], entry["instructions"], entry.get("language"),
                    int(seed) if seed is not None else None,
                )  # fmt: skip
            except (InvalidInput, KeyError, TypeError, ValueError):
                continue  # a hand-edited entry that makes no sense is skipped, not fatal
        return out

    def _write(self, designs: dict[str, DesignedVoice]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        entries = [{k: v for k, v in asdict(d).items() if k != "source"} for d in designs.values()]
        tmp = self.path.with_name(f".{DESIGNS_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"designs": entries}, indent=2, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)
