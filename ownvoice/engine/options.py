"""Options for one synthesis call and for the engine as a whole.

Frozen dataclasses with a `validate()` that names the field, the value and the allowed range.
Defaults are those of the reference package (`generation_config.json` of the Qwen3-TTS repos).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from ownvoice.errors import InvalidInput

TEXT_MODES = ("streaming", "non-streaming")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE = (None, "int8", "int4")  # integer weights for the CPU kernels (engine/fast/packed.py)


# -- the frame cap: how long a text may be spoken at most ----------------------------------------
FRAMES_PER_SECOND = 12.5  # the 12 Hz codec: one frame = 80 ms
CHARS_PER_SECOND = 14.0  # typical read-aloud rate of Latin text, spaces and punctuation included
CAP_FACTOR = 3.0  # allow 3x the expected duration: slow voices, long pauses, spelled-out numbers
MIN_CAP_FRAMES = 40  # 3.2 s floor, for "Hi." or "2024" (which are longer spoken than written)
# One CJK character, kana or hangul syllable is spoken about as long as 3 Latin characters
# (~4-5 syllables per second against ~14 characters per second); a digit as 2 (numbers expand).
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_DIGIT = re.compile(r"[0-9]")


def frame_cap(text: str) -> int:
    """Most frames a text may take when the caller sets no max_frames: 40 + ceil(3 * 12.5 / 14
    * weighted characters), about 2.7 frames per Latin character (3x the ~0.9 frames/character
    of speech at ~14 characters per second); CJK characters weigh 3, digits 2. A checkpoint that
    misses its end of speech stops here instead of after minutes of noise."""
    units = len(text) + 2 * len(_WIDE.findall(text)) + len(_DIGIT.findall(text))
    return MIN_CAP_FRAMES + math.ceil(CAP_FACTOR * FRAMES_PER_SECOND / CHARS_PER_SECOND * units)


# -- sampling bounds: what every front end accepts (the HTTP schema states the same numbers) -----
# Far past them the engine's float32 sampling overflows (a temperature of 1e39 is inf) and the
# request would fail inside the engine, after admission; they are far above any useful value.
MAX_TEMPERATURE = 10.0  # 0 < temperature <= 10 (upstream's default: 0.9)
MAX_REPETITION_PENALTY = 10.0  # 0 < penalty <= 10 (upstream's default: 1.05; 1.0 = off)
# top-k keeps the k most likely ids, so a k past the logits' width is off: the widths of the
# 12 Hz checkpoints (model/config.py), the talker's 2048 codes plus its control, language and
# speaker ids, and the code predictor's 2048 codes
TALKER_VOCAB = 3072
CODE_PREDICTOR_VOCAB = 2048


@dataclass(frozen=True)
class SamplingOptions:
    """How codes are drawn. Talker = codebook 0; sub-talker = code predictor (codebooks 1..15)."""

    # talker (codebook 0)
    do_sample: bool = True  # False = greedy (argmax)
    temperature: float = 0.9  # (0, MAX_TEMPERATURE]
    top_k: int = 50  # 0 = off; at most TALKER_VOCAB
    top_p: float = 1.0  # (0, 1]; 1.0 = off
    repetition_penalty: float = 1.05  # over codebook-0 codes generated so far; 1.0 = off
    # sub-talker (codebooks 1..15); no penalty, no suppression
    sub_do_sample: bool = True
    sub_temperature: float = 0.9
    sub_top_k: int = 50  # 0 = off; at most CODE_PREDICTOR_VOCAB
    sub_top_p: float = 1.0

    @classmethod
    def greedy(cls) -> SamplingOptions:
        return cls(do_sample=False, sub_do_sample=False)

    def validate(self) -> None:
        """InvalidInput naming the first field out of its range (NaN and infinities included)."""
        for name in ("temperature", "sub_temperature"):
            _within(self, name, 0, MAX_TEMPERATURE)
        for name in ("top_p", "sub_top_p"):
            _within(self, name, 0, 1.0)
        _within(self, "repetition_penalty", 0, MAX_REPETITION_PENALTY)
        for name, most in (("top_k", TALKER_VOCAB), ("sub_top_k", CODE_PREDICTOR_VOCAB)):
            v = getattr(self, name)
            if not 0 <= v <= most:
                raise InvalidInput(
                    f"{name} must be in 0..{most} (0 = off; {most} ids to choose from), got {v}",
                    param=name,
                )


def _within(options, name: str, low: float, high: float) -> None:
    """low < value <= high; `not` so that NaN, which fails every comparison, is refused too."""
    v = getattr(options, name)
    if not low < v <= high:
        raise InvalidInput(f"{name} must be in ({low:g}, {high:g}], got {v}", param=name)


@dataclass(frozen=True)
class SynthesisOptions:
    """One synthesis call: language, length, sampling and how audio is streamed."""

    # "auto" lets the model infer the language; otherwise one of engine.supported_languages
    language: str = "auto"
    # None = the checkpoint's generation_config.json (the same values as SamplingOptions())
    sampling: SamplingOptions | None = None
    # seed for sampling; None = nondeterministic
    seed: int | None = None
    # cap on generated frames (12.5 frames per second of audio); generation stops earlier at EOS.
    # Exactly this many frames come out when EOS never wins. None = a cap from the text's length
    # (`frame_cap`, about 3x its spoken length), at most the checkpoint's max_new_tokens - 1
    # (8191 frames, 11 minutes, upstream's only cap)
    max_frames: int | None = None
    # how the text enters the talker: all at once ("non-streaming"), or one token per frame
    # ("streaming"). None = the reference default: non-streaming for CustomVoice/VoiceDesign,
    # streaming for voice clones.
    text_mode: str | None = None
    # streaming schedule: a small first chunk for low time-to-first-audio, then fixed chunks
    first_chunk_frames: int = 2
    chunk_frames: int = 8

    def validate(self) -> None:
        if self.sampling is not None:
            self.sampling.validate()
        if self.max_frames is not None and self.max_frames < 1:
            raise InvalidInput(
                f"max_frames must be >= 1, got {self.max_frames}", param="max_frames"
            )
        if self.text_mode is not None and self.text_mode not in TEXT_MODES:
            raise InvalidInput(
                f"text_mode must be one of {TEXT_MODES}, got {self.text_mode!r}", param="text_mode"
            )
        for name in ("first_chunk_frames", "chunk_frames"):
            v = getattr(self, name)
            if v < 1:
                raise InvalidInput(f"{name} must be >= 1, got {v}", param=name)

    def with_(self, **changes) -> SynthesisOptions:
        return replace(self, **changes)

    def frames_for(self, text: str, most: int) -> int:
        """The frame cap for `text`: max_frames when given, else `frame_cap(text)`; at most
        `most` (the checkpoint's)."""
        return self.max_frames or min(frame_cap(text), most)


@dataclass(frozen=True)
class EngineConfig:
    """How the engine runs: device, precision and which fast paths are on.

    Mirrors the seed server's `optimization:` block (attention, use_compile, use_cuda_graphs,
    streaming.decode_window_frames, streaming.emit_every_frames).
    """

    device: str = "auto"  # "auto" = cuda if available, else cpu; or "cpu", "cuda", "cuda:1", ...
    dtype: str = "auto"  # "auto" = bfloat16 on GPU, float32 on CPU; or one of DTYPES
    # "eager" is the simple reference-order path kept for parity; "sdpa" uses torch's fused kernel
    attention: str = "sdpa"
    # fast decode loop (static KV cache, device-side sampling); False = the eager parity loop
    fast: bool = True
    use_cuda_graphs: bool = True  # only where the device supports them
    use_compile: bool = False
    # None = exact incremental streaming decoder; N = re-decode the last N frames per chunk
    decode_window_frames: int | None = None
    # None, "int8" or "int4": talker and code predictor weights for the CPU kernels
    quantize: str | None = None
    # the speech decoder's precision; None = dtype. "bfloat16" on a CPU with AVX512-BF16 or AMX
    # decodes about 1.5x faster than float32 on our kernels, its audio a log-mel distance of
    # ~0.02 away
    decoder_dtype: str | None = None
    num_threads: int | None = None  # CPU threads for torch; None = torch's default
    # decode the audio of rows that already play on a worker thread (half the CPU threads)
    # while the next frame generates on the rest (engine/decode_worker.py). None = where it was
    # measured to pay, on the CPU kernels with at least 2 threads: always with int8 or int4
    # weights, with float weights while two or more rows play (Engine.overlap tells which).
    # CPU only; False = one phase after the other, on every thread
    overlap_decoder: bool | None = None
    # sequences one step can advance together; None = 16 on a GPU, 8 on the CPU
    max_batch: int | None = None

    def validate(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidInput(f"dtype must be one of {DTYPES}, got {self.dtype!r}", param="dtype")
        if self.attention not in ("sdpa", "eager"):
            raise InvalidInput(
                f"attention must be 'sdpa' or 'eager', got {self.attention!r}", param="attention"
            )
        if self.max_batch is not None and not 1 <= self.max_batch <= 64:
            raise InvalidInput(
                f"max_batch must be in 1..64, got {self.max_batch}", param="max_batch"
            )
        if self.decoder_dtype not in (None, "float32", "bfloat16", "float16"):
            raise InvalidInput(
                f"decoder_dtype must be None, 'float32', 'bfloat16' or 'float16', "
                f"got {self.decoder_dtype!r}",
                param="decoder_dtype",
            )
        if self.quantize not in QUANTIZE:
            raise InvalidInput(
                f"quantize must be None, 'int8' or 'int4', got {self.quantize!r}",
                param="quantize",
            )
