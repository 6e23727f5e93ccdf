// int8 weights x 12-bit activations -> int32 matrix products, the same arithmetic for every
// instruction set.
//
//   y[m, n] = float(sum_k xq[m, k] * wq[n, k]) * xscale[m] * wscale[n]
//
// wq is in [-127, 127], xq in [-Q8_ACT, Q8_ACT]. The integer sum is exact (see Q8_MAX_K), so its
// order does not matter: every instruction set, every tile shape and every batch gives the same
// bits, and a row's result never depends on its neighbours (batch invariance for free).
// 12-bit rather than 8-bit activations: the same number of instructions here (a pairwise
// int16 product instead of a 4-way byte product with a sign fix-up), and the activations'
// rounding error becomes negligible beside the weights' (measured: 93 % code agreement with
// int8 activations, the weights' own figure with these).
//
// Weight layout: panels of 16 rows; for each pair j of columns (k = 2j, 2j + 1), 32 bytes:
// rows 0..7 (2 bytes each), then rows 8..15. Widened to int16, 16 bytes are 8 rows x 2 k, which
// a pairwise multiply-add (madd_epi16, vpdpwssd) takes against 2 activations broadcast to all
// lanes: one int32 per row.
//
// A translation unit defines its Dot (the pairwise step for its instruction set) and
// instantiates q8_block<Dot>. Everything here has internal linkage, so each unit's copy keeps
// its own target.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "intdot.h"

namespace {

constexpr int64_t Q8_PANEL = 16;

inline __m256i broadcast_pair(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i widen(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// NP panels x C rows of x, over all column pairs
template <class Dot, int NP, int C>
inline void q8_tile(const Q8Problem& q, int64_t p, int64_t m) {
  const int64_t G = q.groups, ldx = 2 * G;
  __m256i acc[NP][2][C];
#pragma GCC unroll 8
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[i][0][c] = acc[i][1][c] = _mm256_setzero_si256();
  const int16_t* x = q.xq + m * ldx;
  for (int64_t g = 0; g < G; ++g) {
#pragma GCC unroll 8
    for (int i = 0; i < NP; ++i) {
      const int8_t* wg = q.w + ((p + i) * G + g) * 32;
      const __m256i w0 = widen(wg), w1 = widen(wg + 16);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m256i xb = broadcast_pair(x + c * ldx + 2 * g);
        acc[i][0][c] = Dot::pairs16(acc[i][0][c], w0, xb);
        acc[i][1][c] = Dot::pairs16(acc[i][1][c], w1, xb);
      }
    }
  }
  alignas(32) int32_t out[8];
  for (int i = 0; i < NP; ++i)
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < C; ++c) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out), acc[i][h][c]);
        const float sx = q.xscale[m + c];
        float* y = q.y + (m + c) * q.N;
        for (int j = 0; j < 8; ++j) {
          const int64_t n = (p + i) * Q8_PANEL + h * 8 + j;
          if (n < q.N) y[n] = float(out[j]) * sx * q.wscale[n];
        }
      }
}

template <class Dot, int R>
void q8_few_rows(const Q8Problem& q, int64_t m, int64_t p0, int64_t p1) {
  constexpr int NP = R == 1 ? 4 : (R == 2 ? 2 : 1);
  int64_t p = p0;
  for (; p + NP <= p1; p += NP) q8_tile<Dot, NP, R>(q, p, m);
  for (; p < p1; ++p) q8_tile<Dot, 1, R>(q, p, m);
}

// panels [p0, p1) against all M rows: 4 rows at a time (8 accumulators), then the rest
template <class Dot>
void q8_block(const Q8Problem& q, int64_t p0, int64_t p1) {
  constexpr int C = 4;
  const int64_t full = q.M - q.M % C;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t m = 0; m < full; m += C) q8_tile<Dot, 1, C>(q, p, m);
  switch (q.M - full) {
    case 3: return q8_few_rows<Dot, 3>(q, full, p0, p1);
    case 2: return q8_few_rows<Dot, 2>(q, full, p0, p1);
    case 1: return q8_few_rows<Dot, 1>(q, full, p0, p1);
    default: return;
  }
}

}  // namespace
