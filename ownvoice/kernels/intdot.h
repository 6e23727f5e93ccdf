// Integer matrix products for int8 and int4 weights (q8_tile.h, q4_tile.h), one entry point per
// instruction set. Each set has its own translation unit compiled for it (intdot_<isa>.cpp), so
// code for AVX-512 never reaches a CPU without it: cpu_ops.cpp picks one at run time.
#pragma once

#include <cstdint>

// activations are quantised per row: against int8 weights to [-Q8_ACT, Q8_ACT] (12 bits), where
// the int32 sum of K products stays exact up to K = (2^31 - 1) / (127 * Q8_ACT) = 8260; against
// int4 weights to [-Q4_ACT, Q4_ACT] (8 bits; the weights' own error is far larger)
constexpr int32_t Q8_ACT = 2047;
constexpr int64_t Q8_MAX_K = 8260;
constexpr int32_t Q4_ACT = 127;
// int4 weights carry a scale per group of Q4_GROUP columns (see q4_tile.h)
constexpr int64_t Q4_GROUP = 32;

struct Q8Problem {
  const int8_t* w;       // (panels, K / 2, 32): see q8_tile.h
  const float* wscale;   // (N,) one scale per weight row
  const int16_t* xq;     // (M, 2 G) activations, zero past K
  const float* xscale;   // (M,) one scale per activation row
  int64_t groups;        // G: K rounded up to even, over 2
  int64_t M, N;
  float* y;              // (M, N)
};

struct Q4Problem {
  const uint8_t* w;      // (panels, K / 2, 16): see q4_tile.h
  const float* wscale;   // (panels, K / Q4_GROUP, 16) a scale per row and group of columns
  const int8_t* xq;      // (M, Q4_GROUP G) activations, zero past K
  const int32_t* xsum;   // (M, G) the sum of each row's activations over each group
  const float* xscale;   // (M,)
  int64_t groups;        // G: K rounded up to a multiple of Q4_GROUP, over Q4_GROUP
  int64_t M, N;
  float* y;              // (M, N)
};

// panels [p0, p1) against all M rows
void q8_panels_avx2(const Q8Problem& q, int64_t p0, int64_t p1);
void q8_panels_avx512vnni(const Q8Problem& q, int64_t p0, int64_t p1);
void q8_panels_avxvnni(const Q8Problem& q, int64_t p0, int64_t p1);
void q4_panels_avx2(const Q4Problem& q, int64_t p0, int64_t p1);
void q4_panels_avx512vnni(const Q4Problem& q, int64_t p0, int64_t p1);
void q4_panels_avxvnni(const Q4Problem& q, int64_t p0, int64_t p1);
bool avxvnni_built();  // false where the compiler predates AVX-VNNI
