#include "loss_binding.h"

#include <cmath>
#include <optional>

#include "../bridge/bridge.h"
#include "../heads/head_binding.h"
#include "../heads/readouts.h"
#include "../model/batch_input.h"
#include "../model/model_binding.h"
#include "../model/router_loss.h"
#include "bradley_terry.h"
#include "completion_scoring.h"
#include "objective.h"
#include "policy_gradient.h"
#include "value_loss.h"

namespace comlrl {

namespace {

// A scoring's per-row results (and per-token log-probs when asked) as host tensors. Made in the job, on the model's
// lane: the means' division and the copies from a GPU then run on the lane's stream, not from the JS thread.
struct HostScores {
  torch::Tensor sum, mean, entropy, token_logprobs;
};

HostScores ScoresOnHost(const CompletionScores& scores, bool with_tokens) {
  const auto host = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat32); };
  const torch::Tensor sums = scores.sums.detach();
  return {host(sums), host(sums / scores.counts.clamp_min(1.0)), scores.entropy.defined() ? host(scores.entropy) : torch::Tensor(),
          with_tokens ? host(scores.token_logprobs) : torch::Tensor()};
}

Napi::Object ScoresToJs(Napi::Env env, const HostScores& scores) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("sum", ToFloat32Array(env, scores.sum));
  out.Set("mean", ToFloat32Array(env, scores.mean));
  if (scores.entropy.defined()) out.Set("entropy", ToFloat32Array(env, scores.entropy));
  if (scores.token_logprobs.defined()) out.Set("tokenLogprobs", ToFloat32Array(env, scores.token_logprobs));
  return out;
}

// The resolver of a head loss: its value and the per-row head outputs it was computed from, under `rows_key`.
Resolver LossWithRows(double loss, const char* rows_key, const torch::Tensor& rows) {
  const torch::Tensor detached = rows.detach();
  return [loss, rows_key, detached](Napi::Env env) -> Napi::Value {
    Napi::Object out = Napi::Object::New(env);
    out.Set("loss", loss);
    out.Set(rows_key, ToFloat32Array(env, detached));
    return out;
  };
}

// The head argument of the (model, head) losses, checked to read this model.
std::shared_ptr<HeadState> HeadOf(const Napi::CallbackInfo& info, const ModelState& model) {
  return NativeValueHead::StateOn(info[1], model, model.module->config().hidden_size);
}

// oldValues and clipRange select the clipped value loss; one without the other is an error.
std::optional<ValueClip> ReadValueClip(const Napi::Object& options, int64_t count) {
  const bool has_old = !options.Get("oldValues").IsUndefined(), has_range = !options.Get("clipRange").IsUndefined();
  if (has_old != has_range) throw ArgumentError(has_old ? "oldValues is given without clipRange" : "clipRange is given without oldValues");
  if (!has_old) return std::nullopt;
  const double range = NumberField(options, "clipRange");
  if (!(range >= 0)) throw ArgumentError("clipRange must be non-negative");
  return ValueClip{Float32Field(options, "oldValues", count, "readouts"), range};
}

// What the value-loss calls share: (model, head, { ...batch, readout, targets, oldValues?, clipRange?, scale? }).
struct ValueLossCall {
  std::shared_ptr<ModelState> model;
  std::shared_ptr<HeadState> head;
  CompletionBatch batch;
  Readout readout;
  torch::Tensor targets;
  std::optional<ValueClip> clip;
  double scale;
};

ValueLossCall ReadValueLossCall(const Napi::CallbackInfo& info, const Napi::Object& options) {
  ValueLossCall call;
  call.model = NativeModel::StateOf(info[0], "model");
  call.head = HeadOf(info, *call.model);
  call.batch = ReadReadoutBatch(*call.model->module, options);
  call.readout = ParseReadout(StringField(options, "readout"));
  const int64_t count = ReadoutCount(call.batch, call.readout);
  call.targets = Float32Field(options, "targets", count, "readouts");
  call.clip = ReadValueClip(options, count);
  call.scale = NumberFieldOr(options, "scale", 1.0);
  return call;
}

