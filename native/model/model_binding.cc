#include "model_binding.h"

#include <ATen/CPUGeneratorImpl.h>

#include "../bridge/bridge.h"
#include "../heads/head_binding.h"
#include "../heads/readouts.h"
#include "../losses/bradley_terry.h"
#include "../losses/completion_scoring.h"
#include "../losses/policy_gradient.h"
#include "../losses/value_loss.h"
#include "generate.h"
#include "weights.h"

namespace comlrl {

Napi::FunctionReference NativeModel::constructor_;

namespace {

DecoderConfig ReadDecoderConfig(const Napi::Object& config) {
  DecoderConfig out;
  auto integer = [&](const char* field) { return static_cast<int64_t>(NumberField(config, field)); };
  out.vocab_size = integer("vocabSize");
  out.hidden_size = integer("hiddenSize");
  out.intermediate_size = integer("intermediateSize");
  out.num_layers = integer("numLayers");
  out.num_heads = integer("numHeads");
  out.num_kv_heads = integer("numKvHeads");
  out.head_dim = integer("headDim");
  out.rope_theta = NumberField(config, "ropeTheta");
  out.rms_norm_eps = NumberField(config, "rmsNormEps");
  out.tie_word_embeddings = BoolFieldOr(config, "tieWordEmbeddings", false);
  out.qkv_bias = BoolFieldOr(config, "qkvBias", false);
  out.o_bias = BoolFieldOr(config, "oBias", false);
  out.mlp_bias = BoolFieldOr(config, "mlpBias", false);
  out.qk_norm = BoolFieldOr(config, "qkNorm", false);
  return out;
}

at::Generator MakeGenerator(const torch::Device& device, uint64_t seed) {
  // defaultGenerator(device) is the one spelling of "this device's generator" in both 1.13 and 2.x (2.x dropped
  // getCUDAHooks().getDefaultCUDAGenerator).
  at::Generator generator = device.is_cuda() ? at::globalContext().defaultGenerator(device).clone() : at::detail::createCPUGenerator(seed);
  generator.set_current_seed(seed);
  return generator;
}

std::shared_ptr<ModelState> NewState(const Napi::Object& options, const DecoderConfig& config) {
  const torch::Device device = ParseDevice(StringField(options, "device"));
  const torch::Dtype dtype = ParseDtype(StringField(options, "dtype"));
  const auto seed = static_cast<uint64_t>(NumberFieldOr(options, "seed", 0));
  CausalLM module(config);
  module->to(device, dtype);
  return std::make_shared<ModelState>(module, device, dtype, MakeGenerator(device, seed));
}

// Rows of token ids given flat with their lengths, as JS sends ragged batches.
std::vector<std::vector<int64_t>> RaggedRows(const Napi::Object& options, const char* tokens_field, const char* lengths_field) {
  const torch::Tensor tokens = Int32ArrayToTensor(options.Get(tokens_field), tokens_field);
  const torch::Tensor lengths = Int32ArrayToTensor(options.Get(lengths_field), lengths_field);
  const int32_t* token_data = tokens.data_ptr<int32_t>();
  const int32_t* length_data = lengths.data_ptr<int32_t>();
  std::vector<std::vector<int64_t>> rows(lengths.numel());
  int64_t offset = 0;
  for (int64_t r = 0; r < lengths.numel(); ++r) {
    if (length_data[r] < 0) throw ArgumentError(std::string(lengths_field) + "[" + std::to_string(r) + "] is negative");
    if (offset + length_data[r] > tokens.numel()) {
      throw ArgumentError(std::string(lengths_field) + " add up to more than the " + std::to_string(tokens.numel()) + " ids in " +
                          tokens_field);
    }
    rows[r].assign(token_data + offset, token_data + offset + length_data[r]);
    offset += length_data[r];
  }
  if (offset != tokens.numel()) {
    throw ArgumentError(std::string(lengths_field) + " add up to " + std::to_string(offset) + " but " + tokens_field + " has " +
                        std::to_string(tokens.numel()) + " ids");
  }
  return rows;
}

// { ids, batch, length, attentionMask? }: int64 ids [batch, length] and a bool mask (all true when absent).
std::pair<torch::Tensor, torch::Tensor> ReadTokenBatch(const Napi::Object& options) {
  const int64_t batch = static_cast<int64_t>(NumberField(options, "batch"));
  const int64_t length = static_cast<int64_t>(NumberField(options, "length"));
  torch::Tensor ids = Int32ArrayToTensor(options.Get("ids"), "ids");
  if (ids.numel() != batch * length) throw ArgumentError("ids must hold batch × length = " + std::to_string(batch * length) + " ids");
  torch::Tensor mask = torch::ones({batch, length}, torch::kBool);
  if (!options.Get("attentionMask").IsUndefined()) {
    mask = Int32ArrayToTensor(options.Get("attentionMask"), "attentionMask");
    if (mask.numel() != batch * length) throw ArgumentError("attentionMask must hold batch × length values");
    mask = mask.view({batch, length}).to(torch::kBool);
  }
  return {ids.to(torch::kInt64).view({batch, length}), mask};
}

CompletionBatch ReadCompletionBatch(const Napi::Object& options) {
  return {RaggedRows(options, "prompts", "promptLengths"), RaggedRows(options, "completions", "completionLengths")};
}

void CheckVocab(const std::vector<std::vector<int64_t>>& rows, int64_t vocab_size, const char* what) {
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t token : rows[r]) {
      if (token < 0 || token >= vocab_size) {
        throw ArgumentError(std::string(what) + " row " + std::to_string(r) + " holds token id " + std::to_string(token) +
                            ", outside the vocabulary of " + std::to_string(vocab_size));
      }
    }
  }
}

