#include "numerics.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "../bridge/bridge.h"

namespace comlrl {
namespace {

struct Numerics {
  bool tf32_requested = false;
  bool tf32 = false;  // applied: requested and a CUDA device present
  bool deterministic = false;
};

Numerics applied;

// An opt-in variable: unset or "0" is off, "1" on; anything else stops the addon from loading, by name.
bool OptIn(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || std::string(value) == "0" || std::string(value).empty()) return false;
  if (std::string(value) == "1") return true;
  throw std::invalid_argument(std::string(name) + " must be 0 or 1, got \"" + value + "\"");
}

void ApplyFromEnvironment() {
  applied.tf32_requested = OptIn("COMLRL_TF32");
  applied.deterministic = OptIn("COMLRL_DETERMINISTIC");
  if (applied.tf32_requested && torch::cuda::is_available()) {
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
    applied.tf32 = true;
  }
  if (applied.deterministic) {
    // cuBLAS reads it when it makes its first handle, after this.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
}

// numerics() -> { tf32Requested, tf32, deterministic, cublasWorkspaceConfig }
Napi::Value NumericsInfo(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("tf32Requested", Napi::Boolean::New(env, applied.tf32_requested));
    out.Set("tf32", Napi::Boolean::New(env, applied.tf32 && at::globalContext().allowTF32CuBLAS()));
    out.Set("deterministic", Napi::Boolean::New(env, at::globalContext().deterministicAlgorithms()));
    const char* workspace = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    out.Set("cublasWorkspaceConfig", workspace ? Napi::Value(Napi::String::New(env, workspace)) : env.Null());
    return out;
  });
}

}  // namespace

void InitNumerics(Napi::Env env, Napi::Object exports) {
  try {
    ApplyFromEnvironment();
  } catch (const std::exception& error) {
    throw Napi::Error::New(env, error.what());
  }
  exports.Set("numerics", Napi::Function::New(env, NumericsInfo, "numerics"));
}

}  // namespace comlrl
