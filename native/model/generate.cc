#include "generate.h"

#include "../runtime/transfer.h"

namespace comlrl {
namespace {

// transformers' logits processor: seen tokens' logits shrink towards 0 or, when negative, grow further from it.
torch::Tensor PenalizeRepetitions(const torch::Tensor& logits, const torch::Tensor& seen, double penalty) {
  const torch::Tensor penalized = torch::where(logits < 0, logits * penalty, logits / penalty);
  return torch::where(seen, penalized, logits);
}

// transformers' warpers in their order: temperature, top-k, top-p. Filtered logits become -inf.
torch::Tensor WarpLogits(torch::Tensor logits, const GenerateOptions& options) {
  if (options.temperature != 1.0) logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(-1)) {
    const torch::Tensor kth = std::get<0>(torch::topk(logits, options.top_k, -1)).select(-1, options.top_k - 1).unsqueeze(-1);
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
  }
  if (options.top_p < 1.0) {
    auto [sorted, order] = torch::sort(logits, -1, /*descending=*/false);
    const torch::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
    torch::Tensor remove = cumulative <= (1.0 - options.top_p);
    remove.select(-1, remove.size(-1) - 1).fill_(false);  // always keep the most likely token
    logits = logits.masked_fill(remove.scatter(-1, order, remove), -std::numeric_limits<float>::infinity());
  }
  return logits;
}

// One token per row drawn from probs as torch::multinomial(probs, 1) draws it (argmax of p / q with q ~ Exp(1), the
// exponential form of the Gumbel-max trick: the same draws from the generator, the same tokens), without
// multinomial's two validity checks, each of which waits for the device (generate's logits are made finite first, and
// a flag read after the last step refuses non-finite ones).
torch::Tensor SampleOnePerRow(const torch::Tensor& probs, at::Generator& generator) {
  return probs.div(torch::empty_like(probs).exponential_(1, generator)).argmax(-1);
}

}  // namespace

