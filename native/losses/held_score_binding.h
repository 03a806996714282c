// A scoring forward whose graph is kept for one later policy-gradient backward, for a loss whose row weights need
// other models' scores first (MADPO: each agent's weights come from the joint Δ of every agent), so that the forward
// the backward needs is also the one the weights are computed from:
//   scoreForBackward(model, batch, { keep? }) -> Promise<{ sum, mean, graph? }>: score()'s sums from a forward
//     with gradients, its graph kept in `graph` with keep (the default). Without keep, nothing is held: the graph is
//     freed at once and the dropout stream wound back, so that policyGradientBackward's own forward of the batch is
//     this one again, to the bit (for callers that cannot afford to hold the activations until the backward).
//   heldPolicyGradientBackward(model, graph, { advantages, scale? }) -> Promise<{ loss, routerAuxLoss? }>:
//     policyGradientBackward's gradient from the kept forward; the graph is freed by it and cannot be used again.
#pragma once

#include <napi.h>

namespace comlrl {

void InitHeldScores(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
