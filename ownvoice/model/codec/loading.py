"""Load a `speech_tokenizer/` folder (config.json + model.safetensors) into our codec modules.

Checks the file against the layout the config implies before reading any tensor, and says which
tensors are missing, unexpected or mis-shaped. Modules are built on the meta device and take the
loaded tensors as they are (no random init, no double copy). Knows nothing about downloads, the
talker or streaming.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ownvoice.model.safetensors_io import SafetensorsFile

from ...errors import ModelLoadError
from .checkpoint import (
    build_meta,
    checkpoint_layout,
    decoder_layout,
    decoder_state_dict,
    encoder_layout,
    encoder_state_dict,
    needed_keys,
)
from .config import CodecConfig
from .decoder import CodecDecoder
from .encoder import CodecEncoder

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
MAX_LISTED = 5  # names shown per kind of problem in an error message


@dataclass
class Codec:
    """A loaded speech tokenizer: the decoder, and the encoder when asked for."""

    config: CodecConfig
    # None once an engine moved the decoder into its own layout (engine/loading.py)
    decoder: CodecDecoder | None
    encoder: CodecEncoder | None = None

    @property
    def sample_rate(self) -> int:
        return self.config.output_sample_rate

    @property
    def samples_per_frame(self) -> int:
        return self.config.samples_per_frame


def load_codec(
    folder: Path | str,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    with_encoder: bool = True,
) -> Codec:
    """Read `folder/config.json` and `folder/model.safetensors`; modules in eval mode, no grad.

    Without the encoder only `decoder.*` tensors are read (the encoder's are still allowed in
    the file). Raises ModelLoadError when a file is missing or unreadable, the config is not
    supported, or tensors are missing, unexpected or mis-shaped.
    """
    folder = Path(folder)
    config_path, weights_path = folder / CONFIG_FILE, folder / WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise ModelLoadError(
                f"speech tokenizer folder {folder} has no {path.name}; "
                f"expected {CONFIG_FILE} and {WEIGHTS_FILE} (the speech_tokenizer/ folder of a "
                "Qwen3-TTS 12 Hz checkpoint)"
            )
    try:
        cfg = CodecConfig.from_hf(json.loads(config_path.read_text()))
    except (OSError, ValueError, TypeError, AttributeError) as e:  # JSONDecodeError is a ValueError
        raise ModelLoadError(f"cannot use {config_path}: {e}") from e

    try:
        with SafetensorsFile(weights_path) as f:
            shapes = {k: f.shape(k) for k in f.keys()}
            check_layout(shapes, cfg, with_encoder, weights_path)
            tensors = {k: f.read(k) for k in needed_keys(cfg, with_encoder)}
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read {weights_path}: {e}") from e
    return build_codec(cfg, tensors, device=device, dtype=dtype, with_encoder=with_encoder)


def check_layout(
    shapes: dict[str, tuple[int, ...]], cfg: CodecConfig, with_encoder: bool, source: Path | str
) -> None:
    """Raise ModelLoadError naming missing, unexpected and mis-shaped tensors."""
    known = checkpoint_layout(cfg)
    required = decoder_layout(cfg) | (encoder_layout(cfg) if with_encoder else {})
    problems = []
    missing = sorted(k for k in required if k not in shapes)
    extra = sorted(k for k in shapes if k not in known)
    wrong = sorted(
        f"{k} {shapes[k]} (expected {known[k]})"
        for k in shapes
        if k in known and shapes[k] != known[k]
    )
    for label, names in (("missing", missing), ("unexpected", extra), ("mis-shaped", wrong)):
        if names:
            shown = ", ".join(names[:MAX_LISTED]) + (" ..." if len(names) > MAX_LISTED else "")
            problems.append(f"{len(names)} {label}: {shown}")
    if problems:
        raise ModelLoadError(
            f"{source} does not match its config.json (a Qwen3-TTS 12 Hz speech tokenizer): "
            + "; ".join(problems)
        )


def build_codec(
    cfg: CodecConfig,
    tensors: dict[str, Tensor],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    with_encoder: bool = True,
) -> Codec:
    """Our modules from upstream-named tensors (already checked), on `device` in `dtype`."""
    decoder, encoder = build_meta(cfg, with_encoder)
    _assign(decoder, decoder_state_dict(tensors, cfg), device, dtype)
    if encoder is not None:
        _assign(encoder, encoder_state_dict(tensors, cfg), device, dtype)
    return Codec(cfg, decoder, encoder)


def _assign(module: torch.nn.Module, state: dict[str, Tensor], device, dtype: torch.dtype) -> None:
    state = {k: v.to(device=device, dtype=dtype) for k, v in state.items()}
    module.load_state_dict(state, strict=True, assign=True)
    module.eval().requires_grad_(False)
