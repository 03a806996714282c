#include "value_loss.h"

namespace comlrl {

torch::Tensor ValueLoss(const torch::Tensor& values, const torch::Tensor& targets, const std::optional<ValueClip>& clip) {
  TORCH_CHECK(targets.numel() == values.numel(), "targets has ", targets.numel(), " values for ", values.numel(), " readouts");
  const torch::Tensor y = targets.to(values.device(), torch::kFloat32).view_as(values);
  const torch::Tensor unclipped = (y - values).square();
  if (!clip) return unclipped.mean();
  TORCH_CHECK(clip->old_values.numel() == values.numel(), "oldValues has ", clip->old_values.numel(), " values for ",
              values.numel(), " readouts");
  TORCH_CHECK(clip->range >= 0, "clipRange must be non-negative, got ", clip->range);
  const torch::Tensor old_values = clip->old_values.to(values.device(), torch::kFloat32).view_as(values);
  const torch::Tensor clipped_values = old_values + (values - old_values).clamp(-clip->range, clip->range);
  return torch::max(unclipped, (y - clipped_values).square()).mean();
}

}  // namespace comlrl
