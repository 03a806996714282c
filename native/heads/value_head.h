// A scalar head on a decoder's last hidden state (after the final norm): a critic's value head, or a reward model's
// score head. Linear(H, 1), or Linear(H, d) -> Tanh -> Linear(d, 1); parameter names are the ones a PyTorch
// state_dict of nn.Linear / nn.Sequential uses ("weight", "bias" / "0.weight", "0.bias", "2.weight", "2.bias"), so
// heads saved by Python load unchanged.
#pragma once

#include <torch/torch.h>

#include "../bridge/module_state.h"

namespace comlrl {

class ValueHeadImpl : public torch::nn::Module {
 public:
  // hidden_dim 0: the single linear layer.
  ValueHeadImpl(int64_t hidden_size, int64_t hidden_dim);
  // [..., H] hidden states of any dtype -> float32 [...] values, computed in the head's dtype.
  torch::Tensor forward(const torch::Tensor& hidden);
  // Weights normal(0, 0.02) from generator, biases zero.
  void Init(at::Generator& generator);

  int64_t hidden_size() const { return hidden_size_; }
  int64_t hidden_dim() const { return hidden_dim_; }

 private:
  int64_t hidden_size_, hidden_dim_;
  torch::Tensor weight_, bias_;                               // linear form
  torch::nn::Linear first_{nullptr}, second_{nullptr};  // MLP form: layers "0" and "2" ("1" is the parameterless Tanh)
};
TORCH_MODULE(ValueHead);

struct HeadState : ModuleState {
  ValueHead module;
  HeadState(ValueHead module, torch::Device device, torch::Dtype dtype) : ModuleState(device, dtype), module(std::move(module)) {}
  torch::nn::Module& Module() override { return *module; }
};

}  // namespace comlrl