GenerateResult Generate(CausalLMImpl& model, const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
                        at::Generator& generator) {
  TORCH_CHECK(!prompts.empty(), "generate: no prompts");
  TORCH_CHECK(options.max_new_tokens > 0, "generate: maxNewTokens must be positive");
  TORCH_CHECK(options.num_return_sequences > 0, "generate: numReturnSequences must be positive");
  const torch::Device device = model.model->embed_tokens->weight.device();
  const auto index_options = torch::TensorOptions().dtype(torch::kInt64);
  const int64_t batch = static_cast<int64_t>(prompts.size());
  int64_t prompt_width = 0;
  for (const auto& prompt : prompts) {
    TORCH_CHECK(!prompt.empty(), "generate: empty prompt");
    prompt_width = std::max<int64_t>(prompt_width, static_cast<int64_t>(prompt.size()));
  }
  torch::Tensor ids = torch::full({batch, prompt_width}, options.pad_token_id, index_options);
  torch::Tensor mask = torch::zeros({batch, prompt_width}, torch::kBool);
  const bool penalize = options.repetition_penalty != 1.0;
  // Which tokens each row has seen. Left pads are not among them: a row's penalty is what it would be generated alone.
  torch::Tensor seen = penalize ? torch::zeros({batch, model.config().vocab_size}, torch::kBool) : torch::Tensor();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = static_cast<int64_t>(prompts[b].size());
    const torch::Tensor prompt = torch::tensor(prompts[b], index_options);
    ids[b].narrow(0, prompt_width - length, length).copy_(prompt);
    mask[b].narrow(0, prompt_width - length, length).fill_(true);
    if (penalize) seen[b].index_fill_(0, prompt, true);
  }
  ids = ToDevice(ids, device);
  mask = ToDevice(mask, device);
  if (penalize) seen = ToDevice(seen, device);
  // Positions count real tokens only, so left padding does not shift them (pads get 1, as transformers does).
  torch::Tensor positions = (mask.to(torch::kInt64).cumsum(-1) - 1).masked_fill(mask.logical_not(), 1);

  const int64_t rows = batch * options.num_return_sequences;
  const int64_t capacity = prompt_width + options.max_new_tokens;
  KVCache cache(model.config(), batch, capacity, model.model->embed_tokens->weight.options());
  torch::Tensor full_mask = torch::zeros({batch, capacity}, mask.options());
  full_mask.narrow(1, 0, prompt_width).copy_(mask);

  torch::Tensor hidden = model.forward({ids, positions, mask, prompt_width - 1}, &cache);
  torch::Tensor logits = model.logits(hidden.select(1, prompt_width - 1)).to(torch::kFloat32);
  torch::Tensor next_position = positions.select(1, prompt_width - 1) + 1;
  if (options.num_return_sequences > 1) {
    cache.RepeatRows(options.num_return_sequences);
    full_mask = full_mask.repeat_interleave(options.num_return_sequences, 0);
    logits = logits.repeat_interleave(options.num_return_sequences, 0);
    next_position = next_position.repeat_interleave(options.num_return_sequences, 0);
    if (penalize) seen = seen.repeat_interleave(options.num_return_sequences, 0);
  }

  const auto on_device = index_options.device(device);
  torch::Tensor eos = ToDevice(torch::tensor(options.eos_token_ids, index_options), device);
  torch::Tensor finished = torch::zeros({rows}, on_device.dtype(torch::kBool));
  torch::Tensor lengths = torch::zeros({rows}, on_device);
  std::vector<torch::Tensor> steps, step_logprobs, step_processed_logprobs, step_scores;
  // NaN or infinite logits (NaN weights, an overflowing half-precision model) would be argmax'ed or sampled into some
  // token id all the same: a flag kept on the device is read once, after the last step, and refuses the batch.
  torch::Tensor nonfinite = torch::zeros({}, on_device.dtype(torch::kBool));
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    if (options.return_scores) step_scores.push_back(logits);
    nonfinite = nonfinite | (logits.isfinite().all(-1).logical_not() & finished.logical_not()).any();
    const torch::Tensor processed = penalize ? PenalizeRepetitions(logits, seen, options.repetition_penalty) : logits;
    torch::Tensor token, warped;
    if (options.do_sample) {
      // Zeroed where not finite (an identity otherwise), so that the draw picks something until the flag is read.
      warped = WarpLogits(processed.nan_to_num(0.0, 0.0, 0.0), options);
      token = SampleOnePerRow(warped.softmax(-1), generator);
    } else {
      token = processed.argmax(-1);
    }
    token = token.masked_fill(finished, options.pad_token_id);
    if (penalize) seen.scatter_(1, token.unsqueeze(-1), true);
    if (options.return_logprobs) {
      const torch::Tensor logprob = logits.log_softmax(-1).gather(-1, token.unsqueeze(-1)).squeeze(-1);
      step_logprobs.push_back(logprob.masked_fill(finished, 0.0));
      // Under the distribution sampled from; greedy picks its token with certainty.
      const torch::Tensor sampled = warped.defined() ? warped.log_softmax(-1).gather(-1, token.unsqueeze(-1)).squeeze(-1) : torch::zeros_like(logprob);
      step_processed_logprobs.push_back(sampled.masked_fill(finished, 0.0));
    }
    lengths += finished.logical_not().to(torch::kInt64);
    steps.push_back(token);
    if (eos.numel() > 0) finished = finished | torch::isin(token, eos);
    // The step's one read from the device: whether every row has finished.
    if (step + 1 == options.max_new_tokens || finished.all().item<bool>()) break;
    full_mask.select(1, prompt_width + step).fill_(true);
    // The longest prompt's next position is prompt_width + step, the largest of next_position.
    hidden = model.forward({token.unsqueeze(1), next_position.unsqueeze(1), full_mask.narrow(1, 0, prompt_width + step + 1), prompt_width + step},
                           &cache);
    logits = model.logits(hidden.select(1, 0)).to(torch::kFloat32);
    next_position = next_position + 1;
  }
  TORCH_CHECK(!nonfinite.item<bool>(), "generate: the model's next-token logits are not finite (NaN or infinite): its weights hold NaN or infinity, or overflow in this dtype");
  GenerateResult result;
  result.tokens = torch::stack(steps, 1);
  result.lengths = lengths;
  if (options.return_logprobs) {
    result.logprobs = torch::stack(step_logprobs, 1);
    result.processed_logprobs = torch::stack(step_processed_logprobs, 1);
  }
  if (options.return_scores) result.scores = torch::stack(step_scores, 1);
  return result;
}

}  // namespace comlrl
