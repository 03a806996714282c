#include "adamw_binding.h"

#include <torch/csrc/autograd/function_hook.h>

#include <mutex>
#include <unordered_map>

#include "../bridge/bridge.h"
#include "../heads/head_binding.h"
#include "../io/file_writer.h"
#include "../kernels/adamw.h"
#include "../model/model_binding.h"

namespace comlrl {

namespace {

// The file records each group's parameter shapes beside libtorch's own state, which pairs saved moments with
// parameters by position only: without the record a file from another model would load and fail (or worse, not)
// at the next step.
constexpr const char* kGroupCountKey = "comlrl_group_count";
constexpr const char* kGroupShapesKey = "comlrl_group_shapes_";
// Each master weight under its parameter's position in group order.
constexpr const char* kMasterKey = "comlrl_master_";

std::shared_ptr<ModuleState> TrainableModule(const Napi::Value& value, const std::string& what) {
  if (NativeValueHead::Is(value)) return NativeValueHead::StateOf(value, what.c_str());
  if (NativeModel::Is(value)) return NativeModel::StateOf(value, what.c_str());
  throw ArgumentError(what + " must be a NativeModel or a NativeValueHead");
}

std::vector<torch::Tensor> TrainableParameters(ModuleState& module) {
  std::vector<torch::Tensor> out;
  for (const auto& parameter : module.Module().parameters()) {
    if (parameter.requires_grad()) out.push_back(parameter);
  }
  return out;
}

// Shapes of a group's parameters flattened as [ndim, dims..., ndim, dims...].
torch::Tensor ShapesRecord(const std::vector<torch::Tensor>& params) {
  std::vector<int64_t> flat;
  for (const auto& parameter : params) {
    flat.push_back(parameter.dim());
    for (int64_t size : parameter.sizes()) flat.push_back(size);
  }
  return torch::tensor(flat, torch::kInt64);
}

std::vector<std::vector<int64_t>> ParseShapes(const torch::Tensor& record) {
  const torch::Tensor flat = record.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* data = flat.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t i = 0; i < flat.numel();) {
    const int64_t dims = data[i++];
    TORCH_CHECK(dims >= 0 && i + dims <= flat.numel(), "corrupt parameter-shape record");
    shapes.emplace_back(data + i, data + i + dims);
    i += dims;
  }
  return shapes;
}

void CheckGroupsMatch(torch::serialize::InputArchive& archive, const torch::optim::AdamW& adamw) {
  torch::Tensor count;
  if (!archive.try_read(kGroupCountKey, count)) {
    throw ArgumentError("has no parameter-group record (not an optimizer state written by this version of comlrl)");
  }
  const auto& groups = adamw.param_groups();
  if (count.item<int64_t>() != static_cast<int64_t>(groups.size())) {
    throw ArgumentError("holds " + std::to_string(count.item<int64_t>()) + " parameter groups, this optimizer has " +
                        std::to_string(groups.size()));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    torch::Tensor record;
    archive.read(kGroupShapesKey + std::to_string(g), record);
    const auto saved = ParseShapes(record);
    const auto& params = groups[g].params();
    if (saved.size() != params.size()) {
      throw ArgumentError("group " + std::to_string(g) + " holds " + std::to_string(saved.size()) + " parameters, this optimizer's has " +
                          std::to_string(params.size()));
    }
    for (size_t p = 0; p < params.size(); ++p) {
      if (params[p].sizes() != torch::IntArrayRef(saved[p])) {
        throw ArgumentError("group " + std::to_string(g) + " parameter " + std::to_string(p) + " has shape " + ShapeText(saved[p]) +
                            " in the file, " + ShapeText(params[p].sizes()) + " in this optimizer");
      }
    }
  }
}

// clip_grad_norm_ (or, without clipping, the same norm) over every parameter with a gradient.
double ClipGradients(torch::optim::AdamW& adamw, double max_norm) {
  std::vector<torch::Tensor> with_grad;
  for (const auto& group : adamw.param_groups()) {
    for (const auto& parameter : group.params()) {
      if (parameter.grad().defined()) with_grad.push_back(parameter);
    }
  }
  double norm = 0.0;
  if (max_norm > 0) {
    norm = torch::nn::utils::clip_grad_norm_(with_grad, max_norm);
  } else if (!with_grad.empty()) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> norms;
    for (const auto& parameter : with_grad) norms.push_back(parameter.grad().norm(2).to(torch::kFloat32));
    norm = torch::stack(norms).norm(2).item<double>();
  }
  return norm;
}

