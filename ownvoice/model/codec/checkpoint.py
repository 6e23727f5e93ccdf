"""The tensor layout of `speech_tokenizer/model.safetensors` and its translation to our modules.

Our modules use the checkpoint's names (under `decoder.` / `encoder.`) with two exceptions, both
resolved here: codebooks are stored upstream as `embedding_sum` (or `embed_sum`) and
`cluster_usage` per quantizer, and we keep one precomputed `codebooks` tensor per quantizer
group instead; and projections that only the other direction uses (the decoder's `input_proj`,
the encoder's `output_proj`) plus the encoder's 16 unused codebooks are skipped.
Knows nothing about files or devices.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .config import CodecConfig
from .decoder import CodecDecoder
from .encoder import CodecEncoder

CODEBOOK_EPS = 1e-5  # cluster_usage is clamped to this before dividing (as upstream)

_DEC_Q = "decoder.quantizer"
_ENC_Q = "encoder.quantizer"
_ENC_GROUPS = ("semantic_residual_vector_quantizer", "acoustic_residual_vector_quantizer")


def _module_shapes(
    module: torch.nn.Module, prefix: str, skip_suffix: str
) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}{k}": tuple(v.shape)
        for k, v in module.state_dict().items()
        if not k.endswith(skip_suffix)
    }


def build_meta(cfg: CodecConfig, with_encoder: bool) -> tuple[CodecDecoder, CodecEncoder | None]:
    """Our modules on the meta device (no memory, no init cost), ready for `load_state_dict(assign=True)`."""
    with torch.device("meta"):
        decoder = CodecDecoder(cfg.decoder)
        encoder = (
            CodecEncoder(cfg.encoder, cfg.encoder_valid_num_quantizers) if with_encoder else None
        )
    return decoder, encoder


def decoder_layout(cfg: CodecConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every `decoder.*` tensor in the upstream file."""
    d = cfg.decoder
    shapes = _module_shapes(build_meta(cfg, False)[0], "decoder.", "quantizer.codebooks")
    dim, K = d.codebook_vector_dim, d.codebook_size
    for group, n in (("rvq_first", 1), ("rvq_rest", d.num_quantizers - 1)):
        shapes[f"{_DEC_Q}.{group}.input_proj.weight"] = (dim, d.codebook_dim, 1)
        for i in range(n):
            cb = f"{_DEC_Q}.{group}.vq.layers.{i}._codebook"
            shapes[f"{cb}.cluster_usage"] = (K,)
            shapes[f"{cb}.embedding_sum"] = (K, dim)
    return shapes


def encoder_layout(cfg: CodecConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every `encoder.*` tensor in the upstream file (all 32 quantizers)."""
    e = cfg.encoder
    with torch.device("meta"):
        module = CodecEncoder(e, cfg.encoder_valid_num_quantizers)
    shapes = _module_shapes(module, "encoder.", "codebooks")
    dim, K = e.codebook_dim, e.codebook_size
    counts = (e.num_semantic_quantizers, e.num_quantizers - e.num_semantic_quantizers)
    for group, n in zip(_ENC_GROUPS, counts, strict=True):
        shapes[f"{_ENC_Q}.{group}.output_proj.weight"] = (
            e.hidden_size,
            e.vector_quantization_hidden_dimension,
            1,
        )
        for i in range(n):
            cb = f"{_ENC_Q}.{group}.layers.{i}.codebook"
            shapes[f"{cb}.initialized"] = (1,)
            shapes[f"{cb}.cluster_usage"] = (K,)
            shapes[f"{cb}.embed_sum"] = (K, dim)
    return shapes


def checkpoint_layout(cfg: CodecConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in an upstream `speech_tokenizer/model.safetensors`."""
    return {**encoder_layout(cfg), **decoder_layout(cfg)}


def _decoder_unused(key: str) -> bool:
    # the RVQ input projections serve encoding, which this decoder never does
    return key.startswith(f"{_DEC_Q}.") and key.endswith(".input_proj.weight")


def _decoder_only_in_file(key: str) -> bool:
    """Stored upstream but not a tensor of our decoder (unused, or folded into `codebooks`)."""
    return _decoder_unused(key) or ".vq.layers." in key


def _encoder_unused(key: str) -> bool:
    # the RVQ output projections serve decoding, which the encoder never does
    return key.startswith(f"{_ENC_Q}.") and key.endswith(".output_proj.weight")


def _codebook(embedding_sum: Tensor, cluster_usage: Tensor) -> Tensor:
    return embedding_sum.float() / cluster_usage.float().clamp(min=CODEBOOK_EPS)[:, None]


def decoder_state_dict(tensors: dict[str, Tensor], cfg: CodecConfig) -> dict[str, Tensor]:
    """Upstream `decoder.*` tensors -> the state dict of our `CodecDecoder` (float32 codebooks)."""
    layout = decoder_layout(cfg)
    state = {k.removeprefix("decoder."): tensors[k] for k in layout if not _decoder_only_in_file(k)}
    books = []
    for q in range(cfg.decoder.num_quantizers):
        group, i = ("rvq_first", 0) if q == 0 else ("rvq_rest", q - 1)
        cb = f"{_DEC_Q}.{group}.vq.layers.{i}._codebook"
        books.append(_codebook(tensors[f"{cb}.embedding_sum"], tensors[f"{cb}.cluster_usage"]))
    state["quantizer.codebooks"] = torch.stack(books)
    return state


def encoder_state_dict(tensors: dict[str, Tensor], cfg: CodecConfig) -> dict[str, Tensor]:
    """Upstream `encoder.*` tensors -> the state dict of our `CodecEncoder` (float32 codebooks)."""
    e = cfg.encoder
    state = {
        k.removeprefix("encoder."): tensors[k]
        for k in encoder_layout(cfg)
        if ".codebook." not in k and not _encoder_unused(k)
    }
    counts = (
        e.num_semantic_quantizers,
        cfg.encoder_valid_num_quantizers - e.num_semantic_quantizers,
    )
    for group, n in zip(_ENC_GROUPS, counts, strict=True):
        books = []
        for i in range(n):
            cb = f"{_ENC_Q}.{group}.layers.{i}.codebook"
            books.append(_codebook(tensors[f"{cb}.embed_sum"], tensors[f"{cb}.cluster_usage"]))
        state[f"quantizer.{group}.codebooks"] = torch.stack(books)
    return state


def needed_keys(cfg: CodecConfig, with_encoder: bool) -> set[str]:
    """The upstream tensors `decoder_state_dict` / `encoder_state_dict` read."""
    keys = {k for k in decoder_layout(cfg) if not _decoder_unused(k)}
    if with_encoder:
        e = cfg.encoder
        valid = (
            e.num_semantic_quantizers,
            cfg.encoder_valid_num_quantizers - e.num_semantic_quantizers,
        )
        for k in encoder_layout(cfg):
            if _encoder_unused(k) or k.endswith(".initialized"):
                continue
            if ".codebook." in k:
                group_idx = 0 if _ENC_GROUPS[0] in k else 1
                layer = int(k.split(".layers.")[1].split(".")[0])
                if layer >= valid[group_idx]:
                    continue
            keys.add(k)
    return keys
