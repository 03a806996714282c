#include "readouts.h"

#include <map>

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

torch::Tensor LastRealTokenHidden(CausalLMImpl& model, const torch::Tensor& ids, const torch::Tensor& mask) {
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
