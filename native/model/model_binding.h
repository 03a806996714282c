// NativeModel: a causal LM owned by C++ and driven from JS — its own life: load / create, forward, generate, save,
// clone, freeze, parameter access, sampling streams, dispose. The losses and head readouts over it are free functions
// (losses/loss_binding.h, heads/readout_binding.h) that reach its state through StateOf. Heavy calls return Promises
// and hold the model's mutex, so calls on one model are serialised while different models (agents on different
// devices) run at the same time.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "../bridge/module_state.h"
#include "decoder.h"

namespace comlrl {

struct ModelState : ModuleState {
  CausalLM module;
  // Named sampling streams, each seedable and restorable; "default" always exists. Evaluation samples from its own
  // stream so that how often it runs never shifts the training trajectory. "dropout" always exists too: the
  // module's training-mode dropout draws its masks from it, so seeding and restoring it work as for any stream.
  std::map<std::string, at::Generator> generators;

  ModelState(CausalLM module, torch::Device device, torch::Dtype dtype, at::Generator generator, at::Generator dropout)
      : ModuleState(device, dtype), module(std::move(module)) {
    generators.emplace(kDefaultStream, std::move(generator));
    this->module->set_dropout_generator(dropout);
    generators.emplace(kDropoutStream, std::move(dropout));
  }
  torch::nn::Module& Module() override { return *module; }
  // The stream named so, or an error naming it when it was never seeded.
  at::Generator& Stream(const std::string& name);

  static constexpr const char* kDefaultStream = "default";
  static constexpr const char* kDropoutStream = "dropout";
};

class NativeModel : public Napi::ObjectWrap<NativeModel> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  explicit NativeModel(const Napi::CallbackInfo& info);

  // The live state behind a JS NativeModel, or a TorchError when it is not one or has been disposed.
  static std::shared_ptr<ModelState> StateOf(const Napi::Value& value, const char* what);
  static bool Is(const Napi::Value& value);

 private:
  static Napi::Object Wrap(Napi::Env env, std::shared_ptr<ModelState> state);
  static Napi::Value Load(const Napi::CallbackInfo& info);
  static Napi::Value Create(const Napi::CallbackInfo& info);

  std::shared_ptr<ModelState> Live() const;
  Napi::Value Forward(const Napi::CallbackInfo& info);
  Napi::Value Generate(const Napi::CallbackInfo& info);
  Napi::Value ZeroGrad(const Napi::CallbackInfo& info);
  Napi::Value ParameterNames(const Napi::CallbackInfo& info);
  Napi::Value GetParameter(const Napi::CallbackInfo& info);
  Napi::Value GetGradient(const Napi::CallbackInfo& info);
  Napi::Value Save(const Napi::CallbackInfo& info);
  Napi::Value LoadWeights(const Napi::CallbackInfo& info);
  Napi::Value Clone(const Napi::CallbackInfo& info);
  Napi::Value Freeze(const Napi::CallbackInfo& info);
  Napi::Value SetGradientCheckpointing(const Napi::CallbackInfo& info);
  Napi::Value SetTraining(const Napi::CallbackInfo& info);
  Napi::Value SetSeed(const Napi::CallbackInfo& info);
  Napi::Value GetGeneratorState(const Napi::CallbackInfo& info);
  Napi::Value SetGeneratorState(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<ModelState> state_;
  static Napi::FunctionReference constructor_;
};

}  // namespace comlrl
