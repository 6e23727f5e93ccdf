// The integer products with AVX-VNNI (the VEX forms of vpdpwssd and vpdpbusd on CPUs without
// AVX-512, e.g. Intel's 12th generation and later).
#pragma GCC target("avx2,fma,avxvnni")
#include "q4_tile.h"
#include "q8_tile.h"

namespace {
struct VnniDot {
  static constexpr int registers = 16;
  static inline __m256i pairs16(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_avx_epi32(acc, w, x); }
  static inline __m256i quads8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};
}  // namespace

void q8_panels_avxvnni(const Q8Problem& q, int64_t p0, int64_t p1) { q8_block<VnniDot>(q, p0, p1); }
void q4_panels_avxvnni(const Q4Problem& q, int64_t p0, int64_t p1) { q4_block<VnniDot>(q, p0, p1); }
