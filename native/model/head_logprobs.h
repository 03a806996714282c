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

// Bytes of float32 logits one block holds on a device with free_bytes of its memory free. A CPU: 64 MiB, whatever is
// free (a block's passes then stay near the caches, and the head's re-reads cost little beside the matmuls). A GPU: a
// sixteenth of the free memory (a block's backward holds the logits, their gradient and the softmax's temporaries,
// about four blocks' worth), between 64 MiB and 2 GiB. Why: every block re-reads the whole head in the forward, the
// recompute and the hidden states' gradient, and re-writes the head's weight gradient; 64 MiB blocks are ~110 rows at
// Qwen's 151,936 vocabulary, which makes a GPU's scoring backward bound by those re-reads (~75 blocks at 8k tokens),
// where 2 GiB (~3.5k rows) leaves the matmuls ~20x the traffic's time.
int64_t LogitsBlockBytes(const torch::Device& device, int64_t free_bytes);

// Memory free on a device for a block: for CUDA, what the driver reports free plus what the caching allocator holds
// unused; 0 for a CPU (whose blocks do not depend on it).
int64_t DeviceFreeBytes(const torch::Device& device);

// Rows per block: the setting when one is made, else as many as keep a block's float32 logits at LogitsBlockBytes.
int64_t LogitsBlockRows(int64_t vocab, const torch::Device& device, int64_t free_bytes);
// 0: the automatic size; n > 0: blocks of n rows (tests compare block sizes).
void SetLogitsBlockRows(int64_t rows);

}  // namespace comlrl
