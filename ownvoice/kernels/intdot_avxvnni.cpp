// The integer products with AVX-VNNI (the VEX forms of vpdpwssd and vpdpbusd on CPUs without
// AVX-512, e.g. Intel's 12th generation and later). Compilers before GCC 11 / clang 12 do not know
// the instruction set: there these entry points run the AVX2 code and say they were not built.
#include "intdot.h"

#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#pragma GCC target("avx2,fma,avxvnni")
#include "q4_tile.h"
#include "q8_tile.h"

namespace {
struct VnniDot {
  static inline __m256i pairs16(__m256i acc, __m256i w, __m256i x) { return _mm256_dpwssd_avx_epi32(acc, w, x); }
  static inline __m256i quads8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};
}  // namespace

bool avxvnni_built() { return true; }
void q8_panels_avxvnni(const Q8Problem& q, int64_t p0, int64_t p1) { q8_block<VnniDot>(q, p0, p1); }
void q4_panels_avxvnni(const Q4Problem& q, int64_t p0, int64_t p1) { q4_block<VnniDot>(q, p0, p1); }
#else
bool avxvnni_built() { return false; }
void q8_panels_avxvnni(const Q8Problem& q, int64_t p0, int64_t p1) { q8_panels_avx2(q, p0, p1); }
void q4_panels_avxvnni(const Q4Problem& q, int64_t p0, int64_t p1) { q4_panels_avx2(q, p0, p1); }
#endif