// A training loss with the router's auxiliary term: loss + coef · the aux loss of the forwards recorded, when
// recording, and the aux loss itself (NaN: none) for the result.
struct LossWithRouterAux {
  torch::Tensor loss;
  double aux;
};

LossWithRouterAux WithRouterAux(const torch::Tensor& loss, const RouterAuxRecording& router) {
  if (!router.active()) return {loss, std::nan("")};
  const torch::Tensor aux = router.Loss();
  return {loss + router.coef() * aux, aux.item<double>()};
}

void SetRouterAux(Napi::Object& out, double aux) {
  if (!std::isnan(aux)) out.Set("routerAuxLoss", aux);
}

// Every loss's backward. A non-finite loss has none: no step is taken on it (StageHost.checkLoss drops it), and a step
// taken in backward (NativeOptimizer.stepInBackward) would have applied its gradient before anyone saw the loss.
void Backward(const torch::Tensor& loss, double scale) {
  if (!loss.requires_grad()) throw ArgumentError("nothing to train: the model and the head are both frozen");
  if (std::isfinite(loss.item<double>())) (loss * scale).backward();
}

// score(model, { ...batch, entropy?, tokenLogprobs? }) -> Promise<{ sum, mean, entropy?, tokenLogprobs? }>
Napi::Value Score(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCompletionBatch(*model->module, options);
    const bool with_entropy = BoolFieldOr(options, "entropy", false);
    const bool with_tokens = BoolFieldOr(options, "tokenLogprobs", false);
    return RunAsync(info.Env(), model->lane, [model, batch, with_entropy, with_tokens]() -> Resolver {
      ModuleLocks lock({model.get()});
      torch::NoGradGuard no_grad;
      const HostScores scores = ScoresOnHost(ScoreCompletions(*model->module, batch, with_entropy), with_tokens);
      return [scores](Napi::Env env) -> Napi::Value { return ScoresToJs(env, scores); };
    });
  });
}

// klK3(policy, reference, batch) -> Promise<Float32Array>: per-row Σ_t k3 of the policy against the reference.
Napi::Value KlK3Estimate(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto policy = NativeModel::StateOf(info[0], "policy");
    auto reference = NativeModel::StateOf(info[1], "reference");
    CompletionBatch batch = ReadCompletionBatch(*policy->module, ObjectArg(info, 2, "batch"));
    return RunAsync(info.Env(), policy->lane, [policy, reference, batch]() -> Resolver {
      torch::NoGradGuard no_grad;
      CompletionScores policy_scores, reference_scores;
      // Each model scored under its own lock, one after the other: neither is held while waiting for the other.
      {
        ModuleLocks lock({policy.get()});
        policy_scores = ScoreCompletions(*policy->module, batch, false);
      }
      {
        ModuleLocks lock({reference.get()});
        reference_scores = ScoreCompletions(*reference->module, batch, false);
      }
      torch::Tensor kl = comlrl::KlK3(policy_scores, reference_scores);
      return [kl](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, kl); };
    });
  });
}

// policyGradientBackward(model, { ...batch, advantages, scale? }) -> Promise<{ loss, sum, mean, routerAuxLoss? }>: with the
//   model's policy router coefficient c, loss = scale · (policy-gradient loss + c · router aux loss).
Napi::Value PolicyGradientBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCompletionBatch(*model->module, options);
    const torch::Tensor advantages = Float32Field(options, "advantages", static_cast<int64_t>(batch.prompts.size()), "completions");
    const double scale = NumberFieldOr(options, "scale", 1.0);
    return RunAsync(info.Env(), model->lane, [model, batch, advantages, scale]() -> Resolver {
      ModuleLocks lock({model.get()});
      RouterAuxRecording router(*model->module, model->module->config().policy_router_aux_coef);
      CompletionScores scores = ScoreCompletions(*model->module, batch, false);
      const LossWithRouterAux total = WithRouterAux(PolicyGradientLoss(scores, advantages, 1.0), router);
      const torch::Tensor loss = total.loss * scale;
      const double aux = total.aux;
      Backward(loss, 1.0);
      const HostScores host = ScoresOnHost(scores, false);
      const double loss_value = loss.item<double>();
      return [host, loss_value, aux](Napi::Env env) -> Napi::Value {
        Napi::Object out = ScoresToJs(env, host);
        out.Set("loss", loss_value);
        SetRouterAux(out, aux);
        return out;
      };
    });
  });
}

