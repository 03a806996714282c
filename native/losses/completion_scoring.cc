#include "completion_scoring.h"

#include <map>

#include "../model/head_logprobs.h"
#include "../runtime/transfer.h"

namespace comlrl {

namespace {

torch::Tensor Int64Tensor(const std::vector<int64_t>& values, std::vector<int64_t> shape, const torch::Device& device) {
  // torch::tensor copies: the vectors die with their callers, the tensors may not.
  return ToDevice(torch::tensor(values, torch::kInt64).reshape(shape), device);
}

torch::Tensor BoolTensor(const std::vector<uint8_t>& values, std::vector<int64_t> shape, const torch::Device& device) {
  return ToDevice(torch::tensor(values, torch::kUInt8).reshape(shape), device).to(torch::kBool);
}

// Hidden states that predict each completion token, [total tokens, hidden], rows concatenated.
torch::Tensor PredictingHidden(const CompletionBatch& batch, const SequenceForward& forward) {
  const torch::Device device = forward.hidden.device();
  std::vector<int64_t> select_rows, select_cols;
  for (size_t r = 0; r < batch.prompts.size(); ++r) {
    for (size_t i = 0; i < batch.completions[r].size(); ++i) {
      select_rows.push_back(static_cast<int64_t>(r));
      select_cols.push_back(static_cast<int64_t>(batch.prompts[r].size()) - 1 + static_cast<int64_t>(i));
    }
  }
  const int64_t total = static_cast<int64_t>(select_rows.size());
  return forward.hidden.index({Int64Tensor(select_rows, {total}, device), Int64Tensor(select_cols, {total}, device)});
}

// The predicting hidden states when rows share prompts (the K samples of a node), from ForwardSharedPrompts. While
// router logits are recorded, the completions' last tokens are fed too, as one padded forward of the rows feeds them.
torch::Tensor PredictingHiddenSharedPrompts(CausalLMImpl& model, const CompletionBatch& batch, const std::vector<int64_t>& group_of_row,
                                            const std::vector<const std::vector<int64_t>*>& prompts, const torch::Device& device) {
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  const int64_t groups = static_cast<int64_t>(prompts.size());
  const SharedPromptForward forward = ForwardSharedPrompts(model, batch, group_of_row, prompts, model.router_records() != nullptr);
  // Sources of the predicting hidden states: [prompt_last (groups rows), completion hidden (rows × fed_width)].
  torch::Tensor sources = forward.prompt_last;
  int64_t fed_width = 0;
  if (forward.completion_hidden.defined()) {
    fed_width = forward.completion_hidden.size(1);
    sources = torch::cat({forward.prompt_last, forward.completion_hidden.reshape({rows * fed_width, -1})}, 0);
  }
  std::vector<int64_t> source_index;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < static_cast<int64_t>(batch.completions[r].size()); ++j) {
      source_index.push_back(j == 0 ? group_of_row[r] : groups + r * fed_width + (j - 1));
    }
  }
  return sources.index_select(0, Int64Tensor(source_index, {static_cast<int64_t>(source_index.size())}, device));
}

}  // namespace