Napi::Object ScoresToJs(Napi::Env env, const CompletionScores& scores, bool with_tokens) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("sum", ToFloat32Array(env, scores.sums));
  out.Set("mean", ToFloat32Array(env, scores.sums.detach() / scores.counts.clamp_min(1.0)));
  if (scores.entropy.defined()) out.Set("entropy", ToFloat32Array(env, scores.entropy));
  if (with_tokens) out.Set("tokenLogprobs", ToFloat32Array(env, scores.token_logprobs));
  return out;
}

}  // namespace

void NativeModel::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function cls = DefineClass(
      env, "NativeModel",
      {
          StaticMethod("load", &NativeModel::Load),
          StaticMethod("create", &NativeModel::Create),
          InstanceMethod("forward", &NativeModel::Forward),
          InstanceMethod("generate", &NativeModel::Generate),
          InstanceMethod("score", &NativeModel::Score),
          InstanceMethod("klK3", &NativeModel::KlK3),
          InstanceMethod("policyGradientBackward", &NativeModel::PolicyGradientBackward),
          InstanceMethod("causalLMLossBackward", &NativeModel::CausalLMLossBackward),
          InstanceMethod("values", &NativeModel::Values),
          InstanceMethod("valueLossBackward", &NativeModel::ValueLossBackward),
          InstanceMethod("actorCriticBackward", &NativeModel::ActorCriticBackward),
          InstanceMethod("rewardScores", &NativeModel::RewardScores),
          InstanceMethod("bradleyTerryBackward", &NativeModel::BradleyTerryBackward),
          InstanceMethod("zeroGrad", &NativeModel::ZeroGrad),
          InstanceMethod("parameterNames", &NativeModel::ParameterNames),
          InstanceMethod("getParameter", &NativeModel::GetParameter),
          InstanceMethod("getGradient", &NativeModel::GetGradient),
          InstanceMethod("save", &NativeModel::Save),
          InstanceMethod("loadWeights", &NativeModel::LoadWeights),
          InstanceMethod("clone", &NativeModel::Clone),
          InstanceMethod("freeze", &NativeModel::Freeze),
          InstanceMethod("setGradientCheckpointing", &NativeModel::SetGradientCheckpointing),
          InstanceMethod("setSeed", &NativeModel::SetSeed),
          InstanceMethod("getGeneratorState", &NativeModel::GetGeneratorState),
          InstanceMethod("setGeneratorState", &NativeModel::SetGeneratorState),
          InstanceMethod("info", &NativeModel::Info),
          InstanceMethod("dispose", &NativeModel::Dispose),
      });
  constructor_ = Napi::Persistent(cls);
  exports.Set("NativeModel", cls);
}

NativeModel::NativeModel(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeModel>(info) {
  if (info.Length() != 1 || !info[0].IsExternal()) {
    throw TorchError(info.Env(), "NativeModel is built by NativeModel.load() or NativeModel.create()");
  }
  state_ = *info[0].As<Napi::External<std::shared_ptr<ModelState>>>().Data();
}

Napi::Object NativeModel::Wrap(Napi::Env env, std::shared_ptr<ModelState> state) {
  auto holder = std::make_unique<std::shared_ptr<ModelState>>(std::move(state));
  auto external = Napi::External<std::shared_ptr<ModelState>>::New(env, holder.get());
  Napi::Object object = constructor_.New({external});
  return object;  // holder is freed here; the constructor copied the shared_ptr
}

bool NativeModel::Is(const Napi::Value& value) {
  return value.IsObject() && value.As<Napi::Object>().InstanceOf(constructor_.Value());
}

std::shared_ptr<ModelState> NativeModel::StateOf(const Napi::Value& value, const char* what) {
  if (!Is(value)) throw ArgumentError(std::string(what) + " must be a NativeModel");
  return Unwrap(value.As<Napi::Object>())->Live();
}

at::Generator& ModelState::Stream(const std::string& name) {
  const auto found = generators.find(name);
  if (found == generators.end()) {
    throw ArgumentError("sampling stream \"" + name + "\" was never seeded (setSeed(seed, \"" + name + "\") creates it)");
  }
  return found->second;
}

std::shared_ptr<ModelState> NativeModel::Live() const {
  if (!state_) throw ArgumentError("the model has been disposed");
  return state_;
}

// load({ config, files, dtype, device, seed }) -> Promise<NativeModel>
Napi::Value NativeModel::Load(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const DecoderConfig config = ReadDecoderConfig(ObjectField(options, "config"));
    const std::vector<std::string> files = StringListField(options, "files");
    auto state = NewState(options, config);
    return RunAsync(info.Env(), state->device.str(), [state, files]() -> Resolver {
      comlrl::LoadWeights(*state->module, files);
      return [state](Napi::Env env) -> Napi::Value { return Wrap(env, state); };
    });
  });
}

