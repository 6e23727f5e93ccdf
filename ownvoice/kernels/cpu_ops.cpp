// CPU kernels of the decode loop and the speech decoder. (1) Matrix products with weights
// stored in 16, 8 or 4 bits (float_tile.h, q8_tile.h, q4_tile.h). (2) One whole decoder layer for
// a set of new tokens (norms, q/k norm, RoPE, KV-cache write, attention, MLP), so a decode step
// is a handful of calls instead of hundreds of small torch ops. At batch 1 a decode step is bound
// by how fast weight bytes stream from memory; with B rows each weight is read once for all of
// them. (3) Causal convolutions over channels-last input as the same products (conv_rows).
//
// Batch invariance: every output element is reduced in one fixed order whatever M is and
// whichever tile computes it, so a request decodes to the same codes alone or in a batch.
// AVX2 + FMA (x86-64-v3); the Python side falls back to torch where this is not available. The
// int8 products use AVX-512 VNNI or AVX-VNNI where the CPU has them, and with AVX-512 the float
// products of two or more rows use 512-bit tiles (float_avx512.cpp; chosen at run time).

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bf16_ops.h"
#include "float_tile.h"
#include "intdot.h"
#include "intdot_matmul.h"
#include "snake.h"

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// a weight matrix in panels: (P, K, 16) with N <= 16 P logical rows; int8: (P, K / 2, 32);
// int4 (two per byte, uint8): (P, K / 2, 16)
struct Weight {
  const void* data = nullptr;
  at::ScalarType dtype = at::kFloat;
  const float* scale = nullptr;
  int64_t rows = 0, cols = 0, panels = 0;  // cols: K rounded up to even (int8), to 32 (int4)

  int64_t padded(int64_t k) const {
    const int64_t step = dtype == at::kChar ? 2 : dtype == at::kByte ? Q4_GROUP : 1;
    return (k + step - 1) / step * step;
  }
  bool takes(int64_t k) const { return padded(k) == cols; }
};

Weight as_weight(const torch::Tensor& w, const c10::optional<torch::Tensor>& scale, int64_t rows) {
  Weight r;
  r.dtype = w.scalar_type();
  TORCH_CHECK(r.dtype == at::kBFloat16 || r.dtype == at::kFloat || r.dtype == at::kChar || r.dtype == at::kByte,
              "weights must be bfloat16, float32, int8 or int4 (uint8)");
  const int64_t inner = r.dtype == at::kChar ? 32 : PANEL;
  TORCH_CHECK(w.dim() == 3 && w.size(2) == inner && w.is_contiguous(),
              "weights must be contiguous (panels, K, 16) tensors, int8 (panels, K / 2, 32)");
  r.data = w.data_ptr();
  r.panels = w.size(0);
  r.cols = r.dtype == at::kChar || r.dtype == at::kByte ? 2 * w.size(1) : w.size(1);
  r.rows = rows < 0 ? r.panels * PANEL : rows;
  TORCH_CHECK(r.rows <= r.panels * PANEL && r.rows > (r.panels - 1) * PANEL, "rows do not match the panels");
  if (r.dtype == at::kChar) {
    TORCH_CHECK(scale.has_value() && scale->numel() >= r.rows && scale->scalar_type() == at::kFloat &&
                    scale->is_contiguous(),
                "int8 weights need a float32 scale per row");
    TORCH_CHECK(r.cols <= Q8_MAX_K, "int8 products are exact up to ", Q8_MAX_K, " columns");
    r.scale = scale->data_ptr<float>();
  }
  if (r.dtype == at::kByte) {
    TORCH_CHECK(r.cols % Q4_GROUP == 0, "int4 columns come in groups of ", Q4_GROUP);
    TORCH_CHECK(scale.has_value() && scale->scalar_type() == at::kFloat && scale->is_contiguous() &&
                    scale->dim() == 3 && scale->size(0) == r.panels &&
                    scale->size(1) == r.cols / Q4_GROUP && scale->size(2) == PANEL,
                "int4 weights need a float32 (panels, K / 32, 16) scale per row and group");
    r.scale = scale->data_ptr<float>();
  }
  return r;
}

