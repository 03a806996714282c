#include "held_score_binding.h"

#include <cmath>
#include <memory>

#include "../bridge/bridge.h"
#include "../model/batch_input.h"
#include "../model/model_binding.h"
#include "../model/router_loss.h"
#include "completion_scoring.h"
#include "policy_gradient.h"

namespace comlrl {

namespace {

// A scoring forward's graph, until its one backward. Shared with the jobs that use it, so that JS dropping its
// handle while a job runs frees nothing under it.
struct HeldScores {
  const ModelState* model;
  CompletionScores scores;
  torch::Tensor router_aux;  // the router's auxiliary loss of the forward, with its graph; undefined without one
  double router_coef = 0;
  bool used = false;
};

using HeldHandle = std::shared_ptr<HeldScores>;

// Marks the externals that hold a HeldHandle: any other external (another addon's, another binding's) read as one
// would be undefined behaviour, so a backward checks the mark before it reads the handle.
constexpr napi_type_tag kHeldHandleTag = {0x6c0f3a8e2d5b4c71, 0x9e2a7d14b8c3f605};

Napi::Value HandleOf(Napi::Env env, HeldHandle held) {
  auto handle = Napi::External<HeldHandle>::New(env, new HeldHandle(std::move(held)), [](Napi::Env, HeldHandle* owned) { delete owned; });
  handle.TypeTag(&kHeldHandleTag);
  return handle;
}

// The handle a graph value holds, checked to be one and to be this model's.
HeldHandle HandleIn(const Napi::Value& value, const ModelState& model) {
  if (!value.IsExternal() || !value.As<Napi::External<HeldHandle>>().CheckTypeTag(&kHeldHandleTag)) {
    throw ArgumentError("graph must be what scoreForBackward returned");
  }
  HeldHandle held = *value.As<Napi::External<HeldHandle>>().Data();
  if (held->model != &model) throw ArgumentError("graph was scored by another model");
  return held;
}

// The handle of a graph no backward has used (or release freed), marked used.
HeldHandle HeldOf(const Napi::Value& value, const ModelState& model) {
  HeldHandle held = HandleIn(value, model);
  if (held->used) throw ArgumentError("graph was used by a backward, or released, already");
  held->used = true;
  return held;
}

// A generator's state, read and restored under its lock.
torch::Tensor GeneratorState(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void RestoreGenerator(at::Generator& generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

Napi::Value ScoreForBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    CompletionBatch batch = ReadCompletionBatch(*model->module, ObjectArg(info, 1, "batch"));
    const bool keep = BoolFieldOr(ObjectArg(info, 2, "options"), "keep", true);
    return RunAsync(info.Env(), model->lane, [model, batch, keep]() -> Resolver {
      ModuleLocks lock({model.get()});
      torch::AutoGradMode grad(true);
      // Unkept, the graph is replaced by a backward that runs this forward again: the stream is wound back so that
      // it draws the masks this forward drew, and leaves the stream where a kept graph's backward would.
      at::Generator& dropout = model->generators.at(ModelState::kDropoutStream);
      const torch::Tensor dropout_before = keep ? torch::Tensor() : GeneratorState(dropout);
      RouterAuxRecording router(*model->module, model->module->config().policy_router_aux_coef);
      auto held = std::make_shared<HeldScores>();
      held->model = model.get();
      held->scores = ScoreCompletions(*model->module, batch, false);
      if (router.active()) {
        held->router_aux = router.Loss();
        held->router_coef = router.coef();
      }
      const torch::Tensor sums = held->scores.sums.detach();
      const torch::Tensor means = sums / held->scores.counts.clamp_min(1.0);
      if (!keep) {
        held.reset();
        RestoreGenerator(dropout, dropout_before);
      }
      return [held, sums, means](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("sum", ToFloat32Array(env, sums));
        out.Set("mean", ToFloat32Array(env, means));
        if (held) out.Set("graph", HandleOf(env, held));
        return out;
      };
    });
  });
}

Napi::Value HeldPolicyGradientBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    HeldHandle held = HeldOf(info[1], *model);
    Napi::Object options = ObjectArg(info, 2, "options");
    const torch::Tensor advantages = Float32Field(options, "advantages", held->scores.sums.size(0), "scored rows");
    const double scale = NumberFieldOr(options, "scale", 1.0);
    return RunAsync(info.Env(), model->lane, [model, held, advantages, scale]() -> Resolver {
      ModuleLocks lock({model.get()});
      // Freed when this job ends, whether the backward ran or threw.
      const CompletionScores scores = std::move(held->scores);
      const torch::Tensor router_aux = std::move(held->router_aux);
      if (!scores.sums.requires_grad()) throw ArgumentError("nothing to train: the model is frozen");
      torch::Tensor loss = PolicyGradientLoss(scores, advantages, 1.0);
      if (router_aux.defined()) loss = loss + held->router_coef * router_aux;
      loss = loss * scale;
      const double loss_value = loss.item<double>();
      // As every loss binding's backward (loss_binding.cc Backward): none for a non-finite loss.
      if (std::isfinite(loss_value)) loss.backward();
      const double aux = router_aux.defined() ? router_aux.item<double>() : std::nan("");
      return [loss_value, aux](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", loss_value);
        if (!std::isnan(aux)) out.Set("routerAuxLoss", aux);
        return out;
      };
    });
  });
}

// releaseHeldScores(model, graph) -> Promise<void>: frees a kept graph whose backward will not run (an update that
// failed between scoring and backward) now, on the model's lane. Why: the graph holds the whole forward's activations,
// on a GPU bytes that V8 does not count, so waiting for the garbage collector to drop the handle may hold them for
// long. Nothing to free once a backward has used the graph.
Napi::Value ReleaseHeldScores(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    HeldHandle held = HandleIn(info[1], *model);
    held->used = true;
    return RunAsync(info.Env(), model->lane, [model, held]() -> Resolver {
      ModuleLocks lock({model.get()});
      held->scores = CompletionScores{};
      held->router_aux = torch::Tensor();
      return nullptr;
    });
  });
}

}  // namespace

void InitHeldScores(Napi::Env env, Napi::Object exports) {
  ExportFunctions(env, exports, {{"scoreForBackward", ScoreForBackward},
                                 {"heldPolicyGradientBackward", HeldPolicyGradientBackward},
                                 {"releaseHeldScores", ReleaseHeldScores}});
}

}  // namespace comlrl
