#include "bridge.h"
#include "module_state.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <condition_variable>
#include <deque>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#if COMLRL_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace comlrl {

std::string ShortMessage(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    std::string message = torch_error->what_without_backtrace();
    // libtorch appends "Exception raised from ..." on some paths; the first lines carry the meaning.
    const auto raised = message.find("\nException raised from");
    if (raised != std::string::npos) message.resize(raised);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    return message;
  }
  return error.what();
}

Napi::Error TorchError(Napi::Env env, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("name", Napi::String::New(env, "TorchError"));
  return error;
}

Napi::Value Guard(const Napi::CallbackInfo& info, const std::function<Napi::Value()>& fn) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw TorchError(info.Env(), ShortMessage(error));
  } catch (...) {
    throw TorchError(info.Env(), "unknown native error");
  }
}

namespace {

struct Job {
  std::function<Resolver()> work;
  Resolver resolver;
  std::string error;
  Napi::Promise::Deferred deferred;
};

void FinishJob(Napi::Env env, Napi::Function, std::nullptr_t*, Job* job);
using Wakeup = Napi::TypedThreadSafeFunction<std::nullptr_t, Job, FinishJob>;

std::atomic<int> thread_count_generation{0};
std::atomic<int> configured_threads{0};  // torch's intra-op thread count for the lanes
Wakeup* wakeup = nullptr;  // process-wide; lives as long as the addon
int64_t pending_jobs = 0;  // main thread only: keeps the event loop alive while work is in flight

void FinishJob(Napi::Env env, Napi::Function, std::nullptr_t*, Job* job) {
  std::unique_ptr<Job> owned(job);
  if (--pending_jobs == 0) wakeup->Unref(env);
  if (env == nullptr) return;  // environment shutting down
  Napi::HandleScope scope(env);
  if (!job->error.empty()) {
    job->deferred.Reject(TorchError(env, job->error).Value());
    return;
  }
  try {
    job->deferred.Resolve(job->resolver ? job->resolver(env) : env.Undefined());
  } catch (const Napi::Error& error) {
    job->deferred.Reject(error.Value());
  } catch (const std::exception& error) {
    job->deferred.Reject(TorchError(env, ShortMessage(error)).Value());
  }
}

constexpr const char* kAgentLanePrefix = "cpu#";

std::atomic<int> busy_agent_lanes{0};
std::atomic<int> peak_busy_agent_lanes{0};

void AgentLaneBecameBusy() {
  const int now = ++busy_agent_lanes;
  int peak = peak_busy_agent_lanes.load();
  while (now > peak && !peak_busy_agent_lanes.compare_exchange_weak(peak, now)) {
  }
}

// OpenBLAS's OpenMP build keeps one process-wide thread count, which each call sets to its caller's OpenMP count,
// freeing per-thread buffers when the count drops. After a device-lane call with more threads, two agent lanes
// starting at once would both drop it and free the same buffers twice; so each agent lane's job starts by settling
// it at one thread under a lock (a no-op once settled, and on a BLAS without these functions).
void SettleBlasAtOneThread() {
  using GetFn = int (*)();
  using SetFn = void (*)(int);
  static const auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  static const auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (!get || !set) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (get() != 1) set(1);
}

// A FIFO of jobs served by one detached thread. Lanes are never destroyed: their threads end with the process.
class Lane {
 public:
  explicit Lane(std::string name) : name_(std::move(name)), agent_lane_(name_.rfind(kAgentLanePrefix, 0) == 0) {
    std::thread([this] { Serve(); }).detach();
  }

  void Push(Job* job) {
    if (agent_lane_ && in_flight_++ == 0) AgentLaneBecameBusy();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(job);
    }
    ready_.notify_one();
  }