// Y (M, N) = X (M, K) W^T
void matmul(const Weight& w, const float* x, int64_t M, int64_t K, float* y) {
  switch (w.dtype) {
    case at::kBFloat16:
      return float_matmul<BF16>(static_cast<const uint16_t*>(w.data), w.panels, w.cols, w.rows, Rows{x, K, K, 0}, M, y);
    case at::kChar:
      return int8_matmul(static_cast<const int8_t*>(w.data), w.scale, w.panels, w.cols, w.rows, x, M, K, y);
    case at::kByte:
      return int4_matmul(static_cast<const uint8_t*>(w.data), w.scale, w.panels, w.cols, w.rows, x, M, K, y);
    default:
      return float_matmul<F32>(static_cast<const float*>(w.data), w.panels, w.cols, w.rows, Rows{x, K, K, 0}, M, y);
  }
}

// dot product of two float vectors of length d (a multiple of 8 in every model; any d works)
inline float dot(const float* a, const float* b, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= d; e += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + e), _mm256_loadu_ps(b + e), acc);
  float s = hsum(acc);
  for (; e < d; ++e) s += a[e] * b[e];
  return s;
}

// out += p * v over d floats
inline void axpy(float p, const float* v, float* out, int64_t d) {
  const __m256 pv = _mm256_set1_ps(p);
  int64_t e = 0;
  for (; e + 8 <= d; e += 8)
    _mm256_storeu_ps(out + e, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + e), _mm256_loadu_ps(out + e)));
  for (; e < d; ++e) out[e] += p * v[e];
}

// y = g * (x / rms(x)), normalised in float32 as the model does
void rms_norm(const float* x, const float* g, float* y, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float r = 1.0f / std::sqrt(float(ss / n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] * (x[i] * r);
}

// rotate_half convention: first half pairs with the second
void rope(float* v, const float* cos, const float* sin, int64_t d) {
  const int64_t h = d / 2;
  for (int64_t i = 0; i < h; ++i) {
    const float a = v[i], b = v[i + h];
    v[i] = a * cos[i] - b * sin[i];
    v[i + h] = b * cos[i + h] + a * sin[i + h];
  }
}

}  // namespace

