#include "caching_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/version.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace comlrl {

namespace {

constexpr size_t kMinCachedBytes = size_t{1} << 20;
// Larger blocks go straight back to the system when freed: they are a model's weights or a load's staging, freed
// once and rarely asked for again at that size, and keeping them would hold that memory for the process's life.
// Linux overcommits, so the release-and-retry below would never run: the OOM killer acts before malloc fails.
constexpr size_t kMaxCachedBytes = size_t{256} << 20;
constexpr size_t kPageBytes = 4096;

size_t DefaultLimitBytes() {
  if (const char* configured = std::getenv("COMLRL_CPU_CACHE_MB")) {
    return static_cast<size_t>(std::strtoull(configured, nullptr, 10)) << 20;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 4 : 0;
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(size_t limit) : limit_(limit) {}

  // libtorch 2.x made allocate() non-const and added copy_data() (used by Storage copies) as a pure virtual.
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t bytes) override { return Allocate(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t bytes) const override { return Allocate(bytes); }
#endif

  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

  size_t cached() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  size_t limit() const { return limit_; }

  void ReleaseCache() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (const auto& block : blocks) c10::free_cpu(block.second);
  }

 private:
  static CachingCpuAllocator& Self();

  static void Release(void* data) { Self().GiveBack(data); }

  c10::DataPtr Allocate(size_t bytes) const {
    void* data = bytes < kMinCachedBytes ? c10::alloc_cpu(bytes) : Self().TakeBlock(bytes);
    return {data, data, &Release, c10::Device(c10::DeviceType::CPU)};
  }

  void* TakeBlock(size_t bytes) {
    const size_t size = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto fit = free_.lower_bound(size);
      if (fit != free_.end() && fit->first <= size + size / 4) {
        void* data = fit->second;
        cached_ -= fit->first;
        live_[data] = fit->first;
        free_.erase(fit);
        return data;
      }
      EvictFor(size);
    }
    void* data;
    try {
      data = c10::alloc_cpu(size);
    } catch (const c10::Error&) {
      ReleaseCache();  // the memory may be sitting in the cache: give it back and try once more
      data = c10::alloc_cpu(size);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    live_[data] = size;
    return data;
  }

  void GiveBack(void* data) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto block = live_.find(data);
      if (block != live_.end()) {
        const size_t size = block->second;
        live_.erase(block);
        if (size <= kMaxCachedBytes && cached_ + size <= limit_) {
          free_.emplace(size, data);
          cached_ += size;
          return;
        }
      }
    }
    c10::free_cpu(data);
  }

  // A miss gives back cached blocks, the largest first, of at least the size it is about to take from the system:
  // then the live bytes plus the cached ones never exceed the most bytes that were ever live at once, and the cache
  // costs no peak memory. Blocks freed by a step are still reused by the next step of the same shapes. Holds mutex_.
  void EvictFor(size_t size) {
    size_t evicted = 0;
    while (evicted < size && !free_.empty()) {
      const auto largest = std::prev(free_.end());
      evicted += largest->first;
      cached_ -= largest->first;
      c10::free_cpu(largest->second);
      free_.erase(largest);
    }
  }

  const size_t limit_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_;          // cached blocks by size
  std::unordered_map<void*, size_t> live_;     // blocks of ≥ 1 MiB in use, with their (page-rounded) size
  size_t cached_ = 0;
};

CachingCpuAllocator* installed = nullptr;

CachingCpuAllocator& CachingCpuAllocator::Self() { return *installed; }

}  // namespace

void InstallCachingCpuAllocator() {
  const size_t limit = DefaultLimitBytes();
  // Another allocator already in place (another copy of this addon loaded from elsewhere, or the host's) is kept.
  if (installed || limit == 0 || c10::GetCPUAllocator() != c10::GetDefaultCPUAllocator()) return;
  // Lives as long as the process: tensors allocated here may be freed during static destruction.
  installed = new CachingCpuAllocator(limit);
  c10::SetCPUAllocator(installed, /*priority=*/1);
}

void ReleaseFreedCpuMemory() {
  if (installed) installed->ReleaseCache();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

size_t CpuCacheBytes() { return installed ? installed->cached() : 0; }

size_t CpuCacheLimitBytes() { return installed ? installed->limit() : 0; }

}  // namespace comlrl
