// What cpu_ops.cpp calls for int8 and int4 weights and the instruction set (intdot.cpp). Kept apart from intdot.h, which
// the per-instruction-set units include: they must not see the standard library's inline code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "float_block.h"

// y (M, rows) = x (M, K) times the int8 panels (panels, cols / 2, 32) with a scale per row
void int8_matmul(const int8_t* w, const float* scale, int64_t panels, int64_t cols, int64_t rows,
                 const float* x, int64_t M, int64_t K, float* y);
// the same for int4 panels (panels, cols / 2, 16) with scales (panels, cols / 32, 16)
void int4_matmul(const uint8_t* w, const float* scale, int64_t panels, int64_t cols, int64_t rows,
                 const float* x, int64_t M, int64_t K, float* y);

// the float products' 512-bit tiles (float_avx512.cpp) where the chosen instruction set has them,
// else nullptr (float_tile.h's AVX2 tiles)
using FloatPanelsFn = void (*)(const FloatBlock&, int64_t, int64_t);
FloatPanelsFn wide_float_panels();

std::vector<std::string> supported_isas();  // instruction sets this CPU can run them with
std::string isa();                          // the one they use
void set_isa(const std::string& name);      // force one (tests, benchmarks)
