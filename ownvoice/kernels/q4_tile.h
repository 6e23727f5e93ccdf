// int4 weights x int8 activations, the same arithmetic for every instruction set.
//
//   y[m, n] = (sum over groups g, in order, of float(sum_{k in g} xq[m, k] * wq[n, k]) * s[n, g])
//             * xscale[m]
//
// wq is in [-7, 7] with a scale per row and group of Q4_GROUP = 32 columns; xq in [-127, 127].
// Each group's integer sum is exact (at most 7 * 127 * 32 < 2^15), and each scale has at most 8
// significant bits (packed.py rounds it up to that), so float(sum) * s is exact in float32:
// whether or not a compiler fuses the multiply with the add that follows, the only rounding is
// the running float sum over groups, always in the same order. Every instruction set, tile
// shape and batch gives the same bits, and torch's ops reproduce them (packed.py `int4_linear`).
//
// Weight layout: panels of 16 rows; for every 8 columns, 64 bytes: rows 0..7 (4 bytes each),
// then rows 8..15. Byte j of row r holds u = wq + 8 in [1, 15] of column j in its low nibble and
// of column 4 + j in its high nibble. So a mask gives 8 rows x 4 columns as unsigned bytes,
// a shift and a mask the next 4 columns: what the 4-way byte dot products (maddubs, vpdpbusd:
// unsigned x signed) take against 4 activations broadcast to all lanes. sum u x = sum wq x +
// 8 sum x takes the offset off with one subtraction per group (the activations' group sums are
// computed once per row).

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "intdot.h"

namespace {

inline __m256i q4_broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// one panel x C rows of x, over all groups. One panel at a time: its weights are one sequential
// stream, which the hardware prefetcher follows (four panels at a time, four interleaved 8 KB
// streams, read 15-30 % slower from memory, AVX2 and AVX-512 alike). The low and the high nibbles
// accumulate apart, so each row keeps four independent chains of multiply-adds.
template <class Dot, int C>
inline void q4_tile(const Q4Problem& q, int64_t p, int64_t m) {
  constexpr int64_t OCTETS = Q4_GROUP / 8;
  const int64_t G = q.groups, ldx = Q4_GROUP * G, octets = G * OCTETS;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const uint8_t* w = q.w + p * octets * 64;
  __m256 out[2][C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) out[0][c] = out[1][c] = _mm256_setzero_ps();
  const int8_t* x = q.xq + m * ldx;
  for (int64_t g = 0; g < G; ++g) {
    __m256i lo_acc[2][C], hi_acc[2][C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      lo_acc[0][c] = lo_acc[1][c] = hi_acc[0][c] = hi_acc[1][c] = _mm256_setzero_si256();
    for (int64_t o = g * OCTETS; o < (g + 1) * OCTETS; ++o) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + o * 64 + 32 * h));
        const __m256i lo = _mm256_and_si256(b, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          const int8_t* xc = x + c * ldx + 8 * o;
          lo_acc[h][c] = Dot::quads8(lo_acc[h][c], lo, q4_broadcast4(xc));
          hi_acc[h][c] = Dot::quads8(hi_acc[h][c], hi, q4_broadcast4(xc + 4));
        }
      }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256i offset = _mm256_set1_epi32(8 * q.xsum[(m + c) * G + g]);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256 s = _mm256_loadu_ps(q.wscale + (p * G + g) * 16 + h * 8);
        const __m256i sum = _mm256_add_epi32(lo_acc[h][c], hi_acc[h][c]);
        const __m256 part = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, offset)), s);
        out[h][c] = _mm256_add_ps(out[h][c], part);  // part is exact: fused or not, the same
      }
    }
  }
  alignas(32) float res[8];
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < C; ++c) {
      _mm256_store_ps(res, out[h][c]);
      const float sx = q.xscale[m + c];
      float* y = q.y + (m + c) * q.N;
      for (int r = 0; r < 8; ++r) {
        const int64_t n = p * 16 + h * 8 + r;
        if (n < q.N) y[n] = res[r] * sx;
      }
    }
}

// panels [p0, p1) against all M rows: 2 rows at a time (8 integer and 4 float accumulators),
// then the last row alone
template <class Dot>
void q4_block(const Q4Problem& q, int64_t p0, int64_t p1) {
  constexpr int C = 2;
  const int64_t full = q.M - q.M % C;
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t m = 0; m < full; m += C) q4_tile<Dot, C>(q, p, m);
    if (q.M > full) q4_tile<Dot, 1>(q, p, full);
  }
}

}  // namespace
