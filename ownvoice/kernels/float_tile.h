// Float products against weights stored in panels of 16 rows, 16 or 32 bits per weight,
// float32 activations and accumulation (AVX2 + FMA).
//
//   y[m, n] = sum_k x[m, k] * w[n, k]
//
// Batch invariance: every output element is reduced in one fixed order whatever M is and
// whichever tile computes it (the sequential sum over k, one FMA per term). So a row's result
// does not depend on which other rows share the call: a request decodes to the same codes alone
// or in a batch (see serving.md).

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "float_block.h"
#include "intdot_matmul.h"

namespace {

// ---- weight panels ------------------------------------------------------------------------------
//
// A weight matrix (N, K) is stored as panels of 16 rows, k-major: panel p holds rows 16p..16p+15,
// and for each k their 16 weights side by side (rows past N are zero). One step of a tile loads
// the 16 weights of one k as two vectors of 8 rows and multiplies them with x[m, k] broadcast:
// every output element is the sequential sum over k = 0, 1, 2, ... of one FMA each, whichever
// tile computes it. Formats differ only in how 16 weights are loaded:
//   bf16: lane j of a 256-bit load holds rows j (low half) and j + 8 (high half): a shift makes
//         rows 0..7 float32, a mask rows 8..15 (two integer ops per 16 weights, no shuffles);
//   f32:  two plain loads.
// int8 weights have a layout and arithmetic of their own (integer dot products, q8_tile.h).

struct BF16 {
  using W = uint16_t;
  static inline void load(const W* p, __m256& lo, __m256& hi) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    hi = _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
};

struct F32 {
  using W = float;
  static inline void load(const W* p, __m256& lo, __m256& hi) {
    lo = _mm256_loadu_ps(p);
    hi = _mm256_loadu_ps(p + 8);
  }
};

// PANEL and PREFETCH_K: float_block.h

// NP panels (16 NP rows) x C rows of x, over all of K; y (C, ldy) gets rows n0.. (< N).
template <class Fmt, int NP, int C>
inline void tile(const typename Fmt::W* w, int64_t K, const Rows& r, float* y, int64_t ldy,
                 int64_t n0, int64_t N) {
  // the loops over NP, 2 and C are unrolled so the accumulators stay in registers: 2 NP C of
  // them, the two weight vectors and one broadcast at a time (at most 15 of 16 ymm registers)
  __m256 acc[NP][2][C];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[p][0][c] = acc[p][1][c] = _mm256_setzero_ps();
  for (int64_t k0 = 0, j = 0; k0 < K; k0 += r.seg, ++j) {
    const float* x = r.x + j * r.tap - k0;  // x[c * ld + k] for k in this run
    for (int64_t k = k0; k < k0 + r.seg; ++k) {
#pragma GCC unroll 8
      for (int p = 0; p < NP; ++p) {
        if constexpr (C >= 2) {
          if ((k & 1) == 0)
            _mm_prefetch(reinterpret_cast<const char*>(w + (p * K + k + PREFETCH_K) * PANEL), _MM_HINT_T0);
        }
        __m256 lo, hi;
        Fmt::load(w + (p * K + k) * PANEL, lo, hi);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const __m256 xb = _mm256_broadcast_ss(x + c * r.ld + k);
          acc[p][0][c] = _mm256_fmadd_ps(lo, xb, acc[p][0][c]);
          acc[p][1][c] = _mm256_fmadd_ps(hi, xb, acc[p][1][c]);
        }
      }
    }
  }
  alignas(32) float out[NP][2][C][8];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      _mm256_store_ps(out[p][0][c], acc[p][0][c]);
      _mm256_store_ps(out[p][1][c], acc[p][1][c]);
    }
  for (int p = 0; p < NP; ++p)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < 8; ++i) {
          const int64_t n = n0 + p * PANEL + h * 8 + i;
          if (n < N) y[c * ldy + n] = out[p][h][c][i];
        }
}

inline Rows skip_rows(const Rows& r, int64_t m) { return {r.x + m * r.ld, r.ld, r.seg, r.tap}; }

// R rows of x (R < 6) against panels [p0, p1), NP panels at a time where registers allow:
// at least 8 accumulators keep both FMA units busy despite their latency
template <class Fmt, int R>
void few_rows(const typename Fmt::W* w, const Rows& r, int64_t K, int64_t N, float* y,
              int64_t ldy, int64_t p0, int64_t p1) {
  constexpr int NP = R == 1 ? 4 : (R <= 3 ? 2 : 1);
  int64_t p = p0;
  for (; p + NP <= p1; p += NP) tile<Fmt, NP, R>(w + p * K * PANEL, K, r, y, ldy, p * PANEL, N);
  for (; p < p1; ++p) tile<Fmt, 1, R>(w + p * K * PANEL, K, r, y, ldy, p * PANEL, N);
}

// panels [p0, p1) against M rows of x: 6 rows at a time (12 accumulators), then the rest
template <class Fmt>
void panels_block(const typename Fmt::W* w, const Rows& r, int64_t K, int64_t M, int64_t N,
                  float* y, int64_t ldy, int64_t p0, int64_t p1) {
  constexpr int C = 6;
  const int64_t full = M - M % C;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t m = 0; m < full; m += C)
      tile<Fmt, 1, C>(w + p * K * PANEL, K, skip_rows(r, m), y + m * ldy, ldy, p * PANEL, N);
  const Rows rest = skip_rows(r, full);
  float* yr = y + full * ldy;
  switch (M - full) {
    case 5: return few_rows<Fmt, 5>(w, rest, K, N, yr, ldy, p0, p1);
    case 4: return few_rows<Fmt, 4>(w, rest, K, N, yr, ldy, p0, p1);
    case 3: return few_rows<Fmt, 3>(w, rest, K, N, yr, ldy, p0, p1);
    case 2: return few_rows<Fmt, 2>(w, rest, K, N, yr, ldy, p0, p1);
    case 1: return few_rows<Fmt, 1>(w, rest, K, N, yr, ldy, p0, p1);
    default: return;
  }
}

// Work is split over blocks of 4 panels and, for long inputs (a convolution over thousands of
// samples, whose few output channels would leave cores idle), blocks of ROW_BLOCK rows too.
constexpr int64_t ROW_BLOCK = 96;

// y (M, N) = rows of x times the (N, K) weight matrix in `panels` panels
template <class Fmt>
void float_matmul(const typename Fmt::W* wp, int64_t panels, int64_t K, int64_t N, const Rows& r,
                  int64_t M, float* y) {
  const int64_t groups = (panels + 3) / 4;
  const int64_t blocks = M >= 2 * ROW_BLOCK ? (M + ROW_BLOCK - 1) / ROW_BLOCK : 1;
  const int64_t rows = blocks == 1 ? M : ROW_BLOCK;
  // one row streams weights from memory as fast as either width: it keeps the AVX2 tiles
  const FloatPanelsFn wide = M >= 2 ? wide_float_panels() : nullptr;
  at::parallel_for(0, blocks * groups, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / groups, g = i % groups, m0 = b * rows, m = std::min(rows, M - m0);
      const int64_t p0 = 4 * g, p1 = std::min(4 * g + 4, panels);
      if (wide)
        wide(FloatBlock{wp, std::is_same_v<Fmt, BF16>, skip_rows(r, m0), K, m, N, y + m0 * N, N}, p0, p1);
      else
        panels_block<Fmt>(wp, skip_rows(r, m0), K, m, N, y + m0 * N, N, p0, p1);
    }
  });
}

}  // namespace
