#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <string>
#include <unordered_set>

namespace comlrl {

namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;
// The CPU allocator's alignment: vector loads of every parameter stay aligned as they were.
constexpr size_t kParameterAlignment = 64;

size_t RoundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

void FreeBlock(void* data) { std::free(data); }

}  // namespace

void PlaceParametersOnHugePages(torch::nn::Module& module) {
  const char* setting = std::getenv("COMLRL_HUGE_PAGES");
  if (setting != nullptr && std::string(setting) == "0") return;
  std::vector<torch::Tensor> parameters;
  std::unordered_set<const c10::TensorImpl*> seen;  // a tied weight is one tensor under two names
  size_t bytes = 0;
  for (const torch::Tensor& parameter : module.parameters()) {
    if (!parameter.device().is_cpu() || parameter.numel() == 0 || !seen.insert(parameter.unsafeGetTensorImpl()).second) continue;
    parameters.push_back(parameter);
    bytes = RoundUp(bytes, kParameterAlignment) + parameter.nbytes();
  }
  if (parameters.empty()) return;
  const size_t block_bytes = RoundUp(bytes, kHugePageBytes);
  void* data = nullptr;
  if (posix_memalign(&data, kHugePageBytes, block_bytes) != 0) throw std::bad_alloc();
  // Advice only: refused where transparent huge pages are off, and then the block is ordinary memory.
  madvise(data, block_bytes, MADV_HUGEPAGE);
  c10::Storage storage(c10::Storage::use_byte_size_t(), block_bytes, c10::DataPtr(data, data, &FreeBlock, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  for (torch::Tensor& parameter : parameters) {
    offset = RoundUp(offset, kParameterAlignment);
    const int64_t element = static_cast<int64_t>(parameter.element_size());
    parameter.set_(storage, static_cast<int64_t>(offset) / element, parameter.sizes(), parameter.strides());
    offset += parameter.nbytes();
  }
}

}  // namespace comlrl
