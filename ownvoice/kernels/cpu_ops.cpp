// CPU kernels of the decode loop. (1) Matrix-vector products with weights stored in 16 or 8 bits,
// activations and accumulation in float32. (2) One whole decoder layer for one new token
// (norms, q/k norm, RoPE, KV-cache write, attention, MLP), so a decode step is a handful of
// calls instead of hundreds of small torch ops. At batch 1 a decode step is bound by how fast weight bytes stream
// from memory; torch's own CPU kernels reach about half of it for these shapes, and have no
// mixed bf16-weight / fp32-activation form at all.
//
//   y[m, n] = sum_k x[m, k] * w[n, k]          (x: (M, K) float32, w: (N, K))
//
// Each weight row is read once and used for all M rows of x; rows are split across threads.
// AVX2 + FMA (x86-64-v3); the Python side falls back to torch where this is not available.

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

inline __m256 load8_bf16(const uint16_t* p) {
  // bfloat16 is the top half of a float32: widen and shift, exactly
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m256 load8_i8(const int8_t* p) {
  __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

inline __m256 load8_f32(const float* p) { return _mm256_loadu_ps(p); }

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

// one dot product of a weight row with an activation row; 4 accumulators hide FMA latency
template <typename W, __m256 (*Load)(const W*), float (*Scalar)(W)>
inline float dot(const W* w, const float* x, int64_t K) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    a0 = _mm256_fmadd_ps(Load(w + k), _mm256_loadu_ps(x + k), a0);
    a1 = _mm256_fmadd_ps(Load(w + k + 8), _mm256_loadu_ps(x + k + 8), a1);
    a2 = _mm256_fmadd_ps(Load(w + k + 16), _mm256_loadu_ps(x + k + 16), a2);
    a3 = _mm256_fmadd_ps(Load(w + k + 24), _mm256_loadu_ps(x + k + 24), a3);
  }
  for (; k + 8 <= K; k += 8) a0 = _mm256_fmadd_ps(Load(w + k), _mm256_loadu_ps(x + k), a0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; k < K; ++k) s += Scalar(w[k]) * x[k];
  return s;
}

// bf16 rows at T == 1, without widening shuffles. A 256-bit load holds 16 bf16 weights; 32-bit
// lane j holds element 2j in its low half and 2j+1 in its high half. Masking keeps 2j+1 as a
// float32, shifting left by 16 makes 2j one: two cheap integer ops per 16 weights instead of two
// shuffles, which is what keeps this loop at memory speed. x is reordered once per call to match
// (see split_even_odd).
inline void split_even_odd(const float* x, float* xs, int64_t K) {
  int64_t k = 0;
  for (; k + 16 <= K; k += 16)
    for (int j = 0; j < 8; ++j) {
      xs[k + j] = x[k + 2 * j];
      xs[k + 8 + j] = x[k + 2 * j + 1];
    }
  for (; k < K; ++k) xs[k] = x[k];
}

inline float dot_bf16(const uint16_t* w, const float* xs, const float* x, int64_t K) {
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k + 16));
    a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u, 16)), _mm256_loadu_ps(xs + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(u, hi)), _mm256_loadu_ps(xs + k + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_loadu_ps(xs + k + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), _mm256_loadu_ps(xs + k + 24), a3);
  }
  for (; k + 16 <= K; k += 16) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u, 16)), _mm256_loadu_ps(xs + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(u, hi)), _mm256_loadu_ps(xs + k + 8), a1);
  }
  float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; k < K; ++k) s += bf16_to_float(w[k]) * x[k];
  return s;
}

inline float i8_to_float(int8_t v) { return float(v); }
inline float f32_id(float v) { return v; }

}  // namespace

// ---- one decoder layer for one new token ------------------------------------------------------

