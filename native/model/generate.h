// Batched KV-cached generation: one prefill per prompt shared by its samples, greedy or sampled decoding with
// repetition penalty and temperature / top-k / top-p, per-sequence stop on any EOS id, padding after stop.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decoder.h"

namespace comlrl {

struct GenerateOptions {
  int64_t max_new_tokens = 0;
  int64_t num_return_sequences = 1;
  bool do_sample = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0: no top-k filter
  // transformers' repetition_penalty (> 0, 1: off): the logit of every token already in the row (its prompt or its
  // completion so far) is divided by it when positive and multiplied by it when negative, greedy or sampled.
  double repetition_penalty = 1.0;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = 0;
  bool return_logprobs = false;  // log-probs of the chosen tokens under the model (temperature 1, no filtering)
  bool return_scores = false;    // raw next-token logits per step (tests; [rows, steps, vocab])
};

struct GenerateResult {
  torch::Tensor tokens;    // int64 [prompts * num_return_sequences, steps]; rows of one prompt are adjacent
  torch::Tensor lengths;   // int64 [rows]: tokens up to and including the first EOS
  torch::Tensor logprobs;  // float32 [rows, steps] when asked (0 after the end)
  torch::Tensor processed_logprobs;  // the same under the warped distribution sampled from (repetition penalty, temperature, top-k, top-p)
  torch::Tensor scores;    // float32 [rows, steps, vocab] when asked
};

// prompts: the token ids of each prompt (any lengths); they are left-padded into one batch.
GenerateResult Generate(CausalLMImpl& model, const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                        at::Generator& generator);

}  // namespace comlrl
