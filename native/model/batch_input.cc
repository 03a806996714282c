#include "batch_input.h"

#include <string>

#include "../bridge/bridge.h"

namespace comlrl {

std::vector<std::vector<int64_t>> RaggedRows(const Napi::Object& options, const char* tokens_field, const char* lengths_field) {
  const torch::Tensor tokens = Int32ArrayToTensor(options.Get(tokens_field), tokens_field);
  const torch::Tensor lengths = Int32ArrayToTensor(options.Get(lengths_field), lengths_field);
  const int32_t* token_data = tokens.data_ptr<int32_t>();
  const int32_t* length_data = lengths.data_ptr<int32_t>();
  std::vector<std::vector<int64_t>> rows(lengths.numel());
  int64_t offset = 0;
  for (int64_t r = 0; r < lengths.numel(); ++r) {
    if (length_data[r] < 0) throw ArgumentError(std::string(lengths_field) + "[" + std::to_string(r) + "] is negative");
    if (offset + length_data[r] > tokens.numel()) {
      throw ArgumentError(std::string(lengths_field) + " add up to more than the " + std::to_string(tokens.numel()) + " ids in " +
                          tokens_field);
    }
    rows[r].assign(token_data + offset, token_data + offset + length_data[r]);
    offset += length_data[r];
  }
  if (offset != tokens.numel()) {
    throw ArgumentError(std::string(lengths_field) + " add up to " + std::to_string(offset) + " but " + tokens_field + " has " +
                        std::to_string(tokens.numel()) + " ids");
  }
  return rows;
}

void CheckVocab(const std::vector<std::vector<int64_t>>& rows, int64_t vocab_size, const char* what) {
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t token : rows[r]) {
      if (token < 0 || token >= vocab_size) {
        throw ArgumentError(std::string(what) + " row " + std::to_string(r) + " holds token id " + std::to_string(token) +
                            ", outside the vocabulary of " + std::to_string(vocab_size));
      }
    }
  }
}

namespace {

std::pair<torch::Tensor, torch::Tensor> ReadTokenBatch(const Napi::Object& options) {
  const int64_t batch = static_cast<int64_t>(NumberField(options, "batch"));
  const int64_t length = static_cast<int64_t>(NumberField(options, "length"));
  torch::Tensor ids = Int32ArrayToTensor(options.Get("ids"), "ids");
  if (ids.numel() != batch * length) throw ArgumentError("ids must hold batch × length = " + std::to_string(batch * length) + " ids");
  torch::Tensor mask = torch::ones({batch, length}, torch::kBool);
  if (!options.Get("attentionMask").IsUndefined()) {
    mask = Int32ArrayToTensor(options.Get("attentionMask"), "attentionMask");
    if (mask.numel() != batch * length) throw ArgumentError("attentionMask must hold batch × length values");
    mask = mask.view({batch, length}).to(torch::kBool);
  }
  return {ids.to(torch::kInt64).view({batch, length}), mask};
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> ReadCheckedTokenBatch(const CausalLMImpl& model, const Napi::Object& options) {
  auto token_batch = ReadTokenBatch(options);
  const int64_t vocab = model.config().vocab_size;
  if (token_batch.first.numel() > 0 && (token_batch.first.min().item<int64_t>() < 0 || token_batch.first.max().item<int64_t>() >= vocab)) {
    throw ArgumentError("ids holds a token id outside the vocabulary of " + std::to_string(vocab));
  }
  return token_batch;
}

CompletionBatch ReadCompletionBatch(const CausalLMImpl& model, const Napi::Object& options) {
  CompletionBatch batch{RaggedRows(options, "prompts", "promptLengths"), RaggedRows(options, "completions", "completionLengths")};
  CheckVocab(batch.prompts, model.config().vocab_size, "prompts");
  CheckVocab(batch.completions, model.config().vocab_size, "completions");
  return batch;
}

CompletionBatch ReadReadoutBatch(const CausalLMImpl& model, const Napi::Object& options) {
  CompletionBatch batch = ReadCompletionBatch(model, options);
  if (batch.prompts.empty()) throw ArgumentError("the batch has no rows");
  for (size_t r = 0; r < batch.prompts.size(); ++r) {
    if (batch.prompts[r].empty()) throw ArgumentError("prompts row " + std::to_string(r) + " is empty");
  }
  return batch;
}

torch::Tensor Float32Field(const Napi::Object& options, const char* field, int64_t count, const char* per) {
  torch::Tensor values = Float32ArrayToTensor(options.Get(field), field);
  if (values.numel() != count) {
    throw ArgumentError(std::string(field) + " has " + std::to_string(values.numel()) + " values for " + std::to_string(count) + " " + per);
  }
  return values;
}

}  // namespace comlrl