// The `objective` field of objectiveLoss / objectiveBackward: { lossType, importanceSamplingLevel?, epsilon?,
//   epsilonHigh?, delta?, beta?, klEstimator?, klBiasCorrection?, entropyCoef?, sapoTemperaturePos?, sapoTemperatureNeg?,
//   maxCompletionLength?, tokenNormalizer? }, TRL's defaults where absent (epsilonHigh: epsilon).
ObjectiveOptions ReadObjectiveOptions(const Napi::Object& options) {
  const Napi::Object given = ObjectField(options, "objective");
  const auto present = [&given](const char* field) { return !given.Get(field).IsUndefined() && !given.Get(field).IsNull(); };
  ObjectiveOptions out;
  out.loss = ParseObjectiveLoss(StringField(given, "lossType"));
  if (present("importanceSamplingLevel")) out.level = ParseImportanceSamplingLevel(StringField(given, "importanceSamplingLevel"));
  if (present("klEstimator")) out.kl_estimator = ParseKlEstimator(StringField(given, "klEstimator"));
  out.epsilon_low = NumberFieldOr(given, "epsilon", out.epsilon_low);
  out.epsilon_high = NumberFieldOr(given, "epsilonHigh", out.epsilon_low);
  if (present("delta")) out.delta = NumberField(given, "delta");
  out.beta = NumberFieldOr(given, "beta", 0.0);
  out.kl_bias_correction = BoolFieldOr(given, "klBiasCorrection", true);
  out.entropy_coef = NumberFieldOr(given, "entropyCoef", 0.0);
  out.sapo_temperature_pos = NumberFieldOr(given, "sapoTemperaturePos", out.sapo_temperature_pos);
  out.sapo_temperature_neg = NumberFieldOr(given, "sapoTemperatureNeg", out.sapo_temperature_neg);
  out.max_completion_length = static_cast<int64_t>(NumberFieldOr(given, "maxCompletionLength", 0));
  out.token_normalizer = NumberFieldOr(given, "tokenNormalizer", 0.0);
  return out;
}

// The per-token inputs beside the log-probs: oldLogprobs?, refLogprobs?, tokenMask? (one value per completion token).
void ReadObjectiveTokenFields(const Napi::Object& options, int64_t tokens, ObjectiveInputs& inputs) {
  const auto optional = [&](const char* field) {
    return options.Get(field).IsUndefined() ? torch::Tensor() : Float32Field(options, field, tokens, "completion tokens");
  };
  inputs.old_logprobs = optional("oldLogprobs");
  inputs.ref_logprobs = optional("refLogprobs");
  inputs.token_mask = optional("tokenMask");
}

void SetObjectiveMetrics(Napi::Object& out, const ObjectiveResult& result) {
  out.Set("policyLoss", result.policy_loss);
  out.Set("klMean", result.kl_mean);
  out.Set("entropyMean", result.entropy_mean);
  out.Set("clipLow", result.clip_low);
  out.Set("clipHigh", result.clip_high);
  out.Set("ratioMean", result.ratio_mean);
}

