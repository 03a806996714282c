#include "model_binding.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <set>
#include <sstream>

#include "../bridge/bridge.h"
#include "../bridge/parameter_access.h"
#include "../runtime/huge_pages.h"
#include "../runtime/transfer.h"
#include "batch_input.h"
#include "decoder_config.h"
#include "generate.h"
#include "gguf_weights.h"
#include "weights.h"

namespace comlrl {

namespace {

at::Generator MakeGenerator(const torch::Device& device, uint64_t seed) {
  // defaultGenerator(device) is the one spelling of "this device's generator" in both 1.13 and 2.x (2.x dropped
  // getCUDAHooks().getDefaultCUDAGenerator).
  at::Generator generator = device.is_cuda() ? at::globalContext().defaultGenerator(device).clone() : at::detail::createCPUGenerator(seed);
  generator.set_current_seed(seed);
  return generator;
}

// Where a new model goes, read on the JS thread so that a bad device or dtype is an error before any work.
struct Placement {
  torch::Device device;
  torch::Dtype dtype;
  uint64_t seed;
};

Placement ReadPlacement(const Napi::Object& options) {
  return {ParseDevice(StringField(options, "device")), ParseDtype(StringField(options, "dtype")),
          static_cast<uint64_t>(NumberFieldOr(options, "seed", 0))};
}

// A model whose parameters are allocated, uninitialised, on the placement's device in its dtype: the caller writes
// every one of them next.
std::shared_ptr<ModelState> NewState(const DecoderConfig& config, const Placement& placement) {
  CausalLM module(nullptr);
  {
    ParameterPlacement allocation(torch::TensorOptions().device(placement.device).dtype(placement.dtype));
    module = CausalLM(config);
  }
  if (placement.device.is_cpu()) PlaceParametersOnHugePages(*module);
  return std::make_shared<ModelState>(module, placement.device, placement.dtype, MakeGenerator(placement.device, placement.seed),
                                      MakeGenerator(placement.device, placement.seed));
}

// Pads are fed to the embedding (and to the repetition penalty's scatter): an id outside the vocabulary is refused
// here, since on a GPU the kernel's device-side assert would end the process's CUDA context for good.
int64_t PadTokenId(const Napi::Object& options, int64_t vocab_size) {
  const double value = NumberField(options, "padTokenId");
  if (value != std::floor(value) || value < 0 || value >= static_cast<double>(vocab_size)) {
    std::ostringstream text;
    text << "padTokenId " << value << " is outside the vocabulary of " << vocab_size << " (ids 0.." << vocab_size - 1 << ")";
    throw ArgumentError(text.str());
  }
  return static_cast<int64_t>(value);
}

}  // namespace

void NativeModel::Init(Napi::Env env, Napi::Object exports) {
  exports.Set(kClassName, Define(env, {
                                      StaticMethod("load", &NativeModel::Load),
                                      StaticMethod("create", &NativeModel::Create),
                                      InstanceMethod("forward", &NativeModel::Forward),
                                      InstanceMethod("generate", &NativeModel::Generate),
                                      InstanceMethod("parameterNames", &NativeModel::ParameterNames),
                                      InstanceMethod("save", &NativeModel::Save),
                                      InstanceMethod("loadWeights", &NativeModel::LoadWeights),
                                      InstanceMethod("clone", &NativeModel::Clone),
                                      InstanceMethod("setGradientCheckpointing", &NativeModel::SetGradientCheckpointing),
                                      InstanceMethod("setTraining", &NativeModel::SetTraining),
                                      InstanceMethod("setSeed", &NativeModel::SetSeed),
                                      InstanceMethod("getGeneratorState", &NativeModel::GetGeneratorState),
                                      InstanceMethod("setGeneratorState", &NativeModel::SetGeneratorState),
                                      InstanceMethod("info", &NativeModel::Info),
                                  }));
}

NativeModel::NativeModel(const Napi::CallbackInfo& info) : ModuleBinding(info) {
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

at::Generator& ModelState::Stream(const std::string& name) {
  const auto found = generators.find(name);
  if (found == generators.end()) {
    throw ArgumentError("sampling stream \"" + name + "\" was never seeded (setSeed(seed, \"" + name + "\") creates it)");
  }
  return found->second;
}

at::Generator& ModelState::StreamOrNew(const std::string& name, uint64_t seed) {
  auto found = generators.find(name);
  if (found == generators.end()) found = generators.emplace(name, MakeGenerator(device, seed)).first;
  return found->second;
}

// load({ config, files, dtype, device, seed }) -> Promise<NativeModel>; with gguf: { file, tensors } in place of files,
// the weights come from that GGUF file as its plan says (gguf_weights.h).
Napi::Value NativeModel::Load(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const DecoderConfig config = ReadDecoderConfig(ObjectField(options, "config"));
    const bool from_gguf = options.Has("gguf");
    const std::vector<std::string> files = from_gguf ? std::vector<std::string>{StringField(ObjectField(options, "gguf"), "file")} : StringListField(options, "files");
    const std::vector<GgufSource> plan = from_gguf ? ReadGgufPlan(ObjectField(options, "gguf").Get("tensors")) : std::vector<GgufSource>{};
    const Placement placement = ReadPlacement(options);
    // Built on the device's lane, as every later call on the model runs: the JS thread stays free while the
    // parameters are allocated and the weights copied in (and dequantized).
    return RunAsync(info.Env(), placement.device.str(), [config, files, plan, from_gguf, placement]() -> Resolver {
      auto state = NewState(config, placement);
      if (from_gguf) {
        comlrl::LoadGgufWeights(*state->module, files[0], plan);
      } else {
        comlrl::LoadWeights(*state->module, files);
      }
      return [state](Napi::Env env) -> Napi::Value { return Wrap(env, state); };
    });
  });
}

