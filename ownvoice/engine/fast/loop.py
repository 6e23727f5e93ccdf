"""The fast frame loop over a batch of sequences: one step advances every row by one frame.

Rows occupy slots 0..n-1 of preallocated buffers (`Slots`); each phase below is a function of
those buffers with fixed shapes, so on CUDA each (phase, batch bucket) can be captured as a
graph and replayed, and on the CPU the same functions simply run. Per step:

    1) talker step: feed every row's last frame back, pick its code0 -- graph "step/<bucket>/<span>"
    2) host: read every row's code0 (the one sync) -- retire rows that hit EOS or were cancelled
    3) code predictor: codebooks 1..15 of every row, 15 sub-steps  -- graph "cp/<bucket>"
    4) emit each row's frame; retire rows at their frame cap

A sequence joins between steps: its prompt is prefilled alone (prompts differ in length), and
it makes its first frame alone at once (code0, then the code predictor), so its first audio
does not wait for a batched step; from the next step on it is one more row. Every row keeps its own
sampling settings, random stream, repetition-penalty history, position and trailing text, so
(with the kernel backend, whose reductions do not depend on the batch) a sequence produces the
same codes alone or beside others. The written order of random draws per row is the solo one:
before each code0, codebook-0 noise then code-predictor noise.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, fields

import torch

from ownvoice.engine.fast.backends import KernelBackend, TorchBackend, round_up
from ownvoice.engine.fast.graphs import GraphRunner
from ownvoice.engine.fast.sampler import NEG_INF, SamplerSettings, penalize_seen, sample_no_sync
from ownvoice.engine.sampling import talker_logit_mask
from ownvoice.engine.sequence import FrameEvent, Sequence
from ownvoice.errors import free_device_memory, is_out_of_memory
from ownvoice.model.talker import Talker

log = logging.getLogger(__name__)

MIN_FRAMES = 2  # EOS is not allowed before this many frames (upstream min_new_tokens)
INITIAL_FRAMES = 256  # talker cache room for frames at join; it doubles when a row needs more
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class Slots:
    """Per-row buffers, (max_batch, ...). `frame` is static memory: copy to keep."""

    hidden: torch.Tensor  # (B, 1, H) talker output after its final norm
    code0: torch.Tensor  # (B,) next codebook-0 code
    frame: torch.Tensor  # (B, 16) the last frame's codes
    pos: torch.Tensor  # (B,) position of the next talker input
    frame_index: torch.Tensor  # (B,) frames generated so far
    seen: torch.Tensor  # (B, V) codebook-0 codes generated so far (repetition penalty)
    text_row: torch.Tensor  # (B, 1, H) trailing text row for the next talker input
    noise0: torch.Tensor  # (B, V) Exp(1) noise for codebook 0
    noise_cp: torch.Tensor  # (B, 15, 2048) Exp(1) noise for codebooks 1..15
    penalty: torch.Tensor  # (B, 1)
    talker_sampling: SamplerSettings
    cp_sampling: SamplerSettings

    def tensors(self) -> list[torch.Tensor]:
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, SamplerSettings):
                out += [value.greedy, value.temperature, value.top_k, value.top_p]
            else:
                out.append(value)
        return out


class FrameLoop:
    """Owns the buffers, caches and graphs of one talker. Used by one thread at a time."""

    def __init__(
        self,
        talker: Talker,
        max_batch: int = 8,
        use_cuda_graphs: bool = True,
        use_compile: bool = False,
        kernels=None,
    ):
        self.talker, self.cfg = talker, talker.cfg
        self.device, self.dtype = talker.device, talker.activation_dtype
        self.max_batch = max_batch
        if kernels is not None and self.device.type == "cpu" and _kernels_fit(talker):
            self.backend = KernelBackend(talker, kernels, max_batch)
        else:
            self.backend = TorchBackend(talker, max_batch)
        cp = talker.code_predictor
        V, H, B = self.cfg.vocab_size, self.cfg.hidden_size, max_batch
        dev = self.device

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.slots = Slots(
            hidden=zeros(B, 1, H, dtype=self.dtype),
            code0=zeros(B, dtype=torch.long),
            frame=zeros(B, cp.cfg.num_code_groups, dtype=torch.long),
            pos=zeros(B, dtype=torch.long),
            frame_index=zeros(B, dtype=torch.long),
            seen=zeros(B, V, dtype=torch.bool),
            text_row=zeros(B, 1, H, dtype=self.dtype),
            noise0=torch.ones(B, V, device=dev),
            noise_cp=torch.ones(B, cp.num_steps, cp.cfg.vocab_size, device=dev),
            penalty=torch.ones(B, 1, device=dev),
            talker_sampling=SamplerSettings.make(False, 1.0, 0, 1.0, B, dev),
            cp_sampling=SamplerSettings.make(False, 1.0, 0, 1.0, B, dev),
        )
        self.suppress = talker_logit_mask(V, self.cfg.codec_eos_id, dev)
        self.eos = torch.tensor([self.cfg.codec_eos_id], device=dev)
        self.rows: list[Sequence] = []
        self.waiting = 0  # rows that sat out the last step for want of text
        self.timer = None  # a PhaseTimer while benchmarking
        self.backend_name = "cpu-kernels" if self.exact_batching else "torch"
        self.compiled = False
        self.graphs = GraphRunner(
            enabled=use_cuda_graphs and self.device.type == "cuda", buffers=self.slots.tensors
        )
        if use_compile:
            self._compile()

    @property
    def exact_batching(self) -> bool:
        """True when a row's codes cannot depend on the other rows (the CPU kernel backend)."""
        return self.backend.exact_batching

    def _compile(self) -> None:
        """torch.compile the code-predictor and code-0 phases (fixed shapes per batch bucket).

        The code predictor is where compiling pays (dozens of small ops per step fused); the
        talker step attends a span that changes every 64 frames and would recompile, so it stays
        eager (and graphed). The compiled functions are what the CUDA graphs capture. With our
        CPU kernels there is nothing left to fuse.
        """
        if isinstance(self.backend, KernelBackend):
            log.info("use_compile ignored: the CPU path already runs fused C++ layer kernels")
            return
        # inductor's default mode: "reduce-overhead" brings its own CUDA graphs, which fight ours
        self._predict_residual = torch.compile(self._predict_residual, dynamic=False)
        self._pick_code0 = torch.compile(self._pick_code0, dynamic=False)
        self.compiled = True

    # ---- the phases (fixed shapes per bucket; each is what a graph captures) --------------------

    def _pick_code0(self, rows: slice) -> None:
        s = self.slots
        logits = self.talker.codec_head(s.hidden[rows])[:, -1].float()  # (n, V)
        logits = penalize_seen(logits, s.seen[rows], s.penalty[rows])
        too_early = (s.frame_index[rows] < MIN_FRAMES)[:, None] & (
            torch.arange(logits.shape[-1], device=logits.device) == self.eos
        )
        logits = logits.masked_fill(too_early | self.suppress, NEG_INF)
        s.code0[rows] = sample_no_sync(logits, _rows_of(s.talker_sampling, rows), s.noise0[rows])

    def _predict_residual(self, rows: slice) -> None:
        """Codebooks 1..15 of `rows`, whose codebook 0 is `code0`; 15 unrolled steps."""
        s, cp, talker = self.slots, self.talker.code_predictor, self.talker
        code0 = s.code0[rows]
        s.seen[rows] = s.seen[rows].scatter(1, code0[:, None], True)
        s.frame[rows, 0] = code0
        x = torch.cat([s.hidden[rows], talker.embed_codec(code0[:, None])], dim=1)  # (n, 2, H)
        sampling = _rows_of(s.cp_sampling, rows)
        start = 0
        for step in range(1, cp.num_steps + 1):
            h = self.backend.code_predictor(rows, cp.small_to_mtp_projection(x), start)
            start += x.shape[1]
            logits = cp.lm_head[step - 1](h[:, -1]).float()
            code = sample_no_sync(logits, sampling, s.noise_cp[rows, step - 1])
            s.frame[rows, step] = code
            if step < cp.num_steps:
                x = cp.embed_code(step, code[:, None])

    def _talker_step(self, n: int, span: int) -> None:
        """Feed rows' `frame` + `text_row` at their `pos`, then pick each row's next code0."""
        s, talker = self.slots, self.talker
        rows = slice(0, n)
        x = talker.embed_frames(s.frame[rows][:, None]) + s.text_row[rows]  # (n, 1, H)
        s.hidden[rows] = self.backend.talker(n, x, s.pos[rows], span)
        s.pos[rows] += 1
        s.frame_index[rows] += 1
        self._pick_code0(rows)

    # ---- rows joining and leaving --------------------------------------------------------------

    @property
    def free_slots(self) -> int:
        return self.max_batch - len(self.rows)

    @torch.inference_mode()
    def join(self, seq: Sequence) -> FrameEvent:
        """Prefill a new sequence alone, make its first frame, and make it a row.

        Returns its first frame's event (or its end: EOS, or cancelled before it began).
        All or nothing: if anything here fails (its settings, its prefill running out of
        memory), the sequence is no row and the other rows are as they were; the error is
        raised to the caller, whose request alone it ends."""
        if not self.free_slots:
            raise RuntimeError(f"batch full ({self.max_batch} rows); wait for a row to leave")
        s, slot = self.slots, len(self.rows)
        timer = self.timer or _untimed
        length = seq.prompt.embeds.shape[1]
        self.rows.append(seq)
        seq.slot, seq.position = slot, length
        try:
            # everything below writes only its own slot (free until now) and its own cache
            self.backend.attach(slot, length + min(seq.max_frames, INITIAL_FRAMES))
            self._configure(slot, seq)
            one = slice(slot, slot + 1)
            with timer("prefill"):
                hidden = self.backend.prefill(slot, seq.prompt.embeds)
                s.hidden[slot] = hidden[0, -1:]
                self._draw_noise(slot, seq)
                self._pick_code0(one)
            return self._finish_frames([seq], one)[0]
        except BaseException:
            if seq.slot is not None:
                self._leave(seq)
            raise

    def _finish_frames(self, seqs: list[Sequence], rows: slice) -> list[FrameEvent]:
        """After code0 was picked for `rows` (holding `seqs`): end the ones at EOS or cancelled,
        run the code predictor for the others, emit their frames, end the ones at their cap."""
        s, timer = self.slots, self.timer or _untimed
        events: list[FrameEvent] = []
        # the one host sync: who ended?
        codes = s.code0[rows].tolist()
        for seq, code in zip(seqs, codes, strict=True):
            reason = (
                "cancelled" if seq.cancelled else "eos" if code == self.cfg.codec_eos_id else None
            )
            if reason:
                self._leave(seq)
                events.append(FrameEvent(seq, None, reason))
        # in slot order (leaving rows moved others into their slots)
        going = sorted((seq for seq in seqs if seq.slot is not None), key=lambda q: q.slot)
        if not going:
            return events
        if rows.start == 0:  # a step: the batched phase over the rows that go, at 0..k-1
            self._to_front(going)
            k = len(going)
            rows = slice(0, k)
            bucket = self._bucket(k, exact=k < len(self.rows))
            with timer("code_predictor"):
                self._retry_out_of_memory(
                    lambda: self.graphs.run(
                        f"cp/{bucket}", lambda: self._predict_residual(slice(0, bucket))
                    )
                )
        else:  # one row joining, at its slot
            (seq,) = going
            rows = slice(seq.slot, seq.slot + 1)
            with timer("code_predictor"):
                self._predict_residual(rows)
        # emit; rows at their cap end here (their last frame gets no talker step)
        frames = s.frame[rows].clone()
        for seq, frame in zip(list(going), frames, strict=True):
            seq.frames += 1
            done = seq.frames >= seq.max_frames
            events.append(FrameEvent(seq, frame, "max_frames" if done else None))
            if done:
                self._leave(seq)
        return events

    def _configure(self, slot: int, seq: Sequence) -> None:
        s, sp = self.slots, seq.sampling
        s.seen[slot] = False
        s.frame_index[slot] = 0
        s.pos[slot] = seq.position
        s.penalty[slot] = sp.repetition_penalty
        for settings, args in (
            (s.talker_sampling, (sp.do_sample, sp.temperature, sp.top_k, sp.top_p)),
            (s.cp_sampling, (sp.sub_do_sample, sp.sub_temperature, sp.sub_top_k, sp.sub_top_p)),
        ):
            one = SamplerSettings.make(*args, 1, self.device)
            for name in ("greedy", "temperature", "top_k", "top_p"):
                getattr(settings, name)[slot] = getattr(one, name)[0]

    def _draw_noise(self, slot: int, seq: Sequence) -> None:
        s = self.slots
        if seq.sampling.do_sample:
            s.noise0[slot].exponential_(generator=seq.generator)
        if seq.sampling.sub_do_sample:
            s.noise_cp[slot].exponential_(generator=seq.generator)

    def _leave(self, seq: Sequence) -> None:
        """Free a row's slot; the last row moves into it so rows stay 0..n-1."""
        slot, last = seq.slot, len(self.rows) - 1
        self.backend.detach(slot)
        if slot != last:
            mover = self.rows[last]
            for t in self.slots.tensors():
                t[slot] = t[last]
            self.backend.move(last, slot)
            self.rows[slot], mover.slot = mover, slot
        self.rows.pop()
        seq.slot = None

    # ---- one step over every row -------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> list[FrameEvent]:
        """Advance every row by one frame; returns one event per row that made a frame or ended.

        A row whose text is still arriving (an open text) and has no row for this frame sits
        the step out: it keeps its place, draws no noise and makes no frame (`waiting` counts
        them); the rows that go are moved to slots 0..m-1 first."""
        if not self.rows:
            return []
        s, timer = self.slots, self.timer or _untimed
        events, ready = [], []
        with timer("talker"):
            # each row's own part of the step (its text, its cache, its noise); a row whose
            # part fails ends with that error alone, the others go on
            for seq in list(self.rows):
                try:
                    going = self._prepare(seq)
                except Exception as e:
                    self._leave(seq)
                    seq.fail(e)
                    events.append(FrameEvent(seq, None, "error"))
                    continue
                if going:
                    ready.append(seq)
                elif seq.cancelled:  # nothing to wait for any more
                    self._leave(seq)
                    events.append(FrameEvent(seq, None, "cancelled"))
            self.waiting = len(self.rows) - len(ready)
            if not ready:
                return events
            self._to_front(ready)
            m = len(ready)
            if getattr(self.backend, "grown", False):
                self.graphs.reset()  # captured graphs point at the old buffers
                self.backend.grown = False
            # 1) feed every row's last frame back and pick its next code0
            bucket = self._bucket(m, exact=self.waiting > 0)
            span = self._span(ready)
            counters = (s.pos.clone(), s.frame_index.clone())

            def talker_step() -> None:
                self.graphs.run(f"step/{bucket}/{span}", lambda: self._talker_step(bucket, span))

            def undo() -> None:  # what a talker step changes besides what it recomputes
                s.pos.copy_(counters[0])
                s.frame_index.copy_(counters[1])

            self._retry_out_of_memory(talker_step, undo)
            for seq in ready:
                seq.position += 1
        # 2)-4) who ended, codebooks 1..15 for the rest, emit
        return events + self._finish_frames(ready, slice(0, m))

    def _prepare(self, seq: Sequence) -> bool:
        """A row's own part of a step, in its slot: its text row, room in its cache, its noise.
        False when it sits the step out (its text has not arrived that far)."""
        row = seq.text_row(seq.frames - 1)
        if row is None:
            return False
        self.backend.ensure(seq.slot, seq.position + 1)
        self.slots.text_row[seq.slot] = row[0]
        self._draw_noise(seq.slot, seq)
        return True

    def _retry_out_of_memory(self, phase, undo=lambda: None) -> None:
        """Run a batched phase; if the device runs out of memory, free its cached blocks and
        run it once more. The phases recompute everything they write from the slots (the noise
        was drawn before), so a second run gives the same codes; `undo` resets what a phase
        only adds to. A second failure is raised: every row of the step ends with it."""
        try:
            phase()
        except Exception as e:
            if not is_out_of_memory(e):
                raise
            log.warning(
                "out of memory in a batched step of %d rows; trying once more", len(self.rows)
            )
            free_device_memory()
            undo()
            phase()

    def _to_front(self, seqs: list[Sequence]) -> None:
        """Move `seqs` (rows of the batch) to slots 0..len-1, in their order."""
        for i, seq in enumerate(seqs):
            if seq.slot != i:
                self._swap(i, seq.slot)

    def _swap(self, a: int, b: int) -> None:
        for t in self.slots.tensors():
            t[[a, b]] = t[[b, a]]
        self.backend.swap(a, b)
        self.rows[a], self.rows[b] = self.rows[b], self.rows[a]
        self.rows[a].slot, self.rows[b].slot = a, b

    def _bucket(self, n: int, exact: bool = False) -> int:
        """Rows a phase runs over: exactly n, or (under CUDA graphs) the next bucket, whose
        extra rows compute unused values in free slots. `exact` when rows past n wait for
        text: a bucket would advance them."""
        if exact or not self.graphs.enabled:
            return n
        return next((b for b in BATCH_BUCKETS if b >= n), self.max_batch)

    def _span(self, rows: list[Sequence]) -> int:
        """Cache positions the talker step reads (torch backend): a multiple of 64 covering every
        row's next position, so one graph serves 64 frames."""
        if isinstance(self.backend, KernelBackend):
            return 0
        longest = max(seq.position for seq in rows) + 1
        return min(self.backend.capacity, round_up(longest, self.backend.bucket))

    def cancel_all(self) -> list[FrameEvent]:
        events = [FrameEvent(seq, None, "cancelled") for seq in list(self.rows)]
        for event in events:
            self._leave(event.seq)
        return events


def _rows_of(settings: SamplerSettings, rows: slice) -> SamplerSettings:
    return SamplerSettings(
        settings.greedy[rows],
        settings.temperature[rows],
        settings.top_k[rows],
        settings.top_p[rows],
    )


def _kernels_fit(talker: Talker) -> bool:
    from ownvoice.engine.fast.cpu_stack import CpuStack

    return CpuStack.supported(talker.model) and CpuStack.supported(talker.code_predictor.model)


@contextmanager
def _untimed(name: str):
    yield
