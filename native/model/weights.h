// Moving a decoder's weights between the module and Hugging Face files: load from (sharded) safetensors with every
// tensor checked, initialise randomly as transformers does, save in transformers' own layout.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "decoder.h"

namespace comlrl {

// The tensors a checkpoint holds for this module, in state-dict order (tied models have no lm_head.weight).
std::vector<std::pair<std::string, torch::Tensor>> CheckpointTensors(CausalLMImpl& model);

// Copies every parameter from the files (one or more shards), converting dtypes. A missing tensor, a shape mismatch,
// a tensor the architecture does not have, or a corrupt file is an error naming the tensor and file.
void LoadWeights(CausalLMImpl& model, const std::vector<std::string>& files);

// transformers' _init_weights: normal(0, std) for linear and embedding weights, zero biases, unit norm weights.
void InitWeights(CausalLMImpl& model, double std, at::Generator& generator);

struct SavedShards {
  std::vector<std::string> files;                                   // file names inside dir
  std::vector<std::pair<std::string, std::string>> weight_map;      // tensor -> file (only when sharded)
  int64_t total_bytes = 0;
};

// Writes model.safetensors, or model-0000i-of-0000n.safetensors shards of at most max_shard_bytes each (a tensor
// larger than the limit gets its own shard), in dtype.
SavedShards SaveWeights(CausalLMImpl& model, const std::string& dir, torch::Dtype dtype, int64_t max_shard_bytes);

}  // namespace comlrl
