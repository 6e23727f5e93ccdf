"""Hand-made mutants of what mutmut cannot mutate: the C++ kernels and the fast decode path, and
the life of a speech request (service/speech.py and its front ends: tests that need a server).

Each is one textual change (it must occur exactly once in its file) and the tests that must
notice it. `scripts/mutation.py` applies them one at a time in a copy of the working tree, with
a kernel build cache of its own, and runs those tests; a mutant survives when they pass.
"""

from __future__ import annotations

from dataclasses import dataclass

KERNELS = "ownvoice/kernels/cpu_ops.cpp"
FLOAT_TILE = "ownvoice/kernels/float_tile.h"
FLOAT_512 = "ownvoice/kernels/float_avx512.cpp"  # caught only on a CPU with AVX-512
BF16_DOT = "ownvoice/kernels/bf16dot_avx512.cpp"  # caught only on a CPU with AVX512-BF16
BF16_OPS = "ownvoice/kernels/bf16_ops.cpp"
Q8_512 = "ownvoice/kernels/intdot_avx512vnni.cpp"  # caught only on a CPU with AVX-512 VNNI
SPEECH_DECODER = "ownvoice/engine/fast/speech_decoder.py"
LOOP = "ownvoice/engine/fast/loop.py"
SAMPLER = "ownvoice/engine/fast/sampler.py"
AUDIO_OUT = "ownvoice/engine/audio_out.py"
Q8 = "ownvoice/kernels/q8_tile.h"
Q4 = "ownvoice/kernels/q4_tile.h"

