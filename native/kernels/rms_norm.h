#pragma once

#include <torch/torch.h>

namespace comlrl {

// transformers' RMSNorm — normalise in fp32, round to the input's dtype, scale by the weight — in one pass per row on
// the CPU, and under autograd one node with a fused backward. Why: written with tensor ops it is six libtorch calls
// of ~10 µs each (and as many autograd nodes in a backward), and a decode step of a small model runs nine of them per
// 4 layers, where the arithmetic itself takes a few microseconds.
bool FusedRmsNormApplies(const torch::Tensor& x, const torch::Tensor& weight);

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace comlrl
