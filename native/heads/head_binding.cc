#include "head_binding.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <set>

#include "../bridge/bridge.h"
#include "../bridge/parameter_access.h"

// stateDict() hands out the tensors' memory as is, and state dicts are little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "stateDict bytes assume a little-endian host");

namespace comlrl {

void NativeValueHead::Init(Napi::Env env, Napi::Object exports) {
  exports.Set(kClassName, Define(env, {
                                      InstanceMethod("parameterNames", &NativeValueHead::ParameterNames),
                                      InstanceMethod("stateDict", &NativeValueHead::StateDict),
                                      InstanceMethod("loadStateDict", &NativeValueHead::LoadStateDict),
                                      InstanceMethod("info", &NativeValueHead::Info),
                                  }));
}

NativeValueHead::NativeValueHead(const Napi::CallbackInfo& info) : ModuleBinding(info) {
  Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const double hidden_size = NumberField(options, "hiddenSize");
    const double hidden_dim = NumberFieldOr(options, "hiddenDim", 0);
    if (hidden_size != static_cast<int64_t>(hidden_size) || hidden_size <= 0) throw ArgumentError("hiddenSize must be a positive integer");
    if (hidden_dim != static_cast<int64_t>(hidden_dim) || hidden_dim < 0) {
      throw ArgumentError("hiddenDim must be a positive integer, or null for a linear head");
    }
    const torch::Device device = ParseDevice(StringField(options, "device"));
    const torch::Dtype dtype = ParseDtype(StringField(options, "dtype"));
    // Initialised on the CPU with a CPU generator: the same seed gives the same head on every device.
    at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(NumberFieldOr(options, "seed", 0)));
    ValueHead module(static_cast<int64_t>(hidden_size), static_cast<int64_t>(hidden_dim));
    module->Init(generator);
    module->to(device, dtype);
    state_ = std::make_shared<HeadState>(module, device, dtype);
    return info.Env().Undefined();
  });
}

std::shared_ptr<HeadState> NativeValueHead::StateOn(const Napi::Value& value, const ModuleState& model, int64_t hidden_size) {
  auto head = StateOf(value, "head");
  if (head->device != model.device) {
    throw ArgumentError("the head is on " + head->device.str() + " but the model on " + model.device.str());
  }
  if (head->module->hidden_size() != hidden_size) {
    throw ArgumentError("the head reads hidden size " + std::to_string(head->module->hidden_size()) + ", the model's is " +
                        std::to_string(hidden_size));
  }
  return head;
}

Napi::Value NativeValueHead::ParameterNames(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& item : state->module->named_parameters()) named.emplace_back(item.key(), item.value());
    return ParameterList(info.Env(), named);
  });
}

namespace {

// One entry of a state dict from JS: { dtype, shape, data: Uint8Array } -> a CPU tensor owning a copy of the bytes.
torch::Tensor ReadStateTensor(const Napi::Value& value, const std::string& name) {
  if (!value.IsObject()) throw ArgumentError("state dict entry \"" + name + "\" must be { dtype, shape, data }");
  Napi::Object entry = value.As<Napi::Object>();
  const torch::Dtype dtype = ParseDtype(StringField(entry, "dtype"));
  const std::vector<int64_t> shape = IntListField(entry, "shape");
  Napi::Value data = entry.Get("data");
  if (!data.IsTypedArray() || data.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    throw ArgumentError("state dict entry \"" + name + "\": data must be a Uint8Array");
  }
  Napi::Uint8Array bytes = data.As<Napi::Uint8Array>();
  torch::Tensor tensor = torch::empty(shape, dtype);
  const size_t expected = tensor.numel() * tensor.element_size();
  if (bytes.ByteLength() != expected) {
    throw ArgumentError("state dict entry \"" + name + "\": " + std::to_string(bytes.ByteLength()) + " bytes of data, but " +
                        DtypeName(dtype) + " " + ShapeText(shape) + " needs " + std::to_string(expected));
  }
  if (expected > 0) std::memcpy(tensor.data_ptr(), bytes.Data(), expected);
  return tensor;
}

}  // namespace

// stateDict() -> { [name]: { dtype, shape, data: Uint8Array } }: raw little-endian bytes in the head's dtype.
Napi::Value NativeValueHead::StateDict(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    std::lock_guard<std::mutex> lock(state->mutex);
    Napi::Object out = Napi::Object::New(info.Env());
    for (const auto& item : state->module->named_parameters()) {
      const torch::Tensor tensor = item.value().detach().to(torch::kCPU).contiguous();
      const size_t bytes = tensor.numel() * tensor.element_size();
      Napi::Uint8Array data = Napi::Uint8Array::New(info.Env(), bytes);
      if (bytes > 0) std::memcpy(data.Data(), tensor.data_ptr(), bytes);
      Napi::Object entry = Napi::Object::New(info.Env());
      entry.Set("dtype", DtypeName(tensor.scalar_type()));
      entry.Set("shape", ToShapeArray(info.Env(), tensor.sizes()));
      entry.Set("data", data);
      out.Set(item.key(), entry);
    }
    return out;
  });
}

// loadStateDict(dict): every parameter, by name and shape, converted to the head's dtype. Nothing is copied unless
// the whole dict fits.
Napi::Value NativeValueHead::LoadStateDict(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object dict = ObjectArg(info, 0, "state dict");
    ModuleLocks lock({state.get()});
    auto parameters = state->module->named_parameters();
    std::set<std::string> expected;
    std::string names;
    for (const auto& item : parameters) {
      expected.insert(item.key());
      names += (names.empty() ? "" : ", ") + item.key();
    }
    Napi::Array keys = dict.GetPropertyNames();
    for (uint32_t i = 0; i < keys.Length(); ++i) {
      const std::string key = keys.Get(i).As<Napi::String>().Utf8Value();
      if (!expected.count(key)) throw ArgumentError("state dict has \"" + key + "\", which the value head does not (it has " + names + ")");
    }
    std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
    for (const auto& item : parameters) {
      if (!dict.Has(item.key())) throw ArgumentError("state dict lacks \"" + item.key() + "\"");
      const torch::Tensor source = ReadStateTensor(dict.Get(item.key()), item.key());
      if (source.sizes() != item.value().sizes()) {
        throw ArgumentError("state dict \"" + item.key() + "\" has shape " + ShapeText(source.sizes()) + ", the head's is " +
                            ShapeText(item.value().sizes()));
      }
      copies.emplace_back(item.value(), source);
    }
    torch::NoGradGuard no_grad;
    for (auto& [parameter, source] : copies) parameter.copy_(source);
    return info.Env().Undefined();
  });
}

// info() -> { hiddenSize, hiddenDim (null for a linear head), parameterCount, device, dtype, frozen }
Napi::Value NativeValueHead::Info(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    const ParameterStats stats = StatsOf(*state);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("hiddenSize", Napi::Number::New(info.Env(), static_cast<double>(state->module->hidden_size())));
    out.Set("hiddenDim", state->module->hidden_dim() == 0 ? info.Env().Null()
                                                          : Napi::Number::New(info.Env(), static_cast<double>(state->module->hidden_dim())));
    out.Set("parameterCount", stats.count);
    out.Set("device", state->device.str());
    out.Set("dtype", DtypeName(state->dtype));
    out.Set("frozen", Napi::Boolean::New(info.Env(), stats.frozen));
    return out;
  });
}

}  // namespace comlrl
