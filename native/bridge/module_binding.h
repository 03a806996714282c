// What every JS class that owns one torch module offers alike (NativeModel, NativeValueHead): the live state behind
// an instance, the check that a JS value is one, and the methods over its parameters — getParameter, getGradient,
// zeroGrad, freeze — and dispose. Derived names itself in errors with kClassName ("NativeModel") and kOwner ("the
// model"), and defines its JS class through Define, which adds these methods to its own.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "bridge.h"
#include "parameter_access.h"

namespace comlrl {

template <typename Derived, typename State>
class ModuleBinding : public Napi::ObjectWrap<Derived> {
 public:
  static bool Is(const Napi::Value& value) { return value.IsObject() && value.As<Napi::Object>().InstanceOf(constructor_.Value()); }

  // The live state behind a JS instance, or an error naming `what` when it is not one or has been disposed.
  static std::shared_ptr<State> StateOf(const Napi::Value& value, const char* what) {
    if (!Is(value)) throw ArgumentError(std::string(what) + " must be a " + Derived::kClassName);
    return static_cast<ModuleBinding*>(Napi::ObjectWrap<Derived>::Unwrap(value.As<Napi::Object>()))->Live();
  }

 protected:
  using Method = Napi::ClassPropertyDescriptor<Derived>;

  explicit ModuleBinding(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Derived>(info) {}

  // The JS class with Derived's own `methods` and the shared ones; its constructor is kept for Is and New.
  static Napi::Function Define(Napi::Env env, std::vector<Method> methods) {
    using Wrap = Napi::ObjectWrap<Derived>;
    methods.push_back(Wrap::InstanceMethod("getParameter", &ModuleBinding::GetParameter));
    methods.push_back(Wrap::InstanceMethod("getGradient", &ModuleBinding::GetGradient));
    methods.push_back(Wrap::InstanceMethod("zeroGrad", &ModuleBinding::ZeroGrad));
    methods.push_back(Wrap::InstanceMethod("freeze", &ModuleBinding::Freeze));
    methods.push_back(Wrap::InstanceMethod("dispose", &ModuleBinding::Dispose));
    Napi::Function cls = Wrap::DefineClass(env, Derived::kClassName, methods);
    constructor_ = Napi::Persistent(cls);
    return cls;
  }

  std::shared_ptr<State> Live() const {
    if (!state_) throw ArgumentError(std::string(Derived::kOwner) + " has been disposed");
    return state_;
  }

  std::shared_ptr<State> state_;
  inline static Napi::FunctionReference constructor_;

 private:
  Napi::Value GetParameter(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value { return ParameterValue(info, *Live(), Derived::kOwner); });
  }

  // The gradient, or null when the parameter has none.
  Napi::Value GetGradient(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value { return GradientValue(info, *Live(), Derived::kOwner); });
  }

  Napi::Value ZeroGrad(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value { return DropGradients(info.Env(), Live()); });
  }

  Napi::Value Freeze(const Napi::CallbackInfo& info) {
    return Guard(info, [&]() -> Napi::Value {
      FreezeParameters(*Live());
      return info.Env().Undefined();
    });
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    state_.reset();  // work in flight keeps its own reference and frees the module when it finishes
    return info.Env().Undefined();
  }
};

}  // namespace comlrl
