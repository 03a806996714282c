#include "process_group.h"

// ProcessGroupGloo.hpp declares its class only under the build flag libtorch itself was built with; the symbols are
// exported by libtorch_cpu wherever Gloo was compiled in. The Gloo headers come with a pip libtorch and, on Debian,
// with libgloo-dev; without them this build has no process groups and create() says so.
#if __has_include(<gloo/algorithm.h>)
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#define COMLRL_HAVE_GLOO 1
#else
#define COMLRL_HAVE_GLOO 0
#endif

// NCCL, for gradients and parameters that live on GPUs, exists only in a CUDA libtorch built with it (libtorch_cuda
// exports the process group) with nccl.h at hand (a PyTorch wheel's nvidia-nccl; a CUDA toolkit install): the build
// says so in COMLRL_WITH_NCCL (scripts/find-libtorch.mjs; COMLRL_NCCL=OFF leaves it out). Small payloads and barriers
// stay on Gloo, as torch.distributed's "cpu:gloo,cuda:nccl" does.
#if COMLRL_WITH_NCCL && COMLRL_HAVE_GLOO
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define COMLRL_HAVE_NCCL 1
#else
#define COMLRL_HAVE_NCCL 0
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "../bridge/bridge.h"
#include "../heads/head_binding.h"
#include "../model/model_binding.h"

namespace comlrl {

// Collectives are staged through CPU tensors (Gloo), so they all run on the CPU lane: one FIFO keeps them in the
// order JS issued them, which is the order every rank must use.
constexpr const char* kLane = "cpu";
constexpr int64_t kDefaultBucketBytes = 25 << 20;  // DDP's default bucket size

struct ProcessGroupState {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{0};
#if COMLRL_HAVE_GLOO
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
#endif
#if COMLRL_HAVE_NCCL
  // Set when the group was created with ncclDevice: the CUDA device this rank reduces GPU tensors on.
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  int nccl_device = -1;
  // The first failure: a group whose peer died stays failed, so later calls report the cause at once.
  std::mutex failure_mutex;
  std::string failure;

  void ThrowIfFailed() {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure.empty()) throw std::runtime_error("the process group has failed earlier: " + failure);
  }

#if COMLRL_HAVE_GLOO
  // Waits for one collective; a timeout or a dead peer becomes an error naming the operation and this rank.
  template <typename WorkPtr>
  void Wait(const WorkPtr& work, const char* operation) {
    try {
      work->wait(timeout);
    } catch (const std::exception& error) {
      std::string message = std::string(operation) + " failed on rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                            " (a peer rank died, or did not join within " + std::to_string(timeout.count()) + " ms): " + ShortMessage(error);
      {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure.empty()) failure = message;
      }
      throw std::runtime_error(message);
    }
  }
#endif
};

Napi::FunctionReference NativeProcessGroup::constructor_;

namespace {

int IntegerField(const Napi::Object& object, const char* field, double min, double max) {
  const double value = NumberField(object, field);
  if (value != static_cast<double>(static_cast<int64_t>(value)) || value < min || value > max) {
    throw ArgumentError(std::string(field) + " must be an integer in [" + std::to_string(static_cast<int64_t>(min)) + ", " +
                        std::to_string(static_cast<int64_t>(max)) + "], got " + std::to_string(value));
  }
  return static_cast<int>(value);
}

torch::Tensor Float64ArrayToTensor(const Napi::Value& value, const char* name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
    throw ArgumentError(std::string(name) + " must be a Float64Array");
  }
  auto array = value.As<Napi::Float64Array>();
  auto tensor = torch::empty({static_cast<int64_t>(array.ElementLength())}, torch::kFloat64);
  if (array.ElementLength() > 0) std::memcpy(tensor.data_ptr<double>(), array.Data(), array.ByteLength());
  return tensor;
}

torch::Tensor Uint8ArrayToTensor(const Napi::Value& value, const char* name) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    throw ArgumentError(std::string(name) + " must be a Uint8Array");
  }
  auto array = value.As<Napi::Uint8Array>();
  auto tensor = torch::empty({static_cast<int64_t>(array.ElementLength())}, torch::kUInt8);
  if (array.ElementLength() > 0) std::memcpy(tensor.data_ptr<uint8_t>(), array.Data(), array.ByteLength());
  return tensor;
}

