"""A cloned voice, encoded once: speaker embedding, and for ICL the reference codes + transcript.

Saved as a pair of files, `<stem>.safetensors` (tensors) and `<stem>.json` (everything else), so a
reference clip is encoded once and reused by every later request.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

FORMAT_VERSION = 1


@dataclass(frozen=True)
class VoicePrompt:
    """Everything a Base model needs to speak in someone's voice.

    x-vector-only mode uses just `speaker_embedding`; ICL mode (the default, better quality)
    also conditions on `ref_codes` and their transcript `ref_text`.
    """

    speaker_embedding: torch.Tensor  # (enc_dim,) float32 on the CPU
    ref_codes: torch.Tensor | None  # (frames, 16) int64 on the CPU; None in x-vector-only mode
    ref_text: str | None
    # identifies the Base checkpoint that made it (hidden size + speaker-encoder weights);
    # a prompt is only valid for the model family it was made with
    model_fingerprint: str = ""

    @property
    def x_vector_only(self) -> bool:
        return self.ref_codes is None

    def save(self, stem: str | os.PathLike) -> None:
        """Write `<stem>.safetensors` and `<stem>.json`, each atomically."""
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        tensors = {"speaker_embedding": self.speaker_embedding.detach().float().cpu().contiguous()}
        if self.ref_codes is not None:
            tensors["ref_codes"] = self.ref_codes.detach().long().cpu().contiguous()
        meta = {
            "format_version": FORMAT_VERSION,
            "ref_text": self.ref_text,
            "x_vector_only": self.x_vector_only,
            "model_fingerprint": self.model_fingerprint,
        }
        _atomic_write(stem.with_suffix(".safetensors"), lambda p: save_file(tensors, p))
        _atomic_write(stem.with_suffix(".json"), lambda p: Path(p).write_text(json.dumps(meta)))

    @classmethod
    def load(cls, stem: str | os.PathLike) -> VoicePrompt:
        stem = Path(stem)
        meta = json.loads(stem.with_suffix(".json").read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{stem}.json: unsupported voice prompt format {meta.get('format_version')}"
            )
        tensors = load_file(stem.with_suffix(".safetensors"))
        return cls(
            speaker_embedding=tensors["speaker_embedding"],
            ref_codes=tensors.get("ref_codes"),
            ref_text=meta.get("ref_text"),
            model_fingerprint=meta.get("model_fingerprint", ""),
        )


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