// create({ config, dtype, device, seed, initStd }) -> NativeModel with transformers-style random weights.
Napi::Value NativeModel::Create(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const Placement placement = ReadPlacement(options);
    auto state = NewState(ReadDecoderConfig(ObjectField(options, "config")), placement);
    at::Generator init = at::detail::createCPUGenerator(placement.seed);
    InitWeights(*state->module, NumberFieldOr(options, "initStd", 0.02), init);
    return Wrap(info.Env(), state);
  });
}

// forward({ ids, batch, length, attentionMask?, positionIds?, logits?: true, hiddenStates?: false })
Napi::Value NativeModel::Forward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    // Ids and positions are checked on the host: out of range on a GPU they are a device-side assert, after which every
    // CUDA call of the process fails.
    const auto token_batch = ReadCheckedTokenBatch(*state->module, options);
    const torch::Tensor ids = token_batch.first, mask = token_batch.second;
    const int64_t batch = ids.size(0), length = ids.size(1);
    torch::Tensor positions = torch::arange(length, torch::kInt64).expand({batch, length});
    if (options.Has("positionIds") && !options.Get("positionIds").IsUndefined()) {
      positions = Int32ArrayToTensor(options.Get("positionIds"), "positionIds");
      if (positions.numel() != batch * length) throw ArgumentError("positionIds must hold batch × length = " + std::to_string(batch * length) + " positions");
      positions = positions.view({batch, length}).to(torch::kInt64);
      if (positions.numel() > 0 && positions.min().item<int64_t>() < 0) throw ArgumentError("positionIds holds a negative position");
    }
    const int64_t max_position = positions.max().item<int64_t>();  // a host tensor: no device read
    const bool want_logits = BoolFieldOr(options, "logits", true);
    const bool want_hidden = BoolFieldOr(options, "hiddenStates", false);
    return RunAsync(info.Env(), state->lane, [=]() -> Resolver {
      ModuleLocks lock({state.get()});
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> hidden_states;
      const torch::Tensor hidden = state->module->forward(
          {ToDevice(ids, state->device), ToDevice(positions, state->device), ToDevice(mask, state->device), max_position}, nullptr,
          want_hidden ? &hidden_states : nullptr);
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
//            repetitionPenalty, eosTokenIds, padTokenId, returnLogprobs, returnScores })
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
    settings.repetition_penalty = NumberFieldOr(options, "repetitionPenalty", 1.0);
    settings.pad_token_id = PadTokenId(options, state->module->config().vocab_size);
    settings.return_logprobs = BoolFieldOr(options, "returnLogprobs", false);
    settings.return_scores = BoolFieldOr(options, "returnScores", false);
    const torch::Tensor eos = Int32ArrayToTensor(options.Get("eosTokenIds"), "eosTokenIds");
    for (int64_t i = 0; i < eos.numel(); ++i) settings.eos_token_ids.push_back(eos.data_ptr<int32_t>()[i]);
    if (!(settings.temperature > 0)) throw ArgumentError("temperature must be positive");
    if (!(settings.top_p > 0 && settings.top_p <= 1)) throw ArgumentError("topP must be in (0, 1]");
    if (!(settings.repetition_penalty > 0) || !std::isfinite(settings.repetition_penalty)) throw ArgumentError("repetitionPenalty must be a positive number");
    const std::string stream = options.Get("stream").IsUndefined() ? ModelState::kDefaultStream : StringField(options, "stream");
    // An unknown stream fails here, before any work is queued. Streams are only added on this thread, so reading the
    // map needs no lock (taking the model's mutex would wait out work in flight).
    state->Stream(stream);
    return RunAsync(info.Env(), state->lane, [state, prompts, settings, stream]() -> Resolver {
      ModuleLocks lock({state.get()});
      torch::InferenceMode inference;
      GenerateResult result = comlrl::Generate(*state->module, prompts, settings, state->Stream(stream));
      return [result](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("tokens", ToInt32Array(env, result.tokens));
        out.Set("lengths", ToInt32Array(env, result.lengths));
        out.Set("width", Napi::Number::New(env, result.tokens.size(1)));
        if (result.logprobs.defined()) out.Set("logprobs", ToFloat32Array(env, result.logprobs));
        if (result.processed_logprobs.defined()) out.Set("processedLogprobs", ToFloat32Array(env, result.processed_logprobs));
        if (result.scores.defined()) out.Set("scores", ToFloat32Array(env, result.scores));
        return out;
      };
    });
  });
}

