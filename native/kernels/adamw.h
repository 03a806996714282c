#pragma once

#include <torch/torch.h>

#include <optional>
#include <vector>

namespace comlrl {

// torch::nn::utils::clip_grad_norm_ (when max_norm > 0) followed by torch::optim::AdamW::step(), as fused loops over
// CPU fp32 parameters. Why: written with tensor ops a step is a norm per parameter, a stack, a multiply per parameter
// and ~8 ops plus a state lookup per parameter; a 107k-parameter model in 26 tensors spent ~1 ms per step in libtorch's
// per-op overhead, where the arithmetic takes a few tens of microseconds.
//
// The optimizer's state stays in torch's own AdamWParamState objects (created as AdamW::step() creates them), so
// save/load, reset and a step taken later through libtorch's path see exactly what libtorch's step would have left.

// Takes the step and returns the total gradient norm over every parameter with a gradient, before clipping, as
// clip_grad_norm_ defines it (each gradient's 2-norm in fp32, then the 2-norm of those); max_norm <= 0: no clipping.
// The sums are taken in double, so each norm is the exact one rounded to fp32, where libtorch's fp32 sums drift with a
// tensor's size (8e-6 relative measured on a 131k-element embedding; below 1e-7 on the demo's tensors).
// Returns nullopt, having changed nothing, unless every parameter with a gradient is a contiguous CPU fp32 tensor with
// a dense contiguous fp32 gradient and fp32 moments (if any yet) of its size, amsgrad is off, and the CPU has AVX2
// and FMA (libtorch's own kernels use FMA there, so the two round alike): the caller then takes libtorch's path.
std::optional<double> FusedAdamWStep(torch::optim::AdamW& adamw, double max_norm);

// Whether a parameter with a gradient is not float32 (bf16 or fp16).
bool HoldsLowPrecisionParameters(const torch::optim::AdamW& adamw);

// The float32 master copy of a low-precision parameter (mixed precision): AdamW steps it, and the parameter is its
// rounding. Why: AdamW's update is about lr per step, and at lr 5e-6 that is under half a bf16 ulp of any weight above
// ~1.3e-3, so a bf16 parameter updated in place never moves; the master accumulates those updates until they show.
struct MasterWeight {
  torch::Tensor value;
  // The parameter's version counter after the last copy back: a different one means something else wrote the
  // parameter (weights loaded, broadcast across ranks), and the master is taken again from it.
  int64_t version = -1;
};

// The masters of an optimizer's parameters in group order (undefined values until a parameter's first step); empty:
// no master weights.
using MasterWeights = std::vector<MasterWeight>;

// AdamW::step() with float32 moments for every parameter: the moments (created, or widened from a file saved
// without them) and the update are float32, and a bf16 parameter is rounded once, after its update. Why: in bf16,
// exp_avg_sq.mul_(0.999) cannot move a value (0.1% is under half an ulp), so pure-bf16 AdamW's second moment stalls
// and small updates round away. libtorch's own step cannot take it: its in-place CPU kernels refuse float32
// operands on a bf16 parameter. With masters (non-empty, one per parameter in group order) a low-precision
// parameter's update is taken on its float32 master and copied back. Clipping is the caller's, before.
void StepWithFloat32Moments(torch::optim::AdamW& adamw, MasterWeights& masters);

// The fraction of the low-precision elements of the optimizer's parameters that a step of lr (their group's)
// cannot move: w ± lr rounds back to w. AdamW's update is about lr, so this is the share of weights pure
// low-precision AdamW leaves unchanged. 0 when every such parameter is float32.
double StalledFraction(const torch::optim::AdamW& adamw);

// One parameter's part of a step: its gradient's 2-norm (a 0-dim fp32 tensor on its device) and whether the fused
// loops took it.
struct ParameterStep {
  torch::Tensor norm;
  bool fused;
};

// AdamW::step() for one parameter with a gradient, no clipping: the fused loops where FusedAdamWStep would take it,
// else libtorch's tensor ops (float32 moments for a bf16 or fp16 parameter when float32_moments, as
// StepWithFloat32Moments; its update taken on master when given, as there). The same update as the whole-optimizer step gives that parameter, so a step may be taken a
// parameter at a time as gradients complete (NativeOptimizer's step in backward).
ParameterStep StepParameter(torch::optim::AdamW& adamw, const torch::optim::AdamWOptions& options, const torch::Tensor& parameter,
                            bool float32_moments, MasterWeight* master);

// The total norm of a step's parameters, given in group order, as that step would have reported it: FusedAdamWStep's
// total when the fused loops took every one, else clip_grad_norm_'s (the fp32 2-norm of the stacked norms); 0 for none.
double TotalNorm(const std::vector<ParameterStep>& steps);

}  // namespace comlrl
