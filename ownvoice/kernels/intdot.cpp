// The integer products' entry points (intdot_matmul.h): the instruction set chosen at run time,
// the activation rows quantised, the panels shared out among threads.
//
// The activation rows are quantised per row (symmetric, round half to even; 12 bits against int8
// weights, 8 against int4) and multiplied in integers (q8_tile.h, q4_tile.h); the Python
// reference (packed.py) does the same arithmetic.

#include "intdot_matmul.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

#include "intdot.h"

namespace {

using Q8Fn = void (*)(const Q8Problem&, int64_t, int64_t);
using Q4Fn = void (*)(const Q4Problem&, int64_t, int64_t);

struct Isa {
  const char* name;
  Q8Fn q8;
  Q4Fn q4;
  FloatPanelsFn wide_float;  // nullptr: the AVX2 float tiles
  bool supported;
};

bool cpu_has_avxvnni() {
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
  return __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}

std::vector<Isa> isas() {
  __builtin_cpu_init();
  return {
      {"avx512vnni", q8_panels_avx512vnni, q4_panels_avx512vnni, float_panels_avx512,
       __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw")},
      {"avxvnni", q8_panels_avxvnni, q4_panels_avxvnni, nullptr, avxvnni_built() && cpu_has_avxvnni()},
      {"avx2", q8_panels_avx2, q4_panels_avx2, nullptr, true},
  };
}

Isa& current_isa() {
  static Isa chosen = [] {
    for (const Isa& isa : isas())
      if (isa.supported) return isa;
    return isas().back();
  }();
  return chosen;
}

// x (M, K) float32 -> xq (M, Kp) in [-levels, levels] (zero past K) and one scale per row
template <class T>
void quantize_rows(const float* x, int64_t M, int64_t K, int64_t Kp, int32_t levels_, T* xq, float* xscale) {
  for (int64_t m = 0; m < M; ++m) {
    const float* r = x + m * K;
    T* out = xq + m * Kp;
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(r[k]));
    std::fill(out, out + Kp, T(0));
    if (amax == 0) {
      xscale[m] = 0;
      continue;
    }
    const float levels = float(levels_), inv = levels / amax;
    for (int64_t k = 0; k < K; ++k)
      out[k] = T(std::min(levels, std::max(-levels, std::nearbyint(r[k] * inv))));
    xscale[m] = amax / levels;
  }
}

}  // namespace

void int8_matmul(const int8_t* w, const float* scale, int64_t panels, int64_t cols, int64_t rows,
                 const float* x, int64_t M, int64_t K, float* y) {
  std::vector<int16_t> xq(M * cols);
  std::vector<float> xscale(M);
  quantize_rows(x, M, K, cols, Q8_ACT, xq.data(), xscale.data());
  const Q8Problem q{w, scale, xq.data(), xscale.data(), cols / 2, M, rows, y};
  const Q8Fn fn = current_isa().q8;
  at::parallel_for(0, panels, 4, [&](int64_t p0, int64_t p1) { fn(q, p0, p1); });
}

void int4_matmul(const uint8_t* w, const float* scale, int64_t panels, int64_t cols, int64_t rows,
                 const float* x, int64_t M, int64_t K, float* y) {
  const int64_t G = cols / Q4_GROUP;
  std::vector<int8_t> xq(M * cols);
  std::vector<float> xscale(M);
  std::vector<int32_t> xsum(M * G);
  quantize_rows(x, M, K, cols, Q4_ACT, xq.data(), xscale.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t k = 0; k < Q4_GROUP; ++k) s += xq[m * cols + g * Q4_GROUP + k];
      xsum[m * G + g] = s;
    }
  const Q4Problem q{w, scale, xq.data(), xsum.data(), xscale.data(), G, M, rows, y};
  const Q4Fn fn = current_isa().q4;
  at::parallel_for(0, panels, 4, [&](int64_t p0, int64_t p1) { fn(q, p0, p1); });
}

std::vector<std::string> supported_isas() {
  std::vector<std::string> out;
  for (const Isa& isa : isas())
    if (isa.supported) out.push_back(isa.name);
  return out;
}

std::string isa() { return current_isa().name; }

FloatPanelsFn wide_float_panels() { return current_isa().wide_float; }

void set_isa(const std::string& name) {
  for (const Isa& isa : isas())
    if (name == isa.name) {
      TORCH_CHECK(isa.supported, "this CPU cannot run ", name);
      current_isa() = isa;
      return;
    }
  TORCH_CHECK(false, "unknown instruction set ", name);
}