// objectiveLoss({ logprobs, rowLengths, advantages, oldLogprobs?, refLogprobs?, entropies?, tokenMask?, objective })
//   -> Promise<{ loss, gradLogprobs, gradEntropies?, policyLoss, klMean, entropyMean, clipLow, clipHigh, ratioMean }>:
//   the objective over given per-token log-probs (rows concatenated, rowLengths tokens each) and its gradient with
//   respect to them: what the TRL goldens check, with no model in between.
Napi::Value ObjectiveLossOfTokens(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "inputs");
    const ObjectiveOptions objective = ReadObjectiveOptions(options);
    const torch::Tensor lengths = Int32ArrayToTensor(options.Get("rowLengths"), "rowLengths").to(torch::kInt64);
    if (lengths.numel() > 0 && lengths.min().item<int64_t>() < 0) throw ArgumentError("rowLengths must be non-negative");
    const int64_t tokens = lengths.sum().item<int64_t>();
    ObjectiveInputs inputs;
    inputs.rows = lengths.numel();
    inputs.logprobs = Float32Field(options, "logprobs", tokens, "completion tokens");
    inputs.advantages = Float32Field(options, "advantages", inputs.rows, "rows");
    inputs.row_of_token = torch::repeat_interleave(torch::arange(inputs.rows, torch::kInt64), lengths);
    ReadObjectiveTokenFields(options, tokens, inputs);
    if (!options.Get("entropies").IsUndefined()) inputs.entropies = Float32Field(options, "entropies", tokens, "completion tokens");
    return RunAsync(info.Env(), "cpu", [inputs, objective]() mutable -> Resolver {
      torch::AutoGradMode grad_mode(true);
      inputs.logprobs = inputs.logprobs.clone().requires_grad_(true);
      if (inputs.entropies.defined()) inputs.entropies = inputs.entropies.clone().requires_grad_(true);
      ObjectiveResult result = ObjectiveLossOf(inputs, objective);
      result.loss.backward();
      const double loss = result.loss.item<double>();
      result.loss = torch::Tensor();
      const torch::Tensor grad_logprobs = inputs.logprobs.grad().defined() ? inputs.logprobs.grad() : torch::zeros_like(inputs.logprobs);
      const torch::Tensor grad_entropies = inputs.entropies.defined() && inputs.entropies.grad().defined() ? inputs.entropies.grad() : torch::Tensor();
      return [=](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", loss);
        out.Set("gradLogprobs", ToFloat32Array(env, grad_logprobs));
        if (grad_entropies.defined()) out.Set("gradEntropies", ToFloat32Array(env, grad_entropies));
        SetObjectiveMetrics(out, result);
        return out;
      };
    });
  });
}

// objectiveBackward(model, { ...batch, advantages, oldLogprobs?, refLogprobs?, tokenMask?, objective, scale? })
//   -> Promise<{ loss, tokenLogprobs, sum, mean, policyLoss, klMean, entropyMean, clipLow, clipHigh, ratioMean,
//   routerAuxLoss? }>: accumulates ∇ scale · (objective + the model's policy router coefficient × router aux loss)
//   from one scoring forward; tokenLogprobs are the trainer's log-probs of the completion tokens (detached).
Napi::Value ObjectiveBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCompletionBatch(*model->module, options);
    const ObjectiveOptions objective = ReadObjectiveOptions(options);
    int64_t tokens = 0;
    for (const auto& completion : batch.completions) tokens += static_cast<int64_t>(completion.size());
    ObjectiveInputs inputs;
    inputs.rows = static_cast<int64_t>(batch.prompts.size());
    inputs.advantages = Float32Field(options, "advantages", inputs.rows, "completions");
    ReadObjectiveTokenFields(options, tokens, inputs);
    const double scale = NumberFieldOr(options, "scale", 1.0);
    return RunAsync(info.Env(), model->lane, [model, batch, objective, inputs, scale]() mutable -> Resolver {
      ModuleLocks lock({model.get()});
      RouterAuxRecording router(*model->module, model->module->config().policy_router_aux_coef);
      CompletionScores scores = ScoreCompletions(*model->module, batch, false, objective.entropy_coef != 0.0);
      inputs.logprobs = scores.token_logprobs;
      inputs.entropies = scores.token_entropy;
      inputs.row_of_token = scores.row_of_token;
      ObjectiveResult result = ObjectiveLossOf(inputs, objective);
      const LossWithRouterAux total = WithRouterAux(result.loss, router);
      result.loss = torch::Tensor();
      const torch::Tensor loss = total.loss * scale;
      const double aux = total.aux;
      Backward(loss, 1.0);
      const HostScores host = ScoresOnHost(scores, true);
      const double loss_value = loss.item<double>();
      return [host, result, loss_value, aux](Napi::Env env) -> Napi::Value {
        Napi::Object out = ScoresToJs(env, host);
        out.Set("loss", loss_value);
        SetObjectiveMetrics(out, result);
        SetRouterAux(out, aux);
        return out;
      };
    });
  });
}

