"""The fast frame loop: static buffers, fixed shapes, device-side sampling, one sync per frame.

Every tensor the loop touches lives in preallocated buffers (`FrameState`), and each phase is a
function of those buffers with fixed shapes, so on CUDA each phase can be captured once as a
graph and replayed; on the CPU the same functions simply run. Per frame:

    1) host: read code0 (the one sync: is it EOS?)          -- stop, or go on
    2) code predictor: codebooks 1..15, 15 unrolled steps   -- graph "cp"
    3) talker step: feed the frame back, predict code0      -- graph "step/<bucket>"

The talker's KV cache is read over a bucket of positions (a multiple of `bucket`) with a mask,
so one graph serves a whole range of lengths. Sampling noise is drawn before each frame, outside
the graphs; settings are tensors, so graphs are never re-captured for other settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ownvoice.engine.fast.cache import StaticKVCache
from ownvoice.engine.fast.graphs import GraphRunner
from ownvoice.engine.fast.sampler import NEG_INF, SamplerSettings, penalize_seen, sample_no_sync
from ownvoice.engine.options import SamplingOptions
from ownvoice.engine.prompt import Prompt
from ownvoice.engine.sampling import talker_logit_mask
from ownvoice.model.layers import rope_cos_sin
from ownvoice.model.talker import Talker

log = logging.getLogger(__name__)

MIN_FRAMES = 2


class BucketKVCache:
    """Static talker cache whose writes go to a device-side position and whose reads cover a
    fixed span, so the step has one shape per span."""

    def __init__(self, cache: StaticKVCache, pos: torch.Tensor):
        self.cache, self.pos, self.span = cache, pos, 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        self.cache.k[layer].index_copy_(2, self.pos, k)
        self.cache.v[layer].index_copy_(2, self.pos, v)
        return self.cache.k[layer, :, :, : self.span], self.cache.v[layer, :, :, : self.span]


@dataclass
class FrameState:
    """The loop's buffers. `frame` and `code0` are views of static memory: copy to keep."""

    hidden: torch.Tensor  # (1, 1, H) talker output after its final norm
    code0: torch.Tensor  # (1,) next codebook-0 code
    frame: torch.Tensor  # (1, 16) the last frame's codes
    pos: torch.Tensor  # (1,) position of the next talker input
    frame_index: torch.Tensor  # (1,) frames generated so far
    seen: torch.Tensor  # (1, V) codebook-0 codes generated so far (repetition penalty)
    text_row: torch.Tensor  # (1, 1, H) trailing text row for the next talker input
    noise0: torch.Tensor  # (1, V) Exp(1) noise for codebook 0
    noise_cp: torch.Tensor  # (15, 2048) Exp(1) noise for codebooks 1..15
    penalty: torch.Tensor  # (1, 1)
    talker_sampling: SamplerSettings
    cp_sampling: SamplerSettings


