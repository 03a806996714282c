// NativeValueHead: a value / reward head owned by C++ and driven from JS, with parameter access, freeze and dispose as
// every module binding (bridge/module_binding.h). The readouts (readout_binding.h) and the losses over a model and a
// head (losses/loss_binding.h) take it with its model and hold both modules' mutexes.
#pragma once

#include <napi.h>

#include <memory>

#include "../bridge/module_binding.h"
#include "value_head.h"

namespace comlrl {

class NativeValueHead : public ModuleBinding<NativeValueHead, HeadState> {
 public:
  static constexpr const char* kClassName = "NativeValueHead";
  static constexpr const char* kOwner = "the value head";

  static void Init(Napi::Env env, Napi::Object exports);
  // new NativeValueHead({ hiddenSize, hiddenDim?: number | null, dtype, device, seed? })
  explicit NativeValueHead(const Napi::CallbackInfo& info);

  // The head as StateOf, checked to read `model`: on its device, of its hidden size.
  static std::shared_ptr<HeadState> StateOn(const Napi::Value& value, const ModuleState& model, int64_t hidden_size);

 private:
  Napi::Value ParameterNames(const Napi::CallbackInfo& info);
  Napi::Value StateDict(const Napi::CallbackInfo& info);
  Napi::Value LoadStateDict(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
};

}  // namespace comlrl
