"""Find a checkpoint (local folder or Hugging Face hub id) and load its weights.

Hub downloads go through huggingface_hub, so HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE apply.
Weights load straight into modules built on the meta device (no second copy in memory), in the
checkpoint's dtype or a requested one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from ownvoice.errors import ModelLoadError
from ownvoice.model.safetensors_io import SafetensorsFile

log = logging.getLogger(__name__)

# what a model repo must hold for us (the rest of the repo is not needed)
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "speech_tokenizer/config.json",
    "speech_tokenizer/model.safetensors",
)


def resolve_checkpoint(path_or_id: str) -> Path:
    """A local folder as is; otherwise a hub id, downloaded (or found) in the HF cache."""
    p = Path(path_or_id).expanduser()
    if p.is_dir():
        folder = p
    elif p.exists() or path_or_id.startswith((".", "/", "~")) or path_or_id.count("/") != 1:
        raise ModelLoadError(
            f"model {path_or_id!r} is neither a checkpoint folder nor a hub id like "
            "'Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice'"
        )
    else:
        folder = _download(path_or_id)
    missing = [f for f in MODEL_FILES if not (folder / f).is_file()]
    if missing:
        raise ModelLoadError(f"checkpoint {folder} is incomplete: missing {', '.join(missing)}")
    return folder


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    patterns = [f for f in MODEL_FILES if "/" not in f] + ["speech_tokenizer/*"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except LocalEntryNotFoundError as e:
        raise ModelLoadError(
            f"{repo_id} is not in the Hugging Face cache and cannot be downloaded "
            "(offline, or no network); download it once with network access, "
            "or pass a local checkpoint folder"
        ) from e
    except (HfHubHTTPError, OSError, ValueError) as e:
        raise ModelLoadError(f"could not download {repo_id}: {e}") from e


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read {path}: {e}") from e


def load_safetensors_into(
    module: nn.Module,
    path: Path,
    prefix: str,
    device: torch.device,
    dtype: torch.dtype | None,
    keep_stored: Callable[[str], bool] = lambda name: False,
    ignore: frozenset[str] = frozenset(),
) -> None:
    """Load the tensors under `prefix` in a safetensors file into `module` (built on meta).

    Every parameter and persistent buffer must be present with the right shape; extra tensors
    under the prefix are an error too, so a wrong checkpoint never loads half-way. Tensors for
    which `keep_stored(name)` holds keep the file's dtype (they are repacked right after);
    tensors in `ignore` are read elsewhere (e.g. straight from the file when needed).
    """
    expected = module.state_dict()
    state = {}
    with _open(path) as f:
        names = [k for k in f.keys() if k.startswith(prefix) and k[len(prefix) :] not in ignore]
        extra = sorted(set(k[len(prefix) :] for k in names) - set(expected))
        missing = sorted(set(expected) - set(k[len(prefix) :] for k in names))
        if extra or missing:
            raise ModelLoadError(
                f"{path}: tensors do not match the model ({prefix!r}): "
                f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                f"unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}"
            )
        for key in names:
            name = key[len(prefix) :]
            if f.shape(key) != tuple(expected[name].shape):
                raise ModelLoadError(
                    f"{path}: {key} has shape {f.shape(key)}, expected {tuple(expected[name].shape)}"
                )
            t = f.read(key)
            if dtype is not None and t.is_floating_point() and not keep_stored(name):
                t = t.to(dtype)
            state[name] = t.to(device)
    module.load_state_dict(state, strict=True, assign=True)


def checkpoint_dtype(path: Path) -> torch.dtype:
    """The dtype of the first floating-point tensor of a safetensors file."""
    with _open(path) as f:
        for key in f.keys():
            if f.dtype(key).is_floating_point:
                return f.dtype(key)
    return torch.float32


def _open(path: Path) -> SafetensorsFile:
    try:
        return SafetensorsFile(path)
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read {path}: {e}") from e
