"""Loading a checkpoint onto a device: language model, codec, text tokenizer, defaults.

Everything the engine holds for one checkpoint lives in `LoadedModel`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ownvoice.engine.options import EngineConfig, SamplingOptions
from ownvoice.engine.tokenizer import TextTokenizer
from ownvoice.errors import InvalidInput
from ownvoice.model.config import ModelConfig
from ownvoice.model.embeddings import FileEmbedding, StoredEmbedding
from ownvoice.model.tts_model import Qwen3TTSModel
from ownvoice.model.weights import (
    checkpoint_dtype,
    load_safetensors_into,
    read_json,
    resolve_checkpoint,
)

log = logging.getLogger(__name__)

# cloned voices whose primed speech decoder is kept (~5 MB each for the real model)
PRIMED_VOICES = 16
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    source: str
    folder: Path
    cfg: ModelConfig
    model: Qwen3TTSModel
    codec: object  # ownvoice.model.codec Codec: .decoder, .encoder (Base only)
    tokenizer: TextTokenizer
    device: torch.device
    dtype: torch.dtype
    default_sampling: SamplingOptions
    default_max_frames: int
    decode_window_frames: int | None
    fingerprint: str  # identifies the speaker encoder + codec a VoicePrompt was made with
    loop: object = None  # FrameLoop (fast path) or EagerLoop (parity path)
    # the speech decoder on our CPU kernels (engine/fast/speech_decoder.py); when set, the
    # reference decoder's weights were freed (codec.decoder is None)
    speech_decoder: object = None
    # decoders primed with a cloned voice's reference codes, by the codes (see _primed)
    primed: OrderedDict = field(default_factory=OrderedDict, repr=False)
    primed_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def new_stream_decoder(
        self, ref_codes: torch.Tensor | None
    ) -> Callable[[torch.Tensor], np.ndarray]:
        """A fresh incremental decoder: (n, 16) codes -> (n * 1920,) float32 samples.

        In ICL mode the reference codes are decoded first as left context and their audio
        dropped, exactly as upstream decodes cat(ref_codes, codes) and cuts the reference off.
        That priming depends on the reference alone, so it is done once per cloned voice and
        each request goes on from a copy of its state (`_primed`).
        """
        dec = self._fresh_decoder() if ref_codes is None else self._primed(ref_codes)

        def push(codes: torch.Tensor) -> np.ndarray:
            with torch.inference_mode():
                out = dec.push(codes.to(self.device).T[None])  # (1, 16, n) -> (1, n * 1920)
            return out[0].float().cpu().numpy()

        return push

    def _fresh_decoder(self):
        from ownvoice.engine.fast.speech_decoder import KernelStreamingDecoder
        from ownvoice.model.codec.streaming import StreamingDecoder, WindowedDecoder

        if self.speech_decoder is not None:
            return KernelStreamingDecoder(self.speech_decoder)
        if self.decode_window_frames:
            return WindowedDecoder(self.codec.decoder, window=self.decode_window_frames)
        return StreamingDecoder(self.codec.decoder)

    def prime(self, ref_codes: torch.Tensor) -> None:
        """Prime (and keep) the decoder state of these reference codes ahead of their first
        request (a voice being made)."""
        self._primed(ref_codes)

    def _primed(self, ref_codes: torch.Tensor):
        """A decoder primed with these reference codes: a copy of the state kept for the last
        PRIMED_VOICES references. Priming decodes the whole reference through the decoder's
        transformer and its last frames through the upsampler (~0.4 s for 10 s of reference in
        float32 on two cores): the largest part of an ICL clone's first audio after its prefill."""
        codes = ref_codes.detach().cpu().contiguous()
        key = hashlib.sha256(codes.numpy().tobytes()).hexdigest() + str(tuple(codes.shape))
        with self.primed_lock:
            primed = self.primed.get(key)
            if primed is not None:
                self.primed.move_to_end(key)
        if primed is None:
            primed = self._fresh_decoder()
            with torch.inference_mode():
                primed.prime(codes.to(self.device).T[None])
            with self.primed_lock:
                self.primed[key] = primed
                while len(self.primed) > PRIMED_VOICES:
                    self.primed.popitem(last=False)
        with torch.inference_mode():
            return primed.fork()


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise InvalidInput(f"unknown device {name!r}: {e}", param="device") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInput(
            f"device {name!r} requested but this torch build sees no GPU "
            f"(torch {torch.__version__}); run `ownvoice doctor`",
            param="device",
        )
    return device