Napi::Float64Array ToFloat64Array(Napi::Env env, const torch::Tensor& tensor) {
  auto out = Napi::Float64Array::New(env, tensor.numel());
  if (tensor.numel() > 0) std::memcpy(out.Data(), tensor.data_ptr<double>(), out.ByteLength());
  return out;
}

Napi::Uint8Array ToUint8Array(Napi::Env env, const torch::Tensor& tensor, int64_t length) {
  auto out = Napi::Uint8Array::New(env, length);
  if (length > 0) std::memcpy(out.Data(), tensor.data_ptr<uint8_t>(), length);
  return out;
}

// The modules a model collective works on: an array of NativeModel / NativeValueHead, as optimizer groups take them.
std::vector<std::shared_ptr<ModuleState>> ModulesArg(const Napi::CallbackInfo& info, size_t index) {
  if (info.Length() <= index || !info[index].IsArray()) throw ArgumentError("modules must be an array of NativeModel or NativeValueHead");
  Napi::Array array = info[index].As<Napi::Array>();
  std::vector<std::shared_ptr<ModuleState>> out;
  for (uint32_t i = 0; i < array.Length(); ++i) {
    const std::string what = "modules[" + std::to_string(i) + "]";
    const Napi::Value value = array.Get(i);
    if (NativeValueHead::Is(value)) {
      out.push_back(NativeValueHead::StateOf(value, what.c_str()));
    } else if (NativeModel::Is(value)) {
      out.push_back(NativeModel::StateOf(value, what.c_str()));
    } else {
      throw ArgumentError(what + " must be a NativeModel or a NativeValueHead");
    }
  }
  if (out.empty()) throw ArgumentError("modules must not be empty");
  return out;
}

std::vector<ModuleState*> Raw(const std::vector<std::shared_ptr<ModuleState>>& modules) {
  std::vector<ModuleState*> out;
  for (const auto& module : modules) out.push_back(module.get());
  return out;
}

Napi::Object Traffic(Napi::Env env, int64_t bytes, double seconds) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("bytes", static_cast<double>(bytes));
  out.Set("seconds", seconds);
  return out;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

#if COMLRL_HAVE_GLOO

