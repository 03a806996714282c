// NativeModel: a causal LM owned by C++ and driven from JS — its own life: load / create, forward, generate, save,
// clone, sampling streams; parameter access, freeze and dispose as every module binding (bridge/module_binding.h). The losses and head readouts over it are free functions
// (losses/loss_binding.h, heads/readout_binding.h) that reach its state through StateOf. Heavy calls return Promises
// and hold the model's mutex, so calls on one model are serialised while different models (agents on different
// devices) run at the same time.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "../bridge/module_binding.h"
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
  // The stream named so, created seeded with `seed` when it is new. The caller holds the model's mutex.
  at::Generator& StreamOrNew(const std::string& name, uint64_t seed);

  static constexpr const char* kDefaultStream = "default";
  static constexpr const char* kDropoutStream = "dropout";
};

class NativeModel : public ModuleBinding<NativeModel, ModelState> {
 public:
  static constexpr const char* kClassName = "NativeModel";
  static constexpr const char* kOwner = "the model";

  static void Init(Napi::Env env, Napi::Object exports);
  explicit NativeModel(const Napi::CallbackInfo& info);

 private:
  static Napi::Object Wrap(Napi::Env env, std::shared_ptr<ModelState> state);
  static Napi::Value Load(const Napi::CallbackInfo& info);
  static Napi::Value Create(const Napi::CallbackInfo& info);

  Napi::Value Forward(const Napi::CallbackInfo& info);
  Napi::Value Generate(const Napi::CallbackInfo& info);
  Napi::Value ParameterNames(const Napi::CallbackInfo& info);
  Napi::Value Save(const Napi::CallbackInfo& info);
  Napi::Value LoadWeights(const Napi::CallbackInfo& info);
  Napi::Value Clone(const Napi::CallbackInfo& info);
  Napi::Value SetGradientCheckpointing(const Napi::CallbackInfo& info);
  Napi::Value SetTraining(const Napi::CallbackInfo& info);
  Napi::Value SetSeed(const Napi::CallbackInfo& info);
  Napi::Value GetGeneratorState(const Napi::CallbackInfo& info);
  Napi::Value SetGeneratorState(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
};

}  // namespace comlrl
