// The training kernels as free functions over a model (and, for the critic and reward losses, its head). Each runs one
// batched forward (and backward) in the model's compute lane and holds the mutexes of the modules it touches:
//   score(model, batch)                     Σ / mean log π(completion) per row, optional entropy and token log-probs
//   klK3(policy, reference, batch)          per-row Σ_t k3 of KL(policy ‖ reference)
//   policyGradientBackward(model, batch)    ∇ scale · Σ_k −A_k · log π(completion_k)
//   causalLMLossBackward(model, batch)      next-token cross-entropy (SFT)
//   valueLossBackward(model, head, batch)   MSE or clipped value loss on a readout
//   actorCriticBackward(model, head, batch) policy-gradient + coef · value loss, one forward, one backward
//   bradleyTerryBackward(model, head, batch) mean −log σ(s_chosen − s_rejected)
#pragma once

#include <napi.h>

namespace comlrl {

void InitLosses(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