std::shared_ptr<::gloo::transport::Device> GlooDevice(const std::string& interface, const std::string& master_addr) {
  if (!interface.empty()) return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  // A loopback rendezvous means every rank is on this machine: stay on loopback rather than on whatever address
  // the host name resolves to.
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Runs a collective over `tensor`, staged through a contiguous CPU copy when the tensor is not one already.
template <typename Launch>
void OverCpu(ProcessGroupState& state, const torch::Tensor& tensor, const char* operation, Launch launch) {
  const bool direct = tensor.device().is_cpu() && tensor.is_contiguous();
  std::vector<at::Tensor> buffers{direct ? tensor : tensor.to(torch::kCPU).contiguous()};
  state.Wait(launch(buffers), operation);
  if (!direct) tensor.copy_(buffers[0]);
}

// Whether tensors on `device` are reduced by NCCL in place (on their GPU) rather than staged through Gloo.
bool OnNccl(const ProcessGroupState& state, const torch::Device& device) {
#if COMLRL_HAVE_NCCL
  return state.nccl && device.is_cuda() && device.index() == state.nccl_device;
#else
  return false;
#endif
}

// Whether every one of the tensors sits on this rank's NCCL device: 1 or 0, to be summed over the ranks. A call
// uses NCCL only when the sum is the world size: a rank reducing with NCCL waits for peers that reduce with Gloo, so
// the backend is one every rank agrees on (a rank whose modules share a GPU, or sit on another one, makes it Gloo).
double NcclFlag(const ProcessGroupState& state, const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return 0;
  for (const auto& tensor : tensors) {
    if (!OnNccl(state, tensor.device())) return 0;
  }
  return 1;
}

// NCCL's results and the copies out of its buckets run on this lane's CUDA stream; the device's other lanes read
// the gradients next, so the collective is finished on the device before it resolves. Every NCCL work has completed
// by now (Wait blocks under the group's timeout), so this waits for local copies only and cannot hang on a peer.
void SynchronizeNccl(const ProcessGroupState& state) {
#if COMLRL_HAVE_NCCL
  if (state.nccl) torch::cuda::synchronize(state.nccl_device);
#endif
}

// Sums `tensors` over the ranks, with NCCL when they sit on this rank's NCCL device, else with Gloo.
c10::intrusive_ptr<c10d::Work> AllReduceSum(ProcessGroupState& state, std::vector<at::Tensor>& tensors) {
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
#if COMLRL_HAVE_NCCL
  if (OnNccl(state, tensors[0].device())) return state.nccl->allreduce(tensors, options);
#endif
  return state.group->allreduce(tensors, options);
}

c10d::ReduceOp ParseReduceOp(const std::string& op) {
  if (op == "sum" || op == "mean") return c10d::ReduceOp::SUM;
  if (op == "max") return c10d::ReduceOp::MAX;
  if (op == "min") return c10d::ReduceOp::MIN;
  throw ArgumentError("op must be \"sum\", \"mean\", \"max\" or \"min\", got \"" + op + "\"");
}

// Gradient buckets: contiguous fp32 CPU buffers over consecutive parameters, reduced while the next is filled.
struct GradientSlot {
  torch::Tensor parameter;
  int64_t offset;
};

struct GradientBucket {
  torch::Tensor flat;
  std::vector<GradientSlot> slots;
  c10::intrusive_ptr<c10d::Work> work;
};

void ScatterBack(const GradientBucket& bucket) {
  for (const auto& slot : bucket.slots) {
    torch::Tensor parameter = slot.parameter;
    const auto reduced = bucket.flat.narrow(0, slot.offset, parameter.numel()).view(parameter.sizes());
    if (parameter.grad().defined()) {
      parameter.mutable_grad().copy_(reduced);
    } else {
      parameter.mutable_grad() = reduced.to(parameter.options()).clone();
    }
  }
}

#endif

}  // namespace

void NativeProcessGroup::Init(Napi::Env env, Napi::Object exports) {
#if COMLRL_HAVE_NCCL
  // Every NCCL work is waited for with the group's timeout (Wait), which blocks until the collective finished on the
  // GPU and, past the timeout, aborts the communicator (freeing the stuck kernels) and throws: a dead peer becomes a
  // TorchError. NCCL's watchdog would instead end the process at the same timeout; blocking-wait mode is PyTorch's
  // switch that leaves timeouts to the waiter and starts no watchdog. Read by each ProcessGroupNCCL when it is built;
  // set here, at load, before any thread reads the environment; a user's own setting is kept.
  setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
#endif
  Napi::Function cls = DefineClass(env, "NativeProcessGroup",
                                   {
                                       StaticMethod("create", &NativeProcessGroup::Create),
                                       StaticMethod("glooAvailable", &NativeProcessGroup::GlooAvailable),
                                       StaticMethod("ncclAvailable", &NativeProcessGroup::NcclAvailable),
                                       InstanceMethod("rank", &NativeProcessGroup::Rank),
                                       InstanceMethod("worldSize", &NativeProcessGroup::WorldSize),
                                       InstanceMethod("allReduceGradients", &NativeProcessGroup::AllReduceGradients),
                                       InstanceMethod("broadcastParameters", &NativeProcessGroup::BroadcastParameters),
                                       InstanceMethod("allReduce", &NativeProcessGroup::AllReduce),
                                       InstanceMethod("broadcast", &NativeProcessGroup::Broadcast),
                                       InstanceMethod("allGather", &NativeProcessGroup::AllGather),
                                       InstanceMethod("barrier", &NativeProcessGroup::Barrier),
                                       InstanceMethod("dispose", &NativeProcessGroup::Dispose),
                                   });
  constructor_ = Napi::Persistent(cls);
  exports.Set("NativeProcessGroup", cls);
}

NativeProcessGroup::NativeProcessGroup(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeProcessGroup>(info) {
  if (info.Length() != 1 || !info[0].IsExternal()) throw TorchError(info.Env(), "NativeProcessGroup is built by NativeProcessGroup.create()");
  state_ = *info[0].As<Napi::External<std::shared_ptr<ProcessGroupState>>>().Data();
}

Napi::Value NativeProcessGroup::GlooAvailable(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), COMLRL_HAVE_GLOO != 0); }

