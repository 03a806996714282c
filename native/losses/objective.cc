#include "objective.h"

#include <cmath>
#include <limits>

namespace comlrl {

namespace {

// Σ over each row's tokens: [tokens] → [rows].
torch::Tensor RowSums(const torch::Tensor& per_token, const torch::Tensor& row_of_token, int64_t rows) {
  return torch::zeros({rows}, per_token.options()).index_add(0, row_of_token, per_token);
}

torch::Tensor KlToReference(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs, KlEstimator estimator) {
  switch (estimator) {
    case KlEstimator::kK1:
      return logprobs - ref_logprobs;
    case KlEstimator::kK2:
      return 0.5 * (logprobs - ref_logprobs).pow(2);
    case KlEstimator::kK3: {
      const torch::Tensor d = ref_logprobs - logprobs;
      return torch::exp(d) - d - 1;
    }
  }
  TORCH_CHECK(false, "unknown KL estimator");
}

double MaskedMean(const torch::Tensor& values, const torch::Tensor& mask) {
  torch::NoGradGuard no_grad;
  return ((values * mask).sum() / mask.sum().clamp_min(1.0)).item<double>();
}

void CheckInputs(const ObjectiveInputs& in, const ObjectiveOptions& options) {
  const int64_t tokens = in.logprobs.numel();
  const auto check_tokens = [tokens](const torch::Tensor& t, const char* name) {
    TORCH_CHECK(t.dim() == 1 && t.numel() == tokens, name, " has ", t.numel(), " values for ", tokens, " completion tokens");
  };
  TORCH_CHECK(in.logprobs.dim() == 1, "logprobs must be one value per completion token");
  check_tokens(in.row_of_token, "rowOfToken");
  if (in.old_logprobs.defined()) check_tokens(in.old_logprobs, "oldLogprobs");
  if (in.token_mask.defined()) check_tokens(in.token_mask, "tokenMask");
  TORCH_CHECK(in.advantages.numel() == in.rows, "advantages has ", in.advantages.numel(), " values for ", in.rows, " completions");
  if (options.beta != 0.0) {
    TORCH_CHECK(in.ref_logprobs.defined(), "beta is ", options.beta, " but no reference log-probs were given");
    check_tokens(in.ref_logprobs, "refLogprobs");
  }
  if (options.entropy_coef != 0.0) {
    TORCH_CHECK(in.entropies.defined(), "entropyCoef is ", options.entropy_coef, " but no entropies were given");
    check_tokens(in.entropies, "entropies");
  }
  TORCH_CHECK(options.loss != ObjectiveLoss::kDrGrpo || options.max_completion_length > 0,
              "dr_grpo needs maxCompletionLength > 0, got ", options.max_completion_length);
}

}  // namespace

ObjectiveLoss ParseObjectiveLoss(const std::string& name) {
  if (name == "grpo") return ObjectiveLoss::kGrpo;
  if (name == "dapo") return ObjectiveLoss::kDapo;
  if (name == "dr_grpo") return ObjectiveLoss::kDrGrpo;
  if (name == "bnpo") return ObjectiveLoss::kBnpo;
  if (name == "cispo") return ObjectiveLoss::kCispo;
  if (name == "sapo") return ObjectiveLoss::kSapo;
  TORCH_CHECK(false, "lossType must be one of grpo, dapo, dr_grpo, bnpo, cispo, sapo, got \"", name, "\"");
}

ImportanceSamplingLevel ParseImportanceSamplingLevel(const std::string& name) {
  if (name == "token") return ImportanceSamplingLevel::kToken;
  if (name == "sequence") return ImportanceSamplingLevel::kSequence;
  TORCH_CHECK(false, "importanceSamplingLevel must be \"token\" or \"sequence\", got \"", name, "\"");
}

KlEstimator ParseKlEstimator(const std::string& name) {
  if (name == "k1") return KlEstimator::kK1;
  if (name == "k2") return KlEstimator::kK2;
  if (name == "k3") return KlEstimator::kK3;
  TORCH_CHECK(false, "klEstimator must be one of k1, k2, k3, got \"", name, "\"");
}

ObjectiveResult ObjectiveLossOf(const ObjectiveInputs& in, const ObjectiveOptions& options) {
  CheckInputs(in, options);
  const torch::Tensor& lp = in.logprobs;
  const torch::Tensor old = in.old_logprobs.defined() ? in.old_logprobs.to(lp.device()) : lp.detach();
  const torch::Tensor mask = in.token_mask.defined() ? in.token_mask.to(lp.device(), lp.scalar_type()) : torch::ones_like(lp).detach();
  const torch::Tensor rows_of = in.row_of_token.to(lp.device());
  const torch::Tensor row_advantages = in.advantages.to(lp.device(), lp.scalar_type());
  const torch::Tensor advantages = row_advantages.index_select(0, rows_of);
  const torch::Tensor row_tokens = RowSums(mask, rows_of, in.rows);

  const torch::Tensor log_ratio = lp - old;
  torch::Tensor log_weights = log_ratio;
  if (options.level == ImportanceSamplingLevel::kSequence) {
    // GSPO: the mean log-ratio of the row's unmasked tokens, one weight shared by all of them.
    log_weights = (RowSums(log_ratio * mask, rows_of, in.rows) / row_tokens.clamp_min(1.0)).index_select(0, rows_of);
  }
  const torch::Tensor weights = torch::exp(log_weights);
  torch::Tensor ratio = weights;

  torch::Tensor per_token_loss;
  torch::Tensor clipped_low, clipped_high;
  switch (options.loss) {
    case ObjectiveLoss::kCispo: {
      const torch::Tensor truncated = torch::clamp_max(ratio, options.epsilon_high).detach();
      per_token_loss = -truncated * advantages * lp;
      clipped_low = torch::zeros_like(mask);
      clipped_high = (ratio > options.epsilon_high).logical_and(advantages > 0);
      break;
    }
    case ObjectiveLoss::kSapo: {
      const torch::Tensor temperatures =
          torch::where(advantages > 0, torch::full_like(advantages, options.sapo_temperature_pos), torch::full_like(advantages, options.sapo_temperature_neg));
      per_token_loss = -(torch::sigmoid(temperatures * (ratio - 1)) * 4 / temperatures) * advantages;
      clipped_low = torch::zeros_like(mask);
      clipped_high = torch::zeros_like(mask);
      break;
    }
    default: {
      const torch::Tensor clipped = torch::clamp(ratio, 1 - options.epsilon_low, 1 + options.epsilon_high);
      if (options.delta) ratio = torch::clamp_max(ratio, *options.delta);
      clipped_low = (ratio < 1 - options.epsilon_low).logical_and(advantages < 0);
      clipped_high = (ratio > 1 + options.epsilon_high).logical_and(advantages > 0);
      per_token_loss = -torch::min(ratio * advantages, clipped * advantages);
    }
  }
  torch::Tensor kl;
  if (options.beta != 0.0) {
    kl = KlToReference(lp, in.ref_logprobs.to(lp.device()), options.kl_estimator);
    // The importance weight makes the KL gradient the unbiased reverse-KL gradient (DeepSeek-V3.2), differentiable
    // even where its value is 1.
    if (options.kl_bias_correction) kl = kl * weights;
    per_token_loss = per_token_loss + options.beta * kl;
  }

  const torch::Tensor masked = per_token_loss * mask;
  const torch::Tensor token_count = mask.sum().clamp_min(1.0);
  const double normalizer = options.token_normalizer > 0 ? options.token_normalizer : 0.0;
  const torch::Tensor global_tokens = normalizer > 0 ? torch::full({}, normalizer, mask.options()) : token_count;
  torch::Tensor loss;
  switch (options.loss) {
    case ObjectiveLoss::kGrpo:
    case ObjectiveLoss::kSapo:
      loss = (RowSums(masked, rows_of, in.rows) / row_tokens.clamp_min(1.0)).mean();
      break;
    case ObjectiveLoss::kBnpo:
      loss = masked.sum() / token_count;
      break;
    case ObjectiveLoss::kDrGrpo:
      loss = masked.sum() / static_cast<double>(in.rows * options.max_completion_length);
      break;
    case ObjectiveLoss::kDapo:
    case ObjectiveLoss::kCispo:
      loss = masked.sum() / global_tokens.clamp_min(1.0);
      break;
  }
  ObjectiveResult result;
  result.policy_loss = loss.detach().item<double>();
  if (options.entropy_coef != 0.0) {
    // The mean entropy of the unmasked tokens, whatever the loss type's normaliser (TRL's documented L − coef · H).
    const torch::Tensor entropy_term = (in.entropies.to(lp.device()) * mask).sum() / token_count;
    loss = loss - options.entropy_coef * entropy_term;
  }
  result.loss = loss;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  result.kl_mean = kl.defined() ? MaskedMean(kl, mask) : nan;
  result.entropy_mean = in.entropies.defined() ? MaskedMean(in.entropies.to(lp.device()), mask) : nan;
  // As TRL logs them: over unmasked tokens, or over rows where one weight stands for the row.
  const auto ratio_metric = [&](const torch::Tensor& per_token, double row_without_tokens) {
    torch::NoGradGuard no_grad;
    const torch::Tensor values = per_token.to(mask.scalar_type());
    if (options.level == ImportanceSamplingLevel::kToken) return MaskedMean(values, mask);
    torch::Tensor first_token = torch::full({in.rows}, -1, rows_of.options());
    first_token.scatter_reduce_(0, rows_of, torch::arange(rows_of.numel(), rows_of.options()), "amin", false);
    const torch::Tensor present = first_token >= 0;
    // A row without tokens has weight 1 (no ratio to clip) and still counts, as TRL's (B, 1) weight does.
    torch::Tensor row_values = torch::full({in.rows}, row_without_tokens, values.options());
    row_values.index_put_({present}, values.index_select(0, first_token.index({present})));
    return row_values.mean().item<double>();
  };
  result.clip_low = ratio_metric(clipped_low, 0.0);
  result.clip_high = ratio_metric(clipped_high, 0.0);
  result.ratio_mean = ratio_metric(weights, 1.0);
  return result;
}

}  // namespace comlrl
