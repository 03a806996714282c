// Parameter access that every module a JS object owns offers alike (a causal LM, a value head): the parameter list,
// a parameter or its gradient by name, dropping gradients, freezing, and the sizes info() reports. Each takes the
// module's mutex itself.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "module_state.h"

namespace comlrl {

// [{ name, shape }] in the order given.
Napi::Array ParameterList(Napi::Env env, const std::vector<std::pair<std::string, torch::Tensor>>& named);

// getParameter(name) / getGradient(name) (null when it has none); `owner` names the module in the error for an
// unknown name ("the value head").
Napi::Value ParameterValue(const Napi::CallbackInfo& info, ModuleState& state, const char* owner);
Napi::Value GradientValue(const Napi::CallbackInfo& info, ModuleState& state, const char* owner);

// zeroGrad() -> Promise<void>: the gradients are dropped on the module's lane, after the work queued there before it,
// so the JS thread never waits on the module's mutex while a backward holds it.
Napi::Promise DropGradients(Napi::Env env, std::shared_ptr<ModuleState> state);
// No more gradients: requires_grad off and any gradient dropped (optimizers then skip the parameters).
void FreezeParameters(ModuleState& state);

struct ParameterStats {
  double count = 0, bytes = 0, gradient_bytes = 0;
  bool frozen = true;  // every parameter frozen
};
ParameterStats StatsOf(ModuleState& state);

}  // namespace comlrl
