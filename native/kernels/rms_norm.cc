#include "rms_norm.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "cpu_features.h"

namespace comlrl {

namespace {

// Elements a thread's share must hold before another thread is woken for it.
constexpr int64_t kMinElementsPerThread = 1 << 15;
// Independent partial sums of squares, so the compiler can keep them in one vector register.
constexpr int kLanes = 8;

template <typename T>
void NormalizeRows(const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out) {
  at::parallel_for(0, rows, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const T* in = x + r * dim;
      float lanes[kLanes] = {};
      int64_t i = 0;
      for (; i + kLanes <= dim; i += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float v = static_cast<float>(in[i + l]);
          lanes[l] += v * v;
        }
      }
      float sum = 0;
      for (int l = 0; l < kLanes; ++l) sum += lanes[l];
      for (; i < dim; ++i) sum += static_cast<float>(in[i]) * static_cast<float>(in[i]);
      const float inverse = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
      T* row = out + r * dim;
      for (int64_t j = 0; j < dim; ++j) {
        const T normed = static_cast<T>(static_cast<float>(in[j]) * inverse);
        row[j] = static_cast<T>(static_cast<float>(weight[j]) * static_cast<float>(normed));
      }
    }
  });
}

}  // namespace

bool FusedRmsNormApplies(const torch::Tensor& x, const torch::Tensor& weight) {
  return CpuInferenceTensor(x) && weight.device().is_cpu() && weight.scalar_type() == x.scalar_type() && weight.dim() == 1 &&
         weight.is_contiguous() && x.size(-1) == weight.size(0);
}

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  const torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  const int64_t dim = weight.size(0), rows = input.numel() / dim;
  if (input.scalar_type() == torch::kFloat32) {
    NormalizeRows(input.data_ptr<float>(), weight.data_ptr<float>(), rows, dim, static_cast<float>(eps), out.data_ptr<float>());
  } else {
    NormalizeRows(input.data_ptr<c10::BFloat16>(), weight.data_ptr<c10::BFloat16>(), rows, dim, static_cast<float>(eps),
                  out.data_ptr<c10::BFloat16>());
  }
  return out;
}

}  // namespace comlrl
