#include "rope.h"

#include "cpu_features.h"

namespace comlrl {

namespace {

template <typename T>
void Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, torch::Tensor& out) {
  const int64_t batch = x.size(0), heads = x.size(1), queries = x.size(2), dim = x.size(3), half = dim / 2;
  const T* xs = x.data_ptr<T>();
  const T* cs = cos.data_ptr<T>();
  const T* ss = sin.data_ptr<T>();
  T* os = out.data_ptr<T>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t q = 0; q < queries; ++q) {
        const T* in = xs + b * x.stride(0) + h * x.stride(1) + q * x.stride(2);
        const int64_t angle = (b * queries + q) * dim;
        T* row = os + ((b * heads + h) * queries + q) * dim;
        for (int64_t i = 0; i < dim; ++i) {
          const float rotated = i < half ? -static_cast<float>(in[(i + half) * x.stride(3)]) : static_cast<float>(in[(i - half) * x.stride(3)]);
          const T direct = static_cast<T>(static_cast<float>(in[i * x.stride(3)]) * static_cast<float>(cs[angle + i]));
          const T turned = static_cast<T>(rotated * static_cast<float>(ss[angle + i]));
          row[i] = static_cast<T>(static_cast<float>(direct) + static_cast<float>(turned));
        }
      }
    }
  }
}

}  // namespace

bool FusedRopeApplies(const torch::Tensor& x, const torch::Tensor& cos) {
  return CpuInferenceTensor(x) && x.dim() == 4 && cos.dim() == 4 && cos.scalar_type() == x.scalar_type() && cos.size(1) == 1 &&
         cos.size(0) == x.size(0) && cos.size(2) == x.size(2) && cos.size(3) == x.size(3) && x.size(3) % 2 == 0;
}

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const torch::Tensor c = cos.contiguous(), s = sin.contiguous();
  torch::Tensor out = torch::empty(x.sizes(), x.options().memory_format(torch::MemoryFormat::Contiguous));
  if (x.scalar_type() == torch::kFloat32) {
    Rotate<float>(x, c, s, out);
  } else {
    Rotate<c10::BFloat16>(x, c, s, out);
  }
  return out;
}

}  // namespace comlrl
