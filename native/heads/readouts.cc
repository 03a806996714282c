#include "readouts.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "../bridge/bridge.h"
#include "../runtime/transfer.h"

namespace comlrl {

Readout ParseReadout(const std::string& text) {
  if (text == "v") return Readout::kV;
  if (text == "q") return Readout::kQ;
  if (text == "positions") return Readout::kPositions;
  throw ArgumentError("readout must be \"v\", \"q\" or \"positions\", got \"" + text + "\"");
}

int64_t ReadoutCount(const CompletionBatch& batch, Readout readout) {
  if (readout != Readout::kPositions) return static_cast<int64_t>(batch.prompts.size());
  int64_t count = 0;
  for (size_t r = 0; r < batch.prompts.size(); ++r) count += static_cast<int64_t>(batch.prompts[r].size() + batch.completions[r].size());
  return count;
}

torch::Tensor SelectReadout(const SequenceForward& forward, const CompletionBatch& batch, Readout readout) {
  std::vector<int64_t> rows, cols;
  for (size_t r = 0; r < batch.prompts.size(); ++r) {
    const int64_t prompt = static_cast<int64_t>(batch.prompts[r].size());
    const int64_t total = prompt + static_cast<int64_t>(batch.completions[r].size());
    TORCH_CHECK(prompt > 0, "row ", r, " has an empty prompt");
    TORCH_CHECK(forward.lengths[r] >= (readout == Readout::kV ? prompt : total), "readout: row ", r, " was not fed whole");
    const int64_t first = readout == Readout::kPositions ? 0 : (readout == Readout::kV ? prompt : total) - 1;
    const int64_t last = readout == Readout::kPositions ? total - 1 : first;
    for (int64_t col = first; col <= last; ++col) {
      rows.push_back(static_cast<int64_t>(r));
      cols.push_back(col);
    }
  }
  const torch::Device device = forward.hidden.device();
  return forward.hidden.index({ToDevice(torch::tensor(rows, torch::kInt64), device), ToDevice(torch::tensor(cols, torch::kInt64), device)});
}

torch::Tensor ReadoutHidden(CausalLMImpl& model, const CompletionBatch& batch, Readout readout) {
  TORCH_CHECK(!batch.prompts.empty(), "readout: empty batch");
  TORCH_CHECK(batch.prompts.size() == batch.completions.size(), "readout: ", batch.prompts.size(), " prompts but ",
              batch.completions.size(), " completions");
  if (readout != Readout::kV) return SelectReadout(ForwardSequences(model, batch, true), batch, readout);
  // Distinct prompts in order of first appearance; each row reads its prompt's value.
  std::map<std::vector<int64_t>, int64_t> group_of_prompt;
  CompletionBatch distinct;
  std::vector<int64_t> group_of_row;
  for (const auto& prompt : batch.prompts) {
    const auto inserted = group_of_prompt.emplace(prompt, static_cast<int64_t>(distinct.prompts.size()));
    if (inserted.second) {
      distinct.prompts.push_back(prompt);
      distinct.completions.emplace_back();
    }
    group_of_row.push_back(inserted.first->second);
  }
  const torch::Tensor per_prompt = SelectReadout(ForwardSequences(model, distinct, true), distinct, Readout::kV);
  return per_prompt.index_select(0, torch::tensor(group_of_row, torch::kInt64).to(per_prompt.device()));
}

namespace {

// Each row's real tokens (those its mask sets), in order.
std::vector<std::vector<int64_t>> RealTokens(const torch::Tensor& ids, const torch::Tensor& mask) {
  const torch::Tensor host_ids = ids.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor host_mask = mask.to(torch::kCPU, torch::kBool).contiguous();
  const int64_t rows = ids.size(0), length = ids.size(1);
  const int64_t* id = host_ids.data_ptr<int64_t>();
  const bool* real = host_mask.data_ptr<bool>();
  std::vector<std::vector<int64_t>> tokens(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < length; ++c) {
      if (real[r * length + c]) tokens[r].push_back(id[r * length + c]);
    }
  }
  return tokens;
}

// How to run rows that begin alike (a preference pair's two joint texts, a node's joint actions: their header and
// first prompt) with each shared beginning run once: per row, its group's prefix as the prompt and the rest as the
// completion (at least the last token, whose hidden state is read).
struct PrefixPlan {
  CompletionBatch batch;
  std::vector<int64_t> group_of_row;
  std::vector<size_t> first_row_of_group;  // whose prompt is the group's prefix
  int64_t cost = 0;  // padded tokens fed: groups × the longest prefix + rows × the longest rest
};

size_t CommonPrefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// Groups are runs of rows, sorted by their tokens, whose neighbours share at least `least` tokens; a group's prefix
// is the tokens all its rows share, short of every row's last (a row alone keeps `least` of them). Null where some
// row would have no prefix.
std::optional<PrefixPlan> PlanPrefixes(const std::vector<std::vector<int64_t>>& tokens, const std::vector<int64_t>& order,
                                       const std::vector<size_t>& shared_with_previous, size_t least) {
  const size_t rows = tokens.size();
  std::vector<size_t> group_prefix, group_rows;
  std::vector<int64_t> group_of_row(rows);
  for (size_t i = 0; i < rows; ++i) {
    const size_t row = static_cast<size_t>(order[i]);
    const size_t longest = tokens[row].size() - 1;
    if (i == 0 || shared_with_previous[i] < least) {
      group_prefix.push_back(longest);
      group_rows.push_back(1);
    } else {
      group_prefix.back() = std::min({group_prefix.back(), shared_with_previous[i], longest});
      ++group_rows.back();
    }
    group_of_row[row] = static_cast<int64_t>(group_prefix.size()) - 1;
  }
  for (size_t g = 0; g < group_prefix.size(); ++g) {
    if (group_rows[g] == 1) group_prefix[g] = std::min(group_prefix[g], least);
  }
  PrefixPlan plan;
  plan.group_of_row = group_of_row;
  plan.first_row_of_group.assign(group_prefix.size(), rows);
  size_t widest_prefix = 0, widest_rest = 0;
  for (size_t row = 0; row < rows; ++row) {
    const size_t prefix = group_prefix[static_cast<size_t>(group_of_row[row])];
    if (prefix == 0) return std::nullopt;
    plan.batch.prompts.emplace_back(tokens[row].begin(), tokens[row].begin() + static_cast<int64_t>(prefix));
    plan.batch.completions.emplace_back(tokens[row].begin() + static_cast<int64_t>(prefix), tokens[row].end());
    widest_prefix = std::max(widest_prefix, prefix);
    widest_rest = std::max(widest_rest, tokens[row].size() - prefix);
  }
  for (size_t row = 0; row < rows; ++row) {
    size_t& first = plan.first_row_of_group[static_cast<size_t>(group_of_row[row])];
    first = std::min(first, row);
  }
  plan.cost = static_cast<int64_t>(group_prefix.size() * widest_prefix + rows * widest_rest);
  return plan;
}

// The plan that feeds the fewest padded tokens, if it feeds fewer than one padded forward of the whole rows. The
// candidate groupings are those of each length that sorted neighbours share.
std::optional<PrefixPlan> CheapestPrefixPlan(const std::vector<std::vector<int64_t>>& tokens) {
  const size_t rows = tokens.size();
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return tokens[a] < tokens[b]; });
  std::vector<size_t> shared_with_previous(rows, 0);
  for (size_t i = 1; i < rows; ++i) shared_with_previous[i] = CommonPrefix(tokens[order[i - 1]], tokens[order[i]]);
  size_t longest = 0;
  for (const auto& row : tokens) longest = std::max(longest, row.size());
  std::optional<PrefixPlan> best;
  int64_t best_cost = static_cast<int64_t>(rows * longest);
  for (size_t least : std::set<size_t>(shared_with_previous.begin() + 1, shared_with_previous.end())) {
    if (least == 0) continue;
    std::optional<PrefixPlan> plan = PlanPrefixes(tokens, order, shared_with_previous, least);
    if (plan && plan->cost < best_cost) {
      best_cost = plan->cost;
      best = std::move(plan);
    }
  }
  return best;
}