class FastDecoder:
    """Owns the static caches and graphs of one talker. One synthesis at a time."""

    def __init__(
        self,
        talker: Talker,
        use_cuda_graphs: bool,
        bucket: int = 64,
        initial_capacity: int = 256,
        use_compile: bool = False,
    ):
        self.talker = talker
        self.device, self.dtype = talker.device, talker.activation_dtype
        self.bucket = bucket
        self.cfg = talker.cfg
        tc = talker.cfg.transformer
        cc = talker.code_predictor.cfg.transformer
        steps = talker.code_predictor.num_steps
        self.cp_cache = StaticKVCache(
            cc.num_layers, 1, cc.num_kv_heads, steps + 1, cc.head_dim, self.device, self.dtype
        )
        self._talker_shape = (tc.num_layers, 1, tc.num_kv_heads, tc.head_dim)
        self.cache: StaticKVCache | None = None
        self._ensure_capacity(initial_capacity)
        V, H = self.cfg.vocab_size, self.cfg.hidden_size
        dev = self.device

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.state = FrameState(
            hidden=zeros(1, 1, H, dtype=self.dtype),
            code0=zeros(1, dtype=torch.long),
            frame=zeros(1, 16, dtype=torch.long),
            pos=zeros(1, dtype=torch.long),
            frame_index=zeros(1, dtype=torch.long),
            seen=zeros(1, V, dtype=torch.bool),
            text_row=zeros(1, 1, H, dtype=self.dtype),
            noise0=torch.ones(1, V, device=dev),
            noise_cp=torch.ones(steps, talker.code_predictor.cfg.vocab_size, device=dev),
            penalty=torch.ones(1, 1, device=dev),
            talker_sampling=SamplerSettings.make(False, 1.0, 0, 1.0, 1, dev),
            cp_sampling=SamplerSettings.make(False, 1.0, 0, 1.0, 1, dev),
        )
        self.suppress = talker_logit_mask(V, self.cfg.codec_eos_id, dev)
        self.eos = torch.tensor([self.cfg.codec_eos_id], device=dev)
        st = self.state
        self.timer = None  # a PhaseTimer while benchmarking
        self.host_pos = 0  # s.pos mirrored on the host (CPU kernels take it as an int)
        self.cpu_talker = self.cpu_cp = None
        if self.device.type == "cpu":
            self._use_cpu_kernels()
        self.graphs = GraphRunner(
            enabled=use_cuda_graphs and self.device.type == "cuda",
            buffers=lambda: [st.hidden, st.code0, st.frame, st.pos, st.frame_index, st.seen],
        )
        if use_compile:
            self._compile()

    def _compile(self) -> None:
        """torch.compile the fixed-shape phases: the 15-step code predictor and the code-0 pick.

        The code predictor is where compiling pays (dozens of small ops per step fused; published
        35 -> 19 ms/frame on a 4090); the talker step attends a span that changes every 64 frames
        and would recompile, so it stays eager (and graphed). The compiled functions are what
        the CUDA graphs capture. On the CPU with our C++ kernels there is nothing left to fuse.
        """
        if self.cpu_cp is not None:
            log.info("use_compile ignored: the CPU path already runs fused C++ layer kernels")
            return
        # inductor's default mode: "reduce-overhead" brings its own CUDA graphs, which fight ours
        self._predict_residual = torch.compile(self._predict_residual, dynamic=False)
        self._pick_code0 = torch.compile(self._pick_code0, dynamic=False)

    def _use_cpu_kernels(self) -> None:
        """On the CPU, step both decoder stacks with our C++ layer kernel when possible."""
        from ownvoice.engine.fast.arena import Arena
        from ownvoice.engine.fast.cpu_stack import CpuStack
        from ownvoice.engine.fast.packed import PackedLinear
        from ownvoice.kernels import cpu_kernels

        kernels = cpu_kernels()
        cp = self.talker.code_predictor
        if kernels is None or not (
            CpuStack.supported(self.talker.model) and CpuStack.supported(cp.model)
        ):
            return
        self.cpu_talker = CpuStack(self.talker.model, kernels)
        self.cpu_cp = CpuStack(cp.model, kernels)
        # the heads are streamed every frame too: into huge pages with the layers
        heads = [self.talker.codec_head, *cp.lm_head]
        if isinstance(cp.small_to_mtp_projection, PackedLinear):
            heads.append(cp.small_to_mtp_projection)
        arena = Arena([h.weight for h in heads])
        for head in heads:
            head.weight = arena.take(head.weight)
        positions = torch.arange(cp.num_steps + 1)[None]
        cos, sin = rope_cos_sin(positions, cp.model.inv_freq, torch.float32)
        self.cp_rope = (cos[0].contiguous(), sin[0].contiguous())

    # ---- buffers ---------------------------------------------------------------------------

    def _ensure_capacity(self, needed: int) -> None:
        """Grow the talker cache (by doubling, keeping its contents) to hold `needed` positions."""
        if self.cache is not None and self.cache.max_len >= needed:
            return
        capacity = self.bucket
        while capacity < needed:
            capacity *= 2
        layers, batch, heads, dim = self._talker_shape
        new = StaticKVCache(layers, batch, heads, capacity, dim, self.device, self.dtype)
        if self.cache is not None:
            n = self.cache.max_len
            new.k[:, :, :, :n] = self.cache.k
            new.v[:, :, :, :n] = self.cache.v
            self.graphs.reset()  # captured graphs point at the old buffers
        self.cache = new
        # RoPE for every position the cache can hold, looked up by the device-side position
        positions = torch.arange(capacity, device=self.device)[None]
        cos, sin = rope_cos_sin(positions, self.talker.model.inv_freq, self.dtype)
        self.rope_cos, self.rope_sin = cos[0], sin[0]  # (capacity, head_dim)

    # ---- the phases (fixed shapes; each is what a graph captures) -------------------------------

    def _pick_code0(self) -> None:
        s = self.state
        logits = self.talker.codec_head(s.hidden)[:, -1].float()  # (1, V)
        logits = penalize_seen(logits, s.seen, s.penalty)
        too_early = (s.frame_index < MIN_FRAMES)[:, None] & (
            torch.arange(logits.shape[-1], device=logits.device) == self.eos
        )
        logits = logits.masked_fill(too_early | self.suppress, NEG_INF)
        s.code0.copy_(sample_no_sync(logits, s.talker_sampling, s.noise0))

    def _predict_residual(self) -> None:
        """Codebooks 1..15 of the frame whose codebook 0 is `code0`; 15 unrolled steps."""
        s, cp, talker = self.state, self.talker.code_predictor, self.talker
        s.seen.scatter_(1, s.code0[:, None], True)
        s.frame[:, 0] = s.code0
        x = torch.cat([s.hidden, talker.embed_codec(s.code0[:, None])], dim=1)  # (1, 2, H)
        start = 0
        for step in range(1, cp.num_steps + 1):
            n = x.shape[1]
            positions = torch.arange(start, start + n, device=x.device)[None]
            h = cp.model(cp.small_to_mtp_projection(x), positions, self.cp_cache.at(start))
            start += n
            logits = cp.lm_head[step - 1](h[:, -1]).float()
            noise = s.noise_cp[step - 1 : step]
            code = sample_no_sync(logits, s.cp_sampling, noise)
            s.frame[:, step] = code
            x = cp.embed_code(step, code[:, None])

    def _predict_residual_cpu(self) -> None:
        """`_predict_residual` one token at a time through the C++ layer kernel."""
        s, cp, talker = self.state, self.talker.code_predictor, self.talker
        s.seen.scatter_(1, s.code0[:, None], True)
        s.frame[:, 0] = s.code0
        cos, sin = self.cp_rope

        def feed(rows: torch.Tensor, pos: int) -> torch.Tensor:
            x = cp.small_to_mtp_projection(rows)
            n = rows.shape[1]
            return self.cpu_cp.step(x, pos, self.cp_cache, cos[pos : pos + n], sin[pos : pos + n])

        # positions 0 and 1 (talker hidden, codebook 0) in one pass, as the eager path does
        h = feed(torch.cat([s.hidden, talker.embed_codec(s.code0[:, None])], dim=1), 0)
        for step in range(1, cp.num_steps + 1):
            logits = cp.lm_head[step - 1](h[:, -1]).float()
            code = sample_no_sync(logits, s.cp_sampling, s.noise_cp[step - 1 : step])
            s.frame[:, step] = code
            if step < cp.num_steps:
                h = feed(cp.embed_code(step, code[:, None]), step + 1)

    def _talker_step_cpu(self) -> None:
        """`_talker_step` through the C++ layer kernel, attending exactly the filled positions."""
        s, talker = self.state, self.talker
        x = talker.embed_frames(s.frame[:, None]) + s.text_row
        pos = self.host_pos
        hidden = self.cpu_talker.step(
            x, pos, self.cache, self.rope_cos[pos : pos + 1], self.rope_sin[pos : pos + 1]
        )
        s.hidden.copy_(hidden)
        s.pos.add_(1)
        self.host_pos += 1
        s.frame_index.add_(1)
        self._pick_code0()

    def _talker_step(self, span: int) -> None:
        """Feed `frame` + `text_row` at `pos`, then pick the next code0."""
        s, talker = self.state, self.talker
        x = talker.embed_frames(s.frame[:, None]) + s.text_row  # (1, 1, H)
        cache = BucketKVCache(self.cache, s.pos)
        cache.span = span
        mask = (torch.arange(span, device=x.device) <= s.pos)[None, None, None]
        rope = (self.rope_cos[s.pos][None], self.rope_sin[s.pos][None])  # (1, 1, head_dim)
        hidden = talker.model(x, s.pos[None], cache, mask=mask, rope=rope)
        s.hidden.copy_(hidden)
        s.pos.add_(1)
        s.frame_index.add_(1)
        self._pick_code0()

    # ---- one synthesis -------------------------------------------------------------------------

    @torch.inference_mode()
    def frames(
        self,
        prompt: Prompt,
        sampling: SamplingOptions,
        max_frames: int,
        generator: torch.Generator | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Generator[torch.Tensor, None, str]:
        """Yield frames (1, 16) int64 (fresh tensors); return the stop reason."""
        s = self.state
        timer = self.timer or _untimed
        length = prompt.embeds.shape[1]
        self._ensure_capacity(length + max_frames)
        self._configure(sampling)
        s.seen.zero_()
        s.frame_index.zero_()
        s.pos.fill_(length)
        self.host_pos = length
        # 1) prefill: variable length, so never graphed
        with timer("prefill"):
            if self.cpu_talker is not None:
                hidden = self.cpu_talker.step(
                    prompt.embeds, 0, self.cache, self.rope_cos[:length], self.rope_sin[:length]
                )
            else:
                positions = torch.arange(length, device=self.device)[None]
                hidden = self.talker.model(prompt.embeds, positions, self.cache.at(0))
            s.hidden.copy_(hidden[:, -1:])
            self._draw_noise(sampling, generator)
            self.graphs.run("head", self._pick_code0)
        for k in range(max_frames):
            if should_stop is not None and should_stop():
                return "cancelled"
            # 2) the one host sync per frame
            if int(s.code0) == self.cfg.codec_eos_id:
                return "eos"
            with timer("code_predictor"):
                if self.cpu_cp is not None:
                    self._predict_residual_cpu()
                else:
                    self.graphs.run("cp", self._predict_residual)
            yield s.frame.clone()
            if k == max_frames - 1:
                break
            row = prompt.trailing[:, k : k + 1] if k < prompt.trailing.shape[1] else prompt.pad
            s.text_row.copy_(row)
            with timer("talker"):
                self._draw_noise(sampling, generator)
                if self.cpu_talker is not None:
                    self._talker_step_cpu()
                else:
                    span = min(self.cache.max_len, _round_up(length + k + 1, self.bucket))
                    self.graphs.run(f"step/{span}", lambda span=span: self._talker_step(span))
        return "max_frames"

    def _configure(self, sampling: SamplingOptions) -> None:
        s, dev = self.state, self.device
        s.talker_sampling.copy_(
            SamplerSettings.make(
                sampling.do_sample, sampling.temperature, sampling.top_k, sampling.top_p, 1, dev
            )
        )
        s.cp_sampling.copy_(
            SamplerSettings.make(
                sampling.sub_do_sample,
                sampling.sub_temperature,
                sampling.sub_top_k,
                sampling.sub_top_p,
                1,
                dev,
            )
        )
        s.penalty.fill_(sampling.repetition_penalty)

    def _draw_noise(self, sampling: SamplingOptions, generator: torch.Generator | None) -> None:
        s = self.state
        if sampling.do_sample:
            s.noise0.exponential_(generator=generator)
        if sampling.sub_do_sample:
            s.noise_cp.exponential_(generator=generator)


@contextmanager
def _untimed(name: str):
    yield


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
