// Module registration only: each area of the addon adds its own functions and classes.
#include <napi.h>

#include "bridge/bridge.h"
#include "distributed/process_group.h"
#include "heads/head_binding.h"
#include "heads/readout_binding.h"
#include "losses/held_score_binding.h"
#include "losses/loss_binding.h"
#include "model/gguf_weights.h"
#include "model/model_binding.h"
#include "optim/adamw_binding.h"
#include "optim/numerics.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_lanes.h"
#include "runtime/runtime.h"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  comlrl::InstallCachingCpuAllocator();
  comlrl::InitLanes(env);
  comlrl::InitRuntime(env, exports);
  comlrl::InitNumerics(env, exports);
  comlrl::InitComputeLanes(env, exports);
  comlrl::NativeModel::Init(env, exports);
  comlrl::InitGguf(env, exports);
  comlrl::NativeValueHead::Init(env, exports);
  comlrl::InitReadouts(env, exports);
  comlrl::InitLosses(env, exports);
  comlrl::InitHeldScores(env, exports);
  comlrl::NativeOptimizer::Init(env, exports);
  comlrl::NativeProcessGroup::Init(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(comlrl, Init)
