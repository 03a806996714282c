// The napi <-> libtorch boundary: error translation, array conversions, device/dtype parsing and the async worker
// every heavy binding runs in. Nothing here knows about models or training.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace comlrl {

// Thrown by our own argument checks; reaches JS as a TypeError-like TorchError with this message.
struct ArgumentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Short message for any exception: libtorch errors without their 2.5 KB backtrace.
std::string ShortMessage(const std::exception& error);

// A JS Error with name "TorchError".
Napi::Error TorchError(Napi::Env env, const std::string& message);

// Runs fn and turns any C++ exception into a thrown JS TorchError, so no libtorch error can abort the process.
Napi::Value Guard(const Napi::CallbackInfo& info, const std::function<Napi::Value()>& fn);

// A finished piece of background work: converts its results to JS on the main thread.
using Resolver = std::function<Napi::Value(Napi::Env)>;

// Runs work on the compute lane named `lane` (one long-lived thread per device, e.g. "cpu", "cuda:0", or a CPU
// agent lane) and returns a Promise for what its resolver builds. Exceptions from work or the resolver reject the
// Promise with a TorchError. One thread per device keeps a single OpenMP team busy instead of one spinning team per
// libuv pool thread, and serialises work per device while different devices run concurrently.
Napi::Promise RunAsync(Napi::Env env, const std::string& lane, std::function<Resolver()> work);

// CPU agent lane k ("cpu#k"): where agents that share a CPU run concurrently, each agent's modules run on a lane of
// their own with one intra-op thread, instead of all of them in turn on the "cpu" lane with its thread count (at a
// small model's size libtorch's per-op overhead dominates, which intra-op threads do not shorten).
std::string AgentLaneName(int k);

// Agent lanes with jobs in flight (queued or running) now, and the most at once since the last call (which starts the
// next count from those busy now): how a test tells agents issued side by side from agents issued in turn. Counted from
// the push, not from when a lane's thread starts the job, so that a loaded machine's scheduling cannot hide an overlap
// the trainer made.
struct AgentLaneJobs {
  int busy;
  int peak;
};
AgentLaneJobs TakeAgentLaneJobCounts();

// Sets libtorch's intra-op thread count for every device lane (agent lanes keep one thread).
void SetNumThreads(int n);
// The intra-op thread count the device lanes run with (the JS thread itself runs torch on one thread).
int NumThreads();

// Creates the main-thread wake-up used by RunAsync; called once from module init.
void InitLanes(Napi::Env env);

// A binding's free functions, exported to JS under their names.
using ExportedFunction = std::pair<const char*, Napi::Value (*)(const Napi::CallbackInfo&)>;
void ExportFunctions(Napi::Env env, Napi::Object exports, std::initializer_list<ExportedFunction> functions);

// Argument readers that name the argument when it is wrong.
Napi::Object ObjectArg(const Napi::CallbackInfo& info, size_t index, const char* name);
// A file path argument; `call` names the call in the error ("save(path)").
std::string PathArg(const Napi::CallbackInfo& info, size_t index, const char* call);
std::string StringField(const Napi::Object& object, const char* field);
Napi::Object ObjectField(const Napi::Object& object, const char* field);
std::vector<std::string> StringListField(const Napi::Object& object, const char* field);
double NumberField(const Napi::Object& object, const char* field);
double NumberFieldOr(const Napi::Object& object, const char* field, double fallback);
bool BoolFieldOr(const Napi::Object& object, const char* field, bool fallback);
std::vector<int64_t> IntListField(const Napi::Object& object, const char* field);

// Copies JS typed arrays into CPU tensors (the tensor owns its memory; JS may reuse the array at once).
torch::Tensor Int32ArrayToTensor(const Napi::Value& value, const char* name);
torch::Tensor Float32ArrayToTensor(const Napi::Value& value, const char* name);

// Copies a tensor (any device/dtype) into a new JS typed array.
Napi::Float32Array ToFloat32Array(Napi::Env env, const torch::Tensor& tensor);
Napi::Int32Array ToInt32Array(Napi::Env env, const torch::Tensor& tensor);
Napi::Array ToShapeArray(Napi::Env env, torch::IntArrayRef shape);
// "[2, 3]", for messages.
std::string ShapeText(torch::IntArrayRef shape);

torch::Device ParseDevice(const std::string& text);
torch::Dtype ParseDtype(const std::string& text);
std::string DtypeName(torch::Dtype dtype);

}  // namespace comlrl
