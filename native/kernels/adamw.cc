#include "adamw.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>

#include "avx2.h"
#include "cpu_features.h"

namespace comlrl {

namespace {

// libtorch 1.13 keys an optimizer's state by the parameter's TensorImpl address as text (c10::guts::to_string, an
// ostream of the pointer), 2.x by the address itself.
template <typename Map>
typename Map::key_type StateKey(const Map&, const torch::Tensor& parameter) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    return c10::str(parameter.unsafeGetTensorImpl());
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

}  // namespace

bool HoldsLowPrecisionParameters(const torch::optim::AdamW& adamw) {
  for (const auto& group : adamw.param_groups()) {
    for (const auto& parameter : group.params()) {
      if (parameter.grad().defined() && parameter.scalar_type() != torch::kFloat32) return true;
    }
  }
  return false;
}

namespace {

// The master to step for a low-precision parameter: its float32 copy, taken again when the parameter was written since
// the last copy back (or never had one).
torch::Tensor CurrentMaster(MasterWeight& master, const torch::Tensor& parameter) {
  if (!master.value.defined() || master.version != static_cast<int64_t>(parameter._version())) {
    master.value = parameter.detach().to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
  }
  return master.value;
}

// AdamW::step()'s arithmetic for one parameter with its tensor ops; with float32_moments its moments (created, or
// widened from a file saved without them) and update are float32 and a low-precision parameter is rounded once, after
// its update (a float32 parameter is updated in place either way, exactly as AdamW::step() updates it). With a
// master (float32_moments only) the update accumulates there and the parameter is its rounding.
void StepWithTensorOps(torch::optim::AdamW& adamw, const torch::optim::AdamWOptions& options, const torch::Tensor& parameter,
                       bool float32_moments, MasterWeight* master) {
  torch::NoGradGuard no_grad;
  auto& states = adamw.state();
  const auto moment_options = float32_moments ? parameter.options().dtype(torch::kFloat32) : parameter.options();
  auto key = StateKey(states, parameter);
  auto found = states.find(key);
  if (found == states.end()) {
    auto created = std::make_unique<torch::optim::AdamWParamState>();
    created->step(0);
    created->exp_avg(torch::zeros_like(parameter, moment_options, torch::MemoryFormat::Preserve));
    created->exp_avg_sq(torch::zeros_like(parameter, moment_options, torch::MemoryFormat::Preserve));
    found = states.emplace(std::move(key), std::move(created)).first;
  }
  auto& state = static_cast<torch::optim::AdamWParamState&>(*found->second);
  if (float32_moments) {
    if (state.exp_avg().scalar_type() != torch::kFloat32) state.exp_avg(state.exp_avg().to(torch::kFloat32));
    if (state.exp_avg_sq().scalar_type() != torch::kFloat32) state.exp_avg_sq(state.exp_avg_sq().to(torch::kFloat32));
  }
  torch::Tensor value = master != nullptr ? CurrentMaster(*master, parameter) : float32_moments ? parameter.to(torch::kFloat32) : parameter;
  const torch::Tensor grad = float32_moments ? parameter.grad().to(torch::kFloat32) : parameter.grad();
  if (options.weight_decay() != 0) value.mul_(1 - options.lr() * options.weight_decay());
  state.step(state.step() + 1);
  const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
  const double bias_correction1 = 1 - std::pow(beta1, state.step()), bias_correction2 = 1 - std::pow(beta2, state.step());
  state.exp_avg().mul_(beta1).add_(grad, 1 - beta1);
  state.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
  const torch::Tensor denom = (state.exp_avg_sq().sqrt() / std::sqrt(bias_correction2)).add_(options.eps());
  value.addcdiv_(state.exp_avg(), denom, -options.lr() / bias_correction1);
  if (!value.is_same(parameter)) parameter.copy_(value);
  if (master != nullptr) master->version = static_cast<int64_t>(parameter._version());
}

}  // namespace

void StepWithFloat32Moments(torch::optim::AdamW& adamw, MasterWeights& masters) {
  size_t position = 0;
  for (const auto& group : adamw.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (const auto& parameter : group.params()) {
      MasterWeight* master = masters.empty() || parameter.scalar_type() == torch::kFloat32 ? nullptr : &masters[position];
      ++position;
      if (parameter.grad().defined()) StepWithTensorOps(adamw, options, parameter, true, master);
    }
  }
}

double StalledFraction(const torch::optim::AdamW& adamw) {
  torch::NoGradGuard no_grad;
  int64_t stalled = 0, total = 0;
  for (const auto& group : adamw.param_groups()) {
    const double lr = static_cast<const torch::optim::AdamWOptions&>(group.options()).lr();
    for (const auto& parameter : group.params()) {
      if (parameter.scalar_type() == torch::kFloat32) continue;
      const torch::Tensor wide = parameter.detach().to(torch::kFloat32);
      const torch::Tensor up = (wide + lr).to(parameter.scalar_type()).eq(parameter);
      const torch::Tensor down = (wide - lr).to(parameter.scalar_type()).eq(parameter);
      stalled += up.logical_and(down).sum().item<int64_t>();
      total += parameter.numel();
    }
  }
  return total == 0 ? 0.0 : static_cast<double>(stalled) / static_cast<double>(total);
}

#if COMLRL_AVX2_KERNELS

namespace {

using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// Elements a thread's share must hold before another thread is woken for it.
constexpr int64_t kMinElementsPerThread = 1 << 15;
// Elements per partial sum of squares: a fixed blocking, so the norm does not depend on the thread count.
constexpr int64_t kSumBlock = 1 << 15;

// One group's AdamW scalars, computed in double as AdamW::step() computes them and rounded to fp32 where libtorch's
// fp32 kernels round a Scalar argument.
struct UpdateScalars {
  bool decays;
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bias_correction2, eps, neg_step_size;
};

#pragma GCC push_options
#pragma GCC target("avx2,fma")

// The lanes of the last, partial vector of a loop over n elements.
inline __m256i TailMask(int64_t remaining) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(remaining)), lanes);
}

