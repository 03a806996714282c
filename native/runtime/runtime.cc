#include "runtime.h"

#include <ATen/Version.h>
#include <dlfcn.h>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "../bridge/bridge.h"
#include "../model/head_logprobs.h"
#include "caching_allocator.h"

#if COMLRL_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace comlrl {
namespace {

// The BLAS actually loaded (libblas.so.3 is an alternatives symlink on Debian), asked of the library itself.
std::string BlasDescription() {
  using ConfigFn = char* (*)();
  using ParallelFn = int (*)();
  if (auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    std::string text = config();
    if (auto parallel = reinterpret_cast<ParallelFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"))) {
      const int mode = parallel();
      text += mode == 2 ? " (openmp)" : mode == 1 ? " (pthreads)" : " (sequential)";
    }
    return text;
  }
  if (dlsym(RTLD_DEFAULT, "mkl_get_version_string")) return "MKL";
  if (dlsym(RTLD_DEFAULT, "bli_info_get_version_str")) return "BLIS";
  // PyPI's wheels link MKL statically (no symbol to find): their build configuration names it, and its threading
  // (MKL's GNU OpenMP layer in those builds, which follows torch's thread count).
  const std::string config = at::show_config();
  if (config.find("BLAS_INFO=mkl") != std::string::npos) {
    return config.find("USE_OPENMP=ON") != std::string::npos ? "MKL, statically linked (openmp)" : "MKL, statically linked";
  }
  return "reference BLAS (unoptimized)";
}

std::string BlasLibraryPath() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string file = line.substr(slash);
    if (file.find("libblas") != std::string::npos || file.find("openblas") != std::string::npos ||
        file.find("libmkl") != std::string::npos) {
      return file;
    }
  }
  return "";
}

struct CudaMemory {
  int64_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
};

// The CUDA caching allocator's figures for every visible device. CUDA starts lazily (at the first CUDA tensor), and
// before that the allocator has no devices and its getDeviceStats throws ("did you call init?"): until then every
// figure is 0, as torch.cuda.memory_stats returns nothing before CUDA is initialised. libtorch 1.x has no way to
// ask whether the allocator is initialised, so a 1.x CUDA build reports zeros throughout.
std::vector<CudaMemory> CudaMemoryPerDevice() {
  const int64_t count = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  std::vector<CudaMemory> out(count);
#if COMLRL_WITH_CUDA && TORCH_VERSION_MAJOR >= 2
  auto* allocator = c10::cuda::CUDACachingAllocator::get();
  if (allocator == nullptr || !allocator->initialized()) return out;
  for (int64_t device = 0; device < count; ++device) {
    const auto stats = allocator->getDeviceStats(static_cast<c10::DeviceIndex>(device));
    constexpr size_t kAggregate = 0;  // StatType::AGGREGATE: the small and large pools together
    out[device] = {stats.allocated_bytes[kAggregate].current, stats.reserved_bytes[kAggregate].current,
                   stats.allocated_bytes[kAggregate].peak, stats.reserved_bytes[kAggregate].peak};
  }
#endif
  return out;
}

