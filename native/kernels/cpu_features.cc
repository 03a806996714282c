#include "cpu_features.h"

namespace comlrl {

#if defined(__x86_64__) && defined(__GNUC__)

bool CpuHasAvx2Fma() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

bool CpuHasNativeBf16() {
  static const bool supported = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
  return supported;
}

#else

bool CpuHasAvx2Fma() { return false; }
bool CpuHasNativeBf16() { return true; }

#endif

}  // namespace comlrl