inline __m256d SquaresOf(__m128 half, __m256d acc) {
  const __m256d wide = _mm256_cvtps_pd(half);
  return _mm256_fmadd_pd(wide, wide, acc);
}

// Sum of squares in double: exact products and a sum error far below fp32 rounding, so its fp32 square root is the exact
// norm rounded.
double SumOfSquaresBlock(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc[0] = SquaresOf(_mm256_castps256_ps128(a), acc[0]);
    acc[1] = SquaresOf(_mm256_extractf128_ps(a, 1), acc[1]);
    acc[2] = SquaresOf(_mm256_castps256_ps128(b), acc[2]);
    acc[3] = SquaresOf(_mm256_extractf128_ps(b, 1), acc[3]);
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  double sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum;
}

void ScaleRange(float* x, int64_t first, int64_t last, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  int64_t i = first;
  for (; i + 8 <= last; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), f));
  if (i < last) {
    const __m256i mask = TailMask(last - i);
    _mm256_maskstore_ps(x + i, mask, _mm256_mul_ps(_mm256_maskload_ps(x + i, mask), f));
  }
}

// GCC fuses a product into a following addition (-ffp-contract=fast) where libtorch's separate ops round the
// product first; an empty asm makes the product a value the addition must take as it is.
inline __m256 Rounded(__m256 x) {
  asm("" : "+x"(x));
  return x;
}

// Eight elements of the update, in the order and with the roundings of AdamW::step()'s tensor ops (bit-identical to
// libtorch 1.13's CPU kernels, measured): p.mul_(1 - lr·wd); exp_avg.mul_(beta1).add_(grad, 1 - beta1), whose add
// with alpha is one FMA; exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2), self + (value·t1)·t2 with the last
// product fused into the addition as GCC compiles libtorch's kernel; denom = sqrt(v) / sqrt(bc2) + eps;
// p.addcdiv_(exp_avg, denom, -lr / bc1), self + value·t1 / t2.
inline void UpdateLanes(const UpdateScalars& s, __m256 g, __m256& p, __m256& m, __m256& v) {
  if (s.decays) p = Rounded(_mm256_mul_ps(p, _mm256_set1_ps(s.decay)));
  m = _mm256_fmadd_ps(g, _mm256_set1_ps(s.one_minus_beta1), _mm256_mul_ps(m, _mm256_set1_ps(s.beta1)));
  v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(s.one_minus_beta2), g), g, _mm256_mul_ps(v, _mm256_set1_ps(s.beta2)));
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), _mm256_set1_ps(s.sqrt_bias_correction2)), _mm256_set1_ps(s.eps));
  p = _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(s.neg_step_size), m), denom));
}

