// Batched scoring of (prompt, completion) pairs: exactly the completion tokens — the first completion token through
// the last real one, EOS included, padding excluded — with one forward pass per batch and vocabulary logits computed
// only at the positions that predict completion tokens.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "../model/decoder.h"

namespace comlrl {

struct CompletionBatch {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::vector<int64_t>> completions;
};

struct CompletionScores {
  torch::Tensor token_logprobs;  // float32 [total completion tokens], rows concatenated
  torch::Tensor sums;            // float32 [rows]: Σ log π(completion token); carries the graph under grad mode
  torch::Tensor counts;          // float32 [rows]: completion lengths
  torch::Tensor entropy;         // float32 [rows]: mean token entropy (only when asked)
  torch::Tensor token_entropy;   // float32 [total completion tokens] with its graph (only when asked for a loss)
  torch::Tensor row_of_token;    // int64 [total completion tokens]
};

// While the model records router logits (RouterAuxRecording), its forwards route every token of prompt ⧺ completion,
// each row's prompt counted once per row, so the router loss is that of the padded batch of the rows.
// token_entropy asks for every token's entropy with its graph (an entropy bonus differentiates it).
CompletionScores ScoreCompletions(CausalLMImpl& model, const CompletionBatch& batch, bool with_entropy, bool token_entropy = false);

// One right-padded forward over prompt ⧺ completion of every row (positions from 0, pads masked).
struct SequenceForward {
  torch::Tensor hidden;          // [rows, width, hidden], after the final norm
  std::vector<int64_t> lengths;  // tokens fed per row
};
// with_last_token feeds whole completions (a readout at the last token needs it); without, prompt ⧺ completion[:-1],
// all that scoring needs.
SequenceForward ForwardSequences(CausalLMImpl& model, const CompletionBatch& batch, bool with_last_token);
// The scores ScoreCompletions gives, read from a forward that fed at least prompt ⧺ completion[:-1].
CompletionScores ScoreFromForward(CausalLMImpl& model, const CompletionBatch& batch, const SequenceForward& forward, bool with_entropy);

// One forward of rows that share prompts: each distinct prompt (prompts[g], the prompt of the rows whose
// group_of_row is g) is run once, and its keys/values are shared by the rows that continue it with their
// completions; gradients from every row flow back into it. feed_last feeds whole completions (a readout at the last
// token needs it); without, completion[:-1], all that scoring needs.
struct SharedPromptForward {
  torch::Tensor prompt_last;        // [groups, hidden]: each prompt's last hidden state
  torch::Tensor completion_hidden;  // [rows, fed width, hidden], completions right-padded; undefined when none is fed
};
SharedPromptForward ForwardSharedPrompts(CausalLMImpl& model, const CompletionBatch& batch, const std::vector<int64_t>& group_of_row,
                                         const std::vector<const std::vector<int64_t>*>& prompts, bool feed_last);

// The k3 estimate of KL(policy ‖ reference) per row, summed over completion tokens: d = lp_ref − lp_pol,
// k3 = exp(d) − d − 1 (COMLRL-SPEC §3.6).
torch::Tensor KlK3(const CompletionScores& policy, const CompletionScores& reference);

// Mean cross-entropy of next-token prediction over real tokens (transformers' causal-LM loss), for SFT and tests.
// ids/mask: [batch, length]; returns the scalar loss with its graph under grad mode.
torch::Tensor CausalLMLoss(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask);

}  // namespace comlrl
