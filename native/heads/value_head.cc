#include "value_head.h"

namespace comlrl {

ValueHeadImpl::ValueHeadImpl(int64_t hidden_size, int64_t hidden_dim) : hidden_size_(hidden_size), hidden_dim_(hidden_dim) {
  TORCH_CHECK(hidden_size > 0, "hiddenSize must be positive, got ", hidden_size);
  TORCH_CHECK(hidden_dim >= 0, "hiddenDim must be positive (or null for a linear head), got ", hidden_dim);
  if (hidden_dim == 0) {
    weight_ = register_parameter("weight", torch::empty({1, hidden_size}));
    bias_ = register_parameter("bias", torch::empty({1}));
  } else {
    first_ = register_module("0", torch::nn::Linear(hidden_size, hidden_dim));
    second_ = register_module("2", torch::nn::Linear(hidden_dim, 1));
  }
}

torch::Tensor ValueHeadImpl::forward(const torch::Tensor& hidden) {
  const torch::Tensor x = hidden.to(parameters().front().scalar_type());
  const torch::Tensor out = hidden_dim_ == 0 ? torch::nn::functional::linear(x, weight_, bias_) : second_(torch::tanh(first_(x)));
  return out.squeeze(-1).to(torch::kFloat32);
}

void ValueHeadImpl::Init(at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    if (item.key().size() >= 4 && item.key().compare(item.key().size() - 4, 4, "bias") == 0) {
      item.value().zero_();
    } else {
      item.value().normal_(0.0, 0.02, generator);
    }
  }
}

}  // namespace comlrl
