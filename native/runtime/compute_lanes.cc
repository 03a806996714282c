#include "compute_lanes.h"

#include <cmath>

#include "../bridge/bridge.h"
#include "../heads/head_binding.h"
#include "../model/model_binding.h"

namespace comlrl {
namespace {

constexpr int kMaxLane = 1023;  // each lane used is a thread for the rest of the process

std::shared_ptr<ModuleState> LanedModule(const Napi::CallbackInfo& info, const char* call) {
  if (info.Length() > 0 && NativeModel::Is(info[0])) return NativeModel::StateOf(info[0], "module");
  if (info.Length() > 0 && NativeValueHead::Is(info[0])) return NativeValueHead::StateOf(info[0], "module");
  throw ArgumentError(std::string(call) + ": module must be a NativeModel or a NativeValueHead");
}

// setComputeLane(module, lane): lane k >= 0 runs the module's calls (and those of optimizers whose first module it
// is) on CPU agent lane k, with one intra-op thread; null puts them back on the device's lane. Calls already issued
// finish where they were queued.
Napi::Value SetComputeLane(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    auto module = LanedModule(info, "setComputeLane(module, lane)");
    const Napi::Value lane = info.Length() > 1 ? info[1] : info.Env().Undefined();
    if (lane.IsNull()) {
      module->lane = module->device.str();
      return info.Env().Undefined();
    }
    const double k = lane.IsNumber() ? lane.As<Napi::Number>().DoubleValue() : -1;
    if (!(k >= 0 && k <= kMaxLane && k == std::floor(k))) {
      throw ArgumentError("setComputeLane(module, lane): lane must be an integer from 0 to " + std::to_string(kMaxLane) + " or null");
    }
    if (!module->device.is_cpu()) {
      throw ArgumentError("setComputeLane: agent lanes are for CPU modules; this one is on " + module->device.str() + ", whose lane it keeps");
    }
    module->lane = AgentLaneName(static_cast<int>(k));
    return info.Env().Undefined();
  });
}

// computeLane(module) -> "cpu", "cuda:0", "cpu#1", …
Napi::Value ComputeLane(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value { return Napi::String::New(info.Env(), LanedModule(info, "computeLane(module)")->lane); });
}

// agentLaneJobs() -> { busy, peak }: agent lanes with jobs in flight now and the most at once since the last call.
Napi::Value AgentLaneJobsValue(const Napi::CallbackInfo& info) {
  return Guard(info, [&]() -> Napi::Value {
    const AgentLaneJobs counts = TakeAgentLaneJobCounts();
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("busy", counts.busy);
    out.Set("peak", counts.peak);
    return out;
  });
}

}  // namespace

void InitComputeLanes(Napi::Env env, Napi::Object exports) {
  ExportFunctions(env, exports, {{"setComputeLane", SetComputeLane}, {"computeLane", ComputeLane}, {"agentLaneJobs", AgentLaneJobsValue}});
}

}  // namespace comlrl