// create({ config, dtype, device, seed, initStd }) -> NativeModel with transformers-style random weights.
Napi::Value NativeModel::Create(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    auto state = NewState(options, ReadDecoderConfig(ObjectField(options, "config")));
    at::Generator init = at::detail::createCPUGenerator(static_cast<uint64_t>(NumberFieldOr(options, "seed", 0)));
    // Initialise on the CPU with a CPU generator so the same seed gives the same weights on every device.
    CausalLM cpu_module(state->module->config());
    InitWeights(*cpu_module, NumberFieldOr(options, "initStd", 0.02), init);
    {
      torch::NoGradGuard no_grad;
      auto source = cpu_module->named_parameters();
      for (auto& item : state->module->named_parameters()) item.value().copy_(source[item.key()]);
    }
    return Wrap(info.Env(), state);
  });
}

// forward({ ids, batch, length, attentionMask?, positionIds?, logits?: true, hiddenStates?: false })
Napi::Value NativeModel::Forward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    const auto token_batch = ReadTokenBatch(options);
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    const int64_t batch = ids.size(0), length = ids.size(1);
    torch::Tensor positions = options.Has("positionIds") && !options.Get("positionIds").IsUndefined()
                                  ? Int32ArrayToTensor(options.Get("positionIds"), "positionIds").view({batch, length}).to(torch::kInt64)
                                  : torch::arange(length, torch::kInt64).expand({batch, length});
    const bool want_logits = BoolFieldOr(options, "logits", true);
    const bool want_hidden = BoolFieldOr(options, "hiddenStates", false);
    return RunAsync(info.Env(), state->device.str(), [=]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> hidden_states;
      const torch::Tensor hidden = state->module->forward(
          {ids.to(state->device), positions.to(state->device), mask.to(state->device)}, nullptr, want_hidden ? &hidden_states : nullptr);
      torch::Tensor logits = want_logits ? state->module->logits(hidden).to(torch::kFloat32).cpu() : torch::Tensor();
      for (auto& h : hidden_states) h = h.to(torch::kCPU, torch::kFloat32);
      return [logits, hidden_states](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        if (logits.defined()) {
          out.Set("logits", ToFloat32Array(env, logits));
          out.Set("shape", ToShapeArray(env, logits.sizes()));
        }
        if (!hidden_states.empty()) {
          Napi::Array list = Napi::Array::New(env, hidden_states.size());
          for (size_t i = 0; i < hidden_states.size(); ++i) list.Set(static_cast<uint32_t>(i), ToFloat32Array(env, hidden_states[i]));
          out.Set("hiddenStates", list);
        }
        return out;
      };
    });
  });
}

