// What a head reads off its model, without gradients, as free functions over (model, head):
//   values(model, head, { ...completion batch, readout: "v" | "q" | "positions" }) -> Promise<Float32Array>
//   rewardScores(model, head, { ids, batch, length, attentionMask? }) -> Promise<Float32Array>
#pragma once

#include <napi.h>

namespace comlrl {

void InitReadouts(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