Napi::Value NativeProcessGroup::NcclAvailable(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), COMLRL_HAVE_NCCL != 0); }

Napi::Value NativeProcessGroup::Create(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    auto state = std::make_shared<ProcessGroupState>();
    state->world_size = IntegerField(options, "worldSize", 1, 1 << 20);
    state->rank = IntegerField(options, "rank", 0, state->world_size - 1);
    const std::string master_addr = StringField(options, "masterAddr");
    const int master_port = IntegerField(options, "masterPort", 1, 65535);
    state->timeout = std::chrono::milliseconds(IntegerField(options, "timeoutMs", 1, 1e9));
    const std::string interface = options.Get("interface").IsString() ? StringField(options, "interface") : "";
    if (!options.Get("ncclDevice").IsUndefined()) {
      state->nccl_device = IntegerField(options, "ncclDevice", 0, 1 << 10);
      if (!COMLRL_HAVE_NCCL) {
        throw ArgumentError("ncclDevice given, but this build of comlrl has no NCCL process group (it needs a CUDA libtorch and nccl.h; " +
                            std::string(COMLRL_WITH_CUDA ? "it was built with COMLRL_NCCL=OFF, or without nccl.h" : "this is a CPU build") + ")");
      }
      if (!torch::cuda::is_available() || state->nccl_device >= static_cast<int>(torch::cuda::device_count())) {
        throw ArgumentError("ncclDevice " + std::to_string(state->nccl_device) + " is not a CUDA device here (" +
                            std::to_string(torch::cuda::is_available() ? torch::cuda::device_count() : 0) + " CUDA devices)");
      }
    }
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state, master_addr, master_port, interface]() -> Resolver {
      try {
        c10d::TCPStoreOptions store_options;
        store_options.port = static_cast<std::uint16_t>(master_port);
        store_options.isServer = state->rank == 0;
        store_options.numWorkers = state->world_size;
        store_options.waitWorkers = false;  // the group's rendezvous below waits for every rank, under the timeout
        store_options.timeout = state->timeout;
        state->store = c10::make_intrusive<c10d::TCPStore>(master_addr, store_options);
        auto group_options = c10d::ProcessGroupGloo::Options::create(state->timeout);
        group_options->devices.push_back(GlooDevice(interface, master_addr));
        // Each backend keeps its rendezvous keys under its own prefix of the one store.
        state->group = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", state->store), state->rank,
                                                                   state->world_size, group_options);
#if COMLRL_HAVE_NCCL
        if (state->nccl_device >= 0) {
          auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
          nccl_options->timeout = state->timeout;
          // Communicators are created at the first collective on the device, not here.
          state->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl", state->store), state->rank,
                                                                    state->world_size, nccl_options);
        }
#endif
      } catch (const std::exception& error) {
        throw std::runtime_error("rank " + std::to_string(state->rank) + " of " + std::to_string(state->world_size) + " could not join the group at " +
                                 master_addr + ":" + std::to_string(master_port) + " within " + std::to_string(state->timeout.count()) +
                                 " ms: " + ShortMessage(error));
      }
      return [state](Napi::Env env) -> Napi::Value {
        auto holder = std::make_unique<std::shared_ptr<ProcessGroupState>>(state);
        return constructor_.New({Napi::External<std::shared_ptr<ProcessGroupState>>::New(env, holder.get())});
      };
    });
#else
    throw ArgumentError("this build of comlrl has no Gloo process groups: its libtorch came without the Gloo headers (on Debian, apt-get install "
                        "libgloo-dev and rebuild with npm run build:native)");
#endif
  });
}

std::shared_ptr<ProcessGroupState> NativeProcessGroup::Live() const {
  if (!state_) throw ArgumentError("the process group has been disposed");
  state_->ThrowIfFailed();
  return state_;
}

Napi::Value NativeProcessGroup::Rank(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value { return Napi::Number::New(info.Env(), Live()->rank); });
}

Napi::Value NativeProcessGroup::WorldSize(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value { return Napi::Number::New(info.Env(), Live()->world_size); });
}

