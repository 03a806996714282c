// Process-wide numerics for GPU runs, opted into by environment variables that the addon reads once when it loads:
//   COMLRL_TF32=1           fp32 matmuls and convolutions on CUDA run on TF32 tensor cores (cuBLAS and cuDNN's
//                           allow_tf32): about 8× the fp32 rate of an H100/H200, products rounded to a 10-bit
//                           mantissa. CPUs are left as they are (the flags are CUDA's only).
//   COMLRL_DETERMINISTIC=1  libtorch's deterministic algorithms (an op without one raises instead of running) and
//                           cuBLAS's fixed workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8 unless already set), so that a
//                           GPU run repeats, and resumes, bit for bit on the same machine and software.
// numerics() says what was applied.
#pragma once

#include <napi.h>

namespace comlrl {

void InitNumerics(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
