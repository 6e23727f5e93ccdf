// Matrix-vector products for the CPU decode loop: weights stored in 16 or 8 bits, activations
// and accumulation in float32. At batch 1 a decode step is bound by how fast weight bytes stream
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

#include <cstring>

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

inline float i8_to_float(int8_t v) { return float(v); }
inline float f32_id(float v) { return v; }

template <typename W, __m256 (*Load)(const W*), float (*Scalar)(W)>
torch::Tensor matvec(const torch::Tensor& x, const W* w, int64_t N, const float* scale,
                     const c10::optional<torch::Tensor>& bias) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 (M, K) tensor");
  const int64_t M = x.size(0), K = x.size(1);
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float* bp = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->scalar_type() == torch::kFloat32 && bias->numel() == N, "bad bias");
    bp = bias->data_ptr<float>();
  }
  at::parallel_for(0, N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const W* row = w + n * K;
      const float s = scale ? scale[n] : 1.0f;
      const float b = bp ? bp[n] : 0.0f;
      for (int64_t m = 0; m < M; ++m) yp[m * N + n] = dot<W, Load, Scalar>(row, xp + m * K, K) * s + b;
    }
  });
  return y;
}

torch::Tensor linear_bf16(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias) {
  TORCH_CHECK(w.scalar_type() == torch::kBFloat16 && w.is_contiguous() && w.size(1) == x.size(1),
              "w must be a contiguous bfloat16 (N, K) tensor");
  auto wp = reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>());
  return matvec<uint16_t, load8_bf16, bf16_to_float>(x, wp, w.size(0), nullptr, bias);
}

torch::Tensor linear_f32(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias) {
  TORCH_CHECK(w.scalar_type() == torch::kFloat32 && w.is_contiguous() && w.size(1) == x.size(1),
              "w must be a contiguous float32 (N, K) tensor");
  return matvec<float, load8_f32, f32_id>(x, w.data_ptr<float>(), w.size(0), nullptr, bias);
}

torch::Tensor linear_int8(torch::Tensor x, torch::Tensor w, torch::Tensor scale,
                          c10::optional<torch::Tensor> bias) {
  TORCH_CHECK(w.scalar_type() == torch::kInt8 && w.is_contiguous() && w.size(1) == x.size(1),
              "w must be a contiguous int8 (N, K) tensor");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat32 && scale.numel() == w.size(0), "bad scale");
  return matvec<int8_t, load8_i8, i8_to_float>(x, w.data_ptr<int8_t>(), w.size(0),
                                               scale.data_ptr<float>(), bias);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_bf16", &linear_bf16, "y = x @ w.T (+ b); w bfloat16, x float32");
  m.def("linear_f32", &linear_f32, "y = x @ w.T (+ b); w float32, x float32");
  m.def("linear_int8", &linear_int8, "y = (x @ w.T) * scale (+ b); w int8, x float32");
}
