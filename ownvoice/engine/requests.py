"""From what a caller asked for to what the prompt builder needs, with every check in one place.

Validates the voice against the model type, the language, the instruction and the text, and
applies the reference's rules: dialect speakers, text-mode defaults, instruct dropped where the
model ignores it (with a warning), checkpoint sampling defaults.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.engine.prompt import Conditioning
from ownvoice.engine.tokenizer import PromptIds
from ownvoice.engine.voice import VoicePrompt
from ownvoice.errors import InvalidInput, VoiceNotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    ids: PromptIds
    cond: Conditioning
    sampling: SamplingOptions
    max_frames: int


def resolve_request(
    m, text: str, voice, instruct: str | None, options: SynthesisOptions
) -> Request:
    """`m` is the engine's LoadedModel."""
    cfg = m.cfg
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}", param="input")
    instruct = instruct.strip() if instruct else None
    speaker_id = embedding = ref_codes = ref_text = None
    speaker_name = None

    if cfg.model_type == "custom_voice":
        if isinstance(voice, VoicePrompt):
            raise InvalidInput(
                f"{m.source} is a CustomVoice model; voice cloning needs a Base model",
                param="voice",
            )
        if not voice:
            raise InvalidInput(
                f"a CustomVoice model needs a speaker: one of {', '.join(cfg.supported_speakers)}",
                param="voice",
            )
        speaker_name = voice.lower()
        if speaker_name not in cfg.talker.speaker_ids:
            raise VoiceNotFound(
                f"unknown speaker {voice!r}; this model has: {', '.join(cfg.supported_speakers)}",
                param="voice",
            )
        speaker_id = cfg.talker.speaker_ids[speaker_name]
    elif cfg.model_type == "voice_design":
        if voice is not None:
            raise InvalidInput(
                "a VoiceDesign model has no preset or cloned voices; describe the voice in "
                "`instruct` instead",
                param="voice",
            )
    else:  # base
        if not isinstance(voice, VoicePrompt):
            raise InvalidInput(
                f"{m.source} is a Base (voice cloning) model: pass a VoicePrompt made by "
                "make_voice() from a reference recording"
                + (f", not the speaker name {voice!r}" if isinstance(voice, str) else ""),
                param="voice",
            )
        if voice.model_fingerprint and voice.model_fingerprint != m.fingerprint:
            raise InvalidInput(
                "this voice prompt was made with a different Base checkpoint; make it again "
                "with this model",
                param="voice",
            )
        embedding = voice.speaker_embedding
        size = cfg.speaker_encoder.enc_dim if cfg.speaker_encoder is not None else None
        if size is not None and embedding.numel() != size:  # a prompt made of numbers sent
            raise InvalidInput(
                f"speaker_embedding has {embedding.numel()} dimensions; this model's have {size}",
                param="speaker_embedding",
            )
        if not voice.x_vector_only:
            ref_codes, ref_text = voice.ref_codes, voice.ref_text
            if not ref_text:
                raise InvalidInput("ICL voice prompt has no ref_text", param="ref_text")

    if instruct and not cfg.instruct_supported:
        log.warning(
            "instruct ignored: %s (%s, size %s) does not read instructions",
            m.source, cfg.model_type, cfg.size_tag,
        )  # fmt: skip
        instruct = None

    language = (options.language or "auto").lower()
    if language not in cfg.supported_languages:
        raise InvalidInput(
            f"unsupported language {options.language!r}; choose one of "
            f"{', '.join(cfg.supported_languages)}",
            param="language",
        )
    language_id = None if language == "auto" else cfg.talker.language_ids[language]
    dialect = cfg.talker.speaker_dialects.get(speaker_name, False) if speaker_name else False
    if isinstance(dialect, str) and language in ("chinese", "auto"):
        # upstream: dialect speakers speak their dialect for Chinese and for "auto"
        language_id = cfg.talker.language_ids[dialect]

    text_mode = options.text_mode or ("streaming" if cfg.model_type == "base" else "non-streaming")
    ids = m.tokenizer.prompt_ids(text, ref_text=ref_text, instruct=instruct)
    if not ids.text:
        raise InvalidInput("text tokenizes to nothing", param="input")
    return Request(
        ids=ids,
        cond=Conditioning(
            language_id=language_id,
            speaker_id=speaker_id,
            speaker_embedding=embedding,
            ref_codes=ref_codes,
            non_streaming=text_mode == "non-streaming",
        ),
        sampling=options.sampling or m.default_sampling,
        max_frames=options.frames_for(text, m.default_max_frames),
    )