// Prompts are left-padded, so that each row's prompt ⧺ completion is contiguous in the cache: a sliding window counts
// cache columns, and pads between a short prompt and its completion would shift its reach. While router logits are
// recorded, a prompt's tokens weigh once per row that continues it: the router loss of the rows' prompt ⧺ completion,
// as one padded forward of them gives it.
SharedPromptForward ForwardSharedPrompts(CausalLMImpl& model, const CompletionBatch& batch, const std::vector<int64_t>& group_of_row,
                                         const std::vector<const std::vector<int64_t>*>& prompts, bool feed_last) {
  const torch::Device device = model.model->embed_tokens->weight.device();
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  const int64_t groups = static_cast<int64_t>(prompts.size());
  std::vector<RouterRecord>* router = model.router_records();
  const int64_t unfed = feed_last ? 0 : 1;
  int64_t prompt_width = 0, fed_width = 0;
  for (const auto* prompt : prompts) prompt_width = std::max<int64_t>(prompt_width, static_cast<int64_t>(prompt->size()));
  for (const auto& completion : batch.completions) fed_width = std::max<int64_t>(fed_width, static_cast<int64_t>(completion.size()) - unfed);

  std::vector<int64_t> prompt_ids(groups * prompt_width, 0), prompt_positions(groups * prompt_width, 0);
  std::vector<uint8_t> prompt_mask(groups * prompt_width, 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t length = static_cast<int64_t>(prompts[g]->size()), pad = prompt_width - length;
    std::copy(prompts[g]->begin(), prompts[g]->end(), prompt_ids.begin() + g * prompt_width + pad);
    std::fill_n(prompt_mask.begin() + g * prompt_width + pad, length, 1);
    for (int64_t i = 0; i < length; ++i) prompt_positions[g * prompt_width + pad + i] = i;
  }
  KVCache cache = KVCache::Growable(model.config().num_layers);
  const torch::Tensor prompt_hidden = model.forward(
      {Int64Tensor(prompt_ids, {groups, prompt_width}, device), Int64Tensor(prompt_positions, {groups, prompt_width}, device),
       BoolTensor(prompt_mask, {groups, prompt_width}, device), prompt_width - 1},
      &cache);
  if (router && !router->empty()) {
    std::vector<float> rows_of_group(groups, 0);
    for (int64_t g : group_of_row) rows_of_group[g] += 1;
    router->back().weight = (router->back().weight.view({groups, prompt_width}) * torch::tensor(rows_of_group).to(device).unsqueeze(1)).reshape({-1});
  }
  SharedPromptForward out;
  out.prompt_last = prompt_hidden.select(1, prompt_width - 1);
  if (fed_width == 0) return out;
  std::vector<int64_t> ids(rows * fed_width, 0), positions(rows * fed_width, 0);
  std::vector<uint8_t> mask(rows * (prompt_width + fed_width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = group_of_row[r];
    const auto& completion = batch.completions[r];
    std::copy_n(prompt_mask.begin() + g * prompt_width, prompt_width, mask.begin() + r * (prompt_width + fed_width));
    for (int64_t j = 0; j + unfed < static_cast<int64_t>(completion.size()); ++j) {
      ids[r * fed_width + j] = completion[j];
      mask[r * (prompt_width + fed_width) + prompt_width + j] = 1;
    }
    for (int64_t j = 0; j < fed_width; ++j) positions[r * fed_width + j] = static_cast<int64_t>(prompts[g]->size()) + j;
  }
  cache.SelectRows(Int64Tensor(group_of_row, {rows}, device));
  out.completion_hidden = model.forward(
      {Int64Tensor(ids, {rows, fed_width}, device), Int64Tensor(positions, {rows, fed_width}, device),
       BoolTensor(mask, {rows, prompt_width + fed_width}, device), prompt_width + fed_width - 1},
      &cache);
  return out;
}

SequenceForward ForwardSequences(CausalLMImpl& model, const CompletionBatch& batch, bool with_last_token) {
  const torch::Device device = model.model->embed_tokens->weight.device();
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  SequenceForward out;
  int64_t width = 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t completion = static_cast<int64_t>(batch.completions[r].size());
    const int64_t fed = static_cast<int64_t>(batch.prompts[r].size()) + (with_last_token ? completion : std::max<int64_t>(completion - 1, 0));
    out.lengths.push_back(fed);
    width = std::max(width, fed);
  }
  std::vector<int64_t> ids(rows * width, 0);
  std::vector<uint8_t> mask(rows * width, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t col = 0;
    for (int64_t token : batch.prompts[r]) ids[r * width + col++] = token;
    for (int64_t token : batch.completions[r]) {
      if (col < out.lengths[r]) ids[r * width + col++] = token;
    }
    std::fill_n(mask.begin() + r * width, out.lengths[r], 1);
  }
  const torch::Tensor positions = torch::arange(width, torch::TensorOptions().dtype(torch::kInt64).device(device)).expand({rows, width});
  out.hidden = model.forward({Int64Tensor(ids, {rows, width}, device), positions, BoolTensor(mask, {rows, width}, device), width - 1,
                              /*right_padded=*/true});
  return out;
}

