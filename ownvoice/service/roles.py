"""Which model serves which kind of voice: presets (CustomVoice), design (VoiceDesign), clone
(Base). Decided by the config (`roles:`), else by the only model of the right type, else by the
largest of them (then the first listed), and the start-up log says which and why.

The Qwen3-TTS OpenAI server gives `clone:` voices to the first `type: base` entry in file order,
a trap its users warn each other about (a 0.6B listed first silently serves every clone); taking
the largest does what someone who lists two sizes most likely means.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ownvoice.errors import InvalidInput

ROLE_TYPES = {"presets": "custom_voice", "design": "voice_design", "clone": "base"}


def model_type_hint(source: str, declared: str | None = None) -> str | None:
    """The model type as declared, from the checkpoint's config.json, or from the hub id;
    None = unknown until loaded.

    A local folder's config.json says `tts_model_type` ("custom_voice", "voice_design", "base");
    official hub ids end in -CustomVoice, -VoiceDesign or -Base.
    """
    if declared is not None:
        return declared
    config = Path(source) / "config.json"
    if config.is_file():
        try:
            found = json.loads(config.read_text()).get("tts_model_type")
        except (OSError, ValueError):
            found = None
        if found in ROLE_TYPES.values():
            return found
    tail = source.rstrip("/").lower()
    for suffix, kind in (
        ("customvoice", "custom_voice"),
        ("voicedesign", "voice_design"),
        ("base", "base"),
    ):
        if tail.endswith(suffix):
            return kind
    return None


def model_size_hint(source: str) -> int | None:
    """Parameters of a checkpoint, to choose between two of one type; None = unknown.

    Counted from the safetensors headers of a local folder (or of a hub id already in the
    Hugging Face cache), else read from the hub id's name ("...-1.7B-Base" -> 1.7e9).
    """
    folder = Path(source)
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else _cached_weights(source)
    if files:
        try:
            return sum(_parameters(f) for f in files)
        except (OSError, ValueError):
            pass
    found = re.search(r"(\d+(?:\.\d+)?)B\b", source.rsplit("/", 1)[-1])
    return round(float(found.group(1)) * 1e9) if found else None


def _parameters(path: Path) -> int:
    # the header says every tensor's shape; nothing else is read
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        total = 0
        for key in f.keys():
            n = 1
            for d in f.get_slice(key).get_shape():
                n *= d
            total += n
        return total


def _cached_weights(source: str) -> list[Path]:
    if source.count("/") != 1:
        return []
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return []
    found = try_to_load_from_cache(source, "model.safetensors")
    return [Path(found)] if isinstance(found, str) else []


@dataclass(frozen=True)
class RoleChoice:
    model: str
    why: str  # for the start-up log


def choose_roles(
    explicit: dict[str, str],
    types: dict[str, str | None],
    sizes: dict[str, int | None] | None = None,
) -> dict[str, RoleChoice]:
    """role -> the model that serves it, and why. Explicit roles win; an unset role takes the
    only model of its type, else the largest (by `sizes`, parameters), else the first listed.

    `types` maps model name -> type (None while unknown), in config order.
    """
    sizes = sizes or {}
    roles: dict[str, RoleChoice] = {}
    for role, kind in ROLE_TYPES.items():
        name = explicit.get(role)
        if name is not None:
            if types.get(name) not in (None, kind):
                raise InvalidInput(
                    f"roles.{role} names model {name!r}, whose type is {types[name]!r}; "
                    f"the {role} role needs a {kind} model",
                    param="roles",
                )
            roles[role] = RoleChoice(name, f"roles.{role}")
            continue
        candidates = [m for m, t in types.items() if t == kind]
        if len(candidates) == 1:
            roles[role] = RoleChoice(candidates[0], f"the only {kind} model")
        elif candidates:
            # max() keeps the first of equals, so equal or unknown sizes go by file order
            best = max(candidates, key=lambda m: sizes.get(m) or 0)
            size = sizes.get(best)
            others = ", ".join(m for m in candidates if m != best)
            why = (
                f"the largest {kind} model ({size / 1e9:.2f}B parameters; also: {others})"
                if size and any((sizes.get(m) or 0) < size for m in candidates)
                else f"the first listed of the {kind} models, whose sizes are equal or unknown "
                f"(also: {others})"
            )
            roles[role] = RoleChoice(best, f"{why}; set roles.{role} to choose")
    return roles


def resolve_roles(
    explicit: dict[str, str],
    types: dict[str, str | None],
    sizes: dict[str, int | None] | None = None,
) -> dict[str, str]:
    """role -> model name (see choose_roles)."""
    return {role: c.model for role, c in choose_roles(explicit, types, sizes).items()}
