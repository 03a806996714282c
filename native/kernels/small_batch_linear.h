#pragma once

#include <torch/torch.h>

namespace comlrl {

// y = x · weightᵀ (+ bias) for a handful of rows of x (decoding), reading the weight from memory exactly once.
//
// Why: a decode step multiplies 1–16 rows by every weight matrix. BLAS GEMM packs the whole weight into its panel
// layout on every call (sgemm_incopy was ~30% of a batch-8 decode profile) and its GEMV streams well below the
// memory bandwidth with two threads; this kernel streams each weight row once and applies it to all rows of x while
// it is in L1. Weights are fp32 or bf16 (bf16 is widened to fp32 in registers, so a bf16 model reads half the bytes
// and accumulates in fp32 — CPUs without bf16 instructions otherwise run bf16 matmuls ~30× below fp32).
//
// Applies to CPU tensors without autograd, on x86-64 CPUs with AVX2 and FMA; callers fall back to torch otherwise.
bool SmallBatchLinearApplies(const torch::Tensor& x, const torch::Tensor& weight);

torch::Tensor SmallBatchLinear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// The most rows of x the kernel takes. fp32: beyond 16 rows GEMM's packing is amortised and its blocking wins
// (measured on a 2-core EPYC, 12M- and 0.5B-shaped layers). bf16 weights: the alternative on a CPU without bf16
// instructions is widening every weight to fp32 per call, so the kernel stays ahead to 64 rows.
constexpr int64_t kSmallBatchMaxRowsFloat32 = 16;
constexpr int64_t kSmallBatchMaxRowsBFloat16 = 64;

}  // namespace comlrl
