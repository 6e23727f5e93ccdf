"""Text token ids equal the reference's (transformers' Qwen2 tokenizer) on a multilingual set."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.reference import import_reference

pytestmark = pytest.mark.reference

TEXTS = [
    "Hello world! How are you today?",
    "The price is $1,234.56 (about 20% off) -- call 555-0100 at 9:30 p.m.",
    "Der schnelle braune Fuchs springt über den faulen Hund. Dr. Müller kam am 3. Mai.",
    "今天天气很好，我们一起去公园散步吧。北京是中国的首都。",
    "今日はとても良い天気ですね。東京駅から新幹線で大阪まで行きました。",
    "오늘은 날씨가 정말 좋네요. 서울은 한국의 수도입니다.",
    "C'est une très belle journée, n'est-ce pas ? L'été dernier, j'ai visité Paris.",
    "Быстрая коричневая лиса прыгает через ленивую собаку. Москва — столица России.",
    "Você gostaria de tomar um café comigo amanhã à tarde? O Brasil é grande.",
    "¿Dónde está la estación de tren? ¡Muchas gracias por su ayuda!",
    "La veloce volpe marrone salta sopra il cane pigro. Roma è la capitale d'Italia.",
    "Emoji 😀🎉👍❤️🚀 and symbols ©®™ ∑∞≈ plus numbers 3.14159 2024-12-02 #1 @home",
    "Mixed 中文 and English, 日本語とEnglish, 한국어 123 abc",
    "  leading spaces, trailing spaces  \n\nnew lines\ttabs",
    "I'm sure they'll say it's John's, don't you think? We've seen McDonald's.",
    "JavaScript on YouTube, HTTPServer and/or x/y paths",
    "<|im_start|> and <tts_pad> written in the text are special tokens",
]


def _reference_processor(folder):
    import_reference()
    from qwen_tts.core.models import Qwen3TTSProcessor

    return Qwen3TTSProcessor.from_pretrained(str(folder), fix_mistral_regex=True)


def _ours(folder):
    from ownvoice.engine.tokenizer import TextTokenizer

    return TextTokenizer.from_folder(folder)


def _tokenizer_folder(tiny_checkpoints, tmp_path, transformers_version):
    src = tiny_checkpoints["0.6B-CustomVoice"]
    folder = tmp_path / f"tok-{transformers_version}"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json", "preprocessor_config.json"):
        shutil.copy(src / name, folder / name)
    config = json.loads((src / "config.json").read_text())
    config["transformers_version"] = transformers_version
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_token_ids_match_reference(tiny_checkpoints, tmp_path):
    folder = _tokenizer_folder(tiny_checkpoints, tmp_path, "4.57.1")
    ref, ours = _reference_processor(folder), _ours(folder)
    for text in TEXTS:
        for template in ("{}", "<|im_start|>assistant\n{}<|im_end|>\n<|im_start|>assistant\n"):
            s = template.format(text)
            expected = ref(text=s, return_tensors="pt")["input_ids"][0].tolist()
            assert ours.encode(s) == expected, s
    # merges fire: words become fewer tokens than bytes (a byte-only vocab would pass blindly)
    assert len(ours.encode("Hello world")) < len("Hello world")


def test_special_ids_and_chat_roles(tiny_checkpoints):
    ours = _ours(tiny_checkpoints["0.6B-CustomVoice"])
    assert ours.encode("<|im_start|>assistant\n") == [151644, 77091, 198]
    assert ours.encode("<tts_pad><tts_text_bos><tts_text_eod>") == [151671, 151672, 151673]
    assert ours.encode("<|im_start|>user\n")[1] == 872


def test_regex_swap_of_transformers_is_not_reproduced(tiny_checkpoints, tmp_path):
    """transformers 4.57.3 swaps Qwen's pre-tokenizer regex for a Mistral one when a local
    folder's config.json names a version above 4.57.2. We keep Qwen's (the trained one): the
    two then differ only on contractions / camel case, and agree elsewhere."""
    folder = _tokenizer_folder(tiny_checkpoints, tmp_path, "4.57.3")
    ref, ours = _reference_processor(folder), _ours(folder)

    def ids(s):
        return ref(text=s, return_tensors="pt")["input_ids"][0].tolist()

    assert ids("Hello world, 今天天气很好。") == ours.encode("Hello world, 今天天气很好。")
    tricky = "I like JavaScript and YouTube."
    assert ids(tricky) != ours.encode(tricky)