def resolve_dtype(name: str, device: torch.device, stored: torch.dtype) -> torch.dtype:
    if name != "auto":
        return DTYPES[name]
    # bf16 is the checkpoints' own precision and the fast choice on GPUs; on CPUs without
    # native bf16 float32 is both faster and exact
    if device.type == "cuda":
        return torch.bfloat16 if stored == torch.bfloat16 else stored
    return torch.float32


def load_model(path_or_id: str, config: EngineConfig) -> LoadedModel:
    from ownvoice.model.codec.loading import load_codec

    folder = resolve_checkpoint(path_or_id)
    cfg = ModelConfig.from_hf(read_json(folder / "config.json"))
    device = resolve_device(config.device)
    stored = checkpoint_dtype(folder / "model.safetensors")
    dtype = resolve_dtype(config.dtype, device, stored)
    if config.fast and device.type == "cpu" and dtype != torch.float32:
        # the CPU fast path computes in float32 on the checkpoint's own 16-bit weights: more
        # exact than bf16 arithmetic, and faster on CPUs without native bf16
        log.info("CPU fast path: computing in float32 (weights stay %s)", stored)
        dtype = torch.float32
    with torch.device("meta"):
        model = Qwen3TTSModel(cfg, attention=config.attention)
    weights = folder / "model.safetensors"
    # the text embedding stays in the file (a prompt reads a few of its 152k rows)
    model.talker.model.text_embedding = FileEmbedding(weights, TEXT_EMBEDDING, dtype, device)
    cpu_fast = config.fast and device.type == "cpu" and _cpu_kernels() is not None

    def keep_stored(name: str) -> bool:
        # codec embedding tables keep the checkpoint's 16 bits (exact; rows are cast on use);
        # the CPU fast path repacks the decode-loop matrices from their stored 16 bits, so
        # loading them as float32 first would only double the peak memory
        return _CODEC_EMBEDDING.fullmatch(name) is not None or (cpu_fast and _decode_matrix(name))

    load_safetensors_into(
        model,
        weights,
        "",
        device,
        dtype,
        keep_stored=keep_stored,
        ignore=frozenset({TEXT_EMBEDDING}),
    )
    _store_codec_embeddings(model, dtype)
    model.talker.model.init_rope(device)
    model.talker.code_predictor.model.init_rope(device)
    model.eval()
    codec = load_codec(
        folder / "speech_tokenizer", device, dtype, with_encoder=cfg.model_type == "base"
    )
    if config.decoder_dtype:  # the decoder only: the encoder's reference codes stay as they are
        codec.decoder.to(getattr(torch, config.decoder_dtype))
    gen = read_json(folder / "generation_config.json")
    max_batch = config.max_batch or (16 if device.type == "cuda" else 8)
    speech_decoder = None
    if config.fast:
        from ownvoice.engine.fast.loop import FrameLoop

        kernels = None
        if device.type == "cpu":
            kernels = _pack_for_cpu(model, config, stored)
            speech_decoder = _kernel_speech_decoder(codec, config, kernels)
            release_freed_memory()
        elif config.quantize:
            raise InvalidInput(
                f"quantize={config.quantize!r} is a CPU option (integer weights for our CPU "
                f"kernels); on {device.type} leave it unset",
                param="quantize",
            )
        loop = FrameLoop(
            model.talker,
            max_batch=max_batch,
            use_cuda_graphs=config.use_cuda_graphs,
            use_compile=config.use_compile,
            kernels=kernels,
        )
        release_freed_memory()  # the CPU kernels copied the weights into their own layout
    else:
        from ownvoice.engine.decode import EagerLoop

        if config.quantize:
            raise InvalidInput("quantize needs the fast path (fast=True)", param="quantize")
        loop = EagerLoop(model.talker, max_batch=max_batch)
    return LoadedModel(
        source=path_or_id,
        folder=folder,
        cfg=cfg,
        model=model,
        codec=codec,
        tokenizer=TextTokenizer.from_folder(folder),
        device=device,
        dtype=dtype,
        default_sampling=sampling_from_generation_config(gen),
        default_max_frames=max(1, int(gen.get("max_new_tokens", 2048)) - 1),
        decode_window_frames=config.decode_window_frames,
        fingerprint=_fingerprint(cfg, model),
        loop=loop,
        speech_decoder=speech_decoder,
    )


TEXT_EMBEDDING = "talker.model.text_embedding.weight"
_CODEC_EMBEDDING = re.compile(
    r"talker\.(model\.codec_embedding|code_predictor\.model\.codec_embedding\.\d+)\.weight"
)


