// The integer products with AVX-512 VNNI (its 256-bit forms, which AVX512VL allows): vpdpwssd
// and vpdpbusd multiply int16 pairs or u8 x s8 quads and accumulate in int32, in one instruction.
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")
#include "q4_tile.h"
#include "q8_tile.h"

namespace {
struct Vnni512Dot {
  static inline __m256i pairs16(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_epi32(acc, w, x); }
  static inline __m256i quads8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};
}  // namespace

void q8_panels_avx512vnni(const Q8Problem& q, int64_t p0, int64_t p1) { q8_block<Vnni512Dot>(q, p0, p1); }
void q4_panels_avx512vnni(const Q4Problem& q, int64_t p0, int64_t p1) { q4_block<Vnni512Dot>(q, p0, p1); }