namespace {

void CheckBatch(const CompletionBatch& batch) {
  TORCH_CHECK(batch.prompts.size() == batch.completions.size(), "score: ", batch.prompts.size(), " prompts but ",
              batch.completions.size(), " completions");
  TORCH_CHECK(!batch.prompts.empty(), "score: empty batch");
  for (size_t r = 0; r < batch.prompts.size(); ++r) TORCH_CHECK(!batch.prompts[r].empty(), "score: row ", r, " has an empty prompt");
}

// Log-probs of every completion token from the hidden states that predict them (rows concatenated).
CompletionScores ScorePredicting(CausalLMImpl& model, const CompletionBatch& batch, const torch::Tensor& predicting, bool with_entropy,
                                 bool token_entropy = false) {
  const torch::Device device = model.model->embed_tokens->weight.device();
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  std::vector<int64_t> targets, row_of_token;
  std::vector<float> counts(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t token : batch.completions[r]) {
      targets.push_back(token);
      row_of_token.push_back(r);
    }
    counts[r] = static_cast<float>(batch.completions[r].size());
  }
  const int64_t total = static_cast<int64_t>(targets.size());
  CompletionScores scores;
  scores.counts = ToDevice(torch::tensor(counts), device);
  scores.row_of_token = Int64Tensor(row_of_token, {total}, device);
  if (total == 0) {
    scores.token_logprobs = torch::zeros({0}, torch::TensorOptions().device(device));
    scores.sums = torch::zeros({rows}, torch::TensorOptions().device(device));
    if (with_entropy) scores.entropy = torch::zeros({rows}, torch::TensorOptions().device(device));
    if (token_entropy) scores.token_entropy = torch::zeros({0}, torch::TensorOptions().device(device));
    return scores;
  }
  const HeadLogProbs head = TokenLogProbsThroughHead(model, predicting, Int64Tensor(targets, {total}, device), with_entropy || token_entropy, token_entropy);
  scores.token_logprobs = head.logprobs;
  scores.sums = torch::zeros({rows}, scores.token_logprobs.options()).index_add(0, scores.row_of_token, scores.token_logprobs);
  if (token_entropy) scores.token_entropy = head.entropy;
  if (with_entropy) {
    torch::NoGradGuard no_grad;
    scores.entropy = torch::zeros({rows}, head.entropy.options()).index_add(0, scores.row_of_token, head.entropy.detach()) /
                     scores.counts.clamp_min(1.0);
  }
  return scores;
}

bool HasCompletionTokens(const CompletionBatch& batch) {
  for (const auto& completion : batch.completions) {
    if (!completion.empty()) return true;
  }
  return false;
}

}  // namespace

CompletionScores ScoreCompletions(CausalLMImpl& model, const CompletionBatch& batch, bool with_entropy, bool token_entropy) {
  CheckBatch(batch);
  const torch::Device device = model.model->embed_tokens->weight.device();
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  if (!HasCompletionTokens(batch)) return ScorePredicting(model, batch, torch::Tensor(), with_entropy, token_entropy);
  // Distinct prompts, in order of first appearance, and each row's.
  std::map<std::vector<int64_t>, int64_t> group_of_prompt;
  std::vector<const std::vector<int64_t>*> prompts;
  std::vector<int64_t> group_of_row(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const auto inserted = group_of_prompt.emplace(batch.prompts[r], static_cast<int64_t>(prompts.size()));
    if (inserted.second) prompts.push_back(&batch.prompts[r]);
    group_of_row[r] = inserted.first->second;
  }
  // A dropping forward runs every row's prompt itself, so that each row draws its own masks, as transformers' padded
  // rows do (one shared prompt would give all its rows one mask).
  const bool shared = static_cast<int64_t>(prompts.size()) < rows && !model.drops();
  const torch::Tensor predicting = shared ? PredictingHiddenSharedPrompts(model, batch, group_of_row, prompts, device)
                                          : PredictingHidden(batch, ForwardSequences(model, batch, model.router_records() != nullptr));
  return ScorePredicting(model, batch, predicting, with_entropy, token_entropy);
}

CompletionScores ScoreFromForward(CausalLMImpl& model, const CompletionBatch& batch, const SequenceForward& forward, bool with_entropy) {
  CheckBatch(batch);
  if (!HasCompletionTokens(batch)) return ScorePredicting(model, batch, torch::Tensor(), with_entropy);
  return ScorePredicting(model, batch, PredictingHidden(batch, forward), with_entropy);
}

torch::Tensor KlK3(const CompletionScores& policy, const CompletionScores& reference) {
  TORCH_CHECK(policy.token_logprobs.numel() == reference.token_logprobs.numel(), "kl: batches differ in token count");
  const torch::Tensor d = reference.token_logprobs.to(policy.token_logprobs.device()) - policy.token_logprobs;
  const torch::Tensor k3 = d.exp() - d - 1.0;
  return torch::zeros_like(policy.sums).index_add(0, policy.row_of_token, k3);
}

torch::Tensor CausalLMLoss(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask) {
  const int64_t length = ids.size(1);
  const torch::Tensor positions = torch::arange(length, ids.options()).expand_as(ids);
  const torch::Tensor hidden = model.forward({ids, positions, mask, length - 1});
  const torch::Tensor logits = model.logits(hidden.narrow(1, 0, length - 1)).to(torch::kFloat32);
  const torch::Tensor targets = ids.narrow(1, 1, length - 1).masked_fill(mask.narrow(1, 1, length - 1).logical_not(), -100);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace comlrl