void UpdateRange(const UpdateScalars& s, const float* grad, float* param, float* exp_avg, float* exp_avg_sq, int64_t first, int64_t last) {
  int64_t i = first;
  for (; i + 8 <= last; i += 8) {
    __m256 p = _mm256_loadu_ps(param + i), m = _mm256_loadu_ps(exp_avg + i), v = _mm256_loadu_ps(exp_avg_sq + i);
    UpdateLanes(s, _mm256_loadu_ps(grad + i), p, m, v);
    _mm256_storeu_ps(param + i, p);
    _mm256_storeu_ps(exp_avg + i, m);
    _mm256_storeu_ps(exp_avg_sq + i, v);
  }
  if (i < last) {
    const __m256i mask = TailMask(last - i);
    __m256 p = _mm256_maskload_ps(param + i, mask), m = _mm256_maskload_ps(exp_avg + i, mask), v = _mm256_maskload_ps(exp_avg_sq + i, mask);
    UpdateLanes(s, _mm256_maskload_ps(grad + i, mask), p, m, v);
    _mm256_maskstore_ps(param + i, mask, p);
    _mm256_maskstore_ps(exp_avg + i, mask, m);
    _mm256_maskstore_ps(exp_avg_sq + i, mask, v);
  }
}

#pragma GCC pop_options

double SumOfSquares(const torch::Tensor& t) {
  const float* x = t.data_ptr<float>();
  const int64_t n = t.numel(), blocks = (n + kSumBlock - 1) / kSumBlock;
  if (blocks <= 1) return SumOfSquaresBlock(x, n);
  std::vector<double> partial(blocks);
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) partial[b] = SumOfSquaresBlock(x + b * kSumBlock, std::min(kSumBlock, n - b * kSumBlock));
  });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

bool DenseCpuFp32(const torch::Tensor& t) {
  return t.defined() && t.layout() == torch::kStrided && t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
}

// A parameter with a gradient, in AdamW::step()'s order (a parameter listed twice is stepped twice, as there), and
// its state, null before its first step.
struct Entry {
  const torch::Tensor* parameter;
  const AdamWOptions* options;
  AdamWParamState* state;
};

// The entry of a parameter with a gradient, or none when it is not for the fused loops.
std::optional<Entry> FusedEntry(AdamW& adamw, const AdamWOptions& options, const torch::Tensor& parameter) {
  const torch::Tensor& grad = parameter.grad();
  if (options.amsgrad() || !DenseCpuFp32(parameter) || !DenseCpuFp32(grad) || grad.sizes() != parameter.sizes()) return std::nullopt;
  auto& states = adamw.state();
  AdamWParamState* state = nullptr;
  const auto found = states.find(StateKey(states, parameter));
  if (found != states.end()) {
    state = static_cast<AdamWParamState*>(found->second.get());
    for (const auto& moment : {state->exp_avg(), state->exp_avg_sq()}) {
      if (!DenseCpuFp32(moment) || moment.sizes() != parameter.sizes()) return std::nullopt;
    }
  }
  return Entry{&parameter, &options, state};
}

// The step's parameters, or none when one of them is not for the fused loops.
std::optional<std::vector<Entry>> FusedEntries(AdamW& adamw) {
  if (!CpuHasAvx2Fma()) return std::nullopt;
  std::vector<Entry> entries;
  for (const auto& group : adamw.param_groups()) {
    const auto& options = static_cast<const AdamWOptions&>(group.options());
    for (const auto& parameter : group.params()) {
      if (!parameter.grad().defined()) continue;
      auto entry = FusedEntry(adamw, options, parameter);
      if (!entry) return std::nullopt;
      entries.push_back(*entry);
    }
  }
  return entries;
}

// AdamWParamState exactly as AdamW::step() creates it on a parameter's first step (or the one an earlier listing of
// the same parameter created).
AdamWParamState& StateOf(AdamW& adamw, const torch::Tensor& parameter) {
  auto& states = adamw.state();
  auto key = StateKey(states, parameter);
  auto found = states.find(key);
  if (found == states.end()) {
    auto created = std::make_unique<AdamWParamState>();
    created->step(0);
    created->exp_avg(torch::zeros_like(parameter, torch::MemoryFormat::Preserve));
    created->exp_avg_sq(torch::zeros_like(parameter, torch::MemoryFormat::Preserve));
    found = states.emplace(std::move(key), std::move(created)).first;
  }
  return static_cast<AdamWParamState&>(*found->second);
}

UpdateScalars ScalarsOf(const AdamWOptions& options, int64_t step) {
  const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
  const double bias_correction1 = 1 - std::pow(beta1, step), bias_correction2 = 1 - std::pow(beta2, step);
  return UpdateScalars{options.weight_decay() != 0,
                       static_cast<float>(1 - options.lr() * options.weight_decay()),
                       static_cast<float>(beta1),
                       static_cast<float>(1 - beta1),
                       static_cast<float>(beta2),
                       static_cast<float>(1 - beta2),
                       static_cast<float>(std::sqrt(bias_correction2)),
                       static_cast<float>(options.eps()),
                       static_cast<float>(-(options.lr() / bias_correction1))};
}

// clip_grad_norm_'s norm of one gradient: its 2-norm in fp32.
float GradientNorm(const Entry& entry) { return static_cast<float>(std::sqrt(SumOfSquares(entry.parameter->grad()))); }

