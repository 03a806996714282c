#include "head_logprobs.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "../kernels/token_logprobs.h"

#if COMLRL_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace comlrl {

namespace {

std::atomic<int64_t> block_rows_setting{0};

constexpr int64_t kMinBlockLogitBytes = int64_t{64} << 20;
constexpr int64_t kMaxBlockLogitBytes = int64_t{2} << 30;

// One block as the unblocked path computes it: the head's logits in float32, the targets' log-probs and, when asked,
// −Σ p log p (with its graph only when entropy_grad).
HeadLogProbs ScoreBlock(CausalLMImpl& model, const torch::Tensor& hidden, const torch::Tensor& targets, bool with_entropy, bool entropy_grad) {
  const torch::Tensor logits = model.logits(hidden).to(torch::kFloat32);
  HeadLogProbs out{TokenLogProbs(logits, targets), torch::Tensor()};
  if (with_entropy) {
    std::optional<torch::NoGradGuard> no_grad;
    if (!entropy_grad) no_grad.emplace();
    const torch::Tensor logprobs = logits.log_softmax(-1);
    out.entropy = -(logprobs.exp() * logprobs).sum(-1);
  }
  return out;
}

// Every block scored without a graph, into one [tokens] result.
HeadLogProbs ScoreBlocksWithoutGraph(CausalLMImpl& model, const torch::Tensor& hidden, const torch::Tensor& targets, bool with_entropy,
                                     int64_t block_rows) {
  torch::NoGradGuard no_grad;
  const int64_t rows = hidden.size(0);
  HeadLogProbs out{torch::empty({rows}, hidden.options().dtype(torch::kFloat32)), torch::Tensor()};
  if (with_entropy) out.entropy = torch::empty({rows}, out.logprobs.options());
  for (int64_t first = 0; first < rows; first += block_rows) {
    const int64_t n = std::min(block_rows, rows - first);
    const HeadLogProbs block = ScoreBlock(model, hidden.narrow(0, first, n), targets.narrow(0, first, n), with_entropy, false);
    out.logprobs.narrow(0, first, n).copy_(block.logprobs);
    if (with_entropy) out.entropy.narrow(0, first, n).copy_(block.entropy);
  }
  return out;
}

// The weight CausalLMImpl::logits projects with.
const torch::Tensor& HeadWeight(CausalLMImpl& model) { return model.lm_head ? model.lm_head->weight : model.model->embed_tokens->weight; }

torch::Tensor MatmulIn(const torch::Tensor& a, const torch::Tensor& b, bool widen) {
  return widen ? torch::mm(a.to(torch::kFloat32), b.to(torch::kFloat32)).to(a.scalar_type()) : torch::mm(a, b);
}

// Blocked scoring under grad mode: the forward keeps the hidden states and targets only; the backward recomputes one
// block's logits at a time, takes the gradient with respect to them (log-softmax, soft-cap and entropy by autograd
// over that block alone), and applies the head's two matmuls itself: the hidden states' gradient block by block, and
// the weight's added into its .grad in place (addmm), so no [vocab × hidden] gradient exists beside .grad.
struct BlockedHeadLogProbs : public torch::autograd::Function<BlockedHeadLogProbs> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor hidden, torch::Tensor targets,
                                                int64_t model_address, bool with_entropy, bool entropy_grad, int64_t block_rows) {
    auto* model = reinterpret_cast<CausalLMImpl*>(model_address);
    ctx->save_for_backward({hidden, targets});
    ctx->saved_data["model"] = model_address;
    ctx->saved_data["entropy_grad"] = entropy_grad;
    ctx->saved_data["block_rows"] = block_rows;
    const HeadLogProbs scores = ScoreBlocksWithoutGraph(*model, hidden, targets, with_entropy, block_rows);
    if (!with_entropy) return {scores.logprobs};
    if (!entropy_grad) ctx->mark_non_differentiable({scores.entropy});
    return {scores.logprobs, scores.entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor hidden = saved[0].detach();
    const torch::Tensor& targets = saved[1];
    auto& model = *reinterpret_cast<CausalLMImpl*>(ctx->saved_data["model"].toInt());
    const int64_t block_rows = ctx->saved_data["block_rows"].toInt();
    const torch::Tensor grad_logprobs = grads[0];
    const torch::Tensor grad_entropy = ctx->saved_data["entropy_grad"].toBool() && grads.size() > 1 ? grads[1] : torch::Tensor();
    torch::Tensor weight = HeadWeight(model);
    const bool widen = WidenForMatmul(weight);
    const double cap = model.config().final_softcap;
    const int64_t rows = hidden.size(0);
    torch::Tensor grad_hidden = torch::zeros_like(hidden);
    if (!grad_logprobs.defined() && !grad_entropy.defined()) return {grad_hidden, {}, {}, {}, {}, {}};
    for (int64_t first = 0; first < rows; first += block_rows) {
      const int64_t n = std::min(block_rows, rows - first);
      const torch::Tensor block_hidden = hidden.narrow(0, first, n);
      torch::Tensor head_out;
      {
        torch::NoGradGuard no_grad;
        head_out = MatmulIn(block_hidden, weight.t(), widen);
      }
      const torch::Tensor leaf = head_out.requires_grad_(true);
      torch::Tensor grad_head_out;
      {
        torch::AutoGradMode enable(true);
        const torch::Tensor logits = SoftCap(leaf, cap).to(torch::kFloat32);
        torch::autograd::variable_list outputs, output_grads;
        if (grad_logprobs.defined()) {
          outputs.push_back(TokenLogProbs(logits, targets.narrow(0, first, n)));
          output_grads.push_back(grad_logprobs.narrow(0, first, n));
        }
        if (grad_entropy.defined()) {
          const torch::Tensor logprobs = logits.log_softmax(-1);
          outputs.push_back(-(logprobs.exp() * logprobs).sum(-1));
          output_grads.push_back(grad_entropy.narrow(0, first, n));
        }
        grad_head_out = torch::autograd::grad(outputs, {leaf}, output_grads)[0];
      }
      torch::NoGradGuard no_grad;
      grad_hidden.narrow(0, first, n).copy_(MatmulIn(grad_head_out, weight, widen));
      if (!weight.requires_grad()) continue;
      torch::Tensor& weight_grad = weight.mutable_grad();
      if (!weight_grad.defined()) {
        weight_grad = MatmulIn(grad_head_out.t(), block_hidden, widen);
      } else if (widen) {
        weight_grad.add_(MatmulIn(grad_head_out.t(), block_hidden, widen));
      } else {
        weight_grad.addmm_(grad_head_out.t(), block_hidden);
      }
    }
    return {grad_hidden, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

int64_t LogitsBlockBytes(const torch::Device& device, int64_t free_bytes) {
  if (!device.is_cuda()) return kMinBlockLogitBytes;
  return std::clamp<int64_t>(free_bytes / 16, kMinBlockLogitBytes, kMaxBlockLogitBytes);
}

int64_t DeviceFreeBytes(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
#if COMLRL_WITH_CUDA
  const c10::cuda::CUDAGuard guard(device);
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  int64_t cached = 0;
#if TORCH_VERSION_MAJOR >= 2
  auto* allocator = c10::cuda::CUDACachingAllocator::get();
  if (allocator != nullptr && allocator->initialized()) {
    const auto stats = allocator->getDeviceStats(device.index());
    constexpr size_t kAggregate = 0;  // StatType::AGGREGATE
    cached = stats.reserved_bytes[kAggregate].current - stats.allocated_bytes[kAggregate].current;
  }
#endif
  return static_cast<int64_t>(free) + cached;
#else
  TORCH_CHECK(false, "DeviceFreeBytes: ", device.str(), " needs the CUDA variant of the addon");
#endif
}

int64_t LogitsBlockRows(int64_t vocab, const torch::Device& device, int64_t free_bytes) {
  const int64_t setting = block_rows_setting.load();
  if (setting > 0) return setting;
  return std::max<int64_t>(1, LogitsBlockBytes(device, free_bytes) / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(vocab, 1)));
}

void SetLogitsBlockRows(int64_t rows) {
  TORCH_CHECK(rows >= 0, "setLogitsBlockRows: rows must be 0 (automatic) or positive, got ", rows);
  block_rows_setting.store(rows);
}

HeadLogProbs TokenLogProbsThroughHead(CausalLMImpl& model, const torch::Tensor& hidden, const torch::Tensor& targets, bool with_entropy,
                                      bool entropy_grad) {
  TORCH_CHECK(hidden.dim() == 2 && targets.dim() == 1 && hidden.size(0) == targets.size(0), "TokenLogProbsThroughHead: hidden ",
              hidden.sizes(), " do not match targets ", targets.sizes());
  const int64_t rows = hidden.size(0);
  const int64_t block_rows = LogitsBlockRows(model.config().vocab_size, hidden.device(), DeviceFreeBytes(hidden.device()));
  if (rows <= block_rows) return ScoreBlock(model, hidden, targets, with_entropy, entropy_grad);
  if (!torch::GradMode::is_enabled()) return ScoreBlocksWithoutGraph(model, hidden, targets, with_entropy, block_rows);
  // Gradients reach the head's weight through the hidden states' graph only: without one, the head is scored whole.
  if (!hidden.requires_grad()) return ScoreBlock(model, hidden, targets, with_entropy, entropy_grad);
  const torch::autograd::variable_list out = BlockedHeadLogProbs::apply(hidden, targets, reinterpret_cast<int64_t>(&model), with_entropy,
                                                                        with_entropy && entropy_grad, block_rows);
  HeadLogProbs result{out[0], with_entropy ? out[1] : torch::Tensor()};
  if (with_entropy && !entropy_grad) result.entropy = result.entropy.detach();
  return result;
}

}  // namespace comlrl
