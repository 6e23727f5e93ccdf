"""Which model serves which kind of voice: presets (CustomVoice), design (VoiceDesign), clone
(Base). Decided by the config, else by the only model of the right type; never by the order of
entries."""

from __future__ import annotations

import json
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


def resolve_roles(explicit: dict[str, str], types: dict[str, str | None]) -> dict[str, str]:
    """role -> model name. Explicit roles win; an unset role takes the only model of its type.

    `types` maps model name -> type (None while unknown). Two models of one type and no
    explicit role is an error that asks for the role.
    """
    roles: dict[str, str] = {}
    for role, kind in ROLE_TYPES.items():
        name = explicit.get(role)
        if name is not None:
            if types.get(name) not in (None, kind):
                raise InvalidInput(
                    f"roles.{role} names model {name!r}, whose type is {types[name]!r}; "
                    f"the {role} role needs a {kind} model",
                    param="roles",
                )
            roles[role] = name
            continue
        candidates = [m for m, t in types.items() if t == kind]
        if len(candidates) == 1:
            roles[role] = candidates[0]
        elif len(candidates) > 1:
            raise InvalidInput(
                f"models {', '.join(candidates)} are all {kind} models; set roles.{role} to the "
                "one that should serve it",
                param="roles",
            )
    return roles