void UpdateEntry(AdamW& adamw, const Entry& entry) {
  const torch::Tensor& parameter = *entry.parameter;
  AdamWParamState& state = entry.state ? *entry.state : StateOf(adamw, parameter);
  state.step(state.step() + 1);
  const UpdateScalars scalars = ScalarsOf(*entry.options, state.step());
  const float* grad = parameter.grad().data_ptr<float>();
  float *param = parameter.data_ptr<float>(), *exp_avg = state.exp_avg().data_ptr<float>(), *exp_avg_sq = state.exp_avg_sq().data_ptr<float>();
  at::parallel_for(0, parameter.numel(), kMinElementsPerThread, [&](int64_t first, int64_t last) {
    UpdateRange(scalars, grad, param, exp_avg, exp_avg_sq, first, last);
  });
  // As the in-place ops would: autograd refuses a backward through a graph that saved the old values.
  for (const torch::Tensor& t : {std::cref(parameter), std::cref(state.exp_avg()), std::cref(state.exp_avg_sq())}) {
    t.unsafeGetTensorImpl()->bump_version();
  }
}

}  // namespace

std::optional<double> FusedAdamWStep(AdamW& adamw, double max_norm) {
  auto entries = FusedEntries(adamw);
  if (!entries) return std::nullopt;
  if (entries->empty()) return 0.0;
  // clip_grad_norm_: each gradient's norm in fp32, the total the fp32 norm of those.
  double squares = 0;
  for (const Entry& entry : *entries) {
    const double norm = GradientNorm(entry);
    squares += norm * norm;
  }
  const float total = static_cast<float>(std::sqrt(squares));
  if (max_norm > 0) {
    // max_norm / (total + 1e-6) in fp32, clamped to at most 1: a coefficient of 1 leaves the gradients as they are,
    // a NaN one (a NaN gradient) spreads as libtorch's clamp and multiply spread it.
    const float coefficient = static_cast<float>(max_norm) / (total + static_cast<float>(1e-6));
    if (!(coefficient >= 1.0f)) {
      for (const Entry& entry : *entries) {
        const torch::Tensor& grad = entry.parameter->grad();
        float* data = grad.data_ptr<float>();
        at::parallel_for(0, grad.numel(), kMinElementsPerThread,
                         [&](int64_t first, int64_t last) { ScaleRange(data, first, last, coefficient); });
        grad.unsafeGetTensorImpl()->bump_version();
      }
    }
  }
  for (const Entry& entry : *entries) UpdateEntry(adamw, entry);
  return total;
}

namespace {

std::optional<float> FusedStepParameter(AdamW& adamw, const AdamWOptions& options, const torch::Tensor& parameter) {
  if (!CpuHasAvx2Fma()) return std::nullopt;
  const auto entry = FusedEntry(adamw, options, parameter);
  if (!entry) return std::nullopt;
  const float norm = GradientNorm(*entry);
  UpdateEntry(adamw, *entry);
  return norm;
}

}  // namespace

#else

std::optional<double> FusedAdamWStep(torch::optim::AdamW&, double) { return std::nullopt; }

namespace {

std::optional<float> FusedStepParameter(torch::optim::AdamW&, const torch::optim::AdamWOptions&, const torch::Tensor&) { return std::nullopt; }

}  // namespace

#endif

ParameterStep StepParameter(torch::optim::AdamW& adamw, const torch::optim::AdamWOptions& options, const torch::Tensor& parameter,
                            bool float32_moments, MasterWeight* master) {
  const bool widened = float32_moments && parameter.scalar_type() != torch::kFloat32;
  if (!widened) {
    if (const auto norm = FusedStepParameter(adamw, options, parameter)) return {torch::tensor(*norm), true};
  }
  torch::NoGradGuard no_grad;
  ParameterStep step{parameter.grad().norm(2).to(torch::kFloat32), false};
  StepWithTensorOps(adamw, options, parameter, widened, widened ? master : nullptr);
  return step;
}

double TotalNorm(const std::vector<ParameterStep>& steps) {
  if (steps.empty()) return 0.0;
  const bool fused = std::all_of(steps.begin(), steps.end(), [](const ParameterStep& step) { return step.fused; });
  if (!fused) {
    std::vector<torch::Tensor> norms;
    for (const ParameterStep& step : steps) norms.push_back(step.norm);
    return torch::stack(norms).norm(2).item<double>();
  }
  double squares = 0;
  for (const ParameterStep& step : steps) {
    const double norm = step.norm.item<float>();
    squares += norm * norm;
  }
  return static_cast<float>(std::sqrt(squares));
}

}  // namespace comlrl
