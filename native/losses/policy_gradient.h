// The policy-gradient loss: −Σ_k A_k · log π(completion_k), every completion token scored (the last included), no
// padding; scale weights it for accumulation over micro-batches.
#pragma once

#include <torch/torch.h>

#include "completion_scoring.h"

namespace comlrl {

// advantages: float32 [rows] on any device; returns the scalar loss with the graph of scores.sums.
torch::Tensor PolicyGradientLoss(const CompletionScores& scores, const torch::Tensor& advantages, double scale);

}  // namespace comlrl
