#include "router_loss.h"

namespace comlrl {

RouterAuxRecording::RouterAuxRecording(CausalLMImpl& model, double coef)
    : model_(model), coef_(coef), active_(coef > 0 && model.config().num_experts > 0) {
  if (active_) model_.set_router_records(&records_);
}

RouterAuxRecording::~RouterAuxRecording() {
  if (active_) model_.set_router_records(nullptr);
}

torch::Tensor RouterAuxRecording::Loss() const {
  TORCH_CHECK(active_, "RouterAuxRecording::Loss: nothing was recorded (coefficient 0 or no experts)");
  const int64_t experts = model_.config().num_experts, top_k = model_.config().experts_per_token;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(model_.model->embed_tokens->weight.device());
  torch::Tensor assigned = torch::zeros({experts}, options), probability = torch::zeros({experts}, options);
  torch::Tensor total = torch::zeros({}, options);
  for (const RouterRecord& record : records_) {
    for (const torch::Tensor& logits : record.logits) {
      // transformers takes the softmax in the logits' dtype and sums the probabilities in float32.
      const torch::Tensor probs = torch::softmax(logits, -1);
      const torch::Tensor chosen = std::get<1>(probs.topk(top_k, -1));
      assigned = assigned + torch::zeros({experts}, options).scatter_add(0, chosen.reshape({-1}), record.weight.repeat_interleave(top_k));
      probability = probability + (probs.to(torch::kFloat32) * record.weight.unsqueeze(-1)).sum(0);
      total = total + record.weight.sum();
    }
  }
  TORCH_CHECK(total.item<double>() > 0, "the router auxiliary loss has no token to average over (no sparse layer ran a real token)");
  return (assigned / total * (probability / total)).sum() * static_cast<double>(experts);
}

}  // namespace comlrl
