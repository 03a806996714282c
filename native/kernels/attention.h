#pragma once

#include <torch/torch.h>

#include <string>

namespace comlrl {

// Grouped-query attention, softmax(q kᵀ · scale, masked) v, as one autograd node for fp32 CPU tensors. Why: written
// with tensor ops, the scores [batch, kv heads, group · queries, keys] pass through a scale, a masked fill and the
// softmax, each a full pass with its own allocation, and the backward repeats them; at the sequence lengths a reward
// model or a critic reads (8 rows of ~220 tokens on the demo) those passes took half of a training step. Here the
// scale goes onto the queries (head_dim wide, not keys wide), the mask is filled in place, and the backward is four
// matmuls and the softmax's own backward kernel.
bool FusedAttentionApplies(const torch::Tensor& grouped_q, const torch::Tensor& k, const torch::Tensor& v, double softcap);

// grouped_q [batch, kv heads, group · queries, head_dim] (query heads sharing a kv head stacked along the query
// axis), k and v [batch, kv heads, keys, head_dim], allowed: bool, broadcastable to [batch, kv heads, group, queries,
// keys] (may query i see key j). A query that may see no key attends uniformly to all keys, as the masked softmax
// of the tensor-op form does. Returns [batch, kv heads, group · queries, head_dim].
torch::Tensor FusedAttention(const torch::Tensor& grouped_q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed,
                             int64_t group, double scale);

// libtorch's scaled_dot_product_attention can run: libtorch 2.5 or later, whose enable_gqa lets query heads share
// key/value heads without copies (the headers of 1.13 have no such function).
bool SdpaAvailable();

// libtorch's scaled_dot_product_attention: q [batch, heads, queries, head_dim], k and v [batch, kv heads, keys,
// head_dim], allowed bool [batch, 1, queries, keys], or undefined for causal attention over keys = queries (rows
// right-padded, so that a causal flag alone gives every real token its keys: no mask to refuse the flash kernel).
// It picks its kernel (flash, memory-efficient, cuDNN or math) by device, dtype and arguments. On CUDA, where flash
// cannot run (a mask, or fp32) and query heads share key/value heads, the keys/values are expanded to the query
// heads first, as transformers' repeat_kv does: memory-efficient takes masks and fp32 but not grouped heads, and
// the math kernel it would otherwise fall to builds every score in fp32. A query that may see no key (a left pad)
// gets zeros where ours attends uniformly (torch ≥ 2.5); nothing reads a pad's output. Returns [batch, heads,
// queries, head_dim]. dropout > 0 drops attention probabilities at that rate (training mode), drawing from
// generator: scaled_dot_product_attention takes no generator and draws from the device's default one, so that one
// is given generator's state for the call and generator takes back what the call left.
torch::Tensor Sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed, double scale,
                   double dropout = 0, at::Generator* generator = nullptr);

// The kernel libtorch would run for that call (at::_fused_sdp_choice on the same arguments): "flash_attention",
// "efficient_attention", "cudnn_attention", "math" or "overrideable".
std::string SdpaKernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed, double scale);

}  // namespace comlrl
