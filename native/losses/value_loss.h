// The critic's regression loss: mean (y − V)², or PPO's clipped form mean max((y − V)², (y − V_clip)²) with
// V_clip = V_old + clamp(V − V_old, −clip, clip), which keeps a value update from moving far from the values the
// samples were collected with.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace comlrl {

struct ValueClip {
  torch::Tensor old_values;  // float32, shaped like the values
  double range;
};

// values: float32 [n] with its graph; targets: float32 [n]. Returns the scalar mean loss.
torch::Tensor ValueLoss(const torch::Tensor& values, const torch::Tensor& targets, const std::optional<ValueClip>& clip);

}  // namespace comlrl
