#include "policy_gradient.h"

namespace comlrl {

torch::Tensor PolicyGradientLoss(const CompletionScores& scores, const torch::Tensor& advantages, double scale) {
  TORCH_CHECK(advantages.numel() == scores.sums.numel(), "advantages has ", advantages.numel(), " values for ",
              scores.sums.numel(), " completions");
  return -(advantages.to(scores.sums.device()) * scores.sums).sum() * scale;
}

}  // namespace comlrl
