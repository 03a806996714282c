#include "attention.h"

#include <torch/version.h>

#include <limits>
#include <mutex>
#include <optional>

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

namespace {

// The arguments Sdpa passes for q, k, v and allowed (see attention.h).
struct SdpaArguments {
  torch::Tensor k, v;
  std::optional<torch::Tensor> mask;
  bool causal = false;
  bool grouped = false;  // enable_gqa
};

SdpaArguments SdpaArgumentsFor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed) {
  SdpaArguments args{k, v, allowed.defined() ? std::optional<torch::Tensor>(allowed) : std::nullopt, !allowed.defined(),
                     q.size(1) != k.size(1)};
  const bool half = q.scalar_type() == torch::kBFloat16 || q.scalar_type() == torch::kHalf;
  if (args.grouped && q.is_cuda() && (args.mask || !half)) {
    const int64_t group = q.size(1) / k.size(1);
    args.k = k.repeat_interleave(group, 1);
    args.v = v.repeat_interleave(group, 1);
    args.grouped = false;
  }
  return args;
}

}  // namespace

torch::Tensor Sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed, double scale,
                   double dropout, at::Generator* generator) {
  const SdpaArguments args = SdpaArgumentsFor(q, k, v, allowed);
  if (dropout <= 0) return at::scaled_dot_product_attention(q, args.k, args.v, args.mask, /*dropout_p=*/0.0, args.causal, scale, args.grouped);
  TORCH_CHECK(generator != nullptr, "Sdpa: attention dropout needs a generator");
  // Nothing else draws from the default generator (every sampling and dropout stream is a generator of its own),
  // so lending it the stream's state for this one call keeps the stream seeded and restorable. Each lock is
  // released before the kernel runs, since the kernel takes the default generator's lock itself.
  at::Generator shared = at::globalContext().defaultGenerator(q.device());
  torch::Tensor shared_state;
  {
    std::scoped_lock lock(shared.mutex(), generator->mutex());
    shared_state = shared.get_state();
    shared.set_state(generator->get_state());
  }
  torch::Tensor out = at::scaled_dot_product_attention(q, args.k, args.v, args.mask, dropout, args.causal, scale, args.grouped);
  std::scoped_lock lock(shared.mutex(), generator->mutex());
  generator->set_state(shared.get_state());
  shared.set_state(shared_state);
  return out;
}

std::string SdpaKernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& allowed, double scale) {
  const SdpaArguments args = SdpaArgumentsFor(q, k, v, allowed);
  // scaled_dot_product_attention turns a boolean mask into an additive one of the query's dtype before it chooses.
  std::optional<torch::Tensor> mask;
  if (args.mask) {
    mask = torch::zeros(args.mask->sizes(), q.options()).masked_fill_(args.mask->logical_not(), -std::numeric_limits<double>::infinity());
  }
  // The values of libtorch's sdp::SDPBackend.
  switch (at::_fused_sdp_choice(q, args.k, args.v, mask, /*dropout_p=*/0.0, args.causal, scale, args.grouped)) {
    case 0: return "math";
    case 1: return "flash_attention";
    case 2: return "efficient_attention";
    case 3: return "cudnn_attention";
    case 4: return "overrideable";
  }
  return "none";
}

#else

bool SdpaAvailable() { return false; }

torch::Tensor Sdpa(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double, double, at::Generator*) {
  TORCH_CHECK(false, "scaled_dot_product_attention needs libtorch 2.5 or later");
}

std::string SdpaKernel(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double) {
  TORCH_CHECK(false, "scaled_dot_product_attention needs libtorch 2.5 or later");
}

#endif

}  // namespace comlrl
