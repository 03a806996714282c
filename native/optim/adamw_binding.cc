#include "adamw_binding.h"

#include "../bridge/bridge.h"

namespace comlrl {

void NativeOptimizer::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function cls = DefineClass(env, "NativeOptimizer",
                                   {
                                       InstanceMethod("step", &NativeOptimizer::Step),
                                       InstanceMethod("setLearningRate", &NativeOptimizer::SetLearningRate),
                                       InstanceMethod("save", &NativeOptimizer::Save),
                                       InstanceMethod("load", &NativeOptimizer::Load),
                                       InstanceMethod("dispose", &NativeOptimizer::Dispose),
                                   });
  exports.Set("NativeOptimizer", cls);
}

NativeOptimizer::NativeOptimizer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeOptimizer>(info) {
  Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    Napi::Object options = ObjectArg(info, 1, "options");
    const double lr = NumberField(options, "lr");
    const bool has_betas = options.Get("betas").IsArray();
    const double beta1 = has_betas ? options.Get("betas").As<Napi::Array>().Get(0u).As<Napi::Number>().DoubleValue() : 0.9;
    const double beta2 = has_betas ? options.Get("betas").As<Napi::Array>().Get(1u).As<Napi::Number>().DoubleValue() : 0.999;
    auto adamw_options = torch::optim::AdamWOptions(lr)
                             .betas({beta1, beta2})
                             .eps(NumberFieldOr(options, "eps", 1e-8))
                             .weight_decay(NumberFieldOr(options, "weightDecay", 0.01));
    std::vector<torch::Tensor> parameters;
    for (const auto& parameter : model->module->parameters()) {
      if (parameter.requires_grad()) parameters.push_back(parameter);
    }
    if (parameters.empty()) throw ArgumentError("the model has no trainable parameters (it is frozen)");
    state_ = std::make_shared<State>(State{model, std::make_unique<torch::optim::AdamW>(parameters, adamw_options)});
    return info.Env().Undefined();
  });
}

std::shared_ptr<NativeOptimizer::State> NativeOptimizer::Live() const {
  if (!state_) throw ArgumentError("the optimizer has been disposed");
  return state_;
}

// step({ maxGradNorm? }) -> Promise<{ gradNorm }>: the total gradient norm before any clipping.
Napi::Value NativeOptimizer::Step(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = info.Length() > 0 && info[0].IsObject() ? info[0].As<Napi::Object>() : Napi::Object::New(info.Env());
    const double max_norm = NumberFieldOr(options, "maxGradNorm", 0.0);
    return RunAsync(info.Env(), state->model->device.str(), [state, max_norm]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->model->mutex);
      std::vector<torch::Tensor> with_grad;
      for (const auto& group : state->adamw->param_groups()) {
        for (const auto& parameter : group.params()) {
          if (parameter.grad().defined()) with_grad.push_back(parameter);
        }
      }
      double norm = 0.0;
      if (max_norm > 0) {
        norm = torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
      } else if (!with_grad.empty()) {
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> norms;
        for (const auto& parameter : with_grad) norms.push_back(parameter.grad().norm(2).to(torch::kFloat32));
        norm = torch::stack(norms).norm(2).item<double>();
      }
      state->adamw->step();
      return [norm](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("gradNorm", norm);
        return out;
      };
    });
  });
}

Napi::Value NativeOptimizer::SetLearningRate(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsNumber()) throw ArgumentError("setLearningRate(lr): a number");
    std::lock_guard<std::mutex> lock(state->model->mutex);
    for (auto& group : state->adamw->param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(info[0].As<Napi::Number>().DoubleValue());
    }
    return info.Env().Undefined();
  });
}

// save(path) / load(path): the optimizer state (moments, step counts) in libtorch's archive format.
Napi::Value NativeOptimizer::Save(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsString()) throw ArgumentError("save(path): a file path");
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    return RunAsync(info.Env(), state->model->device.str(), [state, path]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->model->mutex);
      torch::save(*state->adamw, path);
      return nullptr;
    });
  });
}

Napi::Value NativeOptimizer::Load(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsString()) throw ArgumentError("load(path): a file path");
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    return RunAsync(info.Env(), state->model->device.str(), [state, path]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->model->mutex);
      torch::load(*state->adamw, path);
      return nullptr;
    });
  });
}

Napi::Value NativeOptimizer::Dispose(const Napi::CallbackInfo& info) {
  state_.reset();
  return info.Env().Undefined();
}

}  // namespace comlrl
