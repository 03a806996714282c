#pragma once

#include <torch/torch.h>

namespace comlrl {

// A host tensor built from what JS handed over (token ids, masks, indices) on its way to the model's device. To a CUDA
// device it goes through page-locked memory: a copy from pageable memory is staged by the driver and blocks the lane,
// one from pinned memory is a DMA queued on the lane's stream (the caching host allocator keeps the pinned block until
// that copy has finished). To a CPU it is the tensor itself.
torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device);

}  // namespace comlrl
