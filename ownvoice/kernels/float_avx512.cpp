// The float products (float_tile.h) with 512-bit vectors, for CPUs with AVX-512: one panel of
// 16 weight rows is one vector, and 32 registers hold up to 24 accumulators. On a CPU whose
// AVX-512 units are full width (Intel's server cores) that doubles the multiply-adds per cycle,
// which is what binds the speech decoder's convolutions and a batch's decode step; elsewhere
// (split units) the same work takes the same cycles in half the instructions.
//
// Bit for bit the AVX2 tiles' results: each output element is the same sequential sum over
// k = 0, 1, 2, ... of one FMA per term, whatever the vector width, tile or batch.
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl")
#include <immintrin.h>

#include "float_block.h"

namespace {

// A bf16 panel's 16 weights of one k are stored so that a 256-bit lane j holds rows j and j + 8
// (float_tile.h); widened to 32 bits, lane 2j of the vector is row j and lane 2j + 1 row j + 8.
struct BF16 {
  using W = uint16_t;
  static inline __m512 load(const W* p) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
  static constexpr int64_t row(int lane) { return (lane >> 1) + 8 * (lane & 1); }
  static constexpr int64_t K_PER_LINE = 2;  // one 64-byte cache line holds two k of a panel
};

struct F32 {
  using W = float;
  static inline __m512 load(const W* p) { return _mm512_loadu_ps(p); }
  static constexpr int64_t row(int lane) { return lane; }
  static constexpr int64_t K_PER_LINE = 1;
};

// NP panels x C rows of x over all of K: NP C accumulators, NP weight vectors, one broadcast
template <class Fmt, int NP, int C>
inline void tile(const typename Fmt::W* w, int64_t K, const Rows& r, float* y, int64_t ldy,
                 int64_t n0, int64_t N) {
  __m512 acc[NP][C];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[p][c] = _mm512_setzero_ps();
  for (int64_t k0 = 0, j = 0; k0 < K; k0 += r.seg, ++j) {
    const float* x = r.x + j * r.tap - k0;  // x[c * ld + k] for k in this run
    for (int64_t k = k0; k < k0 + r.seg; ++k) {
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        if (k % Fmt::K_PER_LINE == 0)
          _mm_prefetch(reinterpret_cast<const char*>(w + (p * K + k + PREFETCH_K) * PANEL), _MM_HINT_T0);
        const __m512 wv = Fmt::load(w + (p * K + k) * PANEL);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c)
          acc[p][c] = _mm512_fmadd_ps(wv, _mm512_set1_ps(x[c * r.ld + k]), acc[p][c]);
      }
    }
  }
  alignas(64) float out[NP][C][16];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) _mm512_store_ps(out[p][c], acc[p][c]);
  for (int p = 0; p < NP; ++p)
    for (int c = 0; c < C; ++c)
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t n = n0 + p * PANEL + Fmt::row(lane);
        if (n < N) y[c * ldy + n] = out[p][c][lane];
      }
}

// tile<Fmt, NP, rows> for a run-time row count 1 <= rows <= C
template <class Fmt, int NP, int C>
inline void tile_rows(int64_t rows, const typename Fmt::W* w, int64_t K, const Rows& r, float* y,
                      int64_t ldy, int64_t n0, int64_t N) {
  if (rows == C) return tile<Fmt, NP, C>(w, K, r, y, ldy, n0, N);
  if constexpr (C > 1) tile_rows<Fmt, NP, C - 1>(rows, w, K, r, y, ldy, n0, N);
}

// NP panels from p against all M rows, 8 rows (8 NP accumulators) at a time
template <class Fmt, int NP>
void panel_rows(const FloatBlock& b, int64_t p) {
  constexpr int C = 8;
  const auto* w = static_cast<const typename Fmt::W*>(b.w) + p * b.K * PANEL;
  for (int64_t m = 0; m < b.M; m += C) {
    const Rows r{b.r.x + m * b.r.ld, b.r.ld, b.r.seg, b.r.tap};
    const int64_t rows = b.M - m < C ? b.M - m : C;
    tile_rows<Fmt, NP, C>(rows, w, b.K, r, b.y + m * b.ldy, b.ldy, p * PANEL, b.N);
  }
}

template <class Fmt>
void panels(const FloatBlock& b, int64_t p0, int64_t p1) {
  int64_t p = p0;
  if (b.M <= 6) {  // a decode step's few rows: four panels at once keep 8-24 accumulators busy
    const auto* w = static_cast<const typename Fmt::W*>(b.w);
    for (; p + 4 <= p1; p += 4)
      tile_rows<Fmt, 4, 6>(b.M, w + p * b.K * PANEL, b.K, b.r, b.y, b.ldy, p * PANEL, b.N);
  }
  for (; p + 2 <= p1; p += 2) panel_rows<Fmt, 2>(b, p);
  for (; p < p1; ++p) panel_rows<Fmt, 1>(b, p);
}

}  // namespace

void float_panels_avx512(const FloatBlock& b, int64_t p0, int64_t p1) {
  if (b.bf16)
    panels<BF16>(b, p0, p1);
  else
    panels<F32>(b, p0, p1);
}