// causalLMLossBackward(model, { ids, batch, length, attentionMask?, backward?: true }) -> Promise<{ loss, routerAuxLoss? }>:
//   the cross-entropy plus the model's LM router coefficient × the router aux loss, as transformers' labelled loss.
Napi::Value CausalLMLossBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    Napi::Object options = ObjectArg(info, 1, "batch");
    const auto token_batch = ReadCheckedTokenBatch(*model->module, options);
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    const bool backward = BoolFieldOr(options, "backward", true);
    return RunAsync(info.Env(), model->lane, [model, ids, mask, backward]() -> Resolver {
      ModuleLocks lock({model.get()});
      torch::AutoGradMode grad_mode(backward);
      RouterAuxRecording router(*model->module, model->module->config().lm_router_aux_coef);
      const LossWithRouterAux total = WithRouterAux(CausalLMLoss(*model->module, ids.to(model->device), mask.to(model->device)), router);
      if (backward) Backward(total.loss, 1.0);
      const double value = total.loss.item<double>(), aux = total.aux;
      return [value, aux](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", value);
        SetRouterAux(out, aux);
        return out;
      };
    });
  });
}

// valueLossBackward(model, head, { ...batch, readout, targets, oldValues?, clipRange?, scale?, backward? })
//   -> Promise<{ loss, values }>: accumulates scale · ∇loss into the head and (unless frozen) the model; loss is
//   unscaled.
Napi::Value ValueLossBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 2, "batch");
    const ValueLossCall call = ReadValueLossCall(info, options);
    const bool backward = BoolFieldOr(options, "backward", true);
    return RunAsync(info.Env(), call.model->lane, [call, backward]() -> Resolver {
      ModuleLocks locks({call.model.get(), call.head.get()});
      torch::AutoGradMode grad_mode(backward);
      const torch::Tensor values = call.head->module->forward(ReadoutHidden(*call.model->module, call.batch, call.readout));
      const torch::Tensor loss = ValueLoss(values, call.targets, call.clip);
      if (backward) Backward(loss, call.scale);
      return LossWithRows(loss.item<double>(), "values", values);
    });
  });
}

