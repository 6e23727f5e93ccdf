"""`describe` -> `info` (describe_voices): the voices Home Assistant lists, read from the service each time, so a
voice added to the library (over HTTP, by the CLI) appears without a restart.

Every voice the HTTP API lists is a Wyoming voice under the same id (`ryan`, `alloy`,
`clone:Alice`, `design:narrator`), described by its display name, except the bare `design`,
which needs a description Wyoming cannot send. Each voice speaks every language of its model
(Home Assistant shows voices per language); a cloned or designed voice's own language is
listed first.
"""

from __future__ import annotations

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from ownvoice import __version__
from ownvoice.languages import KNOWN, iso_code, model_language

ATTRIBUTION = Attribution(
    name="Qwen3-TTS (Qwen team, Alibaba Cloud)", url="https://github.com/QwenLM/Qwen3-TTS"
)
ROLE_OF_KIND = {"preset": "presets", "alias": "presets", "clone": "clone", "design": "design"}


def describe_voices(voicemap, pool) -> Info:
    voices = []
    for entry in voicemap.list():
        if entry["id"] == "design":
            continue
        worker = pool.workers[pool.roles[ROLE_OF_KIND[entry["kind"]]]]
        voices.append(
            TtsVoice(
                name=entry["id"],
                description=entry["name"],
                attribution=ATTRIBUTION,
                installed=True,
                version=None,
                languages=_languages(worker, entry.get("language")),
            )
        )
    program = TtsProgram(
        name="ownvoice",
        description="Qwen3-TTS on this machine: built-in, cloned and designed voices",
        attribution=ATTRIBUTION,
        installed=True,
        version=__version__,
        voices=voices,
        supports_synthesize_streaming=True,
    )
    return Info(tts=[program])


def _languages(worker, own: str | None) -> list[str]:
    """ISO codes of the languages the voice's model speaks, its own language first."""
    names = worker.engine.supported_languages if worker.engine is not None else KNOWN
    return list(dict.fromkeys(c for c in map(iso_code, [model_language(own) or "", *names]) if c))
