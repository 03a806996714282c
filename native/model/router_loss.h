// The router's auxiliary load-balancing loss of a sparse mixture-of-experts model, as transformers 5's
// load_balancing_loss_func computes it (Qwen3-MoE, Mixtral), over the forwards run while a RouterAuxRecording is
// installed: a trainer adds coefficient × Loss() to its loss.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decoder.h"

namespace comlrl {

// Installs itself on the model for its lifetime when coef > 0 and the model has experts (the caller holds the
// model's lock); every forward meanwhile records its router logits.
class RouterAuxRecording {
 public:
  RouterAuxRecording(CausalLMImpl& model, double coef);
  ~RouterAuxRecording();
  RouterAuxRecording(const RouterAuxRecording&) = delete;
  RouterAuxRecording& operator=(const RouterAuxRecording&) = delete;

  bool active() const { return active_; }
  double coef() const { return coef_; }
  // Σ over sparse layers and recorded tokens, each token weighted: f_e = the weighted count of its top-k
  // assignments to expert e / the total weight, P_e = the weighted mean softmax probability of e; the loss is
  // num_experts · Σ_e f_e · P_e. The counts are constants: the gradient flows through P.
  torch::Tensor Loss() const;

 private:
  CausalLMImpl& model_;
  double coef_;
  bool active_;
  std::vector<RouterRecord> records_;
};

}  // namespace comlrl