// Calls a function after a gradient accumulator has accumulated a backward's gradient into its parameter's .grad: a
// leaf's accumulator runs once per backward, with the sum of every use's gradient, after every node that used the
// parameter has run.
class AfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> call) : call_(std::move(call)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) override {
    call_();
    return outputs;
  }

 private:
  std::function<void()> call_;
};

// The optimizer whose step in backward is armed on each module. One at a time: two optimizers sharing a module
// (agents sharing a model) would otherwise both step its parameters in each other's backward.
std::mutex armed_mutex;
std::unordered_map<const ModuleState*, const void*> armed_by;

void ArmModules(const std::vector<std::shared_ptr<ModuleState>>& modules, const void* optimizer) {
  std::lock_guard<std::mutex> lock(armed_mutex);
  for (const auto& module : modules) {
    const auto found = armed_by.find(module.get());
    if (found != armed_by.end() && found->second != optimizer) {
      throw ArgumentError("stepInBackward: a module of this optimizer has another optimizer's step in backward armed on it; "
                          "optimizers sharing a module step in backward one at a time");
    }
  }
  for (const auto& module : modules) armed_by[module.get()] = optimizer;
}

void DisarmModules(const std::vector<std::shared_ptr<ModuleState>>& modules, const void* optimizer) {
  std::lock_guard<std::mutex> lock(armed_mutex);
  for (const auto& module : modules) {
    const auto found = armed_by.find(module.get());
    if (found != armed_by.end() && found->second == optimizer) armed_by.erase(found);
  }
}

// ClipGradients and AdamW::step(): the path for what the fused loops do not take.
double LibtorchStep(torch::optim::AdamW& adamw, double max_norm) {
  const double norm = ClipGradients(adamw, max_norm);
  adamw.step();
  return norm;
}

}  // namespace

void NativeOptimizer::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function cls = DefineClass(env, "NativeOptimizer",
                                   {
                                       InstanceMethod("step", &NativeOptimizer::Step),
                                       InstanceMethod("stepInBackward", &NativeOptimizer::StepInBackward),
                                       InstanceMethod("setLearningRate", &NativeOptimizer::SetLearningRate),
                                       InstanceMethod("learningRates", &NativeOptimizer::LearningRates),
                                       InstanceMethod("save", &NativeOptimizer::Save),
                                       InstanceMethod("load", &NativeOptimizer::Load),
                                       InstanceMethod("reset", &NativeOptimizer::Reset),
                                       InstanceMethod("momentDtypes", &NativeOptimizer::MomentDtypes),
                                       InstanceMethod("memory", &NativeOptimizer::Memory),
                                       InstanceMethod("stalledFraction", &NativeOptimizer::StalledFraction),
                                       InstanceMethod("dispose", &NativeOptimizer::Dispose),
                                   });
  exports.Set("NativeOptimizer", cls);
}

