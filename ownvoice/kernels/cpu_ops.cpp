// CPU kernels of the decode loop. (1) Matrix products with weights stored in 16 or 8 bits,
// activations and accumulation in float32. (2) One whole decoder layer for a set of new tokens
// (norms, q/k norm, RoPE, KV-cache write, attention, MLP), so a decode step is a handful of
// calls instead of hundreds of small torch ops. At batch 1 a decode step is bound by how fast weight
// bytes stream from memory; with B rows each weight is read once for all of them.
//
//   y[m, n] = sum_k x[m, k] * w[n, k]          (x: (M, K) float32, w: (N, K))
//
// Batch invariance: every output element is reduced in one fixed order whatever M is and
// whichever tile computes it (one 8-lane accumulator, k in blocks, a fixed horizontal sum, then
// the scalar tail in k order). So a row's result does not depend on which other rows share the
// call: a request decodes to the same codes alone or in a batch (see serving.md).
// AVX2 + FMA (x86-64-v3); the Python side falls back to torch where this is not available.

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

inline float bf16_to_float(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- weight formats: how a block of weights is loaded and multiplied --------------------------
//
// Each format defines BLOCK (weights per step along k), how x is laid out for it (`prepare`),
// and `fma`: acc += block of row w against the matching block of x. All tiles use these, so
// the order of operations per output element is the same everywhere.

// bfloat16 without widening shuffles. A 256-bit load holds 16 bf16 weights; 32-bit lane j holds
// element 2j in its low half and 2j+1 in its high half. Masking keeps 2j+1 as a float32,
// shifting left by 16 makes 2j one: two cheap integer ops per 16 weights. x is reordered once
// per call to match: per block of 16, the 8 even elements, then the 8 odd ones.
struct BF16 {
  using W = uint16_t;
  static constexpr int64_t BLOCK = 16;
  static void prepare(const float* x, float* xs, int64_t K) {
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
      for (int j = 0; j < 8; ++j) {
        xs[k + j] = x[k + 2 * j];
        xs[k + 8 + j] = x[k + 2 * j + 1];
      }
    for (; k < K; ++k) xs[k] = x[k];
  }
  struct Loaded {
    __m256 even, odd;
  };
  static inline Loaded load(const W* w) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(u, 16)), _mm256_castsi256_ps(_mm256_and_si256(u, hi))};
  }
  static inline __m256 fma(const Loaded& w, const float* xs, __m256 acc) {
    acc = _mm256_fmadd_ps(w.even, _mm256_loadu_ps(xs), acc);
    return _mm256_fmadd_ps(w.odd, _mm256_loadu_ps(xs + 8), acc);
  }
  static inline float scalar(W v) { return bf16_to_float(v); }
};

struct F32 {
  using W = float;
  static constexpr int64_t BLOCK = 8;
  static void prepare(const float* x, float* xs, int64_t K) { std::memcpy(xs, x, K * sizeof(float)); }
  using Loaded = __m256;
  static inline Loaded load(const W* w) { return _mm256_loadu_ps(w); }
  static inline __m256 fma(const Loaded& w, const float* xs, __m256 acc) {
    return _mm256_fmadd_ps(w, _mm256_loadu_ps(xs), acc);
  }
  static inline float scalar(W v) { return v; }
};

// int8 weights, one float scale per output row (applied after the sum)
struct I8 {
  using W = int8_t;
  static constexpr int64_t BLOCK = 8;
  static void prepare(const float* x, float* xs, int64_t K) { std::memcpy(xs, x, K * sizeof(float)); }
  using Loaded = __m256;
  static inline Loaded load(const W* w) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
  static inline __m256 fma(const Loaded& w, const float* xs, __m256 acc) {
    return _mm256_fmadd_ps(w, _mm256_loadu_ps(xs), acc);
  }
  static inline float scalar(W v) { return float(v); }
};

