// The bf16 products' entry points (bf16_ops.cpp), bound in cpu_ops.cpp.
#pragma once

#include <torch/extension.h>

// AVX512-BF16 products are available here and the products' instruction set (intdot.cpp) is
// AVX-512 (forcing OWNVOICE_KERNEL_ISA=avx2 turns them off too)
bool has_bf16dot();
// y = (x @ w.T) (+ bias), x float32 (M, K) rounded to bf16; w (panels, ceil(K / 2), 32) bf16
torch::Tensor linear_bf16(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                          int64_t rows);
// conv_rows (cpu_ops.cpp) in bf16: x (B, T, C) float32 with C even, w the pair panels of the
// tap-major (rows, taps * C) matrix
torch::Tensor conv_rows_bf16(torch::Tensor x, torch::Tensor w, c10::optional<torch::Tensor> bias,
                             int64_t rows, int64_t taps, int64_t dilation);
