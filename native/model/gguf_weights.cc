#include "gguf_weights.h"

#include <map>
#include <set>

#include "../bridge/bridge.h"
#include "../io/gguf.h"
#include "weights.h"

namespace comlrl {
namespace {

// llama.cpp's convert_hf_to_gguf stores q_proj / k_proj rows of llama-family models interleaved for its rotary
// kernel: within each head, row pairs (i, i + half) become (2i, 2i + 1). Reversed as transformers' GGUF loader does.
torch::Tensor UndoRotaryPermutation(const torch::Tensor& weight, int64_t heads, const std::string& where) {
  const int64_t rows = weight.size(0);
  if (heads <= 0 || rows % (2 * heads) != 0) {
    throw ArgumentError(where + ": " + std::to_string(rows) + " rows do not split into " + std::to_string(heads) + " heads of pairs");
  }
  std::vector<int64_t> split{heads, rows / heads / 2, 2};
  for (int64_t d = 1; d < weight.dim(); ++d) split.push_back(weight.size(d));
  return weight.reshape(split).transpose(1, 2).reshape(weight.sizes()).contiguous();
}

Napi::Value ToJs(Napi::Env env, const GgufValue& value) {
  switch (value.kind) {
    case GgufValue::Kind::kNumber: return Napi::Number::New(env, value.number);
    case GgufValue::Kind::kBool: return Napi::Boolean::New(env, value.boolean);
    case GgufValue::Kind::kString: return Napi::String::New(env, value.text);
    case GgufValue::Kind::kArray: {
      Napi::Array items = Napi::Array::New(env, value.items.size());
      for (size_t i = 0; i < value.items.size(); ++i) items.Set(static_cast<uint32_t>(i), ToJs(env, value.items[i]));
      return items;
    }
  }
  return env.Undefined();
}

// readGguf(path) -> { metadata: { key: value }, tensors: [{ name, type, shape }] }
Napi::Value ReadGguf(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const GgufFile file(PathArg(info, 0, "readGguf(path)"));
    Napi::Env env = info.Env();
    Napi::Object metadata = Napi::Object::New(env);
    for (const auto& [key, value] : file.metadata()) metadata.Set(key, ToJs(env, value));
    Napi::Array tensors = Napi::Array::New(env, file.tensors().size());
    uint32_t i = 0;
    for (const auto& [name, tensor] : file.tensors()) {
      Napi::Object entry = Napi::Object::New(env);
      entry.Set("name", name);
      entry.Set("type", GgmlTypeName(tensor.type));
      entry.Set("shape", ToShapeArray(env, tensor.shape));
      tensors.Set(i++, entry);
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("metadata", metadata);
    out.Set("tensors", tensors);
    return out;
  });
}

// ggufTensor(path, name) -> { shape, values: Float32Array }: one tensor dequantized, as stored (no permutation).
Napi::Value GgufTensor(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const GgufFile file(PathArg(info, 0, "ggufTensor(path, name)"));
    if (info.Length() < 2 || !info[1].IsString()) throw ArgumentError("ggufTensor(path, name): a tensor name");
    const torch::Tensor values = file.Dequantize(info[1].As<Napi::String>().Utf8Value());
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("shape", ToShapeArray(info.Env(), values.sizes()));
    out.Set("values", ToFloat32Array(info.Env(), values));
    return out;
  });
}

}  // namespace

void LoadGgufWeights(CausalLMImpl& model, const std::string& path, const std::vector<GgufSource>& plan) {
  const GgufFile file(path);
  std::map<std::string, const GgufSource*> by_parameter;
  for (const auto& source : plan) by_parameter[source.parameter] = &source;
  torch::NoGradGuard no_grad;
  for (auto& [name, parameter] : CheckpointTensors(model)) {
    const auto found = by_parameter.find(name);
    if (found == by_parameter.end()) throw ArgumentError("weights: " + path + " has no tensor for parameter \"" + name + "\"");
    const GgufSource& source = *found->second;
    const std::string where = path + ": tensor \"" + source.tensor + "\" (parameter \"" + name + "\")";
    if (!file.tensors().count(source.tensor)) throw ArgumentError("weights: " + path + " has no tensor \"" + source.tensor + "\", which parameter \"" + name + "\" needs");
    const auto& shape = file.tensors().at(source.tensor).shape;
    if (torch::IntArrayRef(shape) != parameter.sizes()) {
      throw ArgumentError("weights: " + where + " has shape " + c10::str(torch::IntArrayRef(shape)) + ", the config implies " + c10::str(parameter.sizes()));
    }
    torch::Tensor values = file.Dequantize(source.tensor);
    if (source.permute_heads > 0) values = UndoRotaryPermutation(values, source.permute_heads, where);
    if (source.offset != 0) values.add_(source.offset);
    parameter.copy_(values);
  }
}

std::vector<GgufSource> ReadGgufPlan(const Napi::Value& value) {
  if (!value.IsArray()) throw ArgumentError("gguf.tensors: an array of { parameter, tensor, permuteHeads?, offset? }");
  const Napi::Array items = value.As<Napi::Array>();
  std::vector<GgufSource> plan;
  for (uint32_t i = 0; i < items.Length(); ++i) {
    if (!items.Get(i).IsObject()) throw ArgumentError("gguf.tensors[" + std::to_string(i) + "]: an object");
    const Napi::Object item = items.Get(i).As<Napi::Object>();
    GgufSource source;
    source.parameter = StringField(item, "parameter");
    source.tensor = StringField(item, "tensor");
    source.permute_heads = static_cast<int64_t>(NumberFieldOr(item, "permuteHeads", 0));
    source.offset = NumberFieldOr(item, "offset", 0);
    plan.push_back(std::move(source));
  }
  return plan;
}

void InitGguf(Napi::Env env, Napi::Object exports) { ExportFunctions(env, exports, {{"readGguf", ReadGguf}, {"ggufTensor", GgufTensor}}); }

}  // namespace comlrl
