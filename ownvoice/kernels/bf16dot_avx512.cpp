// The bf16 products (bf16dot.h) with AVX512-BF16: vdpbf16ps multiplies a pair of bf16 in each of
// 16 lanes and adds both products to a float32 accumulator, twice the multiply-adds of a float32
// FMA per instruction, from weights half the size.
#include "bf16dot.h"

#if defined(__clang__) ? (__clang_major__ >= 9) : (__GNUC__ >= 10)
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>

namespace {

constexpr int64_t PANEL = 16;
// weights this many pairs ahead are prefetched (a panel's pair is one 64-byte line)
constexpr int64_t PREFETCH = 32;

inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

// NP panels x C rows over all pairs: NP * C accumulators, NP weight vectors, one broadcast
template <int NP, int C>
inline void tile(const uint32_t* w, int64_t K2, const PairRows& r, float* y, int64_t ldy,
                 int64_t n0, int64_t N) {
  __m512 acc[NP][C];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
  for (int64_t k0 = 0, j = 0; k0 < K2; k0 += r.seg, ++j) {
    const uint32_t* x = r.x + j * r.tap - k0;  // x[c * ld + k] for k in this run
    for (int64_t k = k0; k < k0 + r.seg; ++k) {
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        const uint32_t* wp = w + (p * K2 + k) * PANEL;
        _mm_prefetch(reinterpret_cast<const char*>(wp + PREFETCH * PANEL), _MM_HINT_T0);
        const __m512bh wv = as_bh(_mm512_loadu_si512(wp));
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c)
          acc[p][c] = _mm512_dpbf16_ps(acc[p][c], wv, as_bh(_mm512_set1_epi32(static_cast<int>(x[c * r.ld + k]))));
      }
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) {
    const int64_t n = n0 + p * PANEL;
    if (n >= N) break;
    const __mmask16 keep = N - n >= PANEL ? __mmask16(0xFFFF) : __mmask16((1u << (N - n)) - 1);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy + n, keep, acc[p][c]);
  }
}

// tile<NP, rows> for a run-time row count 1 <= rows <= C
template <int NP, int C>
inline void tile_rows(int64_t rows, const uint32_t* w, int64_t K2, const PairRows& r, float* y,
                      int64_t ldy, int64_t n0, int64_t N) {
  if (rows == C) return tile<NP, C>(w, K2, r, y, ldy, n0, N);
  if constexpr (C > 1) tile_rows<NP, C - 1>(rows, w, K2, r, y, ldy, n0, N);
}

// NP panels from p against all M rows, 8 rows at a time
template <int NP>
void panel_rows(const Bf16Block& b, int64_t p) {
  constexpr int C = 8;
  const uint32_t* w = b.w + p * b.K2 * PANEL;
  for (int64_t m = 0; m < b.M; m += C) {
    const PairRows r{b.r.x + m * b.r.ld, b.r.ld, b.r.seg, b.r.tap};
    const int64_t rows = b.M - m < C ? b.M - m : C;
    tile_rows<NP, C>(rows, w, b.K2, r, b.y + m * b.ldy, b.ldy, p * PANEL, b.N);
  }
}

}  // namespace

void bf16dot_panels_avx512(const Bf16Block& b, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if (b.M <= 6) {  // a few rows: four panels at once keep 8-24 accumulators busy
    for (; p + 4 <= p1; p += 4)
      tile_rows<4, 6>(b.M, b.w + p * b.K2 * PANEL, b.K2, b.r, b.y, b.ldy, p * PANEL, b.N);
  }
  for (; p + 2 <= p1; p += 2) panel_rows<2>(b, p);
  for (; p < p1; ++p) panel_rows<1>(b, p);
}

void to_bf16_avx512(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(out + i, reinterpret_cast<const __m512i&>(v));
  }
  if (i < n) {
    const __mmask16 lo = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __mmask16 hi = n - i <= 16 ? __mmask16(0) : __mmask16((1u << (n - i - 16)) - 1);
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + i + 16), _mm512_maskz_loadu_ps(lo, x + i));
    _mm512_mask_storeu_epi16(out + i, (__mmask32(hi) << 16) | lo, reinterpret_cast<const __m512i&>(v));
  }
}

bool bf16dot_available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

#else  // a compiler without AVX512-BF16: never chosen
void bf16dot_panels_avx512(const Bf16Block&, int64_t, int64_t) {}
void to_bf16_avx512(const float*, int64_t, uint16_t*) {}
bool bf16dot_available() { return false; }
#endif
