#include "attention.h"

#include <torch/version.h>

#include <limits>

namespace comlrl {

namespace {

// The attention probabilities of the scaled queries: [batch, kv heads, group · queries, keys].
torch::Tensor Probabilities(const torch::Tensor& scaled_q, const torch::Tensor& k, const torch::Tensor& allowed, int64_t group) {
  torch::Tensor scores = torch::matmul(scaled_q, k.transpose(-1, -2));
  const int64_t batch = scores.size(0), kv_heads = scores.size(1), keys = scores.size(3);
  scores.view({batch, kv_heads, group, scores.size(2) / group, keys}).masked_fill_(allowed.logical_not(), std::numeric_limits<float>::lowest());
  return torch::softmax(scores, -1);
}

struct GroupedAttention : public torch::autograd::Function<GroupedAttention> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& grouped_q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& allowed, int64_t group, double scale) {
    const torch::Tensor scaled_q = grouped_q * scale;
    const torch::Tensor probs = Probabilities(scaled_q, k, allowed, group);
    ctx->save_for_backward({scaled_q, k, v, probs});
    ctx->saved_data["scale"] = scale;
    return torch::matmul(probs, v);
  }

  // A masked score's probability is 0, so the softmax backward gives it no gradient, as the masked fill's backward
  // would. (A query that sees no key spreads over all of them; its output feeds only its own padded position, which
  // nothing reads, so its incoming gradient is 0 either way.)
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &scaled_q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor grad_out = grads[0];
    const torch::Tensor grad_probs = torch::matmul(grad_out, v.transpose(-1, -2));
    const torch::Tensor grad_v = torch::matmul(probs.transpose(-1, -2), grad_out);
    const torch::Tensor grad_scores = torch::_softmax_backward_data(grad_probs, probs, -1, probs.scalar_type());
    const torch::Tensor grad_q = torch::matmul(grad_scores, k).mul_(scale);
    const torch::Tensor grad_k = torch::matmul(grad_scores.transpose(-1, -2), scaled_q);
    return {grad_q, grad_k, grad_v, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedAttentionApplies(const torch::Tensor& grouped_q, const torch::Tensor& k, const torch::Tensor& v, double softcap) {
  for (const auto* t : {&grouped_q, &k, &v}) {
    if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat32) return false;
  }
  return softcap <= 0;
}

torch::Tensor FusedAttention(const torch::Tensor& grouped_q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed,
                             int64_t group, double scale) {
  // Without autograd recording (scoring, decoding) the same arithmetic runs without the node around it.
  if (!torch::GradMode::is_enabled()) return torch::matmul(Probabilities(grouped_q * scale, k, allowed, group), v);
  return GroupedAttention::apply(grouped_q, k, v, allowed, group, scale);
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)

bool SdpaAvailable() { return true; }

torch::Tensor Sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed, double scale) {
  return at::scaled_dot_product_attention(q, k, v, allowed, /*dropout_p=*/0.0, /*is_causal=*/false, scale,
                                          /*enable_gqa=*/q.size(1) != k.size(1));
}

#else

bool SdpaAvailable() { return false; }

torch::Tensor Sdpa(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double) {
  TORCH_CHECK(false, "scaled_dot_product_attention needs libtorch 2.5 or later");
}

#endif

}  // namespace comlrl