// R weight rows x C rows of x, over all of K. xs: prepared rows (layout of Fmt::prepare),
// x: the same rows unprepared (for the scalar tail). Each of the R*C outputs has its own
// accumulator and sees exactly the operations a 1 x 1 tile would give it.
template <class Fmt, int R, int C>
inline void tile(const typename Fmt::W* w, int64_t K, const float* xs, const float* x, float* y,
                 int64_t ldy, const float* scale) {
  __m256 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
  const int64_t full = K - K % Fmt::BLOCK;
  for (int64_t k = 0; k < full; k += Fmt::BLOCK) {
    for (int r = 0; r < R; ++r) {
      const auto wv = Fmt::load(w + r * K + k);
      for (int c = 0; c < C; ++c) acc[r][c] = Fmt::fma(wv, xs + c * K + k, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float s = hsum(acc[r][c]);
      for (int64_t k = full; k < K; ++k) s += Fmt::scalar(w[r * K + k]) * x[c * K + k];
      if (scale) s *= scale[r];
      y[c * ldy + r] = s;
    }
}

// weight rows [n0, n1) against all M rows of x; R rows of W at a time, C rows of x at a time
template <class Fmt, int R, int C>
void rows_block(const typename Fmt::W* w, const float* scale, const float* xs, const float* x,
                int64_t K, int64_t M, int64_t N, float* y, int64_t n0, int64_t n1) {
  int64_t n = n0;
  auto sc = [&](int64_t i) { return scale ? scale + i : nullptr; };
  for (; n + R <= n1; n += R) {
    int64_t m = 0;
    for (; m + C <= M; m += C)
      tile<Fmt, R, C>(w + n * K, K, xs + m * K, x + m * K, y + m * N + n, N, sc(n));
    for (; m < M; ++m) tile<Fmt, R, 1>(w + n * K, K, xs + m * K, x + m * K, y + m * N + n, N, sc(n));
  }
  for (; n < n1; ++n) {
    int64_t m = 0;
    for (; m + C <= M; m += C)
      tile<Fmt, 1, C>(w + n * K, K, xs + m * K, x + m * K, y + m * N + n, N, sc(n));
    for (; m < M; ++m) tile<Fmt, 1, 1>(w + n * K, K, xs + m * K, x + m * K, y + m * N + n, N, sc(n));
  }
}

template <class Fmt>
void matmul_fmt(const typename Fmt::W* w, const float* scale, const float* x, int64_t K, int64_t M,
                int64_t N, float* y) {
  std::vector<float> xs(M * K);
  for (int64_t m = 0; m < M; ++m) Fmt::prepare(x + m * K, xs.data() + m * K, K);
  // one row of x: memory-bound, 8 independent weight rows hide the FMA latency; several rows:
  // a 3 x 4 register tile reuses each loaded weight block 4 times and each x block 3 times
  at::parallel_for(0, N, 48, [&](int64_t n0, int64_t n1) {
    if (M == 1)
      rows_block<Fmt, 8, 1>(w, scale, xs.data(), x, K, M, N, y, n0, n1);
    else if (M == 2)
      rows_block<Fmt, 4, 2>(w, scale, xs.data(), x, K, M, N, y, n0, n1);
    else
      rows_block<Fmt, 3, 4>(w, scale, xs.data(), x, K, M, N, y, n0, n1);
  });
}

// a weight matrix in any of the stored forms
struct Weight {
  const void* data = nullptr;
  at::ScalarType dtype = at::kFloat;
  const float* scale = nullptr;
  int64_t rows = 0, cols = 0;
};

Weight as_weight(const torch::Tensor& w, const c10::optional<torch::Tensor>& scale) {
  TORCH_CHECK(w.dim() == 2 && w.is_contiguous(), "weights must be contiguous 2-D tensors");
  Weight r;
  r.data = w.data_ptr();
  r.dtype = w.scalar_type();
  r.rows = w.size(0);
  r.cols = w.size(1);
  TORCH_CHECK(r.dtype == at::kBFloat16 || r.dtype == at::kFloat || r.dtype == at::kChar,
              "weights must be bfloat16, float32 or int8");
  if (r.dtype == at::kChar) {
    TORCH_CHECK(scale.has_value() && scale->numel() == r.rows, "int8 weights need a scale per row");
    r.scale = scale->data_ptr<float>();
  }
  return r;
}

// Y (M, N) = X (M, K) W^T
void matmul(const Weight& w, const float* x, int64_t M, float* y) {
  const int64_t K = w.cols, N = w.rows;
  switch (w.dtype) {
    case at::kBFloat16:
      return matmul_fmt<BF16>(static_cast<const uint16_t*>(w.data), nullptr, x, K, M, N, y);
    case at::kChar:
      return matmul_fmt<I8>(static_cast<const int8_t*>(w.data), w.scale, x, K, M, N, y);
    default:
      return matmul_fmt<F32>(static_cast<const float*>(w.data), nullptr, x, K, M, N, y);
  }
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
  const Weight Wqkv = as_weight(qkv, qkv_scale), Wo = as_weight(o, o_scale);
  const Weight Wgu = as_weight(gate_up, gate_up_scale), Wd = as_weight(down, down_scale);
  const int64_t I = Wgu.rows / 2, Q = Wqkv.rows;
  float* xp = x.data_ptr<float>();
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  std::vector<float> h(M * std::max(H, I)), qkv_out(M * Q), attn(M * n_heads * d), tmp(M * H);
  std::vector<float> gu(M * Wgu.rows);

  // 1) attention: project, normalise and rotate q and k, write every token's k and v
  for (int64_t m = 0; m < M; ++m) rms_norm(xp + m * H, in_norm.data_ptr<float>(), h.data() + m * H, H, eps);
  matmul(Wqkv, h.data(), M, qkv_out.data());
  const float *qn = q_norm.data_ptr<float>(), *kn = k_norm.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) {
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
        float acc = 0;
        for (int64_t e = 0; e < d; ++e) acc += qi[e] * kbase[s * d + e];
        scores[s] = acc * scale;
        mx = std::max(mx, scores[s]);
      }
      float total = 0;
      for (int64_t s = 0; s <= last; ++s) total += (scores[s] = std::exp(scores[s] - mx));
      float* out = attn.data() + (m * n_heads + i) * d;
      std::fill(out, out + d, 0.0f);
      for (int64_t s = 0; s <= last; ++s) {
        const float p = scores[s] / total;
        for (int64_t e = 0; e < d; ++e) out[e] += p * vbase[s * d + e];
      }
    }
  });
  matmul(Wo, attn.data(), M, tmp.data());
  for (int64_t i = 0; i < M * H; ++i) xp[i] += tmp[i];

  // 3) MLP: gate and up share one matrix (rows 0..I-1 gate, I..2I-1 up)
  for (int64_t m = 0; m < M; ++m) rms_norm(xp + m * H, post_norm.data_ptr<float>(), h.data() + m * H, H, eps);
  matmul(Wgu, h.data(), M, gu.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < I; ++i) {
      const float g = gu[m * 2 * I + i];
      h[m * I + i] = g / (1.0f + std::exp(-g)) * gu[m * 2 * I + I + i];
    }
  matmul(Wd, h.data(), M, tmp.data());
  for (int64_t i = 0; i < M * H; ++i) xp[i] += tmp[i];
}

// ---- plain linears (prefill, heads) ------------------------------------------------------------

torch::Tensor linear(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> scale,
                     c10::optional<torch::Tensor> bias) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 (M, K) tensor");
  const Weight W = as_weight(w, scale);
  TORCH_CHECK(W.cols == x.size(1), "x and w disagree on K");
  auto y = torch::empty({x.size(0), W.rows}, x.options());
  matmul(W, x.data_ptr<float>(), x.size(0), y.data_ptr<float>());
  if (bias.has_value() && bias->defined()) y.add_(*bias);
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear", &linear, "y = (x @ w.T) [* scale] (+ bias); w bf16 / f32 / int8, x float32");
  m.def("decode_rows", &decode_rows,
        "one decoder layer for M new tokens, each with its own cache and position; x updated in place");
}
