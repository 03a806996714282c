#pragma once

#include <torch/torch.h>

namespace comlrl {

// Rotary embedding x·cos + rotate_half(x)·sin (transformers' apply_rotary_pos_emb, rounding as it does) in one pass,
// for CPU inference (no autograd). Why: the tensor form is five libtorch calls per use, two uses per layer, each
// ~10 µs against a few microseconds of arithmetic at decode shapes.
// x: [batch, heads, queries, head_dim] (any strides); cos, sin: [batch, 1, queries, head_dim]. Returns a contiguous
// tensor shaped like x.
bool FusedRopeApplies(const torch::Tensor& x, const torch::Tensor& cos);

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace comlrl