// allReduceGradients(modules, { weight, values?: Float64Array, bucketBytes? })
//   -> Promise<{ totalWeight, values: Float64Array, bytes, seconds }>
// Every trainable gradient of the modules becomes Σ_r w_r·g_r / Σ_r w_r over the ranks (w = this rank's samples),
// so that a step over the union of the ranks' samples is what every rank applies. A gradient no rank has stays
// undefined (the optimizer skips it, as it would in one process); one that only some ranks have counts as zero on
// the others. `values` are summed over the ranks as given (per-rank totals such as weight·loss).
Napi::Value NativeProcessGroup::AllReduceGradients(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto modules = ModulesArg(info, 0);
    Napi::Object options = ObjectArg(info, 1, "options");
    const double weight = NumberField(options, "weight");
    if (!(weight >= 0)) throw ArgumentError("weight must be a non-negative number (this rank's samples), got " + std::to_string(weight));
    const torch::Tensor values = options.Get("values").IsUndefined() ? torch::empty({0}, torch::kFloat64) : Float64ArrayToTensor(options.Get("values"), "values");
    const int64_t bucket_bytes = static_cast<int64_t>(NumberFieldOr(options, "bucketBytes", kDefaultBucketBytes));
    if (bucket_bytes < 4) throw ArgumentError("bucketBytes must be at least 4");
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state, modules, weight, values, bucket_bytes]() -> Resolver {
      const auto start = std::chrono::steady_clock::now();
      ModuleLocks locks(Raw(modules));
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> parameters;
      for (const auto& module : modules) {
        for (const auto& parameter : module->Module().parameters()) {
          if (parameter.requires_grad()) parameters.push_back(parameter);
        }
      }
      // One small reduction first: the total weight, the caller's values, which gradients exist anywhere, and
      // whether every rank can reduce them with NCCL (NcclFlag).
      const int64_t value_count = values.numel();
      const int64_t nccl_slot = 1 + value_count + static_cast<int64_t>(parameters.size());
      auto scalars = torch::zeros({nccl_slot + 1}, torch::kFloat64);
      scalars[0] = weight;
      if (value_count > 0) scalars.narrow(0, 1, value_count).copy_(values);
      for (size_t p = 0; p < parameters.size(); ++p) scalars[1 + value_count + p] = parameters[p].grad().defined() ? 1.0 : 0.0;
      scalars[nccl_slot] = NcclFlag(*state, parameters);
      std::vector<at::Tensor> scalar_buffers{scalars};
      state->Wait(AllReduceSum(*state, scalar_buffers), "allReduceGradients");
      const double total = scalars[0].item<double>();
      const bool use_nccl = scalars[nccl_slot].item<double>() == state->world_size;
      int64_t bytes = scalars.numel() * 8;

      if (total > 0) {
        const double scale = weight / total;
        const int64_t bucket_elements = std::max<int64_t>(1, bucket_bytes / 4);
        const double* present = scalars.data_ptr<double>() + 1 + value_count;
        std::deque<GradientBucket> in_flight;
        GradientBucket bucket;
        int64_t filled = 0;
        auto launch = [&]() {
          if (bucket.slots.empty()) return;
          // Buckets of GPU gradients stay on the GPU under NCCL; everything else is reduced from CPU memory.
          const torch::Device device = bucket.slots.front().parameter.device();
          bucket.flat = torch::empty({filled}, torch::TensorOptions().dtype(torch::kFloat32).device(use_nccl ? device : torch::kCPU));
          for (const auto& slot : bucket.slots) {
            auto target = bucket.flat.narrow(0, slot.offset, slot.parameter.numel());
            const auto& grad = slot.parameter.grad();
            if (weight > 0 && grad.defined()) {
              target.copy_(grad.reshape({-1}));
            } else {
              target.zero_();
            }
          }
          bucket.flat.mul_(scale);
          bytes += filled * 4;
          std::vector<at::Tensor> buffers{bucket.flat};
          bucket.work = AllReduceSum(*state, buffers);
          in_flight.push_back(std::move(bucket));
          bucket = GradientBucket();
          filled = 0;
          // Two buckets in flight: one reducing while the next is packed, with bounded extra memory.
          if (in_flight.size() > 2) {
            state->Wait(in_flight.front().work, "allReduceGradients");
            ScatterBack(in_flight.front());
            in_flight.pop_front();
          }
        };
        for (size_t p = 0; p < parameters.size(); ++p) {
          if (present[p] == 0) continue;
          const int64_t numel = parameters[p].numel();
          // A bucket holds parameters of one device, so each bucket is reduced by one backend.
          const bool other_device = filled > 0 && bucket.slots.back().parameter.device() != parameters[p].device();
          if (filled > 0 && (filled + numel > bucket_elements || other_device)) launch();
          bucket.slots.push_back({parameters[p], filled});
          filled += numel;
        }
        launch();
        for (auto& done : in_flight) {
          state->Wait(done.work, "allReduceGradients");
          ScatterBack(done);
        }
      }
      SynchronizeNccl(*state);
      torch::Tensor summed = scalars.narrow(0, 1, value_count).clone();
      const double seconds = SecondsSince(start);
      return [total, summed, bytes, seconds](Napi::Env env) -> Napi::Value {
        Napi::Object out = Traffic(env, bytes, seconds);
        out.Set("totalWeight", total);
        out.Set("values", ToFloat64Array(env, summed));
        return out;
      };
    });