// generate({ prompts, promptLengths, maxNewTokens, numReturnSequences, doSample, temperature, topP, topK,
//            eosTokenIds, padTokenId, returnLogprobs, returnScores })
Napi::Value NativeModel::Generate(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    auto prompts = RaggedRows(options, "prompts", "promptLengths");
    CheckVocab(prompts, state->module->config().vocab_size, "prompts");
    GenerateOptions settings;
    settings.max_new_tokens = static_cast<int64_t>(NumberField(options, "maxNewTokens"));
    settings.num_return_sequences = static_cast<int64_t>(NumberFieldOr(options, "numReturnSequences", 1));
    settings.do_sample = BoolFieldOr(options, "doSample", false);
    settings.temperature = NumberFieldOr(options, "temperature", 1.0);
    settings.top_p = NumberFieldOr(options, "topP", 1.0);
    settings.top_k = static_cast<int64_t>(NumberFieldOr(options, "topK", 0));
    settings.pad_token_id = static_cast<int64_t>(NumberField(options, "padTokenId"));
    settings.return_logprobs = BoolFieldOr(options, "returnLogprobs", false);
    settings.return_scores = BoolFieldOr(options, "returnScores", false);
    const torch::Tensor eos = Int32ArrayToTensor(options.Get("eosTokenIds"), "eosTokenIds");
    for (int64_t i = 0; i < eos.numel(); ++i) settings.eos_token_ids.push_back(eos.data_ptr<int32_t>()[i]);
    if (!(settings.temperature > 0)) throw ArgumentError("temperature must be positive");
    if (!(settings.top_p > 0 && settings.top_p <= 1)) throw ArgumentError("topP must be in (0, 1]");
    const std::string stream = options.Get("stream").IsUndefined() ? ModelState::kDefaultStream : StringField(options, "stream");
    // An unknown stream fails here, before any work is queued. Streams are only added on this thread, so reading the
    // map needs no lock (taking the model's mutex would wait out work in flight).
    state->Stream(stream);
    return RunAsync(info.Env(), state->device.str(), [state, prompts, settings, stream]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      torch::InferenceMode inference;
      GenerateResult result = comlrl::Generate(*state->module, prompts, settings, state->Stream(stream));
      return [result](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("tokens", ToInt32Array(env, result.tokens));
        out.Set("lengths", ToInt32Array(env, result.lengths));
        out.Set("width", Napi::Number::New(env, result.tokens.size(1)));
        if (result.logprobs.defined()) out.Set("logprobs", ToFloat32Array(env, result.logprobs));
        if (result.scores.defined()) out.Set("scores", ToFloat32Array(env, result.scores));
        return out;
      };
    });
  });
}

// score({ prompts, promptLengths, completions, completionLengths, entropy?, tokenLogprobs? })
Napi::Value NativeModel::Score(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    CompletionBatch batch = ReadCompletionBatch(options);
    CheckVocab(batch.prompts, state->module->config().vocab_size, "prompts");
    CheckVocab(batch.completions, state->module->config().vocab_size, "completions");
    const bool with_entropy = BoolFieldOr(options, "entropy", false);
    const bool with_tokens = BoolFieldOr(options, "tokenLogprobs", false);
    return RunAsync(info.Env(), state->device.str(), [state, batch, with_entropy, with_tokens]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      torch::NoGradGuard no_grad;
      CompletionScores scores = ScoreCompletions(*state->module, batch, with_entropy);
      return [scores, with_tokens](Napi::Env env) -> Napi::Value { return ScoresToJs(env, scores, with_tokens); };
    });
  });
}

// klK3(reference, batch) -> Promise<Float32Array>: per-row Σ_t k3 of this model (the policy) against reference.
Napi::Value NativeModel::KlK3(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto reference = StateOf(info[0], "reference");
    CompletionBatch batch = ReadCompletionBatch(ObjectArg(info, 1, "batch"));
    CheckVocab(batch.prompts, state->module->config().vocab_size, "prompts");
    CheckVocab(batch.completions, state->module->config().vocab_size, "completions");
    return RunAsync(info.Env(), state->device.str(), [state, reference, batch]() -> Resolver {
      torch::NoGradGuard no_grad;
      CompletionScores policy, ref;
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        policy = ScoreCompletions(*state->module, batch, false);
      }
      {
        std::lock_guard<std::mutex> lock(reference->mutex);
        ref = ScoreCompletions(*reference->module, batch, false);
      }
      torch::Tensor kl = comlrl::KlK3(policy, ref);
      return [kl](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, kl); };
    });
  });
}

// policyGradientBackward({ ...batch, advantages, scale }): accumulates the gradient of
// scale · Σ_k −A_k · log π(completion_k) and returns { loss, sum, mean }.
Napi::Value NativeModel::PolicyGradientBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    CompletionBatch batch = ReadCompletionBatch(options);
    CheckVocab(batch.prompts, state->module->config().vocab_size, "prompts");
    CheckVocab(batch.completions, state->module->config().vocab_size, "completions");
    const torch::Tensor advantages = Float32ArrayToTensor(options.Get("advantages"), "advantages");
    if (advantages.numel() != static_cast<int64_t>(batch.prompts.size())) {
      throw ArgumentError("advantages has " + std::to_string(advantages.numel()) + " values for " +
                          std::to_string(batch.prompts.size()) + " completions");
    }
    const double scale = NumberFieldOr(options, "scale", 1.0);
    return RunAsync(info.Env(), state->device.str(), [state, batch, advantages, scale]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      CompletionScores scores = ScoreCompletions(*state->module, batch, false);
      const torch::Tensor loss = PolicyGradientLoss(scores, advantages, scale);
      loss.backward();
      scores.sums = scores.sums.detach();
      const double loss_value = loss.item<double>();
      return [scores, loss_value](Napi::Env env) -> Napi::Value {
        Napi::Object out = ScoresToJs(env, scores, false);
        out.Set("loss", loss_value);
        return out;
      };
    });
  });
}

