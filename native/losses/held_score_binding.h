// A scoring forward whose graph is kept for one later policy-gradient backward, for a loss whose row weights need
// other models' scores first (MADPO: each agent's weights come from the joint Δ of every agent), so that the forward
// the backward needs is also the one the weights are computed from:
//   scoreForBackward(model, batch) -> Promise<{ sum, mean, graph }>: score()'s sums, the graph kept in `graph`
//   heldPolicyGradientBackward(model, graph, { advantages, scale? }) -> Promise<{ loss, routerAuxLoss? }>:
//     policyGradientBackward's gradient from the kept forward; the graph is freed by it and cannot be used again.
#pragma once

#include <napi.h>

namespace comlrl {

void InitHeldScores(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
