// NativeOptimizer: AdamW over one model's parameters. Several optimizers may share a model (parameter sharing with
// per-agent optimizer state); each step holds the model's mutex.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <memory>

#include "../model/model_binding.h"

namespace comlrl {

class NativeOptimizer : public Napi::ObjectWrap<NativeOptimizer> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  // new NativeOptimizer(model, { lr, betas: [b1, b2], eps, weightDecay })
  explicit NativeOptimizer(const Napi::CallbackInfo& info);

 private:
  struct State {
    std::shared_ptr<ModelState> model;
    std::unique_ptr<torch::optim::AdamW> adamw;
  };
  std::shared_ptr<State> Live() const;
  Napi::Value Step(const Napi::CallbackInfo& info);
  Napi::Value SetLearningRate(const Napi::CallbackInfo& info);
  Napi::Value Save(const Napi::CallbackInfo& info);
  Napi::Value Load(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<State> state_;
};

}  // namespace comlrl