NativeOptimizer::NativeOptimizer(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeOptimizer>(info) {
  Guard(info, [&]() -> Napi::Value {
    Napi::Object options = ObjectArg(info, 1, "options");
    double beta1 = 0.9, beta2 = 0.999;
    const Napi::Value betas = options.Get("betas");
    if (!betas.IsUndefined()) {
      const bool pair = betas.IsArray() && betas.As<Napi::Array>().Length() == 2 && betas.As<Napi::Array>().Get(0u).IsNumber() &&
                        betas.As<Napi::Array>().Get(1u).IsNumber();
      if (!pair) throw ArgumentError("betas must be [beta1, beta2]");
      beta1 = betas.As<Napi::Array>().Get(0u).As<Napi::Number>().DoubleValue();
      beta2 = betas.As<Napi::Array>().Get(1u).As<Napi::Number>().DoubleValue();
    }
    const auto defaults = torch::optim::AdamWOptions(NumberField(options, "lr"))
                              .betas({beta1, beta2})
                              .eps(NumberFieldOr(options, "eps", 1e-8))
                              .weight_decay(NumberFieldOr(options, "weightDecay", 0.01));

    // Either one module (the original form) or an array of groups.
    std::vector<std::pair<Napi::Value, Napi::Object>> specs;
    if (info.Length() > 0 && info[0].IsArray()) {
      Napi::Array groups = info[0].As<Napi::Array>();
      if (groups.Length() == 0) throw ArgumentError("groups must not be empty");
      for (uint32_t g = 0; g < groups.Length(); ++g) {
        if (!groups.Get(g).IsObject()) throw ArgumentError("groups[" + std::to_string(g) + "] must be { module, lr?, weightDecay? }");
        Napi::Object group = groups.Get(g).As<Napi::Object>();
        specs.emplace_back(group.Get("module"), group);
      }
    } else {
      specs.emplace_back(info.Length() > 0 ? info[0] : info.Env().Undefined(), Napi::Object::New(info.Env()));
    }

    const bool master_weights = BoolFieldOr(options, "masterWeights", false);
    auto state = std::make_shared<State>();
    state->fp32_moments = master_weights || BoolFieldOr(options, "fp32Moments", false);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (size_t g = 0; g < specs.size(); ++g) {
      const bool single = specs.size() == 1 && !info[0].IsArray();
      const std::string where = single ? "model" : "groups[" + std::to_string(g) + "].module";
      auto module = TrainableModule(specs[g].first, where);
      for (size_t earlier = 0; earlier < g; ++earlier) {
        if (state->modules[earlier] == module) throw ArgumentError(where + " is groups[" + std::to_string(earlier) + "].module again");
        if (state->modules[earlier]->device != module->device) {
          throw ArgumentError(where + " is on " + module->device.str() + " but groups[0].module is on " + state->modules[0]->device.str() +
                              ": the modules of one optimizer must share a device");
        }
      }
      std::vector<torch::Tensor> params = TrainableParameters(*module);
      if (params.empty()) throw ArgumentError(where + " has no trainable parameters (it is frozen)");
      if (module->dtype == torch::kHalf) {
        throw ArgumentError(where + " is float16: training in float16 needs loss scaling and float32 master weights, which this "
                            "optimizer does not have (AdamW's eps 1e-8 rounds to 0 in float16 and small squared gradients to 0, "
                            "so the first step gives NaN); load the model in bfloat16 or float32");
      }
      auto group_options = std::make_unique<torch::optim::AdamWOptions>(defaults);
      group_options->lr(NumberFieldOr(specs[g].second, "lr", defaults.lr()));
      group_options->weight_decay(NumberFieldOr(specs[g].second, "weightDecay", defaults.weight_decay()));
      groups.emplace_back(std::move(params), std::move(group_options));
      state->device = module->device;
      state->modules.push_back(std::move(module));
    }
    state->adamw = std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
    if (master_weights) {
      size_t count = 0;
      for (const auto& group : state->adamw->param_groups()) count += group.params().size();
      state->masters.resize(count);
    }
    state_ = std::move(state);
    return info.Env().Undefined();
  });
}

NativeOptimizer::State::~State() { DisarmModules(modules, this); }

void NativeOptimizer::State::StepInBackward(size_t group, size_t index, size_t position) {
  if (!in_backward.armed) return;
  const auto& parameter_group = adamw->param_groups()[group];
  const torch::Tensor& parameter = parameter_group.params()[index];
  if (!parameter.grad().defined()) return;
  TORCH_CHECK(!in_backward.taken[position].norm.defined(), "stepInBackward: parameter ", index, " of group ", group,
              " received a second gradient in one step; a step taken in backward needs the whole loss in one backward");
  in_backward.taken[position] = StepParameter(*adamw, static_cast<const torch::optim::AdamWOptions&>(parameter_group.options()), parameter,
                                              fp32_moments, MasterAt(position, parameter));
  parameter.mutable_grad() = torch::Tensor();
}

MasterWeight* NativeOptimizer::State::MasterAt(size_t position, const torch::Tensor& parameter) {
  if (masters.empty() || parameter.scalar_type() == torch::kFloat32) return nullptr;
  return &masters[position];
}

std::vector<ModuleState*> NativeOptimizer::State::LockOrder() const {
  std::vector<ModuleState*> out;
  for (const auto& module : modules) out.push_back(module.get());
  return out;
}

std::shared_ptr<NativeOptimizer::State> NativeOptimizer::Live() const {
  if (!state_) throw ArgumentError("the optimizer has been disposed");
  return state_;
}

// step({ maxGradNorm?, libtorch? }) -> Promise<{ gradNorm }>: the total gradient norm over all groups before any
// clipping. Two paths compute the same step: where FusedAdamWStep applies (every parameter with a gradient a contiguous
// CPU fp32 tensor, as the CPU models are) the fused loops of kernels/adamw.h; otherwise (CUDA, bf16, a non-contiguous
// tensor) libtorch's clip_grad_norm_ and AdamW::step(). Both keep the state in AdamW's own objects, so a run may move
// between them. libtorch: true takes libtorch's path even where the fused one applies (the tests compare the two).
// With fp32Moments and a bf16 (or fp16) parameter, the step is StepWithFloat32Moments after the same clipping.
Napi::Value NativeOptimizer::Step(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    Napi::Object options = info.Length() > 0 && info[0].IsObject() ? info[0].As<Napi::Object>() : Napi::Object::New(info.Env());
    const double max_norm = NumberFieldOr(options, "maxGradNorm", 0.0);
    const bool libtorch = BoolFieldOr(options, "libtorch", false);
    if (state->in_backward.armed && (max_norm > 0 || libtorch)) {
      throw ArgumentError(std::string(max_norm > 0 ? "maxGradNorm" : "libtorch") +
                          " cannot apply to a step begun in backward (stepInBackward(true)): its parameters are already stepped");
    }
    return RunAsync(info.Env(), state->Lane(), [state, max_norm, libtorch]() -> Resolver {
      ModuleLocks locks(state->LockOrder());
      double norm;
      if (state->in_backward.armed) {
        norm = FinishStepInBackward(*state);
      } else if (state->fp32_moments && HoldsLowPrecisionParameters(*state->adamw)) {
        norm = ClipGradients(*state->adamw, max_norm);
        StepWithFloat32Moments(*state->adamw, state->masters);
      } else {
        std::optional<double> fused;
        if (!libtorch) fused = FusedAdamWStep(*state->adamw, max_norm);
        norm = fused ? *fused : LibtorchStep(*state->adamw, max_norm);
      }
      return [norm](Napi::Env env) -> Napi::Value {
        Napi::Object out = Napi::Object::New(env);
        out.Set("gradNorm", norm);
        return out;
      };
    });
  });
}