// One decoder layer for M new tokens, each with its own KV cache and position.
//
// x (M, H) float32 is updated in place: x += attn(norm(x)); x += mlp(norm(x)). Token m belongs
// to the sequence whose caches are k_caches[m] / v_caches[m]: (layers, kv_heads, capacity,
// head_dim) float32, of which `layer` is used. It is written at positions[m] and attends
// positions 0..positions[m] of its cache. Tokens may share a cache: a prefill of T tokens is
// T entries with one cache and consecutive positions (every token's keys are written before
// any attention runs). Rows of different sequences never read each other's caches.
// cos / sin: (M, head_dim) rows of the RoPE table at those positions.
void decode_rows(torch::Tensor x, int64_t layer, torch::Tensor in_norm, torch::Tensor qkv,
                 c10::optional<torch::Tensor> qkv_scale, torch::Tensor q_norm, torch::Tensor k_norm,
                 torch::Tensor o, c10::optional<torch::Tensor> o_scale, torch::Tensor post_norm,
                 torch::Tensor gate_up, c10::optional<torch::Tensor> gate_up_scale, torch::Tensor down,
                 c10::optional<torch::Tensor> down_scale, std::vector<torch::Tensor> k_caches,
                 std::vector<torch::Tensor> v_caches, torch::Tensor positions, torch::Tensor cos,
                 torch::Tensor sin, int64_t n_heads, int64_t n_kv, int64_t d, double eps_d) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.dim() == 2,
              "x must be a contiguous float32 (M, H) tensor");
  const int64_t M = x.size(0), H = x.size(1), groups = n_heads / n_kv;
  TORCH_CHECK(int64_t(k_caches.size()) == M && int64_t(v_caches.size()) == M,
              "one key and one value cache per token");
  TORCH_CHECK(positions.scalar_type() == at::kLong && positions.numel() == M && positions.is_contiguous(),
              "positions must be M int64");
  TORCH_CHECK(cos.size(0) == M && sin.size(0) == M && cos.is_contiguous() && sin.is_contiguous(),
              "cos / sin must be (M, head_dim)");
  const int64_t* pos = positions.data_ptr<int64_t>();
  std::vector<float*> kc(M), vc(M);
  std::vector<int64_t> cap(M);
  for (int64_t m = 0; m < M; ++m) {
    const auto& K = k_caches[m];
    const auto& V = v_caches[m];
    TORCH_CHECK(K.scalar_type() == at::kFloat && K.is_contiguous() && V.is_contiguous() && K.dim() == 4 &&
                    K.size(1) == n_kv && K.size(3) == d && V.sizes() == K.sizes(),
                "caches must be contiguous float32 (layers, kv_heads, capacity, head_dim)");
    TORCH_CHECK(layer >= 0 && layer < K.size(0), "layer out of range");
    cap[m] = K.size(2);
    TORCH_CHECK(pos[m] >= 0 && pos[m] < cap[m], "KV cache full");
    const int64_t offset = layer * n_kv * cap[m] * d;
    kc[m] = K.data_ptr<float>() + offset;
    vc[m] = V.data_ptr<float>() + offset;
  }
  const float eps = float(eps_d);
  const Weight Wqkv = as_weight(qkv, qkv_scale, -1), Wo = as_weight(o, o_scale, H);
  const Weight Wgu = as_weight(gate_up, gate_up_scale, -1), Wd = as_weight(down, down_scale, H);
  TORCH_CHECK(Wqkv.rows == (n_heads + 2 * n_kv) * d && Wo.takes(n_heads * d) && Wgu.takes(H) &&
                  Wd.takes(Wgu.rows / 2) && Wqkv.takes(H),
              "layer weights do not match the model's shapes");
  const int64_t I = Wgu.rows / 2, Q = Wqkv.rows;
  float* xp = x.data_ptr<float>();
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  std::vector<float> h(M * std::max(H, I)), qkv_out(M * Q), attn(M * n_heads * d), tmp(M * H);
  std::vector<float> gu(M * Wgu.rows);

  // 1) attention: project, normalise and rotate q and k, write every token's k and v
  for (int64_t m = 0; m < M; ++m) rms_norm(xp + m * H, in_norm.data_ptr<float>(), h.data() + m * H, H, eps);
  matmul(Wqkv, h.data(), M, H, qkv_out.data());
  const float *qn = q_norm.data_ptr<float>(), *kn = k_norm.data_ptr<float>();
  // elementwise per token; at a batch's 8 rows it was ~3 % of a step on one core: rows go to
  // the threads (the same arithmetic per element, any split)
  at::parallel_for(0, M, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float* q = qkv_out.data() + m * Q;
      float* k = q + n_heads * d;
      float* v = k + n_kv * d;
      for (int64_t i = 0; i < n_heads; ++i) {
        rms_norm(q + i * d, qn, q + i * d, d, eps);
        rope(q + i * d, cp + m * d, sp + m * d, d);
      }
      for (int64_t j = 0; j < n_kv; ++j) {
        rms_norm(k + j * d, kn, k + j * d, d, eps);
        rope(k + j * d, cp + m * d, sp + m * d, d);
        std::memcpy(kc[m] + (j * cap[m] + pos[m]) * d, k + j * d, d * sizeof(float));
        std::memcpy(vc[m] + (j * cap[m] + pos[m]) * d, v + j * d, d * sizeof(float));
      }
    }
  });
  // 2) each token against its own cache, positions 0..pos
  const float scale = 1.0f / std::sqrt(float(d));
  at::parallel_for(0, M * n_heads, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> scores;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t m = b / n_heads, i = b % n_heads, last = pos[m];
      scores.resize(last + 1);
      const float* qi = qkv_out.data() + m * Q + i * d;
      const float* kbase = kc[m] + (i / groups) * cap[m] * d;
      const float* vbase = vc[m] + (i / groups) * cap[m] * d;
      float mx = -INFINITY;
      for (int64_t s = 0; s <= last; ++s) {
        scores[s] = dot(qi, kbase + s * d, d) * scale;
        mx = std::max(mx, scores[s]);
      }
      float total = 0;
      for (int64_t s = 0; s <= last; ++s) total += (scores[s] = std::exp(scores[s] - mx));
      float* out = attn.data() + (m * n_heads + i) * d;
      std::fill(out, out + d, 0.0f);
      for (int64_t s = 0; s <= last; ++s) axpy(scores[s] / total, vbase + s * d, out, d);
    }
  });
  matmul(Wo, attn.data(), M, n_heads * d, tmp.data());
  for (int64_t i = 0; i < M * H; ++i) xp[i] += tmp[i];

  // 3) MLP: gate and up share one matrix (rows 0..I-1 gate, I..2I-1 up)
  for (int64_t m = 0; m < M; ++m) rms_norm(xp + m * H, post_norm.data_ptr<float>(), h.data() + m * H, H, eps);
  matmul(Wgu, h.data(), M, H, gu.data());
  at::parallel_for(0, M * I, 2048, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const int64_t m = e / I, i = e % I;
      const float g = gu[m * 2 * I + i];
      h[e] = g / (1.0f + std::exp(-g)) * gu[m * 2 * I + I + i];
    }
  });
  matmul(Wd, h.data(), M, I, tmp.data());
  for (int64_t i = 0; i < M * H; ++i) xp[i] += tmp[i];
}

