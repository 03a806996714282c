// The Bradley–Terry preference loss of a scalar reward model: mean −log σ(s_chosen − s_rejected) over the pairs.
#pragma once

#include <torch/torch.h>

namespace comlrl {

// scores: float32 [rows] with its graph; chosen/rejected: int64 [pairs] row indices (checked by the caller).
torch::Tensor BradleyTerryLoss(const torch::Tensor& scores, const torch::Tensor& chosen, const torch::Tensor& rejected);

}  // namespace comlrl
