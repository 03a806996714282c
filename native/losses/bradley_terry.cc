#include "bradley_terry.h"

namespace comlrl {

torch::Tensor BradleyTerryLoss(const torch::Tensor& scores, const torch::Tensor& chosen, const torch::Tensor& rejected) {
  TORCH_CHECK(chosen.numel() == rejected.numel(), "chosen has ", chosen.numel(), " rows but rejected ", rejected.numel());
  TORCH_CHECK(chosen.numel() > 0, "no preference pairs");
  const torch::Tensor margin = scores.index_select(0, chosen.to(scores.device())) - scores.index_select(0, rejected.to(scores.device()));
  // −log σ(m) = softplus(−m), finite for any margin (log(sigmoid(m)) underflows to −inf below m ≈ −88 in fp32).
  return torch::nn::functional::softplus(-margin).mean();
}

}  // namespace comlrl