// causalLMLossBackward({ ids, batch, length, attentionMask?, backward?: true }) -> Promise<{ loss }>
Napi::Value NativeModel::CausalLMLossBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    const auto token_batch = ReadTokenBatch(options);
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    const bool backward = BoolFieldOr(options, "backward", true);
    return RunAsync(info.Env(), state->device.str(), [state, ids, mask, backward]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      torch::AutoGradMode grad_mode(backward);
      torch::Tensor loss = CausalLMLoss(*state->module, ids.to(state->device), mask.to(state->device));
      if (backward) loss.backward();
      const double value = loss.item<double>();
      return [value](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", value);
        return out;
      };
    });
  });
}

namespace {

// The head a readout call names, checked against the model it reads.
std::shared_ptr<HeadState> HeadFor(const ModelState& model, const Napi::Value& value) {
  auto head = NativeValueHead::StateOf(value, "head");
  if (head->device != model.device) {
    throw ArgumentError("the head is on " + head->device.str() + " but the model on " + model.device.str());
  }
  const int64_t hidden = model.module->config().hidden_size;
  if (head->module->hidden_size() != hidden) {
    throw ArgumentError("the head reads hidden size " + std::to_string(head->module->hidden_size()) + ", the model's is " +
                        std::to_string(hidden));
  }
  return head;
}

CompletionBatch ReadCheckedCompletionBatch(const ModelState& state, const Napi::Object& options) {
  CompletionBatch batch = ReadCompletionBatch(options);
  CheckVocab(batch.prompts, state.module->config().vocab_size, "prompts");
  CheckVocab(batch.completions, state.module->config().vocab_size, "completions");
  if (batch.prompts.empty()) throw ArgumentError("the batch has no rows");
  for (size_t r = 0; r < batch.prompts.size(); ++r) {
    if (batch.prompts[r].empty()) throw ArgumentError("prompts row " + std::to_string(r) + " is empty");
  }
  return batch;
}

torch::Tensor Float32Field(const Napi::Object& options, const char* field, int64_t count, const char* per) {
  torch::Tensor values = Float32ArrayToTensor(options.Get(field), field);
  if (values.numel() != count) {
    throw ArgumentError(std::string(field) + " has " + std::to_string(values.numel()) + " values for " + std::to_string(count) + " " + per);
  }
  return values;
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

void Backward(const torch::Tensor& loss, double scale) {
  if (!loss.requires_grad()) throw ArgumentError("nothing to train: the model and the head are both frozen");
  (loss * scale).backward();
}

// { ids, batch, length, attentionMask? } with every id inside the vocabulary.
std::pair<torch::Tensor, torch::Tensor> ReadCheckedTokenBatch(const ModelState& state, const Napi::Object& options) {
  auto token_batch = ReadTokenBatch(options);
  const int64_t vocab = state.module->config().vocab_size;
  if (token_batch.first.numel() > 0 && (token_batch.first.min().item<int64_t>() < 0 || token_batch.first.max().item<int64_t>() >= vocab)) {
    throw ArgumentError("ids holds a token id outside the vocabulary of " + std::to_string(vocab));
  }
  return token_batch;
}

}  // namespace

// values(head, { ...batch, readout: "v" | "q" | "positions" }) -> Promise<Float32Array>: one value per row (V, Q) or
// per fed token (positions: prompt ⧺ completion of each row, rows concatenated). No gradients.
Napi::Value NativeModel::Values(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto head = HeadFor(*state, info[0]);
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCheckedCompletionBatch(*state, options);
    const Readout readout = ParseReadout(StringField(options, "readout"));
    return RunAsync(info.Env(), state->device.str(), [state, head, batch, readout]() -> Resolver {
      ModuleLocks locks({state.get(), head.get()});
      torch::NoGradGuard no_grad;
      const torch::Tensor values = head->module->forward(ReadoutHidden(*state->module, batch, readout));
      return [values](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, values); };
    });
  });
}

// valueLossBackward(head, { ...batch, readout, targets, oldValues?, clipRange?, scale?, backward? })
//   -> Promise<{ loss, values }>: MSE or clipped value loss on the readout; accumulates scale · ∇loss into the head and
//   (unless frozen) the model. loss is unscaled.
Napi::Value NativeModel::ValueLossBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto head = HeadFor(*state, info[0]);
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCheckedCompletionBatch(*state, options);
    const Readout readout = ParseReadout(StringField(options, "readout"));
    const int64_t count = ReadoutCount(batch, readout);
    const torch::Tensor targets = Float32Field(options, "targets", count, "readouts");
    const std::optional<ValueClip> clip = ReadValueClip(options, count);
    const double scale = NumberFieldOr(options, "scale", 1.0);
    const bool backward = BoolFieldOr(options, "backward", true);
    return RunAsync(info.Env(), state->device.str(), [=]() -> Resolver {
      ModuleLocks locks({state.get(), head.get()});
      torch::AutoGradMode grad_mode(backward);
      const torch::Tensor values = head->module->forward(ReadoutHidden(*state->module, batch, readout));
      const torch::Tensor loss = ValueLoss(values, targets, clip);
      if (backward) Backward(loss, scale);
      const double loss_value = loss.item<double>();
      const torch::Tensor detached = values.detach();
      return [loss_value, detached](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", loss_value);
        out.Set("values", ToFloat32Array(env, detached));
        return out;
      };
    });
  });
}

