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

// Holds the mutexes of several modules at once, taken in address order so that two calls over the same modules
// (an optimizer step and a critic readout) can never deadlock; a module listed twice is locked once.
class ModuleLocks {
 public:
  explicit ModuleLocks(std::vector<ModuleState*> modules) {
    std::sort(modules.begin(), modules.end());
    modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
    for (ModuleState* module : modules) locks_.emplace_back(module->mutex);
  }

 private:
  std::vector<std::unique_lock<std::mutex>> locks_;
};

}  // namespace comlrl