namespace {

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

// Two weight rows against T rows of x (the prefill case, T > 1): a register tile of 2 rows x 4
// tokens (8 accumulators), so each loaded weight vector feeds 4 FMAs and each x vector 2.
template <typename W, __m256 (*Load)(const W*), float (*Scalar)(W)>
inline void tile2(const W* w0, const W* w1, const float* x, int64_t K, int64_t T, float* y0, float* y1,
                  int64_t stride) {
  for (int64_t t0 = 0; t0 < T; t0 += 4) {
    const int64_t nt = std::min<int64_t>(4, T - t0);
    __m256 a[2][4];
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) a[r][c] = _mm256_setzero_ps();
    const float* xt = x + t0 * K;
    int64_t k = 0;
    if (nt == 4) {
      for (; k + 8 <= K; k += 8) {
        const __m256 u = Load(w0 + k), v = Load(w1 + k);
        for (int c = 0; c < 4; ++c) {
          const __m256 xv = _mm256_loadu_ps(xt + c * K + k);
          a[0][c] = _mm256_fmadd_ps(u, xv, a[0][c]);
          a[1][c] = _mm256_fmadd_ps(v, xv, a[1][c]);
        }
      }
    } else {
      for (; k + 8 <= K; k += 8) {
        const __m256 u = Load(w0 + k), v = Load(w1 + k);
        for (int64_t c = 0; c < nt; ++c) {
          const __m256 xv = _mm256_loadu_ps(xt + c * K + k);
          a[0][c] = _mm256_fmadd_ps(u, xv, a[0][c]);
          a[1][c] = _mm256_fmadd_ps(v, xv, a[1][c]);
        }
      }
    }
    for (int64_t c = 0; c < nt; ++c) {
      float s0 = hsum(a[0][c]), s1 = hsum(a[1][c]);
      for (int64_t kk = k; kk < K; ++kk) {
        s0 += Scalar(w0[kk]) * xt[c * K + kk];
        s1 += Scalar(w1[kk]) * xt[c * K + kk];
      }
      y0[(t0 + c) * stride] = s0;
      y1[(t0 + c) * stride] = s1;
    }
  }
}

template <typename W, __m256 (*Load)(const W*), float (*Scalar)(W)>
void matmul_rows(const W* w, const float* scale, const float* x, int64_t K, int64_t T, int64_t N,
                 float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    if (T == 1) {
      y[n] = dot<W, Load, Scalar>(w + n * K, x, K) * (scale ? scale[n] : 1.0f);
      continue;
    }
    const int64_t m = (n + 1 < n1) ? n + 1 : n;  // pair rows; a lone last row pairs with itself
    tile2<W, Load, Scalar>(w + n * K, w + m * K, x, K, T, y + n, y + m, N);
    if (scale)
      for (int64_t t = 0; t < T; ++t) {
        y[t * N + n] *= scale[n];
        if (m != n) y[t * N + m] *= scale[m];
      }
    n = m;
  }
}

// y (N) = W x for bf16 W (see dot_bf16)
void matvec_bf16(const Weight& w, const float* x, float* y) {
  const int64_t K = w.cols, N = w.rows;
  const uint16_t* wp = static_cast<const uint16_t*>(w.data);
  std::vector<float> xs(K);
  split_even_odd(x, xs.data(), K);
  at::parallel_for(0, N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) y[n] = dot_bf16(wp + n * K, xs.data(), x, K);
  });
}