#else
    return info.Env().Undefined();
#endif
  });
}

// broadcastParameters(modules, root = 0) -> Promise<{ bytes, seconds }>: every parameter and buffer of the modules
// takes root's values, in place.
Napi::Value NativeProcessGroup::BroadcastParameters(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    auto modules = ModulesArg(info, 0);
    const int root = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0;
    if (root < 0 || root >= state->world_size) throw ArgumentError("root must be a rank in [0, " + std::to_string(state->world_size - 1) + "]");
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state, modules, root]() -> Resolver {
      const auto start = std::chrono::steady_clock::now();
      ModuleLocks locks(Raw(modules));
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> tensors;
      for (const auto& module : modules) {
        for (const auto& parameter : module->Module().parameters()) tensors.push_back(parameter);
        for (const auto& buffer : module->Module().buffers()) tensors.push_back(buffer);
      }
      // Whether every rank broadcasts with NCCL (NcclFlag), agreed first over Gloo.
      auto agreement = torch::full({1}, NcclFlag(*state, tensors), torch::kFloat64);
      std::vector<at::Tensor> agreement_buffers{agreement};
      state->Wait(state->group->allreduce(agreement_buffers), "broadcastParameters");
      [[maybe_unused]] const bool use_nccl = agreement.item<double>() == state->world_size;
      c10d::BroadcastOptions options;
      options.rootRank = root;
      int64_t bytes = 8;
      auto broadcast = [&](const torch::Tensor& tensor) {
        if (!tensor.defined() || tensor.numel() == 0) return;
#if COMLRL_HAVE_NCCL
        if (use_nccl && tensor.is_contiguous()) {
          std::vector<at::Tensor> buffers{tensor.detach()};
          state->Wait(state->nccl->broadcast(buffers, options), "broadcastParameters");
          bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
          return;
        }
#endif
        OverCpu(*state, tensor.detach(), "broadcastParameters", [&](std::vector<at::Tensor>& buffers) { return state->group->broadcast(buffers, options); });
        bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
      };
      for (const auto& tensor : tensors) broadcast(tensor);
      SynchronizeNccl(*state);
      const double seconds = SecondsSince(start);
      return [bytes, seconds](Napi::Env env) -> Napi::Value { return Traffic(env, bytes, seconds); };
    });
#else
    return info.Env().Undefined();
#endif
  });
}

// allReduce(values: Float64Array, op: "sum" | "mean" | "max" | "min") -> Promise<Float64Array>
Napi::Value NativeProcessGroup::AllReduce(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    torch::Tensor values = Float64ArrayToTensor(info.Length() > 0 ? info[0] : info.Env().Undefined(), "values");
    const std::string op = info.Length() > 1 && info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "sum";
#if COMLRL_HAVE_GLOO
    const c10d::ReduceOp reduce = ParseReduceOp(op);
    return RunAsync(info.Env(), kLane, [state, values, op, reduce]() -> Resolver {
      if (values.numel() > 0) {
        c10d::AllreduceOptions options;
        options.reduceOp = reduce;
        std::vector<at::Tensor> buffers{values};
        state->Wait(state->group->allreduce(buffers, options), "allReduce");
        if (op == "mean") values.div_(state->world_size);
      }
      return [values](Napi::Env env) -> Napi::Value { return ToFloat64Array(env, values); };
    });
#else
    return info.Env().Undefined();
#endif
  });
}

