// Where a head reads a decoder's hidden states (the last ones, after the final norm), inside the decoder's autograd
// graph so a loss on the readout trains the backbone too:
//   V         the last prompt position, the model run on the prompt alone (a state value);
//   Q         the last completion token, prompt ⧺ completion fed, that token included (a state-action value);
//   positions every position of prompt ⧺ completion, rows concatenated;
//   the last real token of a padded batch (a reward model's score).
#pragma once

#include <torch/torch.h>

#include <string>

#include "../losses/completion_scoring.h"
#include "../model/decoder.h"

namespace comlrl {

enum class Readout { kV, kQ, kPositions };

// "v" | "q" | "positions"; anything else is an error naming the field.
Readout ParseReadout(const std::string& text);

// How many values a readout gives: one per row (V, Q) or one per fed token (positions).
int64_t ReadoutCount(const CompletionBatch& batch, Readout readout);

// The readout's hidden states from a forward that fed whole prompt ⧺ completion rows: [count, H].
torch::Tensor SelectReadout(const SequenceForward& forward, const CompletionBatch& batch, Readout readout);

// The readout's hidden states with the cheapest forward: V runs each distinct prompt once, alone; Q and positions run
// prompt ⧺ completion.
torch::Tensor ReadoutHidden(CausalLMImpl& model, const CompletionBatch& batch, Readout readout);

// ids, mask: [batch, length]. The hidden state at each row's last real token (the last 1 of the mask), [batch, H].
// Positions count real tokens only, so a row gives the same score left- or right-padded.
torch::Tensor LastRealTokenHidden(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask);

}  // namespace comlrl