// Resident bytes now, from /proc/self/statm (its second field, in pages); 0 where there is none.
int64_t ResidentBytes(int fd) {
  char text[128];
  const ssize_t n = fd >= 0 ? pread(fd, text, sizeof(text) - 1, 0) : -1;
  if (n <= 0) return 0;
  text[n] = 0;
  long long size = 0, resident = 0;
  if (std::sscanf(text, "%lld %lld", &size, &resident) != 2) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// The process's high-water mark of resident bytes (VmHWM of /proc/self/status); 0 where there is none.
int64_t PeakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// The peak resident bytes of a window of time: a thread samples statm every millisecond into the window's maximum,
// and a window whose end finds the process's high-water mark risen takes that mark (exact for the window that set
// it). The mark itself is never reset (clear_refs would), so what wait4 or GNU time report stays the process's own.
class ResidentSampler {
 public:
  static ResidentSampler& Get() {
    static ResidentSampler* sampler = new ResidentSampler();  // never destroyed: its thread runs until the process ends
    return *sampler;
  }

  struct Window {
    int64_t resident, peak, process_peak;
  };

  // Closes the window open since the last call and opens the next.
  Window Next() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t now = ResidentBytes(fd_);
    const int64_t process_peak = PeakResidentBytes();
    int64_t peak = std::max(window_peak_.exchange(now), now);
    if (process_peak > last_process_peak_) peak = std::max(peak, process_peak);
    last_process_peak_ = process_peak;
    return {now, peak, process_peak};
  }

 private:
  ResidentSampler() : fd_(open("/proc/self/statm", O_RDONLY | O_CLOEXEC)), last_process_peak_(PeakResidentBytes()) {
    window_peak_ = ResidentBytes(fd_);
    if (fd_ < 0) return;
    std::thread([this] {
      for (;;) {
        const int64_t now = ResidentBytes(fd_);
        int64_t seen = window_peak_.load();
        while (now > seen && !window_peak_.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }).detach();
  }

  const int fd_;
  std::atomic<int64_t> window_peak_{0};
  std::mutex mutex_;
  int64_t last_process_peak_;
};

// Resets the CUDA caching allocator's peak figures on every device, so the next window's peaks are its own.
void ResetCudaPeaks(size_t devices) {
#if COMLRL_WITH_CUDA && TORCH_VERSION_MAJOR >= 2
  auto* allocator = c10::cuda::CUDACachingAllocator::get();
  if (allocator == nullptr || !allocator->initialized()) return;
  for (size_t device = 0; device < devices; ++device) allocator->resetPeakStats(static_cast<c10::DeviceIndex>(device));
#else
  (void)devices;
#endif
}

Napi::Array CudaMemoryArray(Napi::Env env, const std::vector<CudaMemory>& memory) {
  Napi::Array devices = Napi::Array::New(env, memory.size());
  for (size_t i = 0; i < memory.size(); ++i) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("device", "cuda:" + std::to_string(i));
    entry.Set("allocatedBytes", static_cast<double>(memory[i].allocated));
    entry.Set("reservedBytes", static_cast<double>(memory[i].reserved));
    entry.Set("peakAllocatedBytes", static_cast<double>(memory[i].peak_allocated));
    entry.Set("peakReservedBytes", static_cast<double>(memory[i].peak_reserved));
    devices.Set(static_cast<uint32_t>(i), entry);
  }
  return devices;
}

// memoryWindow() -> { residentBytes, peakResidentBytes, processPeakResidentBytes, cudaMemory }: the window since the
// previous call (the first call's since the addon loaded) closed and the next opened; cudaMemory's peaks are the
// window's, as the allocator's peak figures are reset at every call.
Napi::Value MemoryWindow(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    const ResidentSampler::Window window = ResidentSampler::Get().Next();
    const std::vector<CudaMemory> memory = CudaMemoryPerDevice();
    ResetCudaPeaks(memory.size());
    Napi::Object out = Napi::Object::New(env);
    out.Set("residentBytes", static_cast<double>(window.resident));
    out.Set("peakResidentBytes", static_cast<double>(window.peak));
    out.Set("processPeakResidentBytes", static_cast<double>(window.process_peak));
    out.Set("cudaMemory", CudaMemoryArray(env, memory));
    return out;
  });
}

Napi::Value SetLogitsBlockRowsBinding(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsNumber()) throw ArgumentError("setLogitsBlockRows(rows): rows must be 0 (automatic) or a positive integer");
    const double rows = info[0].As<Napi::Number>().DoubleValue();
    if (!(rows >= 0) || rows != static_cast<double>(static_cast<int64_t>(rows))) {
      throw ArgumentError("setLogitsBlockRows(rows): rows must be 0 (automatic) or a positive integer, got " + std::to_string(rows));
    }
    SetLogitsBlockRows(static_cast<int64_t>(rows));
    return info.Env().Undefined();
  });
}

