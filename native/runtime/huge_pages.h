#pragma once

#include <torch/torch.h>

namespace comlrl {

// Moves a CPU module's parameters, not yet written, into one block of memory that the kernel may back with 2 MiB
// pages (transparent huge pages, where enabled in "always" or "madvise" mode), each parameter a view of it.
//
// Why: decoding streams every weight once per token, and with 4 KiB pages a 135M-parameter fp32 model crosses
// ~130,000 pages per step, each a TLB miss and a page walk; on 2 MiB pages the same weights span ~260. A model's
// weights live as long as it does, so the block is touched once and never handed back in pieces. Parameters on
// other devices, and a module with none, are left as they are; where the kernel offers no huge pages the block is
// ordinary memory. The cost is at load: the kernel may compact memory to fault 2 MiB pages in. COMLRL_HUGE_PAGES=0
// leaves every parameter in a block of its own, as libtorch allocates it.
void PlaceParametersOnHugePages(torch::nn::Module& module);

}  // namespace comlrl
