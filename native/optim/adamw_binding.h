// NativeOptimizer: AdamW over parameter groups, each a model or a head with its own learning rate and weight decay
// (an actor and its critic head in one optimizer). Several optimizers may share a module (parameter sharing with
// per-agent optimizer state); a step holds the mutexes of all its modules.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../bridge/module_state.h"
#include "../kernels/adamw.h"

namespace comlrl {

class NativeOptimizer : public Napi::ObjectWrap<NativeOptimizer> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  // new NativeOptimizer([{ module, lr?, weightDecay? }, ...], { lr, betas?: [b1, b2], eps?, weightDecay?, fp32Moments?,
  // masterWeights? })
  // new NativeOptimizer(module, { ... }): one group
  explicit NativeOptimizer(const Napi::CallbackInfo& info);

 private:
  // What grad_accumulator() returns: a shared_ptr in libtorch 1.13, an intrusive_ptr in recent 2.x.
  using AccumulatorRef = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  // The step taken in backward (stepInBackward): while armed, each parameter is stepped as soon as autograd has
  // accumulated its gradient, and its gradient dropped, so that a model's gradients never all live at once.
  struct BackwardSteps {
    bool armed = false;
    // Each parameter's part of the step, in group order; undefined norms where no step was taken yet.
    std::vector<ParameterStep> taken;
    // The parameters' gradient accumulators, held so that every graph accumulates through the nodes the hooks are on
    // (autograd itself keeps only a weak reference); released with the optimizer, they die with their hooks.
    std::vector<AccumulatorRef> accumulators;
  };
  struct State {
    std::vector<std::shared_ptr<ModuleState>> modules;  // one per group, in group order
    std::unique_ptr<torch::optim::AdamW> adamw;
    torch::Device device{torch::kCPU};
    bool fp32_moments = false;  // float32 moments for bf16 parameters (options.fp32Moments); off: in the parameter's dtype
    // float32 master weights for bf16 parameters (options.masterWeights, which implies fp32_moments): one per
    // parameter in group order; empty without them.
    MasterWeights masters;
    BackwardSteps in_backward;
    ~State();
    // Steps one parameter (by group and index) inside a backward and drops its gradient; nothing unless armed.
    void StepInBackward(size_t group, size_t index, size_t position);
    std::vector<ModuleState*> LockOrder() const;
    // The master of the parameter at a position in group order, or null where it has none (no master weights, or a
    // float32 parameter).
    MasterWeight* MasterAt(size_t position, const torch::Tensor& parameter);
    // Its steps run where its first module's calls do, so they queue behind that module's backward.
    const std::string& Lane() const { return modules.front()->lane; }
  };
  std::shared_ptr<State> Live() const;
  static double FinishStepInBackward(State& state);
  static void WriteMasters(torch::serialize::OutputArchive& archive, State& state);
  static MasterWeights ReadMasters(torch::serialize::InputArchive& archive, const State& state);
  Napi::Value Step(const Napi::CallbackInfo& info);
  Napi::Value StepInBackward(const Napi::CallbackInfo& info);
  Napi::Value SetLearningRate(const Napi::CallbackInfo& info);
  Napi::Value LearningRates(const Napi::CallbackInfo& info);
  Napi::Value Save(const Napi::CallbackInfo& info);
  Napi::Value Load(const Napi::CallbackInfo& info);
  Napi::Value Reset(const Napi::CallbackInfo& info);
  Napi::Value MomentDtypes(const Napi::CallbackInfo& info);
  Napi::Value Memory(const Napi::CallbackInfo& info);
  Napi::Value StalledFraction(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<State> state_;
};

}  // namespace comlrl