// logitsBlockRows(vocab, device, freeBytes?): the rows per LM-head block a scoring call on that device makes, with
// freeBytes free on it (default: what it has free now).
Napi::Value LogitsBlockRowsBinding(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
      throw ArgumentError("logitsBlockRows(vocab, device, freeBytes?): vocab must be a number and device a string");
    }
    // Any device by name, present or not: the sizes a GPU would get are asked of CPU-only machines too.
    const std::string name = info[1].As<Napi::String>().Utf8Value();
    std::optional<torch::Device> parsed;
    try {
      parsed.emplace(name);
    } catch (const c10::Error&) {
      throw ArgumentError("logitsBlockRows: device \"" + name + "\" is not a device (\"cpu\", \"cuda:N\")");
    }
    const torch::Device device = *parsed;
    const int64_t vocab = info[0].As<Napi::Number>().Int64Value();
    const int64_t free = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().Int64Value() : DeviceFreeBytes(device);
    return Napi::Number::New(info.Env(), static_cast<double>(LogitsBlockRows(vocab, device, free)));
  });
}

Napi::Value RuntimeInfo(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("torchVersion", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                std::to_string(TORCH_VERSION_PATCH));
    out.Set("cudaCompiled", Napi::Boolean::New(env, COMLRL_WITH_CUDA != 0));
    out.Set("cudaAvailable", Napi::Boolean::New(env, torch::cuda::is_available()));
    out.Set("cudaDeviceCount", Napi::Number::New(env, torch::cuda::is_available() ? torch::cuda::device_count() : 0));
    out.Set("numThreads", Napi::Number::New(env, comlrl::NumThreads()));
    out.Set("blas", BlasDescription());
    out.Set("blasLibrary", BlasLibraryPath());
    out.Set("cpuCacheBytes", Napi::Number::New(env, static_cast<double>(CpuCacheBytes())));
    out.Set("cpuCacheLimitBytes", Napi::Number::New(env, static_cast<double>(CpuCacheLimitBytes())));
    const std::vector<CudaMemory> memory = CudaMemoryPerDevice();
    out.Set("cudaMemory", CudaMemoryArray(env, memory));
    // Bytes in live tensors on cuda:0 (not the allocator's cached blocks): what a leak check watches.
    if (!memory.empty()) out.Set("cudaAllocatedBytes", static_cast<double>(memory[0].allocated));
    return out;
  });
}

// releaseFreedCpuMemory(): see ReleaseFreedCpuMemory.
Napi::Value ReleaseFreedCpuMemoryBinding(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    ReleaseFreedCpuMemory();
    return info.Env().Undefined();
  });
}

Napi::Value SetNumThreadsBinding(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsNumber()) throw ArgumentError("setNumThreads(n): n must be a positive integer");
    const int n = info[0].As<Napi::Number>().Int32Value();
    if (n < 1) throw ArgumentError("setNumThreads(n): n must be a positive integer, got " + std::to_string(n));
    comlrl::SetNumThreads(n);
    return info.Env().Undefined();
  });
}

struct MatmulInputs {
  torch::Tensor a, b;
};

MatmulInputs ReadMatmulInputs(const Napi::CallbackInfo& info) {
  torch::Tensor a = Float32ArrayToTensor(info[0], "a");
  torch::Tensor b = Float32ArrayToTensor(info[2], "b");
  const Napi::Object shapes = Napi::Object::New(info.Env());
  shapes.Set("aShape", info[1]);
  shapes.Set("bShape", info[3]);
  return {a.reshape(IntListField(shapes, "aShape")), b.reshape(IntListField(shapes, "bShape"))};
}

// matmul(a, aShape, b, bShape): a plain libtorch matmul; errors (shape mismatch) surface as TorchError.
Napi::Value Matmul(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    MatmulInputs in = ReadMatmulInputs(info);
    torch::Tensor c = torch::matmul(in.a, in.b);
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("data", ToFloat32Array(info.Env(), c));
    out.Set("shape", ToShapeArray(info.Env(), c.sizes()));
    return out;
  });
}