// ---- plain linears (prefill, heads) ------------------------------------------------------------

torch::Tensor linear(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> scale,
                     c10::optional<torch::Tensor> bias, int64_t rows) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 (M, K) tensor");
  const Weight W = as_weight(w, scale, rows);
  TORCH_CHECK(W.takes(x.size(1)), "x and w disagree on K");
  auto y = torch::empty({x.size(0), W.rows}, x.options());
  matmul(W, x.data_ptr<float>(), x.size(0), x.size(1), y.data_ptr<float>());
  if (bias.has_value() && bias->defined()) y.add_(*bias);
  return y;
}

// A causal convolution over channels-last input as one product (see Rows in float_tile.h):
//   y[b, t] = bias + sum_j W_j x[b, t + j * dilation],  t = 0 .. T_in - (taps - 1) * dilation - 1
// x (B, T_in, C_in) float32 (its first (taps - 1) * dilation samples are the left context);
// w: panels of the (rows, taps * C_in) matrix whose columns are tap-major (j, c_in).
torch::Tensor conv_rows(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                        int64_t rows, int64_t taps, int64_t dilation) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 3 && x.is_contiguous(),
              "x must be a contiguous float32 (B, T, C) tensor");
  const Weight W = as_weight(w, c10::nullopt, rows);
  TORCH_CHECK(W.dtype == at::kFloat || W.dtype == at::kBFloat16, "convolutions take float weights");
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), span = (taps - 1) * dilation;
  TORCH_CHECK(taps >= 1 && dilation >= 1 && W.cols == taps * C, "w does not match taps x channels");
  TORCH_CHECK(T > span, "the input is shorter than the convolution's context");
  const int64_t M = T - span;
  auto y = torch::empty({B, M, W.rows}, x.options());
  for (int64_t b = 0; b < B; ++b) {
    const Rows r{x.data_ptr<float>() + b * T * C, C, C, dilation * C};
    float* yb = y.data_ptr<float>() + b * M * W.rows;
    if (W.dtype == at::kFloat)
      float_matmul<F32>(static_cast<const float*>(W.data), W.panels, W.cols, W.rows, r, M, yb);
    else
      float_matmul<BF16>(static_cast<const uint16_t*>(W.data), W.panels, W.cols, W.rows, r, M, yb);
  }
  if (bias.has_value() && bias->defined()) y.add_(*bias);
  return y;
}