def _store_codec_embeddings(model: Qwen3TTSModel, dtype: torch.dtype) -> None:
    talker = model.talker
    talker.model.codec_embedding = StoredEmbedding(talker.model.codec_embedding.weight, dtype)
    tables = talker.code_predictor.model.codec_embedding
    for i, table in enumerate(tables):
        tables[i] = StoredEmbedding(table.weight, dtype)


_DECODE_MATRIX = re.compile(
    r"talker\.(model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj|codec_head"
    r"|code_predictor\.(model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj|lm_head\.\d+"
    r"|small_to_mtp_projection))\.weight"
)


def _cpu_kernels():
    from ownvoice.kernels import cpu_kernels

    return cpu_kernels()


def _decode_matrix(name: str) -> bool:
    return _DECODE_MATRIX.fullmatch(name) is not None


def _pack_for_cpu(model: Qwen3TTSModel, config: EngineConfig, stored: torch.dtype):
    """CPU fast path: decode-loop linears in our kernels, weights kept in the checkpoint's own
    16 bits (exact), or int8 / int4 when asked. Returns the kernels module, or None where they
    are not available: then unquantized weights stay torch's, and quantized ones run the same
    integer arithmetic in torch's ops (the portable path, correct but slow)."""
    from ownvoice.engine.fast.packed import pack_talker
    from ownvoice.kernels import cpu_kernels

    kernels = cpu_kernels()
    if kernels is None and not config.quantize:
        return None
    if config.quantize:
        mode = config.quantize
    else:
        mode = "bf16" if stored == torch.bfloat16 else "float32"
    n = pack_talker(model.talker, mode, kernels)
    if kernels is None:
        log.warning(
            "quantize=%r without the CPU kernels (x86-64 with AVX2 and a C++ compiler): the "
            "portable integer path is exact but much slower than unquantized weights",
            config.quantize,
        )
    else:
        log.info("CPU fast path: %d linears in %s (%s)", n, mode, kernels.isa())
    return kernels


def _kernel_speech_decoder(codec, config: EngineConfig, kernels):
    """The speech decoder on the CPU kernels, or None where it does not apply: no kernels, the
    windowed approximation, or a reduced-precision decoder the kernels do not run (float16;
    bfloat16 without AVX512-BF16, where torch's bf16 ops are what the CPU does best).

    float32: within 1e-5 of the reference, faster on a streaming chunk. bfloat16 on a CPU with
    AVX512-BF16: its products in bf16 dot products (fast/decoder_products.py), the rest in
    float32 on the bf16-rounded weights. Frees the reference decoder's weights: the kernels hold
    their own copy."""
    if kernels is None or config.decode_window_frames:
        return None
    dtype = codec.decoder.pre_conv.conv.weight.dtype
    bf16 = dtype == torch.bfloat16 and kernels.has_bf16dot()
    if dtype != torch.float32 and not bf16:
        return None
    from ownvoice.engine.fast.speech_decoder import KernelCodecDecoder

    decoder = KernelCodecDecoder(codec.decoder.float() if bf16 else codec.decoder, kernels, bf16)
    codec.decoder = None
    return decoder


def release_freed_memory() -> None:
    """Give memory freed while loading back to the system (glibc keeps freed heap blocks of
    the repacked weights, ~1 GB for 0.6B, in the process otherwise). A no-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def sampling_from_generation_config(gen: dict) -> SamplingOptions:
    base = SamplingOptions()
    return SamplingOptions(
        do_sample=gen.get("do_sample", base.do_sample),
        temperature=gen.get("temperature", base.temperature),
        top_k=gen.get("top_k", base.top_k),
        top_p=gen.get("top_p", base.top_p),
        repetition_penalty=gen.get("repetition_penalty", base.repetition_penalty),
        sub_do_sample=gen.get("subtalker_dosample", base.sub_do_sample),
        sub_temperature=gen.get("subtalker_temperature", base.sub_temperature),
        sub_top_k=gen.get("subtalker_top_k", base.sub_top_k),
        sub_top_p=gen.get("subtalker_top_p", base.sub_top_p),
    )


def _fingerprint(cfg: ModelConfig, model: Qwen3TTSModel) -> str:
    if model.speaker_encoder is None:
        return ""
    # hashing one small weight tells checkpoints apart without reading them all
    w = model.speaker_encoder.fc.weight.detach().float().cpu().numpy().tobytes()
    return f"{cfg.talker.hidden_size}-{hashlib.sha256(w).hexdigest()[:16]}"