// actorCriticBackward(head, { ...batch, advantages, targets, valueLossCoef, readout, oldValues?, clipRange?, scale? })
//   -> Promise<{ policyLoss, valueLoss, loss, values, sum, mean }>: loss = policy-gradient loss (as
//   policyGradientBackward) + valueLossCoef · value loss, read from one forward of prompt ⧺ completion and
//   back-propagated once (scale weights the gradient; the losses returned are unscaled).
Napi::Value NativeModel::ActorCriticBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto head = HeadFor(*state, info[0]);
    Napi::Object options = ObjectArg(info, 1, "batch");
    CompletionBatch batch = ReadCheckedCompletionBatch(*state, options);
    const Readout readout = ParseReadout(StringField(options, "readout"));
    const int64_t count = ReadoutCount(batch, readout);
    const torch::Tensor advantages = Float32Field(options, "advantages", static_cast<int64_t>(batch.prompts.size()), "completions");
    const torch::Tensor targets = Float32Field(options, "targets", count, "readouts");
    const std::optional<ValueClip> clip = ReadValueClip(options, count);
    const double coef = NumberField(options, "valueLossCoef");
    const double scale = NumberFieldOr(options, "scale", 1.0);
    return RunAsync(info.Env(), state->device.str(), [=]() -> Resolver {
      ModuleLocks locks({state.get(), head.get()});
      const SequenceForward forward = ForwardSequences(*state->module, batch, true);
      CompletionScores scores = ScoreFromForward(*state->module, batch, forward, false);
      const torch::Tensor values = head->module->forward(SelectReadout(forward, batch, readout));
      const torch::Tensor policy_loss = PolicyGradientLoss(scores, advantages, 1.0);
      const torch::Tensor value_loss = ValueLoss(values, targets, clip);
      const torch::Tensor loss = policy_loss + coef * value_loss;
      Backward(loss, scale);
      scores.sums = scores.sums.detach();
      const double policy_value = policy_loss.item<double>(), value_value = value_loss.item<double>(), loss_value = loss.item<double>();
      const torch::Tensor detached = values.detach();
      return [=](Napi::Env env) -> Napi::Value {
        Napi::Object out = ScoresToJs(env, scores, false);
        out.Set("policyLoss", policy_value);
        out.Set("valueLoss", value_value);
        out.Set("loss", loss_value);
        out.Set("values", ToFloat32Array(env, detached));
        return out;
      };
    });
  });
}

// rewardScores(head, { ids, batch, length, attentionMask? }) -> Promise<Float32Array>: the head on each row's last
// real token (left or right padding).
Napi::Value NativeModel::RewardScores(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto head = HeadFor(*state, info[0]);
    const auto token_batch = ReadCheckedTokenBatch(*state, ObjectArg(info, 1, "batch"));
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    return RunAsync(info.Env(), state->device.str(), [state, head, ids, mask]() -> Resolver {
      ModuleLocks locks({state.get(), head.get()});
      torch::NoGradGuard no_grad;
      const torch::Tensor scores = head->module->forward(LastRealTokenHidden(*state->module, ids.to(state->device), mask.to(state->device)));
      return [scores](Napi::Env env) -> Napi::Value { return ToFloat32Array(env, scores); };
    });
  });
}

// bradleyTerryBackward(head, { ids, batch, length, attentionMask?, chosen, rejected, backward? })
//   -> Promise<{ loss, scores }>: loss = mean −log σ(s[chosen_i] − s[rejected_i]); gradients reach the head and, unless
//   frozen, the model.
Napi::Value NativeModel::BradleyTerryBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto head = HeadFor(*state, info[0]);
    Napi::Object options = ObjectArg(info, 1, "batch");
    const auto token_batch = ReadCheckedTokenBatch(*state, options);
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
    return RunAsync(info.Env(), state->device.str(), [=]() -> Resolver {
      ModuleLocks locks({state.get(), head.get()});
      torch::AutoGradMode grad_mode(backward);
      const torch::Tensor scores = head->module->forward(LastRealTokenHidden(*state->module, ids.to(state->device), mask.to(state->device)));
      const torch::Tensor loss = BradleyTerryLoss(scores, chosen, rejected);
      if (backward) Backward(loss, 1.0);
      const double loss_value = loss.item<double>();
      const torch::Tensor detached = scores.detach();
      return [loss_value, detached](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("loss", loss_value);
        out.Set("scores", ToFloat32Array(env, detached));
        return out;
      };
    });
  });
}

