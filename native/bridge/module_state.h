// What every torch module owned by a JS object shares: its placement and the mutex that serialises the calls on it.
// Optimizers and cross-module calls (a model with a value head) work on this without knowing the module's kind.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace comlrl {

struct ModuleState {
  ModuleState(torch::Device device, torch::Dtype dtype) : device(device), dtype(dtype), lane(device.str()) {}
  virtual ~ModuleState() = default;
  virtual torch::nn::Module& Module() = 0;

  torch::Device device;
  torch::Dtype dtype;
  // The compute lane its calls run on (bridge.h RunAsync): its device's, or a CPU agent lane (AgentLaneName) when
  // agents share a CPU and run concurrently. Read and written on the JS thread only, when a call is issued.
  std::string lane;
  std::mutex mutex;
};

// Waits until the GPU work this thread queued on device's current stream (a CUDA lane's pool stream) has finished;
// nothing on a CPU device. Defined in bridge.cc.
void SynchronizeCurrentStream(const torch::Device& device);

// Holds the mutexes of several modules at once, taken in address order so that two calls over the same modules
// (an optimizer step and a critic readout) can never deadlock; a module listed twice is locked once. Releasing them
// first waits for the GPU work queued under them: lanes run on streams that do not order themselves with other
// streams, so whoever takes a module's mutex next (the JS thread reading a parameter, a job on another lane) would
// otherwise work on tensors whose kernels are still queued.
class ModuleLocks {
 public:
  explicit ModuleLocks(std::vector<ModuleState*> modules) {
    std::sort(modules.begin(), modules.end());
    modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
    for (ModuleState* module : modules) {
      locks_.emplace_back(module->mutex);
      if (module->device.is_cuda() && std::find(devices_.begin(), devices_.end(), module->device) == devices_.end()) {
        devices_.push_back(module->device);
      }
    }
  }

  ~ModuleLocks() {
    // A CUDA error here is the lane's to report: its own synchronisation after the job fails with it (bridge.cc),
    // and a destructor that threw during unwinding would end the process.
    try {
      for (const torch::Device& device : devices_) SynchronizeCurrentStream(device);
    } catch (...) {
    }
  }

  ModuleLocks(const ModuleLocks&) = delete;
  ModuleLocks& operator=(const ModuleLocks&) = delete;

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
  std::vector<torch::Device> devices_;
};

}  // namespace comlrl
