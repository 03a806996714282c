// Log-probs (and entropies) of given tokens through a model's LM head, a block of rows at a time, so that neither the
// forward nor the backward ever holds the whole [tokens × vocab] logits or their gradient: at Qwen's vocabulary
// (151,936) a few hundred completion tokens make those tensors gigabytes, while a block is a few tens of MiB.
#pragma once

#include <torch/torch.h>

#include "decoder.h"

namespace comlrl {

struct HeadLogProbs {
  torch::Tensor logprobs;  // float32 [tokens]: log softmax(logits)[target], with its graph under grad mode
  torch::Tensor entropy;   // float32 [tokens] (only when asked): −Σ p log p, with its graph when entropy_grad
};

// hidden: [tokens, hidden] states that predict targets (int64 [tokens]). The rows are split into blocks of
// LogitsBlockRows(vocab) rows; in one block the result is what model.logits + TokenLogProbs give, unchanged. Several
// blocks keep only the hidden states for the backward, which recomputes each block's logits (one more LM-head
// matmul) and backpropagates it alone, accumulating the head's weight gradient block by block.
HeadLogProbs TokenLogProbsThroughHead(CausalLMImpl& model, const torch::Tensor& hidden, const torch::Tensor& targets, bool with_entropy,
                                      bool entropy_grad);

// Rows per block: the setting when one is made, else as many as keep a block's float32 logits near 64 MiB.
int64_t LogitsBlockRows(int64_t vocab);
// 0: the automatic size; n > 0: blocks of n rows (tests compare block sizes).
void SetLogitsBlockRows(int64_t rows);

}  // namespace comlrl