// The hidden state at each row's last token, each group's prefix run once.
torch::Tensor LastHiddenSharingPrefixes(CausalLMImpl& model, const PrefixPlan& plan) {
  std::vector<const std::vector<int64_t>*> prefixes;
  for (size_t row : plan.first_row_of_group) prefixes.push_back(&plan.batch.prompts[row]);
  const SharedPromptForward forward = ForwardSharedPrompts(model, plan.batch, plan.group_of_row, prefixes, /*feed_last=*/true);
  std::vector<int64_t> rows, cols;
  for (size_t r = 0; r < plan.batch.completions.size(); ++r) {
    rows.push_back(static_cast<int64_t>(r));
    cols.push_back(static_cast<int64_t>(plan.batch.completions[r].size()) - 1);
  }
  const torch::Device device = forward.completion_hidden.device();
  return forward.completion_hidden.index({ToDevice(torch::tensor(rows, torch::kInt64), device), ToDevice(torch::tensor(cols, torch::kInt64), device)});
}

}  // namespace

torch::Tensor LastRealTokenHidden(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask) {
  // A dropping forward runs every row whole, so that each row draws its own masks, as one padded forward does.
  if (!model.drops()) {
    const std::vector<std::vector<int64_t>> tokens = RealTokens(ids, mask);
    const bool every_row_real = std::none_of(tokens.begin(), tokens.end(), [](const auto& row) { return row.empty(); });
    if (every_row_real) {
      if (const std::optional<PrefixPlan> plan = CheapestPrefixPlan(tokens)) return LastHiddenSharingPrefixes(model, *plan);
    }
  }
  const torch::Tensor real = mask.to(torch::kInt64);
  // The fewest and the most real tokens of a row, in one read from the device.
  const auto [fewest, most] = torch::aminmax(real.sum(1));
  const torch::Tensor counts = torch::stack({fewest, most}).cpu();
  TORCH_CHECK(counts[0].item<int64_t>() > 0, "a row of attentionMask has no real token");
  const torch::Tensor positions = (real.cumsum(1) - 1).clamp_min(0);
  const torch::Tensor hidden = model.forward({ids, positions, mask, counts[1].item<int64_t>() - 1});
  // The last 1 of each row: the largest index whose mask is set.
  const int64_t length = ids.size(1);
  const torch::Tensor last = (torch::arange(length, real.options()).unsqueeze(0) * real).argmax(1);
  return hidden.index({torch::arange(ids.size(0), real.options()), last});
}

}  // namespace comlrl
