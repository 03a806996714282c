#include "transfer.h"

namespace comlrl {

torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device) {
  if (!device.is_cuda() || !host.device().is_cpu()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace comlrl
