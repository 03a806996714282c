// The addon's AVX2 kernels: compiled with GCC on x86-64 under a function-level target, so the rest of the addon and
// libtorch's headers stay at the baseline instruction set; they run only where CpuHasAvx2Fma() says so. Elsewhere
// COMLRL_AVX2_KERNELS is 0 and callers use libtorch's ops.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMLRL_AVX2_KERNELS 1
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace comlrl::avx2 {

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

}  // namespace comlrl::avx2

#pragma GCC pop_options

#else
#define COMLRL_AVX2_KERNELS 0
#endif