// SnakeBeta over channels-last (..., C) float32 input (snake.h), rows in parallel
torch::Tensor snake_beta(torch::Tensor x, torch::Tensor alpha, torch::Tensor inv_beta) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.dim() >= 1,
              "x must be a contiguous float32 tensor");
  const int64_t C = x.size(-1), M = C ? x.numel() / C : 0;
  TORCH_CHECK(alpha.scalar_type() == at::kFloat && alpha.is_contiguous() && alpha.numel() == C &&
                  inv_beta.scalar_type() == at::kFloat && inv_beta.is_contiguous() &&
                  inv_beta.numel() == C,
              "alpha and inv_beta must be contiguous float32 vectors of the channel count");
  auto y = torch::empty_like(x);
  const float *xp = x.data_ptr<float>(), *a = alpha.data_ptr<float>(), *ib = inv_beta.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
  at::parallel_for(0, M, grain, [&](int64_t m0, int64_t m1) {
    snake::rows(xp + m0 * C, a, ib, m1 - m0, C, yp + m0 * C);
  });
  return y;
}

// torch's thread count is per thread, and a thread's first parallel call in each library (torch's,
// and this one, which has its own copy of torch's inline `lazy_init_num_threads`) resets that
// thread's count to the one last set in any thread: so both are initialised before it is set
void set_num_threads(int64_t threads) {
  at::get_num_threads();  // torch's own
  at::internal::lazy_init_num_threads();  // ours
  at::set_num_threads(static_cast<int>(threads));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // the products and layers let go of the GIL while they run, as torch's own ops do: a long one
  // (a prefill, a decoder chunk) would otherwise stall every other Python thread (the server's
  // event loop, a second engine) for its whole length
  const auto free_gil = py::call_guard<py::gil_scoped_release>();
  m.def("linear", &linear, free_gil, "y = (x @ w.T) (+ bias); w: (panels, K, 16) bf16 / f32 or (panels, K / 2, 32) "
        "int8 with a scale per row, or (panels, K / 2, 16) int4 in uint8 with (panels, K / 32, 16) scales, "
        "holding `rows` rows; x float32");
  m.def("snake_beta", &snake_beta, free_gil, "x + inv_beta * sin(alpha * x)^2 over the last (channel) axis");
  m.def("conv_rows", &conv_rows, free_gil, "causal convolution over channels-last (B, T, C) float32 input as one "
        "product: w the panels of the tap-major (rows, taps * C) matrix; y (B, T - (taps - 1) * dilation, rows)");
  m.def("linear_bf16", &linear_bf16, free_gil, "linear in bf16 (AVX512-BF16): x rounded to bf16, w the pair "
        "panels (panels, ceil(K / 2), 32) bf16 holding `rows` rows; y float32");
  m.def("conv_rows_bf16", &conv_rows_bf16, free_gil, "conv_rows in bf16 (AVX512-BF16): x rounded to bf16, w the "
        "pair panels of the tap-major (rows, taps * C) matrix, C even");
  m.def("has_bf16dot", &has_bf16dot, "the bf16 products run here (AVX512-BF16, the AVX-512 instruction set)");
  m.def("isa", &isa, "the instruction set the products use (avx512vnni: 512-bit float tiles too)");
  m.def("supported_isas", &supported_isas, "instruction sets this CPU can run the products with");
  m.def("set_isa", &set_isa, "force an instruction set for the products (tests, benchmarks)");
  m.def("set_num_threads", &set_num_threads, "this thread's CPU threads for torch's ops and these");
  m.def("decode_rows", &decode_rows, free_gil,
        "one decoder layer for M new tokens, each with its own cache and position; x updated in place");
}
