// The integer products with AVX-512 VNNI: vpdpwssd and vpdpbusd multiply int16 pairs or u8 x s8
// quads and accumulate in int32, in one instruction. A few rows (a decode step) take the 256-bit
// forms, which AVX512VL allows (q8_tile.h, q4_tile.h); eight rows and more with int8 weights (a
// prefill, a batch) take 512-bit tiles: one panel's 16 rows of a column pair widen to one vector,
// so a tile of 2 panels x 8 rows keeps 16 accumulators busy. The integer sums are exact, so every
// tile gives the same bits (q8_tile.h).
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")
#include "q4_tile.h"
#include "q8_tile.h"

namespace {
struct Vnni512Dot {
  static inline __m256i pairs16(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_epi32(acc, w, x); }
  static inline __m256i quads8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};

constexpr int Q8_WIDE_ROWS = 8;

// NP panels x C rows (from row m) over all column pairs, 16 rows of a panel per vector: the
// 32 bytes of a pair widen to int16 in row order (rows 0..7, then 8..15; q8_tile.h's layout)
template <int NP, int C>
inline void q8_tile512(const Q8Problem& q, int64_t p, int64_t m) {
  const int64_t G = q.groups, ldx = 2 * G;
  __m512i acc[NP][C];
#pragma GCC unroll 8
  for (int i = 0; i < NP; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[i][c] = _mm512_setzero_si512();
  const int16_t* x = q.xq + m * ldx;
  for (int64_t g = 0; g < G; ++g) {
#pragma GCC unroll 8
    for (int i = 0; i < NP; ++i) {
      const int8_t* wg = q.w + ((p + i) * G + g) * 32;
      const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg)));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        int32_t pair;
        std::memcpy(&pair, x + c * ldx + 2 * g, 4);
        acc[i][c] = _mm512_dpwssd_epi32(acc[i][c], w, _mm512_set1_epi32(pair));
      }
    }
  }
  alignas(64) int32_t out[16];
  for (int i = 0; i < NP; ++i)
    for (int c = 0; c < C; ++c) {
      _mm512_store_si512(out, acc[i][c]);
      const float sx = q.xscale[m + c];
      float* y = q.y + (m + c) * q.N;
      for (int j = 0; j < 16; ++j) {
        const int64_t n = (p + i) * Q8_PANEL + j;
        if (n < q.N) y[n] = float(out[j]) * sx * q.wscale[n];
      }
    }
}

}  // namespace

void q8_panels_avx512vnni(const Q8Problem& q, int64_t p0, int64_t p1) {
  if (q.M < Q8_WIDE_ROWS) return q8_block<Vnni512Dot>(q, p0, p1);
  const int64_t full = q.M - q.M % Q8_WIDE_ROWS;
  int64_t p = p0;
  for (; p + 2 <= p1; p += 2)
    for (int64_t m = 0; m < full; m += Q8_WIDE_ROWS) q8_tile512<2, Q8_WIDE_ROWS>(q, p, m);
  for (; p < p1; ++p)
    for (int64_t m = 0; m < full; m += Q8_WIDE_ROWS) q8_tile512<1, Q8_WIDE_ROWS>(q, p, m);
  if (full < q.M) {  // the last rows, fewer than a tile: the 256-bit tiles
    Q8Problem rest = q;
    rest.xq = q.xq + full * 2 * q.groups;
    rest.xscale = q.xscale + full;
    rest.y = q.y + full * q.N;
    rest.M = q.M - full;
    q8_block<Vnni512Dot>(rest, p0, p1);
  }
}
void q4_panels_avx512vnni(const Q4Problem& q, int64_t p0, int64_t p1) { q4_block<Vnni512Dot>(q, p0, p1); }
