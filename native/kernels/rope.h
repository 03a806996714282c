#pragma once

#include <torch/torch.h>

namespace comlrl {

// Rotary embedding x·cos + rotate_half(x)·sin (transformers' apply_rotary_pos_emb, rounding as it does) in one pass
// on the CPU, and under autograd one node whose backward is the same pass turning the other way (the rotation's
// transpose: cos, −sin, since cos and sin repeat their first half in their second). Why: the tensor form is five
// libtorch calls per use, two uses per layer, each ~10 µs against a few microseconds of arithmetic at decode shapes,
// and as many autograd nodes again in a small model's backward.
// x: [batch, heads, queries, head_dim] (any strides); cos, sin: [batch, 1, queries, head_dim] without gradients.
// Returns a contiguous tensor shaped like x.
bool FusedRopeApplies(const torch::Tensor& x, const torch::Tensor& cos);

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace comlrl
