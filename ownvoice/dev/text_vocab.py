"""Text tokenizer files for random checkpoints, with the real special ids.

The real Qwen vocabulary cannot be downloaded here, so we train a small byte-level BPE on a
multilingual corpus and lay it out like Qwen's: the 256 byte symbols first (so "\\n" is 198),
"user" at 872 and "assistant" at 77091, unreachable fillers up to exactly 151,643 entries, then
the 33 added tokens at 151643..151675 (tokenizer_config.json), as in the Qwen3-TTS repos.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from ownvoice.dev.corpus import CORPUS
from ownvoice.engine.tokenizer import QWEN_PRETOKENIZE_REGEX

BASE_VOCAB_SIZE = 151643
PINNED = {"user": 872, "assistant": 77091}

# (content, special) for ids 151643.. in order; as in the Qwen3 tokenizer_config.json
ADDED_TOKENS = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
]


def _byte_symbols() -> list[str]:
    """The 256 byte-level symbols in GPT-2/Qwen order (printable bytes first)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    rest = [b for b in range(256) if b not in printable]
    mapping = {b: chr(b) for b in printable}
    mapping.update({b: chr(256 + n) for n, b in enumerate(rest)})
    return [mapping[b] for b in printable + rest]


@lru_cache(maxsize=1)
def build_vocab(learned_tokens: int = 4000) -> tuple[dict[str, int], list[str]]:
    """(vocab, merges) of a BPE trained on the corpus, laid out with Qwen's ids."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=256 + learned_tokens,
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # The chat roles are whole tokens in Qwen's vocabulary; repeating them makes BPE learn them.
    # Camel-case words become tokens that span a case change, so tokenizing with another
    # pre-tokenizer regex (transformers' Mistral swap) visibly changes the ids.
    texts = list(CORPUS.values()) + ["user\nassistant\n"] * 50 + ["JavaScript YouTube\n"] * 20
    tok.train_from_iterator(texts, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    learned = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    symbols = _byte_symbols()
    for name in PINNED:
        assert name in learned, f"BPE did not learn {name!r} as one token"
    others = [t for t in learned if t not in symbols and t not in PINNED]
    vocab: dict[str, int] = {s: i for i, s in enumerate(symbols)}
    vocab.update(PINNED)
    next_id = len(symbols)
    taken = set(PINNED.values())
    for token in others:
        while next_id in taken:
            next_id += 1
        vocab[token] = next_id
        next_id += 1
    # Fillers no merge produces: they only make the ids line up with Qwen's.
    by_id = {i: t for t, i in vocab.items()}
    for i in range(BASE_VOCAB_SIZE):
        if i not in by_id:
            vocab[f"<|unused_{i}|>"] = i
    assert len(vocab) == BASE_VOCAB_SIZE, len(vocab)
    return vocab, merges


def tokenizer_config() -> dict:
    decoder = {
        str(BASE_VOCAB_SIZE + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, (content, special) in enumerate(ADDED_TOKENS)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [c for c, s in ADDED_TOKENS if s and c.startswith("<|")],
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
        "audio_token": "<|audio_pad|>",
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "processor_class": "Qwen3TTSProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def write_text_tokenizer(folder: Path) -> None:
    vocab, merges = build_vocab()
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8"
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(), indent=2, ensure_ascii=False), encoding="utf-8"
    )
