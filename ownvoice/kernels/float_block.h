// The float products' interface between cpu_ops.cpp (AVX2, float_tile.h) and the unit built for
// AVX-512 (float_avx512.cpp): the rows a product reads and one block of work. Kept free of the
// standard library's inline code, like intdot.h, so the AVX-512 unit's copy never reaches a CPU
// without it.
#pragma once

#include <cstdint>

// weight rows per panel (float_tile.h)
inline constexpr int64_t PANEL = 16;
// software prefetch of a panel's weights this many k ahead, in tiles of at least 2 rows: without
// it a multi-row tile stalls on memory (its arithmetic per byte hides less latency than a
// one-row tile's four independent panel streams); measured on the talker at 4-8 rows, 20-25 %
inline constexpr int64_t PREFETCH_K = 64;

// The rows of x a product reads. Plain: row m is x + m * ld, K contiguous floats. A causal
// convolution over channels-last input (T, C_in): row t is the concatenation of `taps` runs of
// seg = C_in floats at x + t * ld + j * tap (j = 0 .. taps - 1; tap = dilation * C_in), so the
// convolution is a product with no unfolded copy of its input.
struct Rows {
  const float* x;
  int64_t ld, seg, tap;
};

// M rows of x against the panels of an (N, K) weight matrix (float_tile.h's layout); y (M, ldy)
struct FloatBlock {
  const void* w;  // bf16 (uint16_t) or float32 panels
  bool bf16;
  Rows r;
  int64_t K, M, N;
  float* y;
  int64_t ldy;
};

// panels [p0, p1) against all M rows, with 512-bit vectors (float_avx512.cpp): bit for bit the
// AVX2 tiles' results (each element the same sequential sum over k, one FMA per term)
void float_panels_avx512(const FloatBlock& b, int64_t p0, int64_t p1);
