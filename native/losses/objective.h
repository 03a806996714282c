// The clipped-ratio policy objectives TRL's GRPOTrainer offers (grpo, dapo, dr_grpo, bnpo, cispo, sapo), with token
// or sequence importance ratios (GSPO), two-sided clipping, a KL penalty in the loss (k1, k2 or k3) and an entropy
// bonus, computed over per-token log-probs given flat (rows concatenated) with a token mask, as TRL computes them over
// its padded [B, T] tensors: the same reductions, the same clamps, the same detached factors.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace comlrl {

enum class ObjectiveLoss { kGrpo, kDapo, kDrGrpo, kBnpo, kCispo, kSapo };
enum class ImportanceSamplingLevel { kToken, kSequence };
enum class KlEstimator { kK1, kK2, kK3 };

ObjectiveLoss ParseObjectiveLoss(const std::string& name);
ImportanceSamplingLevel ParseImportanceSamplingLevel(const std::string& name);
KlEstimator ParseKlEstimator(const std::string& name);

struct ObjectiveOptions {
  ObjectiveLoss loss = ObjectiveLoss::kGrpo;
  ImportanceSamplingLevel level = ImportanceSamplingLevel::kToken;
  double epsilon_low = 0.2;
  double epsilon_high = 0.2;
  std::optional<double> delta;  // upper bound on the unclipped ratio (two-sided clipping)
  double beta = 0.0;            // weight of the per-token KL to the reference in the loss
  KlEstimator kl_estimator = KlEstimator::kK3;
  bool kl_bias_correction = true;  // TRL's use_bias_correction_kl: the KL term times the importance weight
  double entropy_coef = 0.0;
  double sapo_temperature_pos = 1.0;
  double sapo_temperature_neg = 1.05;
  int64_t max_completion_length = 0;  // dr_grpo divides by rows × this
  double token_normalizer = 0.0;      // dapo / cispo divide by this token count; ≤ 0: the unmasked tokens given
};

// Per-token tensors are float32 [tokens] on one device, rows concatenated; row_of_token maps each to its row.
struct ObjectiveInputs {
  torch::Tensor logprobs;      // with the graph to the parameters (or a leaf for goldens)
  torch::Tensor old_logprobs;  // undefined: logprobs.detach() (one update per rollout: every ratio is 1)
  torch::Tensor ref_logprobs;  // needed when beta ≠ 0
  torch::Tensor entropies;     // per-token entropy with its graph; needed when entropy_coef ≠ 0
  torch::Tensor token_mask;    // 0/1; undefined: every token counts
  torch::Tensor row_of_token;  // int64
  torch::Tensor advantages;    // [rows]
  int64_t rows = 0;
};

struct ObjectiveResult {
  torch::Tensor loss;    // scalar with the graph
  double policy_loss;    // the loss before the entropy term
  double kl_mean;        // mean per-token KL over unmasked tokens (NaN when beta = 0)
  double entropy_mean;   // mean per-token entropy over unmasked tokens (NaN without entropies)
  double clip_low;       // fraction of unmasked tokens whose ratio is clipped below (negative advantage)
  double clip_high;      // … above (positive advantage); for cispo, truncated at epsilon_high
  double ratio_mean;     // mean importance ratio over unmasked tokens
};

ObjectiveResult ObjectiveLossOf(const ObjectiveInputs& inputs, const ObjectiveOptions& options);

}  // namespace comlrl
