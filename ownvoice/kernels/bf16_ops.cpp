// The bf16 products (bf16dot.h) as torch ops: activations rounded to bf16 once per call, the
// work shared out over blocks of four panels and, for long inputs, of rows (as float_tile.h's).
#include "bf16_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "bf16dot.h"
#include "intdot_matmul.h"

namespace {

constexpr int64_t PANEL = 16;
constexpr int64_t ROW_BLOCK = 96;

struct PairWeight {
  const uint32_t* w;
  int64_t panels, K2, rows;
};

PairWeight as_pairs(const torch::Tensor& w, int64_t rows) {
  TORCH_CHECK(w.scalar_type() == at::kBFloat16 && w.dim() == 3 && w.size(2) == 2 * PANEL &&
                  w.is_contiguous(),
              "w must be contiguous bf16 pair panels (panels, K / 2, 32)");
  TORCH_CHECK(rows > 0 && rows <= w.size(0) * PANEL, "rows does not fit the panels");
  return {reinterpret_cast<const uint32_t*>(w.data_ptr<at::BFloat16>()), w.size(0), w.size(1), rows};
}

void matmul(const PairWeight& W, const PairRows& r, int64_t M, float* y) {
  const int64_t groups = (W.panels + 3) / 4;
  const int64_t blocks = M >= 2 * ROW_BLOCK ? (M + ROW_BLOCK - 1) / ROW_BLOCK : 1;
  const int64_t rows = blocks == 1 ? M : ROW_BLOCK;
  at::parallel_for(0, blocks * groups, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / groups, g = i % groups, m0 = b * rows, m = std::min(rows, M - m0);
      const PairRows part{r.x + m0 * r.ld, r.ld, r.seg, r.tap};
      bf16dot_panels_avx512(Bf16Block{W.w, part, W.K2, m, W.rows, y + m0 * W.rows, W.rows}, 4 * g,
                            std::min(4 * g + 4, W.panels));
    }
  });
}

// n float32 -> bf16 words, in parallel chunks (n even)
void to_bf16(const float* x, int64_t n, uint16_t* out) {
  at::parallel_for(0, n, 1 << 16, [&](int64_t i0, int64_t i1) {
    i0 &= ~int64_t(1);
    i1 = i1 == n ? n : (i1 & ~int64_t(1));
    to_bf16_avx512(x + i0, i1 - i0, out + i0);
  });
}

void check_available() {
  TORCH_CHECK(has_bf16dot(), "the bf16 products need AVX512-BF16 (and the AVX-512 instruction set)");
}

}  // namespace

bool has_bf16dot() {
  static const bool available = bf16dot_available();
  return available && isa() == "avx512vnni";
}

torch::Tensor linear_bf16(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                          int64_t rows) {
  check_available();
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 (M, K) tensor");
  const PairWeight W = as_pairs(w, rows);
  const int64_t M = x.size(0), K = x.size(1), K2 = (K + 1) / 2;
  TORCH_CHECK(K2 == W.K2, "x and w disagree on K");
  std::vector<uint32_t> pairs(M * K2, 0);
  auto* words = reinterpret_cast<uint16_t*>(pairs.data());
  if (K % 2 == 0) {
    to_bf16(x.data_ptr<float>(), M * K, words);
  } else {  // each row padded to a whole pair with a zero
    for (int64_t m = 0; m < M; ++m) to_bf16_avx512(x.data_ptr<float>() + m * K, K, words + m * 2 * K2);
  }
  auto y = torch::empty({M, rows}, x.options());
  matmul(W, PairRows{pairs.data(), K2, K2, 0}, M, y.data_ptr<float>());
  if (bias.has_value() && bias->defined()) y.add_(*bias);
  return y;
}

torch::Tensor conv_rows_bf16(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                             int64_t rows, int64_t taps, int64_t dilation) {
  check_available();
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.dim() == 3 && x.is_contiguous(),
              "x must be a contiguous float32 (B, T, C) tensor");
  const PairWeight W = as_pairs(w, rows);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), span = (taps - 1) * dilation;
  TORCH_CHECK(C % 2 == 0, "the bf16 convolutions take an even channel count");
  TORCH_CHECK(taps >= 1 && dilation >= 1 && W.K2 == taps * C / 2, "w does not match taps x channels");
  TORCH_CHECK(T > span, "the input is shorter than the convolution's context");
  const int64_t M = T - span, C2 = C / 2;
  std::vector<uint32_t> pairs(B * T * C2);
  to_bf16(x.data_ptr<float>(), B * T * C, reinterpret_cast<uint16_t*>(pairs.data()));
  auto y = torch::empty({B, M, rows}, x.options());
  for (int64_t b = 0; b < B; ++b)
    matmul(W, PairRows{pairs.data() + b * T * C2, C2, C2, dilation * C2}, M,
           y.data_ptr<float>() + b * M * rows);
  if (bias.has_value() && bias->defined()) y.add_(*bias);
  return y;
}