 private:
#if COMLRL_WITH_CUDA
  // A CUDA lane's jobs run on a stream of their own (one per lane, from libtorch's pool), so that work for
  // different GPUs, and collectives on the CPU lane, overlap instead of queueing on each device's default stream.
  // Pool streams do not synchronise with other streams: a job ends only when its GPU work has, so that whatever
  // reads its results next (the JS thread, another lane, a collective) sees them complete.
  std::optional<c10::cuda::CUDAStream> BindStream() {
    if (name_.rfind("cuda", 0) != 0) return std::nullopt;
    const torch::Device device(name_);
    const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
    c10::cuda::set_device(index);
    c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
    c10::cuda::setCurrentCUDAStream(stream);
    return stream;
  }
#endif

  void Serve() {
#if COMLRL_WITH_CUDA
    // Bound by the first job, inside its error handling: a device that cannot start (busy in exclusive-process
    // mode, a driver mismatch, no memory for a context) rejects that job with the CUDA error instead of ending the
    // process from this thread; the next job tries again.
    std::optional<c10::cuda::CUDAStream> stream;
    bool stream_bound = false;
#endif
    for (;;) {
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !jobs_.empty(); });
        job = jobs_.front();
        jobs_.pop_front();
      }
      // OpenMP thread counts are per OS thread: apply torch's configured count here when it changes (and only
      // then: at::init_num_threads rebuilds libtorch's thread pool, ~9 ms).
      const int generation = thread_count_generation.load();
      if (generation != applied_generation) {
        ApplyThreadCount();
        applied_generation = generation;
      }
      if (agent_lane_) SettleBlasAtOneThread();
      try {
#if COMLRL_WITH_CUDA
        if (!stream_bound) {
          stream = BindStream();
          stream_bound = true;
        }
#endif
        job->resolver = job->work();
#if COMLRL_WITH_CUDA
        if (stream) stream->synchronize();
#endif
      } catch (const std::exception& error) {
        job->error = ShortMessage(error);
      } catch (...) {
        job->error = "unknown native error";
      }
      job->work = nullptr;  // release captured state here, not on the main thread
      if (agent_lane_ && --in_flight_ == 0) --busy_agent_lanes;
      wakeup->BlockingCall(job);
    }
  }

  void ApplyThreadCount() {
    // Torch sets a thread's count on its first parallel op; do that now, or it would undo the count below.
    at::internal::lazy_init_num_threads();
    at::init_num_threads();
#ifdef _OPENMP
    // Agent lanes run beside each other on the same cores, one thread each: no OpenMP team at all, since two teams
    // on the same cores stall each other at every parallel region, and OpenBLAS's OpenMP build lets only one
    // threaded call run at a time (the others spin waiting). OpenBLAS follows the calling thread's OpenMP count.
    if (agent_lane_) omp_set_num_threads(1);
#endif
  }

  const std::string name_;
  const bool agent_lane_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job*> jobs_;
  std::atomic<int> in_flight_{0};  // pushed and not yet finished
  int applied_generation = -1;
};

Lane& LaneNamed(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, Lane*> lanes;
  std::lock_guard<std::mutex> lock(mutex);
  Lane*& lane = lanes[name];
  if (!lane) lane = new Lane(name);
  return *lane;
}

}  // namespace

std::string AgentLaneName(int k) { return kAgentLanePrefix + std::to_string(k); }

AgentLaneJobs TakeAgentLaneJobCounts() {
  const int busy = busy_agent_lanes.load();
  return {busy, peak_busy_agent_lanes.exchange(busy)};
}

void SetNumThreads(int n) {
  // Torch sets a thread's OpenMP count on that thread's first parallel op; do it now, or it would undo the below.
  at::internal::lazy_init_num_threads();
  at::set_num_threads(n);
  configured_threads = n;
  ++thread_count_generation;
#ifdef _OPENMP
  // Tensor work runs on the lanes; torch calls on the JS thread (building a model, small synchronous helpers) run on
  // one thread. A second OpenMP team would make libgomp manage more threads than there are cores, and it then stops
  // spinning between parallel regions: every region of a decode step paid a futex wake-up (~57 context switches per
  // step, batch-8 decoding at 60% of its speed).
  omp_set_num_threads(1);
#endif
}

