#include "parameter_access.h"

#include "bridge.h"

namespace comlrl {

Napi::Array ParameterList(Napi::Env env, const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  Napi::Array out = Napi::Array::New(env, named.size());
  for (size_t i = 0; i < named.size(); ++i) {
    Napi::Object item = Napi::Object::New(env);
    item.Set("name", named[i].first);
    item.Set("shape", ToShapeArray(env, named[i].second.sizes()));
    out.Set(static_cast<uint32_t>(i), item);
  }
  return out;
}

namespace {

torch::Tensor NamedParameter(ModuleState& state, const Napi::Value& name_value, const char* owner) {
  if (!name_value.IsString()) throw ArgumentError("parameter name must be a string");
  const std::string name = name_value.As<Napi::String>().Utf8Value();
  auto parameters = state.Module().named_parameters();
  if (!parameters.contains(name)) throw ArgumentError(std::string(owner) + " has no parameter named \"" + name + "\"");
  return parameters[name];
}

}  // namespace

Napi::Value ParameterValue(const Napi::CallbackInfo& info, ModuleState& state, const char* owner) {
  std::lock_guard<std::mutex> lock(state.mutex);
  return ToFloat32Array(info.Env(), NamedParameter(state, info[0], owner));
}

Napi::Value GradientValue(const Napi::CallbackInfo& info, ModuleState& state, const char* owner) {
  std::lock_guard<std::mutex> lock(state.mutex);
  const torch::Tensor grad = NamedParameter(state, info[0], owner).grad();
  return grad.defined() ? Napi::Value(ToFloat32Array(info.Env(), grad)) : info.Env().Null();
}

Napi::Promise DropGradients(Napi::Env env, std::shared_ptr<ModuleState> state) {
  return RunAsync(env, state->lane, [state]() -> Resolver {
    ModuleLocks lock({state.get()});
    for (auto& parameter : state->Module().parameters()) parameter.mutable_grad() = torch::Tensor();
    return nullptr;
  });
}

void FreezeParameters(ModuleState& state) {
  std::lock_guard<std::mutex> lock(state.mutex);
  for (auto& parameter : state.Module().parameters()) {
    parameter.set_requires_grad(false);
    parameter.mutable_grad() = torch::Tensor();
  }
}

ParameterStats StatsOf(ModuleState& state) {
  std::lock_guard<std::mutex> lock(state.mutex);
  ParameterStats stats;
  for (const auto& parameter : state.Module().parameters()) {
    stats.count += static_cast<double>(parameter.numel());
    stats.bytes += static_cast<double>(parameter.numel() * parameter.element_size());
    if (parameter.grad().defined()) stats.gradient_bytes += static_cast<double>(parameter.grad().numel() * parameter.grad().element_size());
    stats.frozen = stats.frozen && !parameter.requires_grad();
  }
  return stats;
}

}  // namespace comlrl