// matmulAsync(a, aShape, b, bShape, repeat): the same on a pool thread, repeated (for long-running work in tests).
Napi::Value MatmulAsync(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    MatmulInputs in = ReadMatmulInputs(info);
    const int64_t repeat = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Int64Value() : 1;
    return RunAsync(info.Env(), "cpu", [in, repeat]() -> Resolver {
      torch::NoGradGuard no_grad;
      torch::Tensor c;
      for (int64_t i = 0; i < std::max<int64_t>(repeat, 1); ++i) c = torch::matmul(in.a, in.b);
      return [c](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("data", ToFloat32Array(env, c));
        out.Set("shape", ToShapeArray(env, c.sizes()));
        return out;
      };
    });
  });
}

void Synchronize(const torch::Device& device) {
#if COMLRL_WITH_CUDA
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
#else
  (void)device;
#endif
}

// Seconds per run of `work`, over `iterations` runs timed from a device with nothing queued to one that finished them.
template <typename Work>
double SecondsPerRun(const torch::Device& device, int64_t iterations, Work work) {
  Synchronize(device);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) work();
  Synchronize(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
}

// measureMatmul({ n, dtype, device, iterations }): seconds per n×n×n matmul and GFLOP/s, after one warm-up.
Napi::Value MeasureMatmul(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const int64_t n = static_cast<int64_t>(NumberField(options, "n"));
    const int64_t iterations = static_cast<int64_t>(NumberFieldOr(options, "iterations", 5));
    const torch::Dtype dtype = ParseDtype(StringField(options, "dtype"));
    const torch::Device device = ParseDevice(StringField(options, "device"));
    return RunAsync(info.Env(), device.str(), [=]() -> Resolver {
      torch::NoGradGuard no_grad;
      auto opts = torch::TensorOptions().dtype(dtype).device(device);
      torch::Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts), c = torch::empty({n, n}, opts);
      torch::mm_out(c, a, b);
      const double seconds = SecondsPerRun(device, iterations, [&] { torch::mm_out(c, a, b); });
      const double gflops = 2.0 * n * n * n / seconds / 1e9;
      return [=](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("seconds", seconds);
        out.Set("gflops", gflops);
        return out;
      };
    });
  });
}

// measureCopy({ bytes, device, iterations }): memory bandwidth of a large tensor copy, GB/s (read + write counted),
// and of reading it alone (a sum over it): decoding streams weights without writing them, which reaches more.
Napi::Value MeasureCopy(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 0, "options");
    const int64_t bytes = static_cast<int64_t>(NumberField(options, "bytes"));
    const int64_t iterations = static_cast<int64_t>(NumberFieldOr(options, "iterations", 5));
    const torch::Device device = ParseDevice(StringField(options, "device"));
    return RunAsync(info.Env(), device.str(), [=]() -> Resolver {
      torch::NoGradGuard no_grad;
      auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
      torch::Tensor src = torch::ones({bytes / 4}, opts), dst = torch::empty({bytes / 4}, opts);
      dst.copy_(src);
      const double seconds = SecondsPerRun(device, iterations, [&] { dst.copy_(src); });
      const double gbps = 2.0 * static_cast<double>(bytes) / seconds / 1e9;
      torch::Tensor total = src.sum();
      const double read_seconds = SecondsPerRun(device, iterations, [&] { torch::sum_out(total, src); });
      const double read_gbps = static_cast<double>(bytes) / read_seconds / 1e9;
      return [=](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("seconds", seconds);
        out.Set("gbps", gbps);
        out.Set("readGbps", read_gbps);
        return out;
      };
    });
  });
}

}  // namespace

void InitRuntime(Napi::Env env, Napi::Object exports) {
  ExportFunctions(env, exports,
                  {
                      {"runtimeInfo", RuntimeInfo},
                      {"setNumThreads", SetNumThreadsBinding},
                      {"matmul", Matmul},
                      {"matmulAsync", MatmulAsync},
                      {"measureMatmul", MeasureMatmul},
                      {"measureCopy", MeasureCopy},
                      {"memoryWindow", MemoryWindow},
                      {"setLogitsBlockRows", SetLogitsBlockRowsBinding},
                      {"logitsBlockRows", LogitsBlockRowsBinding},
                      {"releaseFreedCpuMemory", ReleaseFreedCpuMemoryBinding},
                  });
}

}  // namespace comlrl
