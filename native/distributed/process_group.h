// NativeProcessGroup: one c10d process group (Gloo over a TCPStore rendezvous, plus NCCL for GPU tensors) and the collectives data-parallel
// training needs: gradient all-reduce and parameter broadcast over models and value heads, and all-reduce,
// broadcast and all-gather of small payloads, plus a barrier. Every collective runs on the group's compute lane in
// the order JS issued it (c10d requires the same order on every rank), and a peer that dies or stalls past the
// group's timeout rejects the call with a TorchError instead of hanging.
#pragma once

#include <napi.h>

#include <memory>

namespace comlrl {

struct ProcessGroupState;

class NativeProcessGroup : public Napi::ObjectWrap<NativeProcessGroup> {
 public:
  static void Init(Napi::Env env, Napi::Object exports);
  // Built by NativeProcessGroup.create(); the constructor takes the native state only.
  explicit NativeProcessGroup(const Napi::CallbackInfo& info);

 private:
  // create({ rank, worldSize, masterAddr, masterPort, timeoutMs, interface?, ncclDevice? }) -> Promise<NativeProcessGroup>
  // With ncclDevice (a CUDA device index), gradients and parameters on that GPU are reduced by NCCL there.
  static Napi::Value Create(const Napi::CallbackInfo& info);
  static Napi::Value GlooAvailable(const Napi::CallbackInfo& info);
  // Whether this build can reduce GPU tensors with NCCL (create({ ncclDevice })).
  static Napi::Value NcclAvailable(const Napi::CallbackInfo& info);
  std::shared_ptr<ProcessGroupState> Live() const;
  Napi::Value Rank(const Napi::CallbackInfo& info);
  Napi::Value WorldSize(const Napi::CallbackInfo& info);
  Napi::Value AllReduceGradients(const Napi::CallbackInfo& info);
  Napi::Value BroadcastParameters(const Napi::CallbackInfo& info);
  Napi::Value AllReduce(const Napi::CallbackInfo& info);
  Napi::Value Broadcast(const Napi::CallbackInfo& info);
  Napi::Value AllGather(const Napi::CallbackInfo& info);
  Napi::Value Barrier(const Napi::CallbackInfo& info);
  Napi::Value Dispose(const Napi::CallbackInfo& info);

  static Napi::FunctionReference constructor_;
  std::shared_ptr<ProcessGroupState> state_;
};

}  // namespace comlrl
