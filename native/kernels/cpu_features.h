#pragma once

#include <torch/torch.h>

namespace comlrl {

// AVX2 and FMA: what the addon's own CPU kernels need.
bool CpuHasAvx2Fma();

// Hardware bf16 arithmetic (AVX512-BF16 or AMX-BF16 on x86-64). Without it, libtorch's bf16 matmuls run ~35× below
// fp32 (5 vs 177 GFLOP/s measured on a 2-core EPYC), so bf16 models compute their matmuls in fp32 instead. Off
// x86-64 this answers true: libtorch's own bf16 kernels are used as they are.
bool CpuHasNativeBf16();

// A tensor the addon's own CPU kernels take: on the CPU, fp32 or bf16.
inline bool CpuKernelTensor(const torch::Tensor& t) {
  const auto dtype = t.scalar_type();
  return t.device().is_cpu() && (dtype == torch::kFloat32 || dtype == torch::kBFloat16);
}

// One the inference-only kernels take: a CPU kernel tensor with autograd not recording.
inline bool CpuInferenceTensor(const torch::Tensor& t) { return !torch::GradMode::is_enabled() && CpuKernelTensor(t); }

}  // namespace comlrl