// actorCriticBackward(model, head, { ...batch, advantages, targets, valueLossCoef, readout, oldValues?, clipRange?,
//   scale? }) -> Promise<{ policyLoss, valueLoss, loss, values, sum, mean }>: loss = policy-gradient loss (as
//   policyGradientBackward) + valueLossCoef · value loss, read from one forward of prompt ⧺ completion and
//   back-propagated once (scale weights the gradient; the losses returned are unscaled), plus the model's policy router
//   coefficient × the router aux loss of that forward (routerAuxLoss).
Napi::Value ActorCriticBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 2, "batch");
    const ValueLossCall call = ReadValueLossCall(info, options);
    const torch::Tensor advantages = Float32Field(options, "advantages", static_cast<int64_t>(call.batch.prompts.size()), "completions");
    const double coef = NumberField(options, "valueLossCoef");
    return RunAsync(info.Env(), call.model->lane, [call, advantages, coef]() -> Resolver {
      ModuleLocks locks({call.model.get(), call.head.get()});
      RouterAuxRecording router(*call.model->module, call.model->module->config().policy_router_aux_coef);
      const SequenceForward forward = ForwardSequences(*call.model->module, call.batch, true);
      CompletionScores scores = ScoreFromForward(*call.model->module, call.batch, forward, false);
      const torch::Tensor values = call.head->module->forward(SelectReadout(forward, call.batch, call.readout));
      const torch::Tensor policy_loss = PolicyGradientLoss(scores, advantages, 1.0);
      const torch::Tensor value_loss = ValueLoss(values, call.targets, call.clip);
      const LossWithRouterAux total = WithRouterAux(policy_loss + coef * value_loss, router);
      const torch::Tensor& loss = total.loss;
      const double aux = total.aux;
      Backward(loss, call.scale);
      const HostScores host = ScoresOnHost(scores, false);
      const double policy_value = policy_loss.item<double>(), value_value = value_loss.item<double>(), loss_value = loss.item<double>();
      const torch::Tensor detached = values.detach().to(torch::kCPU, torch::kFloat32);
      return [=](Napi::Env env) -> Napi::Value {
        Napi::Object out = ScoresToJs(env, host);
        out.Set("policyLoss", policy_value);
        out.Set("valueLoss", value_value);
        out.Set("loss", loss_value);
        out.Set("values", ToFloat32Array(env, detached));
        SetRouterAux(out, aux);
        return out;
      };
    });
  });
}

// bradleyTerryBackward(model, head, { ids, batch, length, attentionMask?, chosen, rejected, backward? })
//   -> Promise<{ loss, scores }>: loss = mean −log σ(s[chosen_i] − s[rejected_i]); gradients reach the head and, unless
//   frozen, the model.
Napi::Value BradleyTerryBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto model = NativeModel::StateOf(info[0], "model");
    auto head = HeadOf(info, *model);
    Napi::Object options = ObjectArg(info, 2, "batch");
    const auto token_batch = ReadCheckedTokenBatch(*model->module, options);
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    const torch::Tensor chosen = Int32ArrayToTensor(options.Get("chosen"), "chosen").to(torch::kInt64);
    const torch::Tensor rejected = Int32ArrayToTensor(options.Get("rejected"), "rejected").to(torch::kInt64);
    if (chosen.numel() != rejected.numel()) {
      throw ArgumentError("chosen has " + std::to_string(chosen.numel()) + " rows but rejected " + std::to_string(rejected.numel()));
    }
    if (chosen.numel() == 0) throw ArgumentError("chosen and rejected are empty: no preference pairs");
    for (const auto& [field, rows] : {std::make_pair("chosen", chosen), std::make_pair("rejected", rejected)}) {
      if (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= ids.size(0)) {
        throw ArgumentError(std::string(field) + " names a row outside the batch of " + std::to_string(ids.size(0)));
      }
    }
    const bool backward = BoolFieldOr(options, "backward", true);
    return RunAsync(info.Env(), model->lane, [=]() -> Resolver {
      ModuleLocks locks({model.get(), head.get()});
      torch::AutoGradMode grad_mode(backward);
      const torch::Tensor scores = head->module->forward(LastRealTokenHidden(*model->module, ids.to(model->device), mask.to(model->device)));
      const torch::Tensor loss = BradleyTerryLoss(scores, chosen, rejected);
      if (backward) Backward(loss, 1.0);
      return LossWithRows(loss.item<double>(), "scores", scores);
    });
  });
}

}  // namespace

void InitLosses(Napi::Env env, Napi::Object exports) {
  ExportFunctions(env, exports,
                  {
                      {"score", Score},
                      {"klK3", KlK3Estimate},
                      {"policyGradientBackward", PolicyGradientBackward},
                      {"objectiveLoss", ObjectiveLossOfTokens},
                      {"objectiveBackward", ObjectiveBackward},
                      {"causalLMLossBackward", CausalLMLossBackward},
                      {"valueLossBackward", ValueLossBackward},
                      {"actorCriticBackward", ActorCriticBackward},
                      {"bradleyTerryBackward", BradleyTerryBackward},
                  });
}

}  // namespace comlrl