// What step() does after a backward that stepped in it: steps the parameters whose gradients no accumulator saw (a
// head's weight written into .grad outside autograd) and totals every parameter's norm in group order.
double NativeOptimizer::FinishStepInBackward(State& state) {
  auto& steps = state.in_backward;
  steps.armed = false;
  DisarmModules(state.modules, &state);
  std::vector<ParameterStep> taken;
  size_t position = 0;
  for (const auto& group : state.adamw->param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (const auto& parameter : group.params()) {
      ParameterStep& step = steps.taken[position++];
      if (!step.norm.defined() && parameter.grad().defined()) {
        step = StepParameter(*state.adamw, options, parameter, state.fp32_moments, state.MasterAt(position - 1, parameter));
      }
      if (step.norm.defined()) taken.push_back(step);
    }
  }
  steps.taken.clear();
  return TotalNorm(taken);
}

// stepInBackward(on) -> Promise<void>: on arms the next step to be taken during the backward that follows, each
// parameter as soon as autograd has accumulated its gradient (whose tensor is then dropped), and step() finishes it;
// off disarms without stepping (a backward that failed). The update is the one step() would take after the backward,
// parameter for parameter, with no clipping and one backward per step: the caller arms only such steps (a second
// gradient for a stepped parameter is an error). A parameter of a frozen module joins at step() if it gets a gradient.
Napi::Value NativeOptimizer::StepInBackward(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsBoolean()) throw ArgumentError("stepInBackward(on): on must be a boolean");
    const bool on = info[0].As<Napi::Boolean>().Value();
    return RunAsync(info.Env(), state->Lane(), [state, on]() -> Resolver {
      ModuleLocks locks(state->LockOrder());
      auto& steps = state->in_backward;
      const auto& groups = state->adamw->param_groups();
      size_t count = 0;
      for (const auto& group : groups) count += group.params().size();
      if (on && steps.accumulators.empty()) {
        const std::weak_ptr<State> weak = state;
        size_t position = 0;
        for (size_t g = 0; g < groups.size(); ++g) {
          for (size_t i = 0; i < groups[g].params().size(); ++i, ++position) {
            auto accumulator = torch::autograd::impl::grad_accumulator(groups[g].params()[i]);
            if (!accumulator) continue;  // frozen since the optimizer was made
            accumulator->add_post_hook(std::make_unique<AfterAccumulation>([weak, g, i, position]() {
              if (auto live = weak.lock()) live->StepInBackward(g, i, position);
            }));
            steps.accumulators.push_back(std::move(accumulator));
          }
        }
      }
      if (on) {
        ArmModules(state->modules, state.get());
      } else {
        DisarmModules(state->modules, state.get());
      }
      steps.armed = on;
      steps.taken.assign(on ? count : 0, ParameterStep{});
      return nullptr;
    });
  });
}

