// Products in bf16 with AVX512-BF16's dot product (vdpbf16ps): the speech decoder's matrices and
// convolutions when it runs in bfloat16 (`decoder_dtype: bfloat16`) on a CPU that has it
// (Zen 4 and later, Cooper Lake, Sapphire Rapids and later). Kept free of the standard library's
// inline code, like intdot.h, so the unit built for AVX512-BF16 never reaches a CPU without it.
//
// Weights: panels of 16 rows, k-pair-major: panel p holds rows 16p..16p+15 and, for each pair of
// columns (2i, 2i + 1), their 32 bf16 side by side, row j in 32-bit lane j (column 2i in the low
// half), so one 512-bit load is one pair of every row. Activations: bf16 too (rounded to nearest
// even from float32), a pair per 32-bit word, broadcast.
//
// Batch invariance: vdpbf16ps adds each lane's two products to its float32 accumulator in a fixed
// order, so every output element is one sequential sum over the pairs i = 0, 1, 2, ... whatever
// M is and whichever tile computes it: a row's result does not depend on the rows beside it.
#pragma once

#include <cstdint>

// The rows of x a product reads, in pairs (32-bit words): row m is the concatenation of runs of
// `seg` pairs at x + m * ld + j * tap (j = 0, 1, ...): a plain matrix has one run (seg = K / 2),
// a causal convolution over channels-last input one run per tap (as Rows in float_block.h)
struct PairRows {
  const uint32_t* x;
  int64_t ld, seg, tap;
};

// M rows of x against the panels [p0, p1) of an (N, 2 K2) matrix; y (M, ldy) float32
struct Bf16Block {
  const uint32_t* w;  // (panels, K2, 16) pairs
  PairRows r;
  int64_t K2, M, N;
  float* y;
  int64_t ldy;
};

void bf16dot_panels_avx512(const Bf16Block& b, int64_t p0, int64_t p1);
// n float32 -> n bf16, round to nearest even (n even)
void to_bf16_avx512(const float* x, int64_t n, uint16_t* out);
// the compiler knew AVX512-BF16 and this CPU has it
bool bf16dot_available();