void SynchronizeCurrentStream(const torch::Device& device) {
#if COMLRL_WITH_CUDA
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
}

int NumThreads() { return configured_threads > 0 ? configured_threads.load() : at::get_num_threads(); }

void InitLanes(Napi::Env env) {
  wakeup = new Wakeup(Wakeup::New(env, "comlrl:lanes", 0, 1, nullptr));
  wakeup->Unref(env);
}

Napi::Promise RunAsync(Napi::Env env, const std::string& lane, std::function<Resolver()> work) {
  auto* job = new Job{std::move(work), nullptr, "", Napi::Promise::Deferred::New(env)};
  Napi::Promise promise = job->deferred.Promise();
  if (pending_jobs++ == 0) wakeup->Ref(env);
  LaneNamed(lane).Push(job);
  return promise;
}

void ExportFunctions(Napi::Env env, Napi::Object exports, std::initializer_list<ExportedFunction> functions) {
  for (const auto& [name, function] : functions) exports.Set(name, Napi::Function::New(env, function, name));
}

std::string PathArg(const Napi::CallbackInfo& info, size_t index, const char* call) {
  if (info.Length() <= index || !info[index].IsString()) throw ArgumentError(std::string(call) + ": a file path");
  return info[index].As<Napi::String>().Utf8Value();
}

Napi::Object ObjectArg(const Napi::CallbackInfo& info, size_t index, const char* name) {
  if (info.Length() <= index || !info[index].IsObject()) throw ArgumentError(std::string(name) + " must be an object");
  return info[index].As<Napi::Object>();
}

std::string StringField(const Napi::Object& object, const char* field) {
  Napi::Value value = object.Get(field);
  if (!value.IsString()) throw ArgumentError(std::string(field) + " must be a string");
  return value.As<Napi::String>().Utf8Value();
}

Napi::Object ObjectField(const Napi::Object& object, const char* field) {
  Napi::Value value = object.Get(field);
  if (!value.IsObject()) throw ArgumentError(std::string(field) + " must be an object");
  return value.As<Napi::Object>();
}

std::vector<std::string> StringListField(const Napi::Object& object, const char* field) {
  Napi::Value value = object.Get(field);
  if (!value.IsArray()) throw ArgumentError(std::string(field) + " must be an array of strings");
  Napi::Array array = value.As<Napi::Array>();
  std::vector<std::string> out;
  for (uint32_t i = 0; i < array.Length(); ++i) {
    if (!array.Get(i).IsString()) throw ArgumentError(std::string(field) + " must be an array of strings");
    out.push_back(array.Get(i).As<Napi::String>().Utf8Value());
  }
  return out;
}

double NumberField(const Napi::Object& object, const char* field) {
  Napi::Value value = object.Get(field);
  if (!value.IsNumber()) throw ArgumentError(std::string(field) + " must be a number");
  return value.As<Napi::Number>().DoubleValue();
}

double NumberFieldOr(const Napi::Object& object, const char* field, double fallback) {
  Napi::Value value = object.Get(field);
  if (value.IsUndefined() || value.IsNull()) return fallback;
  return NumberField(object, field);
}

bool BoolFieldOr(const Napi::Object& object, const char* field, bool fallback) {
  Napi::Value value = object.Get(field);
  if (value.IsUndefined() || value.IsNull()) return fallback;
  if (!value.IsBoolean()) throw ArgumentError(std::string(field) + " must be a boolean");
  return value.As<Napi::Boolean>().Value();
}

std::vector<int64_t> IntListField(const Napi::Object& object, const char* field) {
  Napi::Value value = object.Get(field);
  if (!value.IsArray()) throw ArgumentError(std::string(field) + " must be an array of integers");
  Napi::Array array = value.As<Napi::Array>();
  std::vector<int64_t> out(array.Length());
  for (uint32_t i = 0; i < array.Length(); ++i) {
    Napi::Value item = array.Get(i);
    if (!item.IsNumber()) throw ArgumentError(std::string(field) + " must be an array of integers");
    out[i] = item.As<Napi::Number>().Int64Value();
  }
  return out;
}