// setLearningRate(lr, group?): every group when group is omitted.
Napi::Value NativeOptimizer::SetLearningRate(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    if (info.Length() < 1 || !info[0].IsNumber()) throw ArgumentError("setLearningRate(lr, group?): lr must be a number");
    const double lr = info[0].As<Napi::Number>().DoubleValue();
    auto& groups = state->adamw->param_groups();
    const bool all = info.Length() < 2 || info[1].IsUndefined();
    int64_t only = -1;
    if (!all) {
      if (!info[1].IsNumber()) throw ArgumentError("setLearningRate(lr, group?): group must be a group index");
      only = info[1].As<Napi::Number>().Int64Value();
      if (only < 0 || only >= static_cast<int64_t>(groups.size())) {
        throw ArgumentError("setLearningRate: group " + std::to_string(only) + " does not exist (" + std::to_string(groups.size()) +
                            " groups)");
      }
    }
    ModuleLocks locks(state->LockOrder());
    for (size_t g = 0; g < groups.size(); ++g) {
      if (all || static_cast<int64_t>(g) == only) static_cast<torch::optim::AdamWOptions&>(groups[g].options()).lr(lr);
    }
    return info.Env().Undefined();
  });
}

Napi::Value NativeOptimizer::LearningRates(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    ModuleLocks locks(state->LockOrder());
    const auto& groups = state->adamw->param_groups();
    Napi::Array out = Napi::Array::New(info.Env(), groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      out.Set(static_cast<uint32_t>(g), static_cast<const torch::optim::AdamWOptions&>(groups[g].options()).lr());
    }
    return out;
  });
}

// The master weights still current (their parameter unwritten since the last step), each under its position. One that
// is not would be taken again from its parameter at the next step, so the file leaves it out and a load does the same.
void NativeOptimizer::WriteMasters(torch::serialize::OutputArchive& archive, State& state) {
  size_t position = 0;
  for (const auto& group : state.adamw->param_groups()) {
    for (const auto& parameter : group.params()) {
      const MasterWeight* master = state.MasterAt(position, parameter);
      if (master != nullptr && master->value.defined() && master->version == static_cast<int64_t>(parameter._version())) {
        archive.write(kMasterKey + std::to_string(position), master->value);
      }
      ++position;
    }
  }
}

// A file's master weights, each checked against its parameter: its shape, and that it rounds to the parameter's
// current value (a file saved beside other weights than the model holds would otherwise step from the file's).
// Refused when this optimizer keeps none (its moments would be the file's float32 ones on bf16 parameters).
MasterWeights NativeOptimizer::ReadMasters(torch::serialize::InputArchive& archive, const State& state) {
  MasterWeights read(state.masters.size());
  size_t position = 0;
  for (const auto& group : state.adamw->param_groups()) {
    for (const auto& parameter : group.params()) {
      torch::Tensor value;
      const std::string key = kMasterKey + std::to_string(position);
      if (archive.try_read(key, value)) {
        if (state.masters.empty()) {
          throw ArgumentError("holds float32 master weights (saved with precision \"bf16-mixed\"); this optimizer keeps none");
        }
        const std::string where = "master weight " + std::to_string(position);
        if (value.sizes() != parameter.sizes() || value.scalar_type() != torch::kFloat32) {
          throw ArgumentError(where + " is " + DtypeName(value.scalar_type()) + " " + ShapeText(value.sizes()) + ", its parameter " +
                              ShapeText(parameter.sizes()));
        }
        value = value.to(parameter.device());
        if (!torch::equal(value.to(parameter.scalar_type()), parameter.detach())) {
          throw ArgumentError(where + " does not round to its parameter: load the model weights saved with this optimizer state first");
        }
        read[position] = MasterWeight{value, static_cast<int64_t>(parameter._version())};
      }
      ++position;
    }
  }
  return read;
}