// Y (T, N) = X (T, K) W^T, rows of W split across threads
void matmul(const Weight& w, const float* x, int64_t T, float* y) {
  const int64_t K = w.cols, N = w.rows;
  if (T == 1 && w.dtype == at::kBFloat16) return matvec_bf16(w, x, y);
  at::parallel_for(0, N, 64, [&](int64_t n0, int64_t n1) {
    switch (w.dtype) {
      case at::kBFloat16:
        matmul_rows<uint16_t, load8_bf16, bf16_to_float>(static_cast<const uint16_t*>(w.data), w.scale, x, K, T, N, y, n0, n1);
        break;
      case at::kChar:
        matmul_rows<int8_t, load8_i8, i8_to_float>(static_cast<const int8_t*>(w.data), w.scale, x, K, T, N, y, n0, n1);
        break;
      default:
        matmul_rows<float, load8_f32, f32_id>(static_cast<const float*>(w.data), w.scale, x, K, T, N, y, n0, n1);
    }
  });
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

// x (T, H) float32 holds T consecutive new tokens at positions pos..pos+T-1; it is updated in
// place: x += attn(norm(x)); x += mlp(norm(x)). k_cache / v_cache: this layer's
// (kv_heads, capacity, head_dim) float32; the new positions are written, and token t attends
// positions 0..pos+t. cos / sin: (T, head_dim) rows of the RoPE table.
void decode_layer(torch::Tensor x, torch::Tensor in_norm, torch::Tensor qkv,
                  c10::optional<torch::Tensor> qkv_scale, torch::Tensor q_norm, torch::Tensor k_norm,
                  torch::Tensor o, c10::optional<torch::Tensor> o_scale, torch::Tensor post_norm,
                  torch::Tensor gate_up, c10::optional<torch::Tensor> gate_up_scale,
                  torch::Tensor down, c10::optional<torch::Tensor> down_scale, torch::Tensor k_cache,
                  torch::Tensor v_cache, int64_t pos, torch::Tensor cos, torch::Tensor sin,
                  int64_t n_heads, int64_t n_kv, int64_t d, double eps_d) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.dim() == 2,
              "x must be a contiguous float32 (T, H) tensor");
  TORCH_CHECK(k_cache.scalar_type() == at::kFloat && k_cache.is_contiguous() && v_cache.is_contiguous(),
              "caches must be contiguous float32");
  const float eps = float(eps_d);
  const int64_t T = x.size(0), H = x.size(1), cap = k_cache.size(1), groups = n_heads / n_kv;
  TORCH_CHECK(pos + T <= cap, "KV cache full");
  TORCH_CHECK(cos.size(0) == T && sin.size(0) == T && cos.is_contiguous() && sin.is_contiguous(),
              "cos / sin must be (T, head_dim)");
  const Weight Wqkv = as_weight(qkv, qkv_scale), Wo = as_weight(o, o_scale);
  const Weight Wgu = as_weight(gate_up, gate_up_scale), Wd = as_weight(down, down_scale);
  const int64_t I = Wgu.rows / 2, Q = Wqkv.rows;
  float* xp = x.data_ptr<float>();
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float *kc = k_cache.data_ptr<float>(), *vc = v_cache.data_ptr<float>();
  std::vector<float> h(T * std::max(H, I)), qkv_out(T * Q), attn(T * n_heads * d), tmp(T * H);
  std::vector<float> gu(T * Wgu.rows);

  // 1) attention
  for (int64_t t = 0; t < T; ++t) rms_norm(xp + t * H, in_norm.data_ptr<float>(), h.data() + t * H, H, eps);
  matmul(Wqkv, h.data(), T, qkv_out.data());
  const float *qn = q_norm.data_ptr<float>(), *kn = k_norm.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    float* q = qkv_out.data() + t * Q;
    float* k = q + n_heads * d;
    float* v = k + n_kv * d;
    for (int64_t i = 0; i < n_heads; ++i) {
      rms_norm(q + i * d, qn, q + i * d, d, eps);
      rope(q + i * d, cp + t * d, sp + t * d, d);
    }
    for (int64_t j = 0; j < n_kv; ++j) {
      rms_norm(k + j * d, kn, k + j * d, d, eps);
      rope(k + j * d, cp + t * d, sp + t * d, d);
      std::memcpy(kc + (j * cap + pos + t) * d, k + j * d, d * sizeof(float));
      std::memcpy(vc + (j * cap + pos + t) * d, v + j * d, d * sizeof(float));
    }
  }
  const float scale = 1.0f / std::sqrt(float(d));
  at::parallel_for(0, T * n_heads, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> scores(pos + T);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t t = b / n_heads, i = b % n_heads, last = pos + t;
      const float* qi = qkv_out.data() + t * Q + i * d;
      const float* kbase = kc + (i / groups) * cap * d;
      const float* vbase = vc + (i / groups) * cap * d;
      float mx = -INFINITY;
      for (int64_t s = 0; s <= last; ++s) {
        float acc = 0;
        for (int64_t e = 0; e < d; ++e) acc += qi[e] * kbase[s * d + e];
        scores[s] = acc * scale;
        mx = std::max(mx, scores[s]);
      }
      float total = 0;
      for (int64_t s = 0; s <= last; ++s) total += (scores[s] = std::exp(scores[s] - mx));
      float* out = attn.data() + (t * n_heads + i) * d;
      std::fill(out, out + d, 0.0f);
      for (int64_t s = 0; s <= last; ++s) {
        const float p = scores[s] / total;
        for (int64_t e = 0; e < d; ++e) out[e] += p * vbase[s * d + e];
      }
    }
  });
  matmul(Wo, attn.data(), T, tmp.data());
  for (int64_t i = 0; i < T * H; ++i) xp[i] += tmp[i];

  // 2) MLP: gate and up share one matrix (rows 0..I-1 gate, I..2I-1 up)
  for (int64_t t = 0; t < T; ++t) rms_norm(xp + t * H, post_norm.data_ptr<float>(), h.data() + t * H, H, eps);
  matmul(Wgu, h.data(), T, gu.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const float g = gu[t * 2 * I + i];
      h[t * I + i] = g / (1.0f + std::exp(-g)) * gu[t * 2 * I + I + i];
    }
  matmul(Wd, h.data(), T, tmp.data());
  for (int64_t i = 0; i < T * H; ++i) xp[i] += tmp[i];
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
  m.def("decode_layer", &decode_layer, "one decoder layer for one new token, x updated in place");
}
