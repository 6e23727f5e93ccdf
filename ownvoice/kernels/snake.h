// SnakeBeta over channels-last rows, fused: y = x + inv_beta[c] * sin(alpha[c] * x)^2.
//
// The speech decoder applies it before every convolution of its upsampling blocks; as five
// torch ops (mul, sin, pow, mul, add) it reads and writes the activations five times and was
// a sixth of the decoder's time on a CPU. Here it is one pass, 8 lanes at a time.
//
// sin^2 ignores the sign of sin, so the argument is reduced by whole multiples of pi (not
// 2 pi): r = t - k pi with |r| <= pi / 2, sin(t)^2 = sin(r)^2. pi is split in three parts
// (Cody-Waite) so r stays exact to float rounding for |t| up to ~1e5, far past the decoder's
// activations; sin(r) is an odd polynomial of degree 11 (Taylor, error < 6e-8 on [-pi/2, pi/2]).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace snake {

inline __m256 sin_squared(__m256 t) {
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(0.318309886183790671f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(3.140625f), t);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(9.67502593994140625e-4f), r);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.509957990978376432e-7f), r);
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 p = _mm256_set1_ps(-2.5052108385441718775e-8f);          // -1/11!
  p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(2.7557319223985890653e-6f));   // 1/9!
  p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(-1.9841269841269841270e-4f));  // -1/7!
  p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(8.3333333333333333333e-3f));   // 1/5!
  p = _mm256_fmadd_ps(p, r2, _mm256_set1_ps(-1.6666666666666666667e-1f));  // -1/3!
  const __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(p, r2), r, r);
  return _mm256_mul_ps(s, s);
}

// rows of C channels: y[m, c] = x[m, c] + inv_beta[c] * sin(alpha[c] x[m, c])^2
inline void rows(const float* x, const float* alpha, const float* inv_beta, int64_t M, int64_t C,
                 float* y) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = x + m * C;
    float* ym = y + m * C;
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
      const __m256 v = _mm256_loadu_ps(xm + c);
      const __m256 s2 = sin_squared(_mm256_mul_ps(v, _mm256_loadu_ps(alpha + c)));
      _mm256_storeu_ps(ym + c, _mm256_fmadd_ps(_mm256_loadu_ps(inv_beta + c), s2, v));
    }
    for (; c < C; ++c) {
      const float s = std::sin(alpha[c] * xm[c]);
      ym[c] = xm[c] + inv_beta[c] * (s * s);
    }
  }
}

}  // namespace snake
