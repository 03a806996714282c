// The batches JS hands to a model, read into tensors and checked against the model they are for: ragged rows of
// token ids (prompts, completions) and padded [batch, length] id blocks. Every error names the field at fault.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <utility>
#include <vector>

#include "../losses/completion_scoring.h"
#include "decoder.h"

namespace comlrl {

// Rows of token ids given flat with their lengths, as JS sends ragged batches.
std::vector<std::vector<int64_t>> RaggedRows(const Napi::Object& options, const char* tokens_field, const char* lengths_field);

// Every id of rows inside the model's vocabulary; `what` names the field in the error.
void CheckVocab(const std::vector<std::vector<int64_t>>& rows, int64_t vocab_size, const char* what);

// { ids, batch, length, attentionMask? }: int64 ids [batch, length] and a bool mask (all true when absent), every id
// inside the model's vocabulary.
std::pair<torch::Tensor, torch::Tensor> ReadCheckedTokenBatch(const CausalLMImpl& model, const Napi::Object& options);

// { prompts, promptLengths, completions, completionLengths } with every id inside the model's vocabulary.
CompletionBatch ReadCompletionBatch(const CausalLMImpl& model, const Napi::Object& options);

// A completion batch a head reads: as ReadCompletionBatch, and at least one row, each with a prompt (the readouts
// read the last prompt position).
CompletionBatch ReadReadoutBatch(const CausalLMImpl& model, const Napi::Object& options);

// options[field] as float32 values, exactly `count` of them (`per` names what each one is for in the error).
torch::Tensor Float32Field(const Napi::Object& options, const char* field, int64_t count, const char* per);

}  // namespace comlrl
