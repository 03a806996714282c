// NativeValueHead: a value / reward head owned by C++ and driven from JS. The readouts (readout_binding.h) and the
// losses over a model and a head (losses/loss_binding.h) take it with its model and hold both modules' mutexes.
#pragma once

#include <napi.h>

#include <memory>

#include "value_head.h"

namespace comlrl {

class NativeValueHead : public Napi::ObjectWrap<NativeValueHead> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  // new NativeValueHead({ hiddenSize, hiddenDim?: number | null, dtype, device, seed? })
  explicit NativeValueHead(const Napi::CallbackInfo& info);

  // The live state behind a JS NativeValueHead, or an error naming `what` when it is not one or has been disposed.
  static std::shared_ptr<HeadState> StateOf(const Napi::Value& value, const char* what);
  // The head as StateOf, checked to read `model`: on its device, of its hidden size.
  static std::shared_ptr<HeadState> StateOn(const Napi::Value& value, const ModuleState& model, int64_t hidden_size);
  static bool Is(const Napi::Value& value);

 private:
  std::shared_ptr<HeadState> Live() const;
  Napi::Value ParameterNames(const Napi::CallbackInfo& info);
  Napi::Value GetParameter(const Napi::CallbackInfo& info);
  Napi::Value GetGradient(const Napi::CallbackInfo& info);
  Napi::Value ZeroGrad(const Napi::CallbackInfo& info);
  Napi::Value Freeze(const Napi::CallbackInfo& info);
  Napi::Value StateDict(const Napi::CallbackInfo& info);
  Napi::Value LoadStateDict(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<HeadState> state_;
  static Napi::FunctionReference constructor_;
};

}  // namespace comlrl