KERNEL_TESTS = ["tests/engine/test_kernels.py", "tests/engine/test_fast_path.py"]
BF16_TESTS = ["tests/engine/test_bf16_products.py"]
DECODER_TESTS = [
    "tests/codec/test_codec_streaming.py",
    "tests/engine/test_fast_path.py::test_fast_equals_eager_greedy",
]
BATCH_TESTS = ["tests/engine/test_batching.py", "tests/engine/test_fast_path.py"]
PARITY_FAST = [
    "tests/parity/test_modes.py::test_the_fast_path_matches_the_reference_greedy",
    "tests/engine/test_fast_path.py",
]
SAMPLING_TESTS = ["tests/engine/test_sampler.py", "tests/parity/test_sampled_distribution.py"]
OVERLAP_TESTS = ["tests/engine/test_decode_worker.py"]
LIFE_TESTS = ["tests/server/test_one_life.py"]
SHUTDOWN_TESTS = ["tests/server/test_shutdown.py"]
WYOMING_LIMITS = ["tests/wyoming/test_wyoming_limits.py"]
FAULT_TESTS = ["tests/engine/test_fault_isolation.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: list[str]


MUTANTS = [
    # ---- 512-bit float tiles: same bits as the AVX2 ones or a test fails ----
    Mutant(
        "kernel 512: bf16 lanes taken as rows in order",
        FLOAT_512,
        "static constexpr int64_t row(int lane) { return (lane >> 1) + 8 * (lane & 1); }",
        "static constexpr int64_t row(int lane) { return lane; }",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel 512: second panel of a pair skipped",
        FLOAT_512,
        "for (; p + 2 <= p1; p += 2) panel_rows<Fmt, 2>(b, p);",
        "for (; p + 2 <= p1; p += 2) panel_rows<Fmt, 1>(b, p);",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel 512: rows past the last whole 8-row block dropped",
        FLOAT_512,
        "for (int64_t m = 0; m < b.M; m += C) {",
        "for (int64_t m = 0; m + C <= b.M; m += C) {",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel 512: a few-row tile's fourth panel skipped",
        FLOAT_512,
        "tile_rows<Fmt, 4, 6>(b.M, w + p * b.K * PANEL",
        "tile_rows<Fmt, 3, 6>(b.M, w + p * b.K * PANEL",
        KERNEL_TESTS,
    ),
    # ---- int8 products of eight rows and more in 512-bit tiles ----
    Mutant(
        "kernel int8 512: second panel of a pair skipped",
        Q8_512,
        "for (int64_t m = 0; m < full; m += Q8_WIDE_ROWS) q8_tile512<2, Q8_WIDE_ROWS>(q, p, m);",
        "for (int64_t m = 0; m < full; m += Q8_WIDE_ROWS) q8_tile512<1, Q8_WIDE_ROWS>(q, p, m);",
        ["tests/engine/test_kernels.py"],
    ),
    Mutant(
        "kernel int8 512: the last rows scaled as the first",
        Q8_512,
        "rest.xscale = q.xscale + full;",
        "rest.xscale = q.xscale;",
        ["tests/engine/test_kernels.py"],
    ),
    # ---- bf16 dot products (the bf16 speech decoder) ----
    Mutant(
        "kernel bf16: rows past the last whole 8-row block dropped",
        BF16_DOT,
        "for (int64_t m = 0; m < b.M; m += C) {",
        "for (int64_t m = 0; m + C <= b.M; m += C) {",
        BF16_TESTS,
    ),
    Mutant(
        "kernel bf16: the last pair of columns left out",
        BF16_DOT,
        "for (int64_t k = k0; k < k0 + r.seg; ++k) {",
        "for (int64_t k = k0; k < k0 + r.seg - (k0 + r.seg == K2); ++k) {",
        BF16_TESTS,
    ),
    Mutant(
        "kernel bf16: a partial panel's rows stored past N",
        BF16_DOT,
        "N - n >= PANEL ? __mmask16(0xFFFF) : __mmask16((1u << (N - n)) - 1)",
        "__mmask16(0xFFFF)",
        BF16_TESTS,
    ),
    Mutant(
        "kernel bf16: a conversion's odd tail not rounded",
        BF16_DOT,
        "const __mmask16 lo = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);",
        "const __mmask16 lo = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i - 1)) - 1);",
        BF16_TESTS,
    ),
    Mutant(
        "kernel bf16: a convolution's taps read without the dilation",
        BF16_OPS,
        "PairRows{pairs.data() + b * T * C2, C2, C2, dilation * C2}",
        "PairRows{pairs.data() + b * T * C2, C2, C2, C2}",
        BF16_TESTS,
    ),
    # ---- C++ kernels (class 1: tails and remainders) ----
    Mutant(
        "kernel: last lone panel dropped",
        FLOAT_TILE,
        "for (; p < p1; ++p) tile<Fmt, 1, R>",
        "for (; p + 1 < p1; ++p) tile<Fmt, 1, R>",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: rows 5 of a 6-row tile remainder dropped",
        FLOAT_TILE,
        "case 5: return few_rows<Fmt, 5>(w, rest, K, N, yr, ldy, p0, p1);",
        "case 5: return few_rows<Fmt, 4>(w, rest, K, N, yr, ldy, p0, p1);",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: rows 4 of a 6-row tile remainder dropped",
        FLOAT_TILE,
        "case 4: return few_rows<Fmt, 4>(w, rest, K, N, yr, ldy, p0, p1);",
        "case 4: return few_rows<Fmt, 3>(w, rest, K, N, yr, ldy, p0, p1);",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: last weight of each run of K skipped",
        FLOAT_TILE,
        "for (int64_t k = k0; k < k0 + r.seg; ++k) {",
        "for (int64_t k = k0; k + 1 < k0 + r.seg; ++k) {",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int8 scale of the panel's first row for all",
        Q8,
        "y[n] = float(out[j]) * sx * q.wscale[n];",
        "y[n] = float(out[j]) * sx * q.wscale[(p + i) * Q8_PANEL];",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int8 product drops the last column pair",
        Q8,
        "for (int64_t g = 0; g < G; ++g) {",
        "for (int64_t g = 0; g + 1 < G; ++g) {",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int4 offset taken off with the wrong weight",
        Q4,
        "_mm256_set1_epi32(8 * q.xsum[(m + c) * G + g])",
        "_mm256_set1_epi32(7 * q.xsum[(m + c) * G + g])",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int4 scale of the next group",
        Q4,
        "q.wscale + (p * G + g) * 16 + h * 8",
        "q.wscale + (p * G + (g + 1) % G) * 16 + h * 8",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int4 high nibbles' products dropped from a group's sum",
        Q4,
        "_mm256_add_epi32(lo_acc[h][c], hi_acc[h][c])",
        "_mm256_add_epi32(lo_acc[h][c], lo_acc[h][c])",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: int4 odd row of a batch dropped",
        Q4,
        "if (q.M > full) q4_tile<Dot, 1>(q, p, full);",
        "if (q.M > full + 1) q4_tile<Dot, 1>(q, p, full);",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: conv_rows keeps the GIL while it runs",
        KERNELS,
        'm.def("conv_rows", &conv_rows, free_gil,',
        'm.def("conv_rows", &conv_rows,',
        ["tests/engine/test_kernel_gil.py"],
    ),
    Mutant(
        "kernel: activations truncated instead of rounded",
        "ownvoice/kernels/intdot.cpp",
        "std::nearbyint(r[k] * inv)",
        "std::trunc(r[k] * inv)",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: AVX-512 VNNI int4 product with its operands swapped",
        "ownvoice/kernels/intdot_avx512vnni.cpp",
        "return _mm256_dpbusd_epi32(acc, u, s);",
        "return _mm256_dpbusd_epi32(acc, s, u);",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: bf16 high half loses a mantissa bit",
        FLOAT_TILE,
        "static_cast<int>(0xFFFF0000u)",
        "static_cast<int>(0xFFFE0000u)",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: attention misses the newest token's value",
        KERNELS,
        "for (int64_t s = 0; s <= last; ++s) axpy(",
        "for (int64_t s = 0; s < last; ++s) axpy(",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: rms norm divides by n - 1",
        KERNELS,
        "std::sqrt(float(ss / n) + eps)",
        "std::sqrt(float(ss / (n - 1)) + eps)",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: rope second half rotated the wrong way",
        KERNELS,
        "v[i + h] = b * cos[i + h] + a * sin[i + h];",
        "v[i + h] = b * cos[i + h] - a * sin[i + h];",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: values written at row 0's position (cross-row)",
        KERNELS,
        "std::memcpy(vc[m] + (j * cap[m] + pos[m]) * d",
        "std::memcpy(vc[m] + (j * cap[m] + pos[0]) * d",
        BATCH_TESTS,
    ),
    Mutant(
        "kernel: grouped heads mapped round-robin",
        KERNELS,
        "const float* kbase = kc[m] + (i / groups) * cap[m] * d;",
        "const float* kbase = kc[m] + (i % n_kv) * cap[m] * d;",
        KERNEL_TESTS,
    ),
    # ---- the fast decode loop and sampler (class 6) ----
    Mutant(  # (the margin above the bound is safety: any margin >= 0 decodes exactly)
        "decoder priming rounds its history bound down",
        "ownvoice/model/codec/streaming.py",
        "keep = math.ceil(self.decoder.waveform_history_frames) + PRIME_MARGIN_FRAMES",
        "keep = math.floor(self.decoder.waveform_history_frames) + PRIME_MARGIN_FRAMES",
        ["tests/codec/test_codec_streaming.py"],
    ),
    Mutant(
        "fast loop: EOS allowed after one frame",
        LOOP,
        "MIN_FRAMES = 2",
        "MIN_FRAMES = 1",
        BATCH_TESTS,
    ),
    Mutant(
        "fast loop: trailing text one frame late",
        LOOP,
        "row = seq.text_row(seq.frames - 1)",
        "row = seq.text_row(seq.frames)",
        PARITY_FAST,
    ),
    Mutant(
        "fast loop: repetition history not updated",
        LOOP,
        "s.seen[rows] = s.seen[rows].scatter(1, code0[:, None], True)",
        "s.seen[rows] = s.seen[rows]",
        PARITY_FAST,
    ),
    Mutant(
        "fast loop: a leaving row's slot keeps stale buffers",
        LOOP,
        "            for t in self.slots.tensors():\n                t[slot] = t[last]\n",
        "            for t in self.slots.tensors()[1:]:\n                t[slot] = t[last]\n",
        BATCH_TESTS,
    ),
    # ---- the speech decoder on the kernels ----
    Mutant(
        "kernel: a long product's last row block dropped",
        FLOAT_TILE,
        "M >= 2 * ROW_BLOCK ? (M + ROW_BLOCK - 1) / ROW_BLOCK : 1",
        "M >= 2 * ROW_BLOCK ? M / ROW_BLOCK : 1",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: convolution taps read without dilation",
        KERNELS,
        "const Rows r{x.data_ptr<float>() + b * T * C, C, C, dilation * C};",
        "const Rows r{x.data_ptr<float>() + b * T * C, C, C, C};",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: snake's sine reduced by the wrong multiple of pi",
        "ownvoice/kernels/snake.h",
        "_mm256_set1_ps(0.318309886183790671f)",
        "_mm256_set1_ps(0.159154943091895336f)",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel: snake's sine polynomial one term short",
        "ownvoice/kernels/snake.h",
        "__m256 p = _mm256_set1_ps(-2.5052108385441718775e-8f);",
        "__m256 p = _mm256_set1_ps(0.0f);",
        KERNEL_TESTS,
    ),
    Mutant(
        "speech decoder: transposed convolution taps in the wrong order",
        SPEECH_DECODER,
        "w = conv.weight.view(c_in, c_out, taps, s).flip(2)",
        "w = conv.weight.view(c_in, c_out, taps, s)",
        DECODER_TESTS,
    ),
    Mutant(
        "speech decoder: attention cache one frame short",
        SPEECH_DECODER,
        "keep = min(self.window - 1, k.shape[2])",
        "keep = min(self.window - 2, k.shape[2])",
        DECODER_TESTS,
    ),
    Mutant(
        "speech decoder: depthwise conv tail not carried",
        SPEECH_DECODER,
        "full = state.with_tail(id(self), x, self.dw_context)",
        "full = torch.cat([x.new_zeros(B, self.dw_context, C), x], dim=1)",
        DECODER_TESTS,
    ),
    Mutant(  # only differs when a row's position is a multiple of 64: long parity cases
        "fast loop: torch backend reads one position short",
        LOOP,
        "longest = max(seq.position for seq in rows) + 1",
        "longest = max(seq.position for seq in rows)",
        PARITY_FAST,
    ),
    Mutant(
        "sampler: top-k drops the k-th token",
        SAMPLER,
        "scaled.masked_fill(scaled < kth, NEG_INF)",
        "scaled.masked_fill(scaled <= kth, NEG_INF)",
        SAMPLING_TESTS,
    ),
    Mutant(
        "sampler: repetition penalty raises negative logits",
        SAMPLER,
        "torch.where(logits < 0, logits * penalty, logits / penalty)",
        "torch.where(logits < 0, logits / penalty, logits / penalty)",
        SAMPLING_TESTS,
    ),
    Mutant(
        "sampler: top-p keeps the token that crosses the mass",
        SAMPLER,
        "drop_sorted = (above >= s.top_p) & (s.top_p < 1.0)",
        "drop_sorted = (above > s.top_p + 0.05) & (s.top_p < 1.0)",
        SAMPLING_TESTS,
    ),
    Mutant(
        "sampler: ties past the candidates ranked anyway",
        SAMPLER,
        "(scaled >= kth).sum(-1, keepdim=True) <= most)",
        "(scaled >= kth).sum(-1, keepdim=True) <= most + 1)",
        SAMPLING_TESTS,
    ),
    Mutant(
        "sampler: candidates ranked in topk's order of ties",
        SAMPLER,
        "            ids, _ = torch.sort(ids, dim=-1)\n",
        "",
        SAMPLING_TESTS,
    ),
    # ---- decoding beside the generation ----
    Mutant(
        "overlap: float weights use the worker for a stream alone",
        AUDIO_OUT,
        "return playing >= self.overlap_from",
        "return playing >= 1",
        OVERLAP_TESTS,
    ),
    Mutant(
        "overlap: back in line without the worker's chunks first",
        AUDIO_OUT,
        "            yield from self.worker.results(wait=True)\n        for seq",
        "            pass\n        for seq",
        OVERLAP_TESTS,
    ),
    # ---- one life for every speech request ----
    Mutant(
        "life: speed not applied to a stream",
        "ownvoice/service/encode.py",
        "self.stretch = TimeStretch(speed, sample_rate) if speed != 1.0 else None",
        "self.stretch = None",
        LIFE_TESTS,
    ),
    Mutant(
        "life: streamed text never idle",
        "ownvoice/service/generation.py",
        "if self.text is not None and self.text.idle_seconds > self.idle_timeout_s:",
        "if False:",
        LIFE_TESTS,
    ),
    Mutant(
        "life: a shutdown after the answer began counted as an error",
        "ownvoice/service/speech.py",
        'if reason == "shutdown":  # the front end says so with an error (HTTP)\n'
        '                return "aborted"',
        'if reason == "shutdown":  # the front end says so with an error (HTTP)\n'
        '                return "error"',
        LIFE_TESTS,
    ),
    Mutant(
        "life: batch items take the queue's places too",
        "ownvoice/service/speech.py",
        "slot = admission.try_admit(spare=admission.queue_size)",
        "slot = admission.try_admit()",
        LIFE_TESTS,
    ),
    Mutant(
        "life: a cancelled sentence's partial file sent",
        "ownvoice/server/stream_sentence.py",
        "if self.held and (self.streaming or not (cancelled or failed)):",
        "if self.held:",
        LIFE_TESTS,
    ),
    Mutant(
        "life: no cap on queued utterances",
        "ownvoice/server/speech_stream.py",
        "        if len(self.active) >= most:\n",
        "        if False:\n",
        LIFE_TESTS,
    ),
    Mutant(
        "life: a WebSocket utterance not counted",
        "ownvoice/service/record.py",
        "metrics.requests.labels(status, fmt, stream, self.origin.endpoint).inc()",
        "metrics.requests.labels(status, fmt, stream, self.origin.endpoint).inc("
        "0 if self.origin.endpoint == 'websocket' else 1)",
        LIFE_TESTS,
    ),
    Mutant(
        "life: the drain does not wait for speech outside HTTP",
        "ownvoice/server/drain.py",
        "return self.in_flight == 0 and self.service.in_flight == 0",
        "return self.in_flight == 0",
        SHUTDOWN_TESTS,
    ),
    Mutant(
        "life: Wyoming without a connection cap",
        "ownvoice/wyoming/listener.py",
        "if len(self._connections) >= self.options.max_connections:",
        "if False:",
        WYOMING_LIMITS,
    ),
    Mutant(
        "life: idle Wyoming connections kept",
        "ownvoice/wyoming/connection.py",
        "if not self._tasks and self._stream is None:",
        "if False:",
        WYOMING_LIMITS,
    ),
    Mutant(
        "life: no frame cap from the text",
        "ownvoice/engine/options.py",
        "return self.max_frames or min(frame_cap(text), most)",
        "return self.max_frames or most",
        ["tests/engine/test_frame_cap.py"],
    ),
    # ---- a fault stays with its request ----
    Mutant(
        "fault: a row that failed to join stays in the batch",
        LOOP,
        "            if seq.slot is not None:\n                self._leave(seq)\n            raise",
        "            raise",
        FAULT_TESTS,
    ),
    Mutant(
        "fault: a row's failed step part fails the whole step",
        LOOP,
        "                except Exception as e:\n                    self._leave(seq)",
        "                except ZeroDivisionError as e:\n                    self._leave(seq)",
        FAULT_TESTS,
    ),
    Mutant(
        "fault: a decoder's error escapes the engine",
        AUDIO_OUT,
        "    except Exception as e:\n        seq.fail(e)",
        "    except ZeroDivisionError as e:\n        seq.fail(e)",
        FAULT_TESTS,
    ),
    Mutant(
        "fault: a batched phase out of memory not run again",
        LOOP,
        "            free_device_memory()\n            undo()\n            phase()",
        "            raise",
        FAULT_TESTS,
    ),
    Mutant(
        "fault: the scheduler ends a failed row's generation as a success",
        "ownvoice/service/scheduler.py",
        "            if seq.error is not None:\n                self._end(gen, error=seq.error)",
        "            if False:\n                self._end(gen, error=seq.error)",
        FAULT_TESTS,
    ),
]
