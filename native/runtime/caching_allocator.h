#pragma once

#include <cstddef>

namespace comlrl {

// Makes libtorch's CPU allocations of 1 MiB and more come from a cache of freed blocks.
//
// Why: glibc hands large blocks back to the kernel when they are freed (everything over 32 MiB always), so every
// training step faulted its activations, logits and gradients in again, page by page, zeroed: ~200,000 page faults
// and ~15% of a 21M model's step. Freed blocks are kept, by size, up to a limit (a quarter of physical memory, or
// COMLRL_CPU_CACHE_MB); a request takes the smallest cached block that fits with at most 25% to spare. A request
// no cached block fits first gives back cached blocks of at least its size, so that cached and live blocks together
// never exceed the most the live ones ever took at once. When allocation fails, the cache is released and the
// allocation retried. COMLRL_CPU_CACHE_MB=0 turns it off.
void InstallCachingCpuAllocator();

// Gives the memory of freed tensors back to the system: the cache's blocks, and (glibc) the free pages of malloc's
// heaps, which keep what smaller tensors freed. For when large modules have just been freed (a trainer closed): the
// next trainer's blocks come in fresh, instead of beside gigabytes of another run's blocks its sizes may not fit.
void ReleaseFreedCpuMemory();

// Bytes held in freed blocks awaiting reuse, and the limit (0 when the cache is off).
size_t CpuCacheBytes();
size_t CpuCacheLimitBytes();

}  // namespace comlrl