Napi::Value NativeModel::ZeroGrad(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    for (auto& parameter : state->module->parameters()) {
      if (parameter.grad().defined()) parameter.mutable_grad() = torch::Tensor();
    }
    return info.Env().Undefined();
  });
}

Napi::Value NativeModel::ParameterNames(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto tensors = CheckpointTensors(*state->module);
    Napi::Array out = Napi::Array::New(info.Env(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      Napi::Object item = Napi::Object::New(info.Env());
      item.Set("name", tensors[i].first);
      item.Set("shape", ToShapeArray(info.Env(), tensors[i].second.sizes()));
      out.Set(static_cast<uint32_t>(i), item);
    }
    return out;
  });
}

namespace {

torch::Tensor NamedParameter(ModelState& state, const Napi::Value& name_value) {
  if (!name_value.IsString()) throw ArgumentError("parameter name must be a string");
  const std::string name = name_value.As<Napi::String>().Utf8Value();
  auto parameters = state.module->named_parameters();
  if (!parameters.contains(name)) throw ArgumentError("no parameter named \"" + name + "\"");
  return parameters[name];
}

}  // namespace

Napi::Value NativeModel::GetParameter(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    return ToFloat32Array(info.Env(), NamedParameter(*state, info[0]));
  });
}

Napi::Value NativeModel::GetGradient(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    const torch::Tensor grad = NamedParameter(*state, info[0]).grad();
    return grad.defined() ? Napi::Value(ToFloat32Array(info.Env(), grad)) : info.Env().Null();
  });
}

// save({ dir, dtype, maxShardBytes }) -> Promise<{ files, weightMap, totalBytes }>; the caller owns dir's atomicity.
Napi::Value NativeModel::Save(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    const std::string dir = StringField(options, "dir");
    const torch::Dtype dtype = options.Get("dtype").IsString() ? ParseDtype(StringField(options, "dtype")) : state->dtype;
    const auto max_shard = static_cast<int64_t>(NumberFieldOr(options, "maxShardBytes", 5e9));
    return RunAsync(info.Env(), state->device.str(), [state, dir, dtype, max_shard]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      SavedShards saved = SaveWeights(*state->module, dir, dtype, max_shard);
      return [saved](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        Napi::Array files = Napi::Array::New(env, saved.files.size());
        for (size_t i = 0; i < saved.files.size(); ++i) files.Set(static_cast<uint32_t>(i), saved.files[i]);
        Napi::Object weight_map = Napi::Object::New(env);
        for (const auto& [tensor, file] : saved.weight_map) weight_map.Set(tensor, file);
        out.Set("files", files);
        out.Set("weightMap", weight_map);
        out.Set("totalBytes", Napi::Number::New(env, static_cast<double>(saved.total_bytes)));
        return out;
      };
    });
  });
}

// loadWeights(files) -> Promise<void>: replaces this model's weights in place (checkpoint resume); every tensor is
// checked as at load time.
Napi::Value NativeModel::LoadWeights(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object holder = Napi::Object::New(info.Env());
    holder.Set("files", info.Length() > 0 ? info[0] : info.Env().Undefined());
    const std::vector<std::string> files = StringListField(holder, "files");
    return RunAsync(info.Env(), state->device.str(), [state, files]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      comlrl::LoadWeights(*state->module, files);
      return nullptr;
    });
  });
}

// clone({ device?, dtype? }) -> Promise<NativeModel>: a deep copy (e.g. a frozen reference policy).
Napi::Value NativeModel::Clone(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = info.Length() > 0 && info[0].IsObject() ? info[0].As<Napi::Object>() : Napi::Object::New(info.Env());
    const torch::Device device = options.Get("device").IsString() ? ParseDevice(StringField(options, "device")) : state->device;
    const torch::Dtype dtype = options.Get("dtype").IsString() ? ParseDtype(StringField(options, "dtype")) : state->dtype;
    const auto seed = static_cast<uint64_t>(NumberFieldOr(options, "seed", 0));
    return RunAsync(info.Env(), state->device.str(), [state, device, dtype, seed]() -> Resolver {
      std::lock_guard<std::mutex> lock(state->mutex);
      CausalLM module(state->module->config());
      module->to(device, dtype);
      {
        torch::NoGradGuard no_grad;
        auto source = state->module->named_parameters();
        for (auto& item : module->named_parameters()) item.value().copy_(source[item.key()]);
      }
      auto copy = std::make_shared<ModelState>(module, device, dtype, MakeGenerator(device, seed));
      return [copy](Napi::Env env) -> Napi::Value { return Wrap(env, copy); };
    });
  });
}

