"""Language names and codes, in one place.

The model knows languages by name ("english", "chinese", ...: its codec_language_id keys, plus
two Chinese dialects reached through their speakers); people and file formats use ISO 639-1
codes and tags ("en", "pt-BR", "zh_CN"). `model_language` turns either into the model's name;
`iso_code` goes the other way (the sentence splitter wants codes).
"""

from __future__ import annotations

# the model's language names -> ISO 639-1 codes
ISO_CODES = {
    "english": "en",
    "german": "de",
    "chinese": "zh",
    "japanese": "ja",
    "korean": "ko",
    "french": "fr",
    "russian": "ru",
    "portuguese": "pt",
    "spanish": "es",
    "italian": "it",
    "beijing_dialect": "zh",
    "sichuan_dialect": "zh",
}
# ISO codes -> the model's names (dialects are reached through their speakers, never by code)
NAMES = {code: name for name, code in ISO_CODES.items() if "dialect" not in name}


def model_language(value: str | None) -> str | None:
    """'en', 'en-US', 'pt_BR', 'English' -> the model's name ('english'); None or blank -> None.

    A value that is neither a known code nor a tag of one is returned lower-cased, for the
    caller to check against what the model supports (its error lists the choices)."""
    if value is None or not value.strip():
        return None
    v = value.strip().lower().replace("_", "-")
    primary = v.split("-")[0]
    if v in NAMES or ("-" in v and primary in NAMES):
        return NAMES[primary]
    return v


def iso_code(name: str) -> str | None:
    """The ISO code of a model language name ('english' -> 'en'), or None if unknown."""
    return ISO_CODES.get(name.strip().lower())


# every language of the 12 Hz model family, for checks made before a model is loaded
KNOWN = ("auto", *sorted(set(NAMES.values())))


def check_language(value: str | None, supported=None, param: str = "language") -> str:
    """The model's name for `value` ('auto' when blank), or InvalidInput listing the choices.
    `supported`: the model's own list (engine.supported_languages); default: KNOWN."""
    from ownvoice.errors import InvalidInput

    name = model_language(value) or "auto"
    choices = tuple(supported) if supported is not None else KNOWN
    if name not in choices:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidInput(
            f"language {shown!r} is not supported; use one of {', '.join(choices)} "
            "(or an ISO code such as en, zh, pt-BR)",
            param=param,
        )
    return name
