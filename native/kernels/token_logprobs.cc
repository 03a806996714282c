#include "token_logprobs.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "avx2.h"
#include "cpu_features.h"

namespace comlrl {

namespace {

torch::Tensor GatherLogProbs(const torch::Tensor& logits, const torch::Tensor& targets) {
  return logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

}  // namespace

#if COMLRL_AVX2_KERNELS

namespace {

// Rows of the vocabulary a thread's share must hold before another thread is woken for it.
constexpr int64_t kMinElementsPerThread = 1 << 16;

#pragma GCC push_options
#pragma GCC target("avx2,fma")

// e^x for 8 floats (Cephes' range reduction and polynomial; ~2 ulp). Inputs here are ≤ 0: logits minus their max.
inline __m256 Exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(exponent));
}

// log Σ exp(row) over n values, in two passes (the max, then the shifted exponentials; the row is in L2 by then).
float LogSumExp(const float* row, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + v));
  float max = avx2::HorizontalMax(vmax);
  for (; v < n; ++v) max = std::max(max, row[v]);
  const __m256 shift = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  v = 0;
  for (; v + 8 <= n; v += 8) vsum = _mm256_add_ps(vsum, Exp8(_mm256_sub_ps(_mm256_loadu_ps(row + v), shift)));
  float sum = avx2::HorizontalSum(vsum);
  for (; v < n; ++v) sum += std::exp(row[v] - max);
  return max + std::log(sum);
}

// grad[v] = −g · exp(row[v] − lse): the softmax part of d(log p_target)/d logits, scaled by the incoming gradient.
void ScaledNegativeSoftmax(const float* row, int64_t n, float lse, float g, float* grad) {
  const __m256 shift = _mm256_set1_ps(lse);
  const __m256 scale = _mm256_set1_ps(-g);
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) {
    _mm256_storeu_ps(grad + v, _mm256_mul_ps(scale, Exp8(_mm256_sub_ps(_mm256_loadu_ps(row + v), shift))));
  }
  for (; v < n; ++v) grad[v] = -g * std::exp(row[v] - lse);
}

#pragma GCC pop_options

int64_t RowGrain(int64_t vocab) { return std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(vocab, 1)); }

struct FusedTokenLogProbs : public torch::autograd::Function<FusedTokenLogProbs> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor logits, torch::Tensor targets) {
    const int64_t rows = logits.size(0), vocab = logits.size(1);
    torch::Tensor lse = torch::empty({rows}, logits.options());
    torch::Tensor out = torch::empty({rows}, logits.options());
    const float* data = logits.data_ptr<float>();
    const int64_t* target = targets.data_ptr<int64_t>();
    float* lse_data = lse.data_ptr<float>();
    float* out_data = out.data_ptr<float>();
    at::parallel_for(0, rows, RowGrain(vocab), [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        lse_data[t] = LogSumExp(data + t * vocab, vocab);
        out_data[t] = data[t * vocab + target[t]] - lse_data[t];
      }
    });
    ctx->save_for_backward({logits, targets, lse});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& logits = saved[0];
    const int64_t rows = logits.size(0), vocab = logits.size(1);
    const torch::Tensor grad_out = grads[0].contiguous();
    torch::Tensor grad = torch::empty_like(logits);
    const float* data = logits.data_ptr<float>();
    const int64_t* target = saved[1].data_ptr<int64_t>();
    const float* lse = saved[2].data_ptr<float>();
    const float* g = grad_out.data_ptr<float>();
    float* grad_data = grad.data_ptr<float>();
    at::parallel_for(0, rows, RowGrain(vocab), [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        ScaledNegativeSoftmax(data + t * vocab, vocab, lse[t], g[t], grad_data + t * vocab);
        grad_data[t * vocab + target[t]] += g[t];
      }
    });
    return {grad, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor TokenLogProbs(const torch::Tensor& logits, const torch::Tensor& targets) {
  TORCH_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0), "TokenLogProbs: logits ",
              logits.sizes(), " do not match targets ", targets.sizes());
  // Callers check the targets against the vocabulary on the host (batch_input.cc's CheckVocab), so a device's copy is
  // not read back for it; on the CPU, where the kernel below indexes memory with them, the check costs no wait.
  if (targets.device().is_cpu() && targets.numel() > 0) {
    TORCH_CHECK(targets.min().item<int64_t>() >= 0 && targets.max().item<int64_t>() < logits.size(1),
                "TokenLogProbs: a target is outside the vocabulary of ", logits.size(1));
  }
  if (!logits.device().is_cpu() || logits.scalar_type() != torch::kFloat32 || !CpuHasAvx2Fma()) {
    return GatherLogProbs(logits, targets);
  }
  return FusedTokenLogProbs::apply(logits.contiguous(), targets.to(torch::kInt64).contiguous());
}

#else

torch::Tensor TokenLogProbs(const torch::Tensor& logits, const torch::Tensor& targets) {
  return GatherLogProbs(logits, targets);
}

#endif

}  // namespace comlrl
