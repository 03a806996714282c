#include "readout_binding.h"

#include "../bridge/bridge.h"
#include "../model/batch_input.h"
#include "../model/model_binding.h"
#include "head_binding.h"
#include "readouts.h"

namespace comlrl {

namespace {

// values(model, head, batch): one value per row (V, Q) or per fed token (positions: prompt ⧺ completion of each row,
// rows concatenated).
Napi::Value Values(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    auto head = NativeValueHead::StateOn(info[1], *model, model->module->config().hidden_size);
    Napi::Object options = ObjectArg(info, 2, "batch");
    CompletionBatch batch = ReadReadoutBatch(*model->module, options);
    const Readout readout = ParseReadout(StringField(options, "readout"));
    return RunAsync(info.Env(), model->lane, [model, head, batch, readout]() -> Resolver {
      ModuleLocks locks({model.get(), head.get()});
      torch::NoGradGuard no_grad;
      const torch::Tensor values = head->module->forward(ReadoutHidden(*model->module, batch, readout));
      return [values](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, values); };
    });
  });
}

// rewardScores(model, head, batch): the head on each row's last real token (left or right padding).
Napi::Value RewardScores(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    auto head = NativeValueHead::StateOn(info[1], *model, model->module->config().hidden_size);
    const auto token_batch = ReadCheckedTokenBatch(*model->module, ObjectArg(info, 2, "batch"));
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    return RunAsync(info.Env(), model->lane, [model, head, ids, mask]() -> Resolver {
      ModuleLocks locks({model.get(), head.get()});
      torch::NoGradGuard no_grad;
      const torch::Tensor scores = head->module->forward(LastRealTokenHidden(*model->module, ids.to(model->device), mask.to(model->device)));
      return [scores](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, scores); };
    });
  });
}

}  // namespace

void InitReadouts(Napi::Env env, Napi::Object exports) {
  ExportFunctions(env, exports, {{"values", Values}, {"rewardScores", RewardScores}});
}

}  // namespace comlrl
