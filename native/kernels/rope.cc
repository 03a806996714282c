#include "rope.h"

#include <ATen/Parallel.h>

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
  // Rows of (batch, head) pairs; a thread is woken only for a share of at least ~32k elements.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, queries * dim));
  at::parallel_for(0, batch * heads, grain, [&](int64_t first, int64_t last) {
    for (int64_t pair = first; pair < last; ++pair) {
      const int64_t b = pair / heads, h = pair % heads;
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
  });
}

torch::Tensor RotateOnce(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const torch::Tensor c = cos.contiguous(), s = sin.contiguous();
  torch::Tensor out = torch::empty(x.sizes(), x.options().memory_format(torch::MemoryFormat::Contiguous));
  if (x.scalar_type() == torch::kFloat32) {
    Rotate<float>(x, c, s, out);
  } else {
    Rotate<c10::BFloat16>(x, c, s, out);
  }
  return out;
}

struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return RotateOnce(x, cos, sin);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {RotateOnce(grads[0], saved[0], -saved[1]), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedRopeApplies(const torch::Tensor& x, const torch::Tensor& cos) {
  return CpuKernelTensor(x) && x.dim() == 4 && cos.dim() == 4 && cos.scalar_type() == x.scalar_type() && cos.size(1) == 1 &&
         cos.size(0) == x.size(0) && cos.size(2) == x.size(2) && cos.size(3) == x.size(3) && x.size(3) % 2 == 0;
}

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (torch::GradMode::is_enabled() && x.requires_grad()) return RotaryFunction::apply(x, cos, sin);
  return RotateOnce(x, cos, sin);
}

}  // namespace comlrl