// parameterNames() -> [{ name, shape }] under the names a checkpoint saves them by.
Napi::Value NativeModel::ParameterNames(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value { return ParameterList(info.Env(), CheckpointTensors(*Live()->module)); });
}

// save({ dir, dtype, maxShardBytes }) -> Promise<{ files, weightMap, totalBytes }>; the caller owns dir's atomicity.
Napi::Value NativeModel::Save(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = ObjectArg(info, 0, "options");
    const std::string dir = StringField(options, "dir");
    const torch::Dtype dtype = options.Get("dtype").IsString() ? ParseDtype(StringField(options, "dtype")) : state->dtype;
    const auto max_shard = static_cast<int64_t>(NumberFieldOr(options, "maxShardBytes", 5e9));
    return RunAsync(info.Env(), state->lane, [state, dir, dtype, max_shard]() -> Resolver {
      ModuleLocks lock({state.get()});
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
    return RunAsync(info.Env(), state->lane, [state, files]() -> Resolver {
      ModuleLocks lock({state.get()});
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
    return RunAsync(info.Env(), state->lane, [state, device, dtype, seed]() -> Resolver {
      ModuleLocks lock({state.get()});
      auto copy = NewState(state->module->config(), {device, dtype, seed});
      {
        torch::NoGradGuard no_grad;
        auto source = state->module->named_parameters();
        for (auto& item : copy->module->named_parameters()) item.value().copy_(source[item.key()]);
      }
      return [copy](Napi::Env env) -> Napi::Value { return Wrap(env, copy); };
    });
  });
}

namespace {

// The body of a boolean switch on the module: the argument checked, then set under the model's mutex.
template <typename Set>
Napi::Value SetSwitch(const Napi::CallbackInfo& info, const std::shared_ptr<ModelState>& state, const char* usage, Set set) {
  if (info.Length() < 1 || !info[0].IsBoolean()) throw ArgumentError(std::string(usage) + ": a boolean");
  std::lock_guard<std::mutex> lock(state->mutex);
  set(*state->module, info[0].As<Napi::Boolean>().Value());
  return info.Env().Undefined();
}

}  // namespace

Napi::Value NativeModel::SetGradientCheckpointing(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    return SetSwitch(info, Live(), "setGradientCheckpointing(enabled)", [](CausalLMImpl& m, bool on) { m.set_gradient_checkpointing(on); });
  });
}

Napi::Value NativeModel::SetTraining(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    return SetSwitch(info, Live(), "setTraining(enabled)", [](CausalLMImpl& m, bool on) { m.set_training(on); });
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
    at::Generator& generator = state->StreamOrNew(stream, seed);
    std::lock_guard<std::mutex> generator_lock(generator.mutex());
    generator.set_current_seed(seed);
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
    at::Generator& generator = state->StreamOrNew(stream, 0);
    std::lock_guard<std::mutex> generator_lock(generator.mutex());
    generator.set_state(tensor);
    return info.Env().Undefined();
  });
}

// info() -> { parameterCount, parameterBytes, gradientBytes, device, dtype, attention, attentionKernels,
//            gradientCheckpointing, training, frozen }
Napi::Value NativeModel::Info(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    const ParameterStats stats = StatsOf(*state);
    std::lock_guard<std::mutex> lock(state->mutex);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("parameterCount", stats.count);
    out.Set("parameterBytes", stats.bytes);
    out.Set("gradientBytes", stats.gradient_bytes);
    std::set<const void*> blocks;
    for (const torch::Tensor& parameter : state->module->parameters()) blocks.insert(parameter.storage().data());
    out.Set("parameterBlocks", static_cast<double>(blocks.size()));
    out.Set("device", state->device.str());
    out.Set("dtype", DtypeName(state->dtype));
    const DecoderConfig& config = state->module->config();
    out.Set("attention", UsesSdpa(config.attention, config.attn_softcap, state->device) ? "sdpa" : "eager");
    const AttentionKernels kernels = AttentionKernelsFor(config, torch::TensorOptions().device(state->device).dtype(state->dtype));
    Napi::Object kernel_names = Napi::Object::New(info.Env());
    kernel_names.Set("training", kernels.training);
    kernel_names.Set("masked", kernels.masked);
    kernel_names.Set("decode", kernels.decode);
    out.Set("attentionKernels", kernel_names);
    out.Set("gradientCheckpointing", Napi::Boolean::New(info.Env(), state->module->gradient_checkpointing()));
    out.Set("training", Napi::Boolean::New(info.Env(), state->module->training()));
    out.Set("frozen", Napi::Boolean::New(info.Env(), stats.frozen));
    return out;
  });
}

}  // namespace comlrl
