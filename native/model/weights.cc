#include "weights.h"

#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "../bridge/bridge.h"
#include "../io/safetensors.h"

namespace comlrl {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// GPT-2 checkpoints saved from the base model (the hub's gpt2 itself) name tensors without "transformer." and carry
// the causal-mask buffers attn.bias / attn.masked_bias, which are not weights; transformers accepts both.
const char kGpt2Prefix[] = "transformer.";

bool IsGpt2MaskBuffer(const std::string& name) { return EndsWith(name, ".attn.bias") || EndsWith(name, ".attn.masked_bias"); }

// Bytes of a file copied at a time: what of the file a load holds beside the parameters, and the pinned staging
// buffer's size on a GPU.
constexpr int64_t kSliceBytes = int64_t{16} << 20;

// Copies tensor `name` from the file's mapping into the parameter (converting its dtype) a slice at a time, with no
// host copy of the whole tensor; each slice's mapped pages are released once copied. To a GPU each slice goes
// through a page-locked buffer: a copy from the mapping itself would be staged by the driver through pageable memory.
// The buffer has the parameter's dtype, so the conversion (bf16 files into fp32 models) happens in filling it: a
// copy to the device that also converts would go through a fresh pageable tensor instead.
void CopyFromMapping(const SafetensorsFile& file, const std::string& name, const torch::Tensor& parameter) {
  const TensorEntry& entry = file.entries().at(name);
  const torch::Tensor source = file.view(name).reshape({-1});
  const torch::Tensor target = parameter.view({-1});
  const int64_t count = source.numel(), element_bytes = source.element_size();
  const int64_t per_slice = std::max<int64_t>(1, kSliceBytes / std::max<int64_t>(element_bytes, parameter.element_size()));
  torch::Tensor staging;
  if (!parameter.device().is_cpu() && count > 0) {
    staging = torch::empty({std::min(per_slice, count)}, torch::TensorOptions().dtype(parameter.scalar_type()).pinned_memory(true));
  }
  for (int64_t start = 0; start < count; start += per_slice) {
    const int64_t n = std::min(per_slice, count - start);
    const torch::Tensor slice = source.narrow(0, start, n);
    if (staging.defined()) {
      const torch::Tensor stage = staging.narrow(0, 0, n);
      stage.copy_(slice);
      // A blocking copy: the staging buffer is refilled for the next slice only once this one has arrived.
      target.narrow(0, start, n).copy_(stage);
    } else {
      target.narrow(0, start, n).copy_(slice);
    }
    file.release(entry.begin + static_cast<size_t>(start * element_bytes), entry.begin + static_cast<size_t>((start + n) * element_bytes));
  }
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> CheckpointTensors(CausalLMImpl& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

void LoadWeights(CausalLMImpl& model, const std::vector<std::string>& files) {
  TORCH_CHECK(!files.empty(), "no weight files given");
  std::vector<std::unique_ptr<SafetensorsFile>> opened;
  std::map<std::string, const SafetensorsFile*> owner;
  for (const auto& path : files) {
    opened.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [name, entry] : opened.back()->entries()) owner[name] = opened.back().get();
  }
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  const bool gpt2 = model.config().gpt2_layout;
  for (auto& [model_name, parameter] : CheckpointTensors(model)) {
    std::string name = model_name;
    auto found = owner.find(name);
    if (found == owner.end() && gpt2 && name.rfind(kGpt2Prefix, 0) == 0) {
      name = name.substr(sizeof(kGpt2Prefix) - 1);
      found = owner.find(name);
    }
    if (found == owner.end()) {
      throw ArgumentError("weights: tensor \"" + model_name + "\" is missing from " + (files.size() == 1 ? files[0] : "every shard"));
    }
    const TensorEntry& entry = found->second->entries().at(name);
    if (torch::IntArrayRef(entry.shape) != parameter.sizes()) {
      throw ArgumentError("weights: tensor \"" + name + "\" in " + found->second->path() + " has shape " +
                          c10::str(torch::IntArrayRef(entry.shape)) + ", the config implies " + c10::str(parameter.sizes()));
    }
    CopyFromMapping(*found->second, name, parameter);
    used.insert(name);
  }
  for (const auto& [name, file] : owner) {
    const bool ignorable = name.find("rotary_emb.inv_freq") != std::string::npos ||
                           (name == "lm_head.weight" && model.config().tie_word_embeddings) || (gpt2 && IsGpt2MaskBuffer(name));
    if (!used.count(name) && !ignorable) {
      throw ArgumentError("weights: " + file->path() + " holds tensor \"" + name + "\", which this architecture does not have");
    }
  }
}

void InitWeights(CausalLMImpl& model, double std, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& [name, parameter] : CheckpointTensors(model)) {
    // Drawn in float32 on the CPU from the CPU generator, one parameter at a time, so that one seed gives the same
    // weights on every device and in every dtype (rounded once into it).
    const bool in_place = parameter.device().is_cpu() && parameter.scalar_type() == torch::kFloat32;
    torch::Tensor values = in_place ? parameter : torch::empty(parameter.sizes(), torch::kFloat32);
    const bool is_bias = EndsWith(name, ".bias");
    // GPT-2 calls its norms ln_1, ln_2 and ln_f.
    const bool is_norm = name.find("norm") != std::string::npos || name.find(".ln_") != std::string::npos;
    if (is_bias) {
      values.zero_();
    } else if (is_norm) {
      values.fill_(1.0);
    } else {
      values.normal_(0.0, std, generator);
    }
    if (!in_place) parameter.copy_(values);
  }
}

SavedShards SaveWeights(CausalLMImpl& model, const std::string& dir, torch::Dtype dtype, int64_t max_shard_bytes) {
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> shards(1);
  int64_t shard_bytes = 0, total = 0;
  const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (auto& [name, parameter] : CheckpointTensors(model)) {
    const int64_t bytes = parameter.numel() * element_bytes;
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, parameter);
    shard_bytes += bytes;
    total += bytes;
  }
  SavedShards saved;
  saved.total_bytes = total;
  const size_t count = shards.size();
  for (size_t i = 0; i < count; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, count);
    const std::string file = count == 1 ? "model.safetensors" : name;
    WriteSafetensors(dir + "/" + file, shards[i], dtype);
    saved.files.push_back(file);
    if (count > 1) {
      for (const auto& [tensor_name, tensor] : shards[i]) saved.weight_map.emplace_back(tensor_name, file);
    }
  }
  return saved;
}

}  // namespace comlrl
