"""Chunked codec decoding: audio for each new run of frames as soon as its codes exist.

`StreamingDecoder` is exact: it carries every causal op's left context between chunks (per
convolution, the last input samples; per transposed convolution, the overlapping input sample; per
attention layer, keys and values of the last window-1 = 71 frames, with RoPE positions counting on,
which is harmless because attention only sees position differences). The concatenation of its
outputs equals `CodecDecoder(all codes)` up to float rounding, for any chunk sizes, at a constant
cost per frame.
`WindowedDecoder` is the approximation other projects use: re-decode the last `window` frames of
codes before each chunk and keep only the new audio. Kept for comparison.
`decode_chunked` decodes a whole utterance through a StreamingDecoder in fixed chunks, so memory
stays bounded for long audio with the same result as one-shot.
Knows nothing about the talker, sample formats or threads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .convs import StreamState
from .decoder import CodecDecoder

# prime() runs the upsampler over ceil(waveform_history_frames) + this many frames. The bound
# alone is exact (tests/codec/test_codec_streaming.py shows it, and that one frame less is
# not); the margin keeps a rounding of the history estimate from ever mattering.
PRIME_MARGIN_FRAMES = 2


def check_codes(codes: Tensor, num_quantizers: int) -> None:
    if codes.dim() != 3 or codes.shape[1] != num_quantizers or codes.shape[2] < 1:
        raise ValueError(
            f"codes must have shape (batch, {num_quantizers}, frames >= 1), got {tuple(codes.shape)}"
        )


class StreamingDecoder:
    """Exact incremental decoding with one `CodecDecoder`.

    `push(codes)` returns the audio of exactly those frames. Each returned tensor is a new
    allocation owned by the caller: later pushes never write into it, so it stays valid as long
    as the caller keeps it. The decoder's weights are shared, not copied, so several streams
    may use one decoder; the carried state (~5 MB per item for the real model in float32,
    mostly attention keys and values) belongs to this object. One object is not thread-safe.
    """

    def __init__(self, decoder: CodecDecoder) -> None:
        self.decoder = decoder
        self.reset()

    def reset(self) -> None:
        """Forget all context; the next push starts a new utterance."""
        self._state = StreamState()
        self._batch_size: int | None = None

    @property
    def frames_decoded(self) -> int:
        """Frames pushed (or primed) since the last reset."""
        return self._state.position

    def _accept(self, codes: Tensor) -> None:
        check_codes(codes, self.decoder.config.num_quantizers)
        if self._batch_size is not None and codes.shape[0] != self._batch_size:
            raise RuntimeError(
                f"batch size changed from {self._batch_size} to {codes.shape[0]} within one "
                "stream; call reset() before decoding a different batch"
            )
        self._batch_size = codes.shape[0]

    @torch.no_grad()
    def push(self, codes: Tensor) -> Tensor:
        """codes (B, 16, n), n >= 1 -> waveform (B, n * 1920) continuing the previous pushes."""
        self._accept(codes)
        return self.decoder(codes, self._state)

    def fork(self) -> StreamingDecoder:
        """A new stream that continues from this one's state (a primed reference shared by
        every request of one cloned voice); the two go on independently."""
        other = StreamingDecoder(self.decoder)
        other._state, other._batch_size = self._state.copy(), self._batch_size
        return other

    @torch.no_grad()
    def prime(self, codes: Tensor) -> None:
        """Advance the state over `codes` without producing their audio (ICL reference codes).

        Leaves the same state as `push(codes)` (up to float rounding) but runs the expensive
        conv upsampler only on the last few frames: its convolutions forget anything older
        than `waveform_history_frames`, so earlier frames cannot influence what it carries.
        """
        self._accept(codes)
        latents = self.decoder.latents(codes, self._state)  # advances attention caches
        keep = math.ceil(self.decoder.waveform_history_frames) + PRIME_MARGIN_FRAMES
        self.decoder.waveform(latents[..., -keep:], self._state)


class WindowedDecoder:
    """Approximate incremental decoding: re-decode `window` frames of context before each chunk.

    Costs (window + n) / n times the exact decoder per chunk and differs from the one-shot
    decode once the attention history exceeds the window (it sees at most `window` earlier
    frames instead of 71 per layer). Exact only while every pushed frame fits in the window.
    Same interface and buffer ownership as `StreamingDecoder`.
    """

    def __init__(self, decoder: CodecDecoder, window: int = 25) -> None:
        if window < 0:
            raise ValueError(f"window must be >= 0 frames, got {window}")
        self.decoder = decoder
        self.window = window
        self.reset()

    def reset(self) -> None:
        self._context: Tensor | None = None
        self._frames = 0

    @property
    def frames_decoded(self) -> int:
        return self._frames

    @torch.no_grad()
    def push(self, codes: Tensor) -> Tensor:
        check_codes(codes, self.decoder.config.num_quantizers)
        ctx = self._context
        if ctx is not None and ctx.shape[0] != codes.shape[0]:
            raise RuntimeError(
                f"batch size changed from {ctx.shape[0]} to {codes.shape[0]} within one stream; "
                "call reset() before decoding a different batch"
            )
        full = codes if ctx is None else torch.cat([ctx, codes], dim=-1)
        wav = self.decoder(full)
        skip = full.shape[-1] - codes.shape[-1]
        self._remember(full)
        self._frames += codes.shape[-1]
        return wav[..., skip * self.decoder.samples_per_frame :]

    def fork(self) -> WindowedDecoder:
        """A new stream that continues from this one's context."""
        other = WindowedDecoder(self.decoder, self.window)
        other._context, other._frames = self._context, self._frames  # replaced, never written
        return other

    def prime(self, codes: Tensor) -> None:
        """Remember `codes` as context without decoding them."""
        check_codes(codes, self.decoder.config.num_quantizers)
        full = codes if self._context is None else torch.cat([self._context, codes], dim=-1)
        self._remember(full)
        self._frames += codes.shape[-1]

    def _remember(self, codes: Tensor) -> None:
        start = max(0, codes.shape[-1] - self.window)
        self._context = codes[..., start:] if self.window else None


@torch.no_grad()
def decode_chunked(decoder: CodecDecoder, codes: Tensor, chunk_frames: int = 300) -> Tensor:
    """One-shot result (B, T * 1920) with memory bounded by `chunk_frames` instead of T."""
    if chunk_frames < 1:
        raise ValueError(f"chunk_frames must be >= 1, got {chunk_frames}")
    stream = StreamingDecoder(decoder)
    parts = [
        stream.push(codes[..., i : i + chunk_frames])
        for i in range(0, codes.shape[-1], chunk_frames)
    ]
    return torch.cat(parts, dim=-1)