// broadcast(bytes: Uint8Array, root = 0) -> Promise<Uint8Array>: root's bytes on every rank (others pass any array,
// e.g. an empty one; the length travels first).
Napi::Value NativeProcessGroup::Broadcast(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    torch::Tensor bytes = Uint8ArrayToTensor(info.Length() > 0 ? info[0] : info.Env().Undefined(), "bytes");
    const int root = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 0;
    if (root < 0 || root >= state->world_size) throw ArgumentError("root must be a rank in [0, " + std::to_string(state->world_size - 1) + "]");
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state, bytes, root]() -> Resolver {
      c10d::BroadcastOptions options;
      options.rootRank = root;
      std::vector<at::Tensor> length{torch::full({1}, bytes.numel(), torch::kInt64)};
      state->Wait(state->group->broadcast(length, options), "broadcast");
      const int64_t size = length[0].item<int64_t>();
      std::vector<at::Tensor> payload{state->rank == root ? bytes : torch::empty({size}, torch::kUInt8)};
      if (size > 0) state->Wait(state->group->broadcast(payload, options), "broadcast");
      torch::Tensor received = payload[0];
      return [received, size](Napi::Env env) -> Napi::Value { return ToUint8Array(env, received, size); };
    });
#else
    return info.Env().Undefined();
#endif
  });
}

// allGather(bytes: Uint8Array) -> Promise<Uint8Array[]>: every rank's bytes, in rank order (lengths may differ).
Napi::Value NativeProcessGroup::AllGather(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    torch::Tensor bytes = Uint8ArrayToTensor(info.Length() > 0 ? info[0] : info.Env().Undefined(), "bytes");
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state, bytes]() -> Resolver {
      const int world = state->world_size;
      auto gather = [&](const torch::Tensor& mine, int64_t size, torch::ScalarType dtype) {
        std::vector<std::vector<at::Tensor>> outputs(1);
        for (int r = 0; r < world; ++r) outputs[0].push_back(torch::empty({size}, dtype));
        std::vector<at::Tensor> inputs{mine};
        state->Wait(state->group->allgather(outputs, inputs), "allGather");
        return outputs[0];
      };
      const auto lengths = gather(torch::full({1}, bytes.numel(), torch::kInt64), 1, torch::kInt64);
      int64_t longest = 0;
      std::vector<int64_t> sizes;
      for (const auto& length : lengths) {
        sizes.push_back(length.item<int64_t>());
        longest = std::max(longest, sizes.back());
      }
      std::vector<at::Tensor> payloads(world, torch::empty({0}, torch::kUInt8));
      if (longest > 0) {
        auto padded = torch::zeros({longest}, torch::kUInt8);
        padded.narrow(0, 0, bytes.numel()).copy_(bytes);
        payloads = gather(padded, longest, torch::kUInt8);
      }
      return [payloads, sizes](Napi::Env env) -> Napi::Value {
        Napi::Array out = Napi::Array::New(env, payloads.size());
        for (size_t r = 0; r < payloads.size(); ++r) out.Set(static_cast<uint32_t>(r), ToUint8Array(env, payloads[r], sizes[r]));
        return out;
      };
    });
#else
    return info.Env().Undefined();
#endif
  });
}

Napi::Value NativeProcessGroup::Barrier(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
#if COMLRL_HAVE_GLOO
    return RunAsync(info.Env(), kLane, [state]() -> Resolver {
      state->Wait(state->group->barrier(), "barrier");
      return nullptr;
    });
#else
    return info.Env().Undefined();
#endif
  });
}

// Leaves the group; a collective still queued keeps the group alive until it has run.
Napi::Value NativeProcessGroup::Dispose(const Napi::CallbackInfo& info) {
  state_.reset();
  return info.Env().Undefined();
}

}  // namespace comlrl
