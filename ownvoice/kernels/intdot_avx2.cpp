// The integer products on AVX2: pairs of int16 products into int32 (madd_epi16); 4-way u8 x s8
// products via pairs into int16 (maddubs, at most 2 * 15 * 127: no saturation) and then int32.
#include "q4_tile.h"
#include "q8_tile.h"

namespace {
struct Avx2Dot {
  static inline __m256i pairs16(__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
  }
  static inline __m256i quads8(__m256i acc, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
}  // namespace

void q8_panels_avx2(const Q8Problem& q, int64_t p0, int64_t p1) { q8_block<Avx2Dot>(q, p0, p1); }
void q4_panels_avx2(const Q4Problem& q, int64_t p0, int64_t p1) { q4_block<Avx2Dot>(q, p0, p1); }