// save(path) / load(path): the optimizer state (moments, step counts, master weights) in libtorch's archive format,
// with the parameter-group record that load checks.
Napi::Value NativeOptimizer::Save(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    const std::string path = PathArg(info, 0, "save(path)");
    return RunAsync(info.Env(), state->Lane(), [state, path]() -> Resolver {
      torch::serialize::OutputArchive archive;
      {
        ModuleLocks locks(state->LockOrder());
        state->adamw->save(archive);
        const auto& groups = state->adamw->param_groups();
        archive.write(kGroupCountKey, torch::tensor(static_cast<int64_t>(groups.size())));
        for (size_t g = 0; g < groups.size(); ++g) archive.write(kGroupShapesKey + std::to_string(g), ShapesRecord(groups[g].params()));
        WriteMasters(archive, *state);
      }
      // torch's zip writer must never see a failing sink (it would throw again from its destructor and abort the
      // process): the writer records the failure and Finish() raises it.
      FileWriter file(path);
      archive.save_to([&file](const void* data, size_t size) { return file.WriteOrRecord(data, size); });
      file.Finish();
      return nullptr;
    });
  });
}

Napi::Value NativeOptimizer::Load(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    const std::string path = PathArg(info, 0, "load(path)");
    return RunAsync(info.Env(), state->Lane(), [state, path]() -> Resolver {
      try {
        torch::serialize::InputArchive archive;
        archive.load_from(path, state->device);
        ModuleLocks locks(state->LockOrder());
        CheckGroupsMatch(archive, *state->adamw);
        MasterWeights masters = ReadMasters(archive, *state);
        state->adamw->load(archive);
        state->masters = std::move(masters);
      } catch (const std::exception& error) {
        throw ArgumentError(path + ": " + ShortMessage(error));
      }
      return nullptr;
    });
  });
}

// reset(): forgets every parameter's moments and step count, as a newly made optimizer over the same groups
// (torch creates them again at the next step); learning rates and hyperparameters stay.
Napi::Value NativeOptimizer::Reset(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    return RunAsync(info.Env(), state->Lane(), [state]() -> Resolver {
      ModuleLocks locks(state->LockOrder());
      state->adamw->state().clear();
      for (auto& master : state->masters) master = MasterWeight{};
      return nullptr;
    });
  });
}

// momentDtypes() -> the dtypes the moments are held in, one entry per parameter with state, in group order.
Napi::Value NativeOptimizer::MomentDtypes(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    ModuleLocks locks(state->LockOrder());
    std::vector<std::string> names;
    for (const auto& [key, param_state] : state->adamw->state()) {
      const auto& moments = static_cast<const torch::optim::AdamWParamState&>(*param_state);
      names.push_back(DtypeName(moments.exp_avg().scalar_type()));
      names.push_back(DtypeName(moments.exp_avg_sq().scalar_type()));
    }
    Napi::Array out = Napi::Array::New(info.Env(), names.size());
    for (size_t i = 0; i < names.size(); ++i) out.Set(static_cast<uint32_t>(i), names[i]);
    return out;
  });
}

// memory() -> the bytes the trained parameters and their optimizer state hold: parameters (element count), weights,
// masters and moments as held now, and gradients as one whole backward's would take (each in its parameter's
// dtype; a step in backward never holds them all).
Napi::Value NativeOptimizer::Memory(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    ModuleLocks locks(state->LockOrder());
    double parameters = 0, weights = 0, masters = 0, moments = 0;
    for (const auto& group : state->adamw->param_groups()) {
      for (const auto& parameter : group.params()) {
        parameters += static_cast<double>(parameter.numel());
        weights += static_cast<double>(parameter.nbytes());
      }
    }
    for (const auto& master : state->masters) {
      if (master.value.defined()) masters += static_cast<double>(master.value.nbytes());
    }
    for (const auto& [key, param_state] : state->adamw->state()) {
      const auto& held = static_cast<const torch::optim::AdamWParamState&>(*param_state);
      moments += static_cast<double>(held.exp_avg().nbytes() + held.exp_avg_sq().nbytes());
    }
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("parameters", parameters);
    out.Set("weightBytes", weights);
    out.Set("masterBytes", masters);
    out.Set("momentBytes", moments);
    out.Set("gradientBytes", weights);
    return out;
  });
}

// stalledFraction() -> Promise<number>: StalledFraction over every trained parameter at its group's learning rate.
Napi::Value NativeOptimizer::StalledFraction(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto state = Live();
    return RunAsync(info.Env(), state->Lane(), [state]() -> Resolver {
      ModuleLocks locks(state->LockOrder());
      const double fraction = comlrl::StalledFraction(*state->adamw);
      return [fraction](Napi::Env env) -> Napi::Value { return Napi::Number::New(env, fraction); };
    });
  });
}

Napi::Value NativeOptimizer::Dispose(const Napi::CallbackInfo& info) {
  state_.reset();
  return info.Env().Undefined();
}

}  // namespace comlrl
