"""Qwen2 byte-level BPE text tokenizer and the Qwen3-TTS chat templates.

The Qwen3-TTS repos ship `vocab.json` + `merges.txt` + `tokenizer_config.json` but no
`tokenizer.json`, so we build the fast tokenizer ourselves with the `tokenizers` library, the same
way transformers converts a slow Qwen2 tokenizer: NFC, a Split on Qwen's pre-tokenizer regex, byte
level, then the added tokens at the ids `tokenizer_config.json` gives them.

We use Qwen's own pre-tokenizer regex, the one the model was trained with. transformers 4.57.3
swaps it for a Mistral regex when a local folder's config.json names a transformers version
above 4.57.2 (architecture.md 4.1): a loader bug that only changes camel case, contractions and
"/"-adjacent text. We do not reproduce it.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from ownvoice.errors import InvalidInput, ModelLoadError

QWEN_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def assistant_text(text: str) -> str:
    """The text to speak; ids[3:-5] of its tokens are the text itself."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def reference_text(text: str) -> str:
    """The transcript of an ICL reference clip; ids[3:-2] are the transcript itself."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(text: str) -> str:
    """A style instruction (VoiceDesign, 1.7B CustomVoice); used whole."""
    return f"<|im_start|>user\n{text}<|im_end|>\n"


_PRETOKENIZER = pre_tokenizers.Split(
    Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated", invert=False
)


@dataclass(frozen=True)
class PromptIds:
    """Token ids of one request's texts, sliced the way the prompt builder needs them."""

    role: list[int]  # "<|im_start|>assistant\n" (3 ids)
    text: list[int]  # the text to speak
    ref_text: list[int] | None = None  # ICL transcript
    instruct: list[int] | None = None  # whole instruct template


class TextTokenizer:
    def __init__(self, tokenizer: Tokenizer):
        self._tok = tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> TextTokenizer:
        folder = Path(folder)
        try:
            vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
            merges = _read_merges(folder / "merges.txt")
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ModelLoadError(f"text tokenizer file missing: {e.filename}") from e
        tok = Tokenizer(
            models.BPE(
                vocab=vocab,
                merges=merges,
                dropout=None,
                unk_token=None,
                continuing_subword_prefix="",
                end_of_word_suffix="",
                fuse_unk=False,
                byte_fallback=False,
            )
        )
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(
                    Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated", invert=False
                ),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        _add_tokens(tok, config.get("added_tokens_decoder") or {})
        return cls(tok)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def stable_prefix(self, text: str) -> str:
        """The part of `text` whose tokens no continuation can change: all of it but the last
        pre-token (a word may go on, spaces may join the next word). NFC first, as encode does."""
        text = unicodedata.normalize("NFC", text)
        pieces = _PRETOKENIZER.pre_tokenize_str(text)
        return text[: pieces[-1][1][0]] if pieces else ""

    def prompt_ids(
        self, text: str, ref_text: str | None = None, instruct: str | None = None
    ) -> PromptIds:
        """Tokenize the request's texts into the slices the prompt needs (architecture.md 5.1).

        Each template is tokenized as one string, as upstream does; the slicing relies on
        "<|im_start|>assistant\\n" being 3 tokens and the text being followed by 5.
        """
        ids = self.encode(assistant_text(text))
        if len(ids) <= 8 or not text.strip():
            raise InvalidInput("text is empty: nothing to speak", param="input")
        ref = None
        if ref_text is not None:
            r = self.encode(reference_text(ref_text))
            if len(r) <= 5 or not ref_text.strip():
                raise InvalidInput("ref_text is empty", param="ref_text")
            ref = r[3:-2]
        ins = self.encode(instruct_text(instruct)) if instruct else None
        return PromptIds(role=ids[:3], text=ids[3:-5], ref_text=ref, instruct=ins)


def _read_merges(path: Path) -> list[tuple[str, str]]:
    merges = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#version"):
            continue
        a, b = line.split(" ")
        merges.append((a, b))
    return merges


def _add_tokens(tok: Tokenizer, decoder: dict[str, dict]) -> None:
    """Add the added/special tokens in id order, checking each lands on its declared id."""
    for id_str in sorted(decoder, key=int):
        spec = decoder[id_str]
        token = AddedToken(
            spec["content"],
            single_word=spec.get("single_word", False),
            lstrip=spec.get("lstrip", False),
            rstrip=spec.get("rstrip", False),
            normalized=spec.get("normalized", False),
            special=spec.get("special", True),
        )
        if token.special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
        got = tok.token_to_id(spec["content"])
        if got != int(id_str):
            raise ModelLoadError(
                f"tokenizer_config.json puts {spec['content']!r} at id {id_str}, but the "
                f"vocabulary placed it at {got}; vocab.json must have exactly {id_str} entries "
                "before the added tokens"
            )
