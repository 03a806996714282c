#include "small_batch_linear.h"

#include <ATen/Parallel.h>

#include "avx2.h"
#include "cpu_features.h"

namespace comlrl {

#if COMLRL_AVX2_KERNELS

namespace {

// Multiply-accumulates a work unit must hold before it is worth waking another thread for.
constexpr int64_t kMinMacsPerThread = 1 << 16;
// Weight rows a thread's share is counted in (a multiple of every block width below).
constexpr int kColumnsPerBlock = 4;
// How far ahead the weight stream is prefetched: 16 KiB covers DRAM latency at the bandwidth two cores draw.
constexpr int64_t kPrefetchFloats = 4096;

#pragma GCC push_options
#pragma GCC target("avx2,fma")

inline __m256 LoadWeights(const float* p) { return _mm256_loadu_ps(p); }

// bf16 is the high half of an fp32: widen 8 of them by shifting into place.
inline __m256 LoadWeights(const c10::BFloat16* p) {
  const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}

inline float WeightToFloat(float v) { return v; }
inline float WeightToFloat(c10::BFloat16 v) { return static_cast<float>(v); }

// Left to itself GCC folds a vector's load into every FMA that uses it, so a vector used by four FMAs is loaded four
// times and the loop waits on the load ports instead of the FMA units; this empty asm pins the value in a register.
inline void InRegister(__m256& v) { asm("" : "+x"(v)); }

// y[r][c] = x[r] · w[c] (+ bias[c]) for Rows rows of x and Cols rows of the weight, all accumulators in registers.
// `prefetch` (elements) is how far ahead in the weight the lines for a later block are requested: the hardware
// prefetcher stops at page boundaries, and a block of weight rows is often about a page.
template <int Rows, int Cols, typename W>
inline void DotBlock(const float* x, const W* w, const float* bias, int64_t k_size, int64_t prefetch, float* y,
                     int64_t y_stride) {
  __m256 acc[Rows][Cols];
  for (int r = 0; r < Rows; ++r)
    for (int c = 0; c < Cols; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= k_size; k += 8) {
    __m256 wv[Cols];
    for (int c = 0; c < Cols; ++c) {
      // One request per 64-byte line, not per 32-byte vector: prefetches share the load ports with the FMAs' loads.
      if ((k & 8) == 0) _mm_prefetch(reinterpret_cast<const char*>(w + prefetch + c * k_size + k), _MM_HINT_T0);
      wv[c] = LoadWeights(w + c * k_size + k);
      InRegister(wv[c]);
    }
    for (int r = 0; r < Rows; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * k_size + k);
      InRegister(xv);
      for (int c = 0; c < Cols; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < Cols; ++c) {
      float sum = avx2::HorizontalSum(acc[r][c]);
      for (int64_t t = k; t < k_size; ++t) sum += x[r * k_size + t] * WeightToFloat(w[c * k_size + t]);
      y[r * y_stride + c] = bias ? sum + bias[c] : sum;
    }
  }
}

// All rows of x against Cols consecutive weight rows, Rows rows of x per pass; the weight rows stay in L1/L2 between
// passes. Rows × Cols accumulators + Cols weight vectors + one x vector must fit AVX2's 16 registers.
template <int Rows, int Cols, typename W>
inline void AllRows(const float* x, int64_t rows, const W* w, const float* bias, int64_t k_size, int64_t prefetch, float* y,
                    int64_t n_size) {
  int64_t r = 0;
  for (; r + Rows <= rows; r += Rows) DotBlock<Rows, Cols>(x + r * k_size, w, bias, k_size, prefetch, y + r * n_size, n_size);
  const float* xr = x + r * k_size;
  float* yr = y + r * n_size;
  switch (rows - r) {
    case 3: DotBlock<3, Cols>(xr, w, bias, k_size, prefetch, yr, n_size); break;
    case 2: DotBlock<2, Cols>(xr, w, bias, k_size, prefetch, yr, n_size); break;
    case 1: DotBlock<1, Cols>(xr, w, bias, k_size, prefetch, yr, n_size); break;
    default: break;
  }
}

// Weight rows [begin, end). One or two rows of x take four weight rows at a time (enough independent FMA chains to
// hide their latency); more take two, four rows of x per pass, so each loaded weight vector meets four x vectors.
template <typename W>
void Columns(const float* x, int64_t rows, const W* w, const float* bias, int64_t k_size, int64_t n_size, int64_t begin,
             int64_t end, float* y) {
  const int64_t prefetch = std::max<int64_t>(kColumnsPerBlock, kPrefetchFloats / k_size) * k_size;
  const float* no_bias = nullptr;
  auto bias_at = [&](int64_t n) { return bias ? bias + n : no_bias; };
  int64_t n = begin;
  if (rows <= 2) {
    for (; n + 4 <= end; n += 4) AllRows<2, 4>(x, rows, w + n * k_size, bias_at(n), k_size, prefetch, y + n, n_size);
  } else {
    for (; n + 2 <= end; n += 2) AllRows<4, 2>(x, rows, w + n * k_size, bias_at(n), k_size, prefetch, y + n, n_size);
  }
  for (; n < end; ++n) AllRows<4, 1>(x, rows, w + n * k_size, bias_at(n), k_size, prefetch, y + n, n_size);
}

#pragma GCC pop_options

template <typename W>
void Run(const float* x, int64_t rows, const W* w, const float* bias, int64_t k_size, int64_t n_size, float* y) {
  const int64_t blocks = (n_size + kColumnsPerBlock - 1) / kColumnsPerBlock;
  const int64_t macs_per_block = kColumnsPerBlock * k_size * rows;
  const int64_t grain = std::max<int64_t>(1, (kMinMacsPerThread + macs_per_block - 1) / macs_per_block);
  at::parallel_for(0, blocks, grain, [&](int64_t first, int64_t last) {
    Columns(x, rows, w, bias, k_size, n_size, first * kColumnsPerBlock, std::min(last * kColumnsPerBlock, n_size), y);
  });
}

}  // namespace

bool SmallBatchLinearApplies(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!CpuHasAvx2Fma() || !CpuInferenceTensor(x) || weight.scalar_type() != x.scalar_type() || !weight.device().is_cpu() ||
      weight.dim() != 2 || !weight.is_contiguous()) {
    return false;
  }
  const auto dtype = weight.scalar_type();
  const int64_t max_rows = dtype == torch::kFloat32 ? kSmallBatchMaxRowsFloat32 : kSmallBatchMaxRowsBFloat16;
  return x.size(-1) == weight.size(1) && x.numel() / x.size(-1) <= max_rows;
}

torch::Tensor SmallBatchLinear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const int64_t k_size = weight.size(1);
  const int64_t n_size = weight.size(0);
  const torch::Tensor rows = x.reshape({-1, k_size}).to(torch::kFloat32).contiguous();
  const torch::Tensor bias32 = bias.defined() ? bias.to(torch::kFloat32).contiguous() : torch::Tensor();
  torch::Tensor y = torch::empty({rows.size(0), n_size}, rows.options());
  const float* bias_data = bias32.defined() ? bias32.data_ptr<float>() : nullptr;
  if (weight.scalar_type() == torch::kFloat32) {
    Run(rows.data_ptr<float>(), rows.size(0), weight.data_ptr<float>(), bias_data, k_size, n_size, y.data_ptr<float>());
  } else {
    Run(rows.data_ptr<float>(), rows.size(0), weight.data_ptr<c10::BFloat16>(), bias_data, k_size, n_size, y.data_ptr<float>());
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = n_size;
  return y.to(x.scalar_type()).view(shape);
}

#else

bool SmallBatchLinearApplies(const torch::Tensor&, const torch::Tensor&) { return false; }

torch::Tensor SmallBatchLinear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return torch::nn::functional::linear(x, weight, bias);
}

#endif

}  // namespace comlrl