namespace {

template <typename JsArray, typename T>
torch::Tensor TypedArrayToTensor(const Napi::Value& value, const char* name, napi_typedarray_type type, torch::Dtype dtype,
                                 const char* type_name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != type) {
    throw ArgumentError(std::string(name) + " must be a " + type_name);
  }
  JsArray array = value.As<JsArray>();
  torch::Tensor tensor = torch::empty({static_cast<int64_t>(array.ElementLength())}, dtype);
  if (array.ElementLength() > 0) std::memcpy(tensor.data_ptr<T>(), array.Data(), array.ElementLength() * sizeof(T));
  return tensor;
}

}  // namespace

torch::Tensor Int32ArrayToTensor(const Napi::Value& value, const char* name) {
  return TypedArrayToTensor<Napi::Int32Array, int32_t>(value, name, napi_int32_array, torch::kInt32, "Int32Array");
}

torch::Tensor Float32ArrayToTensor(const Napi::Value& value, const char* name) {
  return TypedArrayToTensor<Napi::Float32Array, float>(value, name, napi_float32_array, torch::kFloat32, "Float32Array");
}

Napi::Float32Array ToFloat32Array(Napi::Env env, const torch::Tensor& tensor) {
  torch::Tensor flat = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous().reshape({-1});
  Napi::Float32Array out = Napi::Float32Array::New(env, flat.numel());
  if (flat.numel() > 0) std::memcpy(out.Data(), flat.data_ptr<float>(), flat.numel() * sizeof(float));
  return out;
}

Napi::Int32Array ToInt32Array(Napi::Env env, const torch::Tensor& tensor) {
  torch::Tensor flat = tensor.detach().to(torch::kCPU, torch::kInt32).contiguous().reshape({-1});
  Napi::Int32Array out = Napi::Int32Array::New(env, flat.numel());
  if (flat.numel() > 0) std::memcpy(out.Data(), flat.data_ptr<int32_t>(), flat.numel() * sizeof(int32_t));
  return out;
}

Napi::Array ToShapeArray(Napi::Env env, torch::IntArrayRef shape) {
  Napi::Array out = Napi::Array::New(env, shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out.Set(static_cast<uint32_t>(i), Napi::Number::New(env, shape[i]));
  return out;
}

std::string ShapeText(torch::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

torch::Device ParseDevice(const std::string& text) {
  if (text == "cpu") return torch::Device(torch::kCPU);
  if (text.rfind("cuda", 0) == 0) {
    if (!torch::cuda::is_available()) throw ArgumentError("device \"" + text + "\" requested but CUDA is not available");
    // "cuda" is device 0, as in torch: one spelling per device, so that a module loaded on "cuda" shares cuda:0's
    // lane and stream, and optimizers and heads see the two as one device.
    torch::Device device(text);
    if (!device.has_index()) device.set_index(0);
    if (device.index() >= static_cast<int64_t>(torch::cuda::device_count())) {
      throw ArgumentError("device \"" + text + "\" does not exist (" + std::to_string(torch::cuda::device_count()) +
                          " CUDA devices)");
    }
    return device;
  }
  throw ArgumentError("unknown device \"" + text + "\" (expected \"cpu\" or \"cuda:N\")");
}

torch::Dtype ParseDtype(const std::string& text) {
  if (text == "float32" || text == "fp32" || text == "f32") return torch::kFloat32;
  if (text == "bfloat16" || text == "bf16") return torch::kBFloat16;
  if (text == "float16" || text == "fp16" || text == "f16") return torch::kFloat16;
  throw ArgumentError("unknown dtype \"" + text + "\" (expected float32, bfloat16 or float16)");
}

std::string DtypeName(torch::Dtype dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat16: return "float16";
    default: return std::string(c10::toString(dtype));
  }
}

}  // namespace comlrl
