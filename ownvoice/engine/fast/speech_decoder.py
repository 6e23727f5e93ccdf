"""The speech decoder on our CPU kernels: codes in, 24 kHz audio out, chunk by chunk.

The same network as `ownvoice.model.codec.decoder.CodecDecoder` (the reference, kept beside it;
tests hold the two within 1e-4), computed channels-last, (B, T, C), so that every convolution is
one product of the kernels' panel matmul over its input with no unfolded copy (`conv_rows`):
a causal conv of `taps` taps is a product with K = taps * C_in; a transposed conv of stride s
and kernel 2s is a conv of 2 taps whose output row holds s samples. What this buys on the CPU:
torch's convolutions reorder their weights on every call and pay a large fixed cost on the short
inputs of a streaming chunk (the first block's 1024 -> 1536 conv: 6.7 ms for 4 samples here,
1.9 with the panels); on long inputs both run at the cores' FMA peak. The decoder always
streams (a one-shot decode is one push into a fresh state); its state carries the same left
contexts as `StreamState`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ownvoice.engine.fast.decoder_products import Products
from ownvoice.model.codec import streaming
from ownvoice.model.codec.decoder import CodecDecoder
from ownvoice.model.codec.transformer import apply_rope, rope_cos_sin, window_attention


class _State:
    """What one stream remembers between chunks: conv tails (B, context, C), attention keys and
    values, frames decoded."""

    def __init__(self) -> None:
        self.tails: dict[int, Tensor] = {}
        self.kv: dict[int, tuple[Tensor, Tensor]] = {}
        self.position = 0

    def copy(self) -> _State:
        out = _State()
        out.tails = {k: t.clone() for k, t in self.tails.items()}
        out.kv = {k: (a.clone(), b.clone()) for k, (a, b) in self.kv.items()}
        out.position = self.position
        return out

    def with_tail(self, key: int, x: Tensor, context: int) -> Tensor:
        prev = self.tails.get(key)
        if prev is None:
            prev = x.new_zeros(x.shape[0], context, x.shape[2])
        full = torch.cat([prev, x], dim=1)
        self.tails[key] = full[:, full.shape[1] - context :].clone()
        return full


class _Linear:
    def __init__(self, weight: Tensor, bias: Tensor | None, products: Products):
        self.products, self.rows = products, weight.shape[0]
        self.weight = products.pack(weight)
        self.bias = None if bias is None else bias.detach().float().contiguous()

    def __call__(self, x: Tensor) -> Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = self.products.linear(x2, self.weight, self.bias, self.rows)
        return y.view(*x.shape[:-1], self.rows)


class _Conv:
    """A causal conv as one product: weight matrix (rows, taps * C_in), tap-major columns."""

    def __init__(self, matrix: Tensor, bias: Tensor | None, taps: int, dilation: int,
                 products: Products):  # fmt: skip
        self.products, self.rows, self.taps, self.dilation = (
            products,
            matrix.shape[0],
            taps,
            dilation,
        )
        self.weight = products.pack(matrix)
        self.bias = None if bias is None else bias.detach().float().contiguous()
        self.context = (taps - 1) * dilation

    @classmethod
    def causal(cls, module, products: Products) -> _Conv:
        """From a CausalConv1d: weight (C_out, C_in, taps) -> (C_out, taps * C_in)."""
        conv = module.conv
        matrix = conv.weight.permute(0, 2, 1).reshape(conv.out_channels, -1)
        return cls(matrix, conv.bias, conv.kernel_size[0], conv.dilation[0], products)

    @classmethod
    def transposed(cls, module, products: Products) -> _Conv:
        """From a CausalConvTranspose1d (kernel = taps * stride): output row i holds samples
        i*s + q (q < s) of every channel; sample i*s + q sums, over taps j, input
        x[i - (taps - 1) + j] times kernel index q + s * (taps - 1 - j)."""
        conv, s = module.conv, module.stride
        c_in, c_out, kernel = conv.weight.shape
        taps = kernel // s
        w = conv.weight.view(c_in, c_out, taps, s).flip(2)  # tap j = kernel block taps-1-j
        matrix = w.permute(3, 1, 2, 0).reshape(s * c_out, taps * c_in)  # rows (q, c), cols (j, ci)
        bias = conv.bias.repeat(s)
        return cls(matrix, bias, taps, 1, products)

    def __call__(self, x: Tensor, state: _State) -> Tensor:
        # (B, n, C_in) -> (B, n, rows)
        if self.context:
            x = state.with_tail(id(self), x, self.context)
        return self.products.conv(
            x.contiguous(), self.weight, self.bias, self.rows, self.taps, self.dilation
        )


class _Snake:
    """SnakeBeta, x + sin(alpha x)^2 / beta, in one pass of the kernels (as five torch ops it
    was a sixth of the decoder's time)."""

    def __init__(self, module, products: Products):
        self.kernels = products.kernels
        self.alpha = module.alpha.detach().float().exp().contiguous()
        self.inv_beta = (1.0 / (module.beta.detach().float().exp() + 1e-9)).contiguous()

    def __call__(self, x: Tensor) -> Tensor:
        return self.kernels.snake_beta(x.contiguous(), self.alpha, self.inv_beta)


class _Upsampler:
    """A transposed conv (x r) and a ConvNeXt block, channels-last."""

    def __init__(self, transposed, convnext, products):
        self.stride = transposed.stride
        self.up = _Conv.transposed(transposed, products)
        dw = convnext.dwconv
        self.dw_weight = dw.conv.weight.detach().float()[:, 0].T.contiguous()  # (taps, C)
        self.dw_bias = dw.conv.bias.detach().float()
        self.dw_context = dw.context
        self.norm = convnext.norm
        self.pw1 = _Linear(convnext.pwconv1.weight, convnext.pwconv1.bias, products)
        self.pw2 = _Linear(convnext.pwconv2.weight, convnext.pwconv2.bias, products)
        self.gamma = convnext.gamma.detach().float()

    def __call__(self, x: Tensor, state: _State) -> Tensor:
        B, n, C = x.shape
        x = self.up(x, state).view(B, n * self.stride, C)
        full = state.with_tail(id(self), x, self.dw_context)
        h = self.dw_bias + full[:, : x.shape[1]] * self.dw_weight[0]
        for j in range(1, self.dw_weight.shape[0]):
            h = h + full[:, j : j + x.shape[1]] * self.dw_weight[j]
        h = self.pw2(F.gelu(self.pw1(self.norm(h))))
        return x + self.gamma * h


class _Block:
    """SnakeBeta, transposed conv (x rate), three residual units."""

    def __init__(self, block, products):
        self.snake = _Snake(block.block[0], products)
        self.stride = block.block[1].stride
        self.up = _Conv.transposed(block.block[1], products)
        self.units = [
            (_Snake(u.act1, products), _Conv.causal(u.conv1, products), _Snake(u.act2, products),
             _Conv.causal(u.conv2, products))
            for u in block.block[2:]
        ]  # fmt: skip

    def __call__(self, x: Tensor, state: _State) -> Tensor:
        B, n, _ = x.shape
        x = self.up(self.snake(x), state)
        x = x.view(B, n * self.stride, -1)
        for act1, conv1, act2, conv2 in self.units:
            x = x + conv2(act2(conv1(act1(x), state)), state)
        return x


class _Layer:
    """A pre_transformer layer: attention over a causal window (with a KV cache), SwiGLU."""

    def __init__(self, layer, products):
        attn, mlp = layer.self_attn, layer.mlp
        self.heads, self.kv_heads, self.head_dim = attn.num_heads, attn.num_kv_heads, attn.head_dim
        self.rope_theta, self.window = attn.rope_theta, attn.window
        self.in_norm, self.post_norm = layer.input_layernorm, layer.post_attention_layernorm
        qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
        qkv_bias = None
        if attn.q_proj.bias is not None:
            qkv_bias = torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
        self.qkv = _Linear(qkv, qkv_bias, products)
        self.o = _Linear(attn.o_proj.weight, attn.o_proj.bias, products)
        self.gate_up = _Linear(
            torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), None, products
        )
        self.down = _Linear(mlp.down_proj.weight, None, products)
        self.attn_scale = layer.self_attn_layer_scale.scale.detach().float()
        self.mlp_scale = layer.mlp_layer_scale.scale.detach().float()

    def __call__(self, x: Tensor, state: _State) -> Tensor:
        B, n, _ = x.shape
        H, Hk, D = self.heads, self.kv_heads, self.head_dim
        q, k, v = self.qkv(self.in_norm(x)).split([H * D, Hk * D, Hk * D], dim=-1)
        q = q.reshape(B, n, H, D).transpose(1, 2)
        k = k.reshape(B, n, Hk, D).transpose(1, 2)
        v = v.reshape(B, n, Hk, D).transpose(1, 2)
        cos, sin = rope_cos_sin(state.position, n, D, self.rope_theta, x.device, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        past = 0
        cached = state.kv.get(id(self))
        if cached is not None:
            past = cached[0].shape[2]
            k, v = torch.cat([cached[0], k], dim=2), torch.cat([cached[1], v], dim=2)
        keep = min(self.window - 1, k.shape[2])
        state.kv[id(self)] = (
            k[:, :, k.shape[2] - keep :].clone(),
            v[:, :, v.shape[2] - keep :].clone(),
        )
        if Hk != H:
            k, v = k.repeat_interleave(H // Hk, dim=1), v.repeat_interleave(H // Hk, dim=1)
        out = window_attention(q, k, v, past, self.window)
        x = x + self.attn_scale * self.o(out.transpose(1, 2).reshape(B, n, H * D))
        gate, up = self.gate_up(self.post_norm(x)).chunk(2, dim=-1)
        return x + self.mlp_scale * self.down(F.silu(gate) * up)


class KernelCodecDecoder:
    """A CodecDecoder's weights in the kernels' panels; decodes through `KernelStreamingDecoder`.

    Holds its own float32 copy of every matrix, so the reference decoder can be freed."""

    def __init__(self, reference: CodecDecoder, kernels, bf16: bool = False):
        cfg = self.config = reference.config
        products = self.products = Products(kernels, bf16)
        self.samples_per_frame = reference.samples_per_frame
        self.history_frames = reference.waveform_history_frames
        q = reference.quantizer
        self.codebooks = q.codebooks.detach().float()
        self.rvq_first = _Linear(q.rvq_first.output_proj.weight[..., 0], None, products)
        self.rvq_rest = _Linear(q.rvq_rest.output_proj.weight[..., 0], None, products)
        self.pre_conv = _Conv.causal(reference.pre_conv, products)
        t = reference.pre_transformer
        self.input_proj = _Linear(t.input_proj.weight, t.input_proj.bias, products)
        self.layers = [_Layer(layer, products) for layer in t.layers]
        self.norm = t.norm
        self.output_proj = _Linear(t.output_proj.weight, t.output_proj.bias, products)
        self.upsample = [_Upsampler(tr, cn, products) for tr, cn in reference.upsample]
        self.conv_in = _Conv.causal(reference.decoder[0], products)
        self.blocks = [_Block(b, products) for b in reference.decoder[1:-2]]
        self.snake_out = _Snake(reference.decoder[-2], products)
        self.conv_out = _Conv.causal(reference.decoder[-1], products)
        if cfg.sliding_window is None:
            raise ValueError("streaming needs a finite attention window")

    def latents(self, codes: Tensor, state: _State) -> Tensor:
        """codes (B, Q, T) -> transformer output (B, T, latent_dim), channels-last."""
        Q, K, dim = self.codebooks.shape
        offsets = torch.arange(Q, device=codes.device)[None, :, None] * K
        vectors = F.embedding(codes + offsets, self.codebooks.view(Q * K, dim))  # (B, Q, T, dim)
        x = self.rvq_first(vectors[:, 0]) + self.rvq_rest(vectors[:, 1:].sum(dim=1))
        x = self.input_proj(self.pre_conv(x, state))
        for layer in self.layers:
            x = layer(x, state)
        state.position += x.shape[1]
        return self.output_proj(self.norm(x))

    def waveform(self, x: Tensor, state: _State) -> Tensor:
        """(B, T, latent_dim) -> (B, T * samples_per_frame)."""
        for up in self.upsample:
            x = up(x, state)
        x = self.conv_in(x, state)
        for block in self.blocks:
            x = block(x, state)
        wav = self.conv_out(self.snake_out(x), state)  # (B, T * 1920, 1)
        return wav.clamp(-1.0, 1.0)[..., 0]


class KernelStreamingDecoder:
    """`StreamingDecoder`'s interface (push, prime, reset, frames_decoded) on a
    KernelCodecDecoder. One object per stream; not thread-safe."""

    def __init__(self, decoder: KernelCodecDecoder) -> None:
        self.decoder = decoder
        self.reset()

    def reset(self) -> None:
        self._state = _State()
        self._batch_size: int | None = None

    @property
    def frames_decoded(self) -> int:
        return self._state.position

    def _accept(self, codes: Tensor) -> None:
        streaming.check_codes(codes, self.decoder.config.num_quantizers)
        if self._batch_size is not None and codes.shape[0] != self._batch_size:
            raise RuntimeError(
                f"batch size changed from {self._batch_size} to {codes.shape[0]} within one "
                "stream; call reset() before decoding a different batch"
            )
        self._batch_size = codes.shape[0]

    @torch.no_grad()
    def push(self, codes: Tensor) -> Tensor:
        """codes (B, 16, n) -> waveform (B, n * 1920) continuing the previous pushes."""
        self._accept(codes)
        return self.decoder.waveform(self.decoder.latents(codes, self._state), self._state)

    def fork(self) -> KernelStreamingDecoder:
        """A new stream that continues from this one's state (as StreamingDecoder.fork)."""
        other = KernelStreamingDecoder(self.decoder)
        other._state, other._batch_size = self._state.copy(), self._batch_size
        return other

    @torch.no_grad()
    def prime(self, codes: Tensor) -> None:
        """Advance the state over `codes` without their audio (as StreamingDecoder.prime)."""
        self._accept(codes)
        latents = self.decoder.latents(codes, self._state)
        keep = math.ceil(self.decoder.history_frames) + streaming.PRIME_MARGIN_FRAMES
        self.decoder.waveform(latents[:, -keep:].contiguous(), self._state)
