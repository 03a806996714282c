#include "rms_norm.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

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

// y = w · x · r with r = (mean(x²) + eps)^−½ per row: dx = r · (w·dy) − x · r³ · mean(w·dy·x), dw = Σ_rows dy · x · r.
// In fp32 whatever the dtype (autograd treats transformers' roundings as identities too).
template <typename T>
void NormalizeRowsBackward(const T* x, const T* weight, const T* grad, int64_t rows, int64_t dim, float eps, T* grad_x, float* grad_w) {
  const int threads = at::get_num_threads();
  std::vector<float> partial_w(static_cast<size_t>(threads) * dim, 0.0f);
  at::parallel_for(0, rows, std::max<int64_t>(1, kMinElementsPerThread / dim), [&](int64_t first, int64_t last) {
    float* mine = partial_w.data() + static_cast<size_t>(at::get_thread_num()) * dim;
    for (int64_t r = first; r < last; ++r) {
      const T* in = x + r * dim;
      const T* dy = grad + r * dim;
      float squares = 0, projection = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const float v = static_cast<float>(in[j]);
        squares += v * v;
        projection += static_cast<float>(weight[j]) * static_cast<float>(dy[j]) * v;
      }
      const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(dim) + eps);
      const float correction = inverse * inverse * inverse * projection / static_cast<float>(dim);
      T* out = grad_x + r * dim;
      for (int64_t j = 0; j < dim; ++j) {
        const float v = static_cast<float>(in[j]), g = static_cast<float>(dy[j]);
        out[j] = static_cast<T>(inverse * static_cast<float>(weight[j]) * g - v * correction);
        mine[j] += g * v * inverse;
      }
    }
  });
  for (int64_t j = 0; j < dim; ++j) {
    float sum = 0;
    for (int t = 0; t < threads; ++t) sum += partial_w[static_cast<size_t>(t) * dim + j];
    grad_w[j] = sum;
  }
}

torch::Tensor NormalizeOnce(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
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

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return NormalizeOnce(x, weight, eps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor x = saved[0].contiguous(), weight = saved[1], grad = grads[0].contiguous();
    const float eps = static_cast<float>(ctx->saved_data["eps"].toDouble());
    const int64_t dim = weight.size(0), rows = x.numel() / dim;
    torch::Tensor grad_x = torch::empty_like(x);
    torch::Tensor grad_w = torch::empty({dim}, weight.options().dtype(torch::kFloat32));
    if (x.scalar_type() == torch::kFloat32) {
      NormalizeRowsBackward(x.data_ptr<float>(), weight.data_ptr<float>(), grad.data_ptr<float>(), rows, dim, eps, grad_x.data_ptr<float>(),
                            grad_w.data_ptr<float>());
    } else {
      NormalizeRowsBackward(x.data_ptr<c10::BFloat16>(), weight.data_ptr<c10::BFloat16>(), grad.data_ptr<c10::BFloat16>(), rows, dim, eps,
                            grad_x.data_ptr<c10::BFloat16>(), grad_w.data_ptr<float>());
    }
    return {grad_x, grad_w.to(weight.scalar_type()), torch::Tensor()};
  }
};

}  // namespace

bool FusedRmsNormApplies(const torch::Tensor& x, const torch::Tensor& weight) {
  return CpuKernelTensor(x) && weight.device().is_cpu() && weight.scalar_type() == x.scalar_type() && weight.dim() == 1 &&
         weight.is_contiguous() && x.size(-1) == weight.size(0);
}

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad())) return RmsNormFunction::apply(x, weight, eps);
  return NormalizeOnce(x, weight, eps);
}

}  // namespace comlrl