Napi::Value NativeModel::Freeze(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    for (auto& parameter : state->module->parameters()) {
      parameter.set_requires_grad(false);
      parameter.mutable_grad() = torch::Tensor();
    }
    return info.Env().Undefined();
  });
}

Napi::Value NativeModel::SetGradientCheckpointing(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsBoolean()) throw ArgumentError("setGradientCheckpointing(enabled): a boolean");
    std::lock_guard<std::mutex> lock(state->mutex);
    state->module->set_gradient_checkpointing(info[0].As<Napi::Boolean>().Value());
    return info.Env().Undefined();
  });
}

namespace {

// The optional stream-name argument of the generator methods.
std::string StreamArg(const Napi::CallbackInfo& info, size_t index) {
  if (info.Length() <= index || info[index].IsUndefined()) return ModelState::kDefaultStream;
  if (!info[index].IsString()) throw ArgumentError("stream must be a string");
  return info[index].As<Napi::String>().Utf8Value();
}

}  // namespace

// setSeed(seed, stream = "default"): seeds the stream, creating it if new.
Napi::Value NativeModel::SetSeed(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsNumber()) throw ArgumentError("setSeed(seed, stream?): seed must be a non-negative integer");
    const auto seed = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
    const std::string stream = StreamArg(info, 1);
    std::lock_guard<std::mutex> lock(state->mutex);
    const auto found = state->generators.find(stream);
    if (found == state->generators.end()) {
      state->generators.emplace(stream, MakeGenerator(state->device, seed));
      return info.Env().Undefined();
    }
    std::lock_guard<std::mutex> generator_lock(found->second.mutex());
    found->second.set_current_seed(seed);
    return info.Env().Undefined();
  });
}

Napi::Value NativeModel::GetGeneratorState(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    const std::string stream = StreamArg(info, 0);
    std::lock_guard<std::mutex> lock(state->mutex);
    at::Generator& generator = state->Stream(stream);
    std::lock_guard<std::mutex> generator_lock(generator.mutex());
    const torch::Tensor bytes = generator.get_state();
    Napi::Uint8Array out = Napi::Uint8Array::New(info.Env(), bytes.numel());
    std::memcpy(out.Data(), bytes.data_ptr<uint8_t>(), bytes.numel());
    return out;
  });
}

// setGeneratorState(state, stream = "default"): restores a state from getGeneratorState (creating the stream if new,
// as restoring a checkpoint does).
Napi::Value NativeModel::SetGeneratorState(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      throw ArgumentError("setGeneratorState(state, stream?): state must be a Uint8Array from getGeneratorState()");
    }
    const std::string stream = StreamArg(info, 1);
    Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
    torch::Tensor tensor = torch::empty({static_cast<int64_t>(bytes.ElementLength())}, torch::kUInt8);
    std::memcpy(tensor.data_ptr<uint8_t>(), bytes.Data(), bytes.ElementLength());
    std::lock_guard<std::mutex> lock(state->mutex);
    auto found = state->generators.find(stream);
    if (found == state->generators.end()) found = state->generators.emplace(stream, MakeGenerator(state->device, 0)).first;
    std::lock_guard<std::mutex> generator_lock(found->second.mutex());
    found->second.set_state(tensor);
    return info.Env().Undefined();
  });
}

// info() -> { parameterCount, parameterBytes, gradientBytes, device, dtype, gradientCheckpointing, frozen }
Napi::Value NativeModel::Info(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    double count = 0, bytes = 0, grad_bytes = 0;
    bool frozen = true;
    for (const auto& parameter : state->module->parameters()) {
      count += static_cast<double>(parameter.numel());
      bytes += static_cast<double>(parameter.numel() * parameter.element_size());
      if (parameter.grad().defined()) grad_bytes += static_cast<double>(parameter.grad().numel() * parameter.grad().element_size());
      frozen = frozen && !parameter.requires_grad();
    }
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("parameterCount", count);
    out.Set("parameterBytes", bytes);
    out.Set("gradientBytes", grad_bytes);
    out.Set("device", state->device.str());
    out.Set("dtype", DtypeName(state->dtype));
    out.Set("gradientCheckpointing", Napi::Boolean::New(info.Env(), state->module->gradient_checkpointing()));
    out.Set("frozen", Napi::Boolean::New(info.Env(), frozen));
    return out;
  });
}

Napi::Value NativeModel::Dispose(const Napi::CallbackInfo& info) {
  state_.reset();  // work in flight keeps its own reference and frees the model when it finishes
  return info.Env().Undefined();
}

}  // namespace comlrl
