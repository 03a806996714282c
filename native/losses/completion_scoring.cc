#include "completion_scoring.h"

namespace comlrl {

CompletionScores ScoreCompletions(CausalLMImpl& model, const CompletionBatch& batch, bool with_entropy) {
  TORCH_CHECK(batch.prompts.size() == batch.completions.size(), "score: ", batch.prompts.size(), " prompts but ",
              batch.completions.size(), " completions");
  TORCH_CHECK(!batch.prompts.empty(), "score: empty batch");
  const torch::Device device = model.model->embed_tokens->weight.device();
  const int64_t rows = static_cast<int64_t>(batch.prompts.size());
  int64_t width = 0, total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK(!batch.prompts[r].empty(), "score: row ", r, " has an empty prompt");
    // The last completion token is a target only: it is never fed.
    const int64_t fed = static_cast<int64_t>(batch.prompts[r].size() + batch.completions[r].size()) - 1;
    width = std::max(width, std::max<int64_t>(fed, static_cast<int64_t>(batch.prompts[r].size())));
    total += static_cast<int64_t>(batch.completions[r].size());
  }
  // Right-padded sequences with positions 0..n-1; pads are masked out and never targets.
  std::vector<int64_t> ids(rows * width, 0), targets, select_rows, select_cols, row_of_token;
  std::vector<uint8_t> mask(rows * width, 0);
  std::vector<float> counts(rows);
  targets.reserve(total);
  for (int64_t r = 0; r < rows; ++r) {
    const auto& prompt = batch.prompts[r];
    const auto& completion = batch.completions[r];
    const int64_t prompt_length = static_cast<int64_t>(prompt.size());
    int64_t col = 0;
    for (int64_t token : prompt) ids[r * width + col++] = token;
    for (size_t i = 0; i + 1 < completion.size(); ++i) ids[r * width + col++] = completion[i];
    std::fill_n(mask.begin() + r * width, col, 1);
    for (size_t i = 0; i < completion.size(); ++i) {
      select_rows.push_back(r);
      select_cols.push_back(prompt_length - 1 + static_cast<int64_t>(i));
      targets.push_back(completion[i]);
      row_of_token.push_back(r);
    }
    counts[r] = static_cast<float>(completion.size());
  }
  // torch::tensor copies: the vectors die with this function, the tensors may not.
  auto as_tensor = [&](const std::vector<int64_t>& values, std::vector<int64_t> shape) {
    return torch::tensor(values, torch::kInt64).reshape(shape).to(device);
  };
  const torch::Tensor ids_t = as_tensor(ids, {rows, width});
  const torch::Tensor mask_t = torch::tensor(mask, torch::kUInt8).reshape({rows, width}).to(device).to(torch::kBool);
  const torch::Tensor positions = torch::arange(width, torch::TensorOptions().dtype(torch::kInt64).device(device)).expand({rows, width});

  CompletionScores scores;
  scores.counts = torch::tensor(counts).to(device);
  scores.row_of_token = as_tensor(row_of_token, {total});
  if (total == 0) {
    scores.token_logprobs = torch::zeros({0}, torch::TensorOptions().device(device));
    scores.sums = torch::zeros({rows}, torch::TensorOptions().device(device));
    if (with_entropy) scores.entropy = torch::zeros({rows}, torch::TensorOptions().device(device));
    return scores;
  }
  const torch::Tensor hidden = model.forward({ids_t, positions, mask_t});
  const torch::Tensor selected = hidden.index({as_tensor(select_rows, {total}), as_tensor(select_cols, {total})});
  const torch::Tensor logprobs = model.logits(selected).to(torch::kFloat32).log_softmax(-1);
  scores.token_logprobs = logprobs.gather(-1, as_tensor(targets, {total, 1})).squeeze(-1);
  scores.sums = torch::zeros({rows}, scores.token_logprobs.options()).index_add(0, scores.row_of_token, scores.token_logprobs);
  if (with_entropy) {
    torch::NoGradGuard no_grad;
    const torch::Tensor token_entropy = -(logprobs.exp() * logprobs).sum(-1);
    scores.entropy = torch::zeros({rows}, token_entropy.options()).index_add(0, scores.row_of_token, token_entropy) /
                     scores.counts.clamp_min(1.0);
  }
  return scores;
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
  const torch::Tensor hidden = model.forward({ids, positions, mask});
  const torch::Tensor logits = model.logits(hidden.narrow(1, 0, length - 1)).to(torch::kFloat32);
  const torch::Tensor targets = ids.narrow(1, 1, length - 1).masked_fill(mask.narrow(1, 1, length - 1).logical_not(), -100);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace comlrl
