#include "decoder.h"

#include <cmath>
#include <algorithm>
#include <map>

#include "../kernels/attention.h"
#include "../kernels/cpu_features.h"
#include "../kernels/rms_norm.h"
#include "../kernels/rope.h"
#include "../kernels/small_batch_linear.h"

namespace comlrl {

KVCache::KVCache(const DecoderConfig& config, int64_t batch, int64_t capacity, const torch::TensorOptions& options) {
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const int64_t window = config.layer_window[i];
    keep.push_back(window > 0 && window - 1 < capacity ? window - 1 : 0);
    if (keep.back() > 0) {
      keys.emplace_back();
      values.emplace_back();
      continue;
    }
    keys.push_back(torch::empty({batch, config.num_kv_heads, capacity, config.head_dim}, options));
    values.push_back(torch::empty({batch, config.num_kv_heads, capacity, config.head_dim}, options));
  }
}

KVCache KVCache::Growable(int64_t num_layers) {
  KVCache cache;
  cache.keys.resize(num_layers);
  cache.values.resize(num_layers);
  cache.keep.assign(num_layers, 0);
  cache.preallocated = false;
  return cache;
}

std::pair<torch::Tensor, torch::Tensor> KVCache::Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t added = k.size(2);
  if (keep[layer] > 0) {
    // This step's queries see the retained keys and their own; later ones only the last keep of them.
    const torch::Tensor all_k = keys[layer].defined() ? torch::cat({keys[layer], k}, 2) : k;
    const torch::Tensor all_v = values[layer].defined() ? torch::cat({values[layer], v}, 2) : v;
    const int64_t kept = std::min(keep[layer], all_k.size(2));
    keys[layer] = all_k.narrow(2, all_k.size(2) - kept, kept).clone();
    values[layer] = all_v.narrow(2, all_v.size(2) - kept, kept).clone();
    return {all_k, all_v};
  }
  if (preallocated) {
    keys[layer].narrow(2, length, added).copy_(k);
    values[layer].narrow(2, length, added).copy_(v);
    return {keys[layer].narrow(2, 0, length + added), values[layer].narrow(2, 0, length + added)};
  }
  keys[layer] = keys[layer].defined() ? torch::cat({keys[layer], k}, 2) : k;
  values[layer] = values[layer].defined() ? torch::cat({values[layer], v}, 2) : v;
  return {keys[layer], values[layer]};
}

void KVCache::SelectRows(const torch::Tensor& index) {
  for (auto* list : {&keys, &values}) {
    for (auto& tensor : *list) {
      if (tensor.defined()) tensor = tensor.index_select(0, index);
    }
  }
}

void KVCache::RepeatRows(int64_t times) {
  if (times == 1) return;
  for (auto* list : {&keys, &values}) {
    for (auto& tensor : *list) {
      if (tensor.defined()) tensor = tensor.repeat_interleave(times, 0);
    }
  }
}

namespace {

thread_local torch::TensorOptions parameter_options = torch::TensorOptions().dtype(torch::kFloat32);

torch::Tensor NewParameter(torch::IntArrayRef shape) { return torch::empty(shape, parameter_options); }

}  // namespace

ParameterPlacement::ParameterPlacement(const torch::TensorOptions& options) : previous_(parameter_options) { parameter_options = options; }

ParameterPlacement::~ParameterPlacement() { parameter_options = previous_; }

NormImpl::NormImpl(int64_t dim, double eps, NormKind kind) : eps_(eps), kind_(kind) {
  weight = register_parameter("weight", NewParameter({dim}));
  if (kind == NormKind::kLayer) bias = register_parameter("bias", NewParameter({dim}));
}

// As transformers: RMSNorm normalises in float32; Llama casts back then scales, Gemma scales by (1 + w) in float32
// then casts. LayerNorm runs in the input's dtype, as torch.nn.LayerNorm.
torch::Tensor NormImpl::forward(const torch::Tensor& x) {
  if (kind_ == NormKind::kLayer) return torch::layer_norm(x, {weight.size(0)}, weight, bias, eps_);
  if (kind_ == NormKind::kRms && FusedRmsNormApplies(x, weight)) return FusedRmsNorm(x, weight, eps_);
  const torch::Tensor h = x.to(torch::kFloat32);
  const torch::Tensor normed = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  if (kind_ == NormKind::kRmsOnePlus) return (normed * (1.0 + weight.to(torch::kFloat32))).to(x.scalar_type());
  return weight * normed.to(x.scalar_type());
}

// A bf16 matmul on a CPU without bf16 instructions runs in fp32 on widened copies, rounded once to bf16: what a bf16
// GEMM accumulating in fp32 computes, ~35× sooner. Autograd carries the casts, so gradients reach the bf16 weights.
bool WidenForMatmul(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 && t.device().is_cpu() && !CpuHasNativeBf16();
}

torch::Tensor SoftCap(const torch::Tensor& x, double cap) { return cap > 0 ? torch::tanh(x / cap) * cap : x; }

namespace {

torch::Tensor Widened(const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; }

torch::Tensor Matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (WidenForMatmul(a)) return torch::matmul(Widened(a), Widened(b)).to(a.scalar_type());
  return torch::matmul(a, b);
}

// x @ weightᵀ (+ bias). A few rows without autograd (decoding) go through the small-batch kernel, which reads each
// weight once; everything else through torch's linear (BLAS GEMM).
torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (SmallBatchLinearApplies(x, weight)) return SmallBatchLinear(x, weight, bias);
  if (WidenForMatmul(weight)) {
    return torch::nn::functional::linear(Widened(x), Widened(weight), Widened(bias)).to(x.scalar_type());
  }
  return torch::nn::functional::linear(x, weight, bias);
}

// The token embedding's lookup, whose backward adds its rows into the table's gradient in place when one is already
// there (a tied table's, which the blocked LM head writes first: head_logprobs.cc), rather than handing autograd a
// second dense [vocab × hidden] gradient to add to it (0.54 GiB at Qwen's vocabulary). The rows are summed per token
// id as embedding's own backward sums them, then added once each, so .grad holds the same bits; autograd's gradient
// accumulator then runs with no gradient of its own, as it does for a leaf, and its hooks see the complete .grad.
struct EmbeddingIntoGrad : public torch::autograd::Function<EmbeddingIntoGrad> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor weight, torch::Tensor ids) {
    ctx->save_for_backward({weight, ids});
    return torch::embedding(weight, ids);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& weight = saved[0];
    const torch::Tensor ids = saved[1].reshape({-1});
    const torch::Tensor grad = grads[0].reshape({ids.size(0), weight.size(1)});
    torch::Tensor& weight_grad = weight.mutable_grad();
    if (!weight_grad.defined() || weight_grad.scalar_type() != grad.scalar_type() || !weight_grad.is_contiguous()) {
      return {torch::embedding_backward(grads[0], saved[1], weight.size(0), -1, false, false), torch::Tensor()};
    }
    torch::NoGradGuard no_grad;
    const auto [tokens, row_of_id] = at::_unique(ids, /*sorted=*/true, /*return_inverse=*/true);
    weight_grad.index_add_(0, tokens, at::embedding_dense_backward(grad, row_of_id, tokens.size(0), -1, false));
    return {torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (FusedRopeApplies(x, cos)) return FusedRope(x, cos, sin);
  return x * cos + RotateHalf(x) * sin;
}

// cos, sin: [batch, 1, queries, rotary_dim], broadcast over heads. With partial rotary (rotary_dim < head_dim) only
// the first rotary_dim features turn, as transformers does; no tables (a NoPE layer) leaves x as it is.
torch::Tensor ApplyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (!cos.defined()) return x;
  const int64_t rotary = cos.size(-1), dim = x.size(-1);
  if (rotary == dim) return Rotate(x, cos, sin);
  return torch::cat({Rotate(x.narrow(-1, 0, rotary), cos, sin), x.narrow(-1, rotary, dim - rotary)}, -1);
}

// The generator of the training-mode forward running on this thread, or null where nothing drops (see DropoutScope).
thread_local at::Generator* active_dropout = nullptr;

// Installs a forward's dropout generator (null: no dropout) on this thread for its lifetime. Thread-local, since a
// checkpointed layer's recompute runs wherever autograd runs its backward, and each installs its own.
class DropoutScope {
 public:
  explicit DropoutScope(at::Generator* generator) : previous_(active_dropout) { active_dropout = generator; }
  ~DropoutScope() { active_dropout = previous_; }
  DropoutScope(const DropoutScope&) = delete;
  DropoutScope& operator=(const DropoutScope&) = delete;

 private:
  at::Generator* previous_;
};

// torch's dropout in training mode: each element kept with probability 1 − rate and scaled by 1 / (1 − rate).
torch::Tensor Dropout(const torch::Tensor& x, double rate) {
  if (rate <= 0 || active_dropout == nullptr) return x;
  return x * torch::empty_like(x).bernoulli_(1 - rate, *active_dropout).div_(1 - rate);
}

double ActiveRate(double rate) { return active_dropout ? rate : 0; }

// Reentrant gradient checkpointing for one decoder layer: the forward keeps only the layer's input; the backward
// recomputes the layer with grad enabled and backpropagates through it (accumulating its parameters' gradients).
// With route set, a sparse layer also outputs its router logits, so that the auxiliary loss backpropagates too.
// The rotary tables and the mask (constants, and undefined for a layer without rotary or on the causal-flag path,
// which autograd's inputs cannot be) travel as LayerConstants and are kept in the context's saved data.
struct LayerConstants {
  torch::Tensor cos, sin, mask;
};

struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t constants_address,
                                                int64_t layer_address, bool route) {
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(layer_address);
    const auto& constants = *reinterpret_cast<const LayerConstants*>(constants_address);
    const torch::Tensor &cos = constants.cos, &sin = constants.sin, &mask = constants.mask;
    ctx->save_for_backward({x});
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["mask"] = mask;
    ctx->saved_data["layer"] = layer_address;
    ctx->saved_data["route"] = route;
    // The recompute must drop what this forward drops: as torch.utils.checkpoint keeps the RNG state, the dropout
    // generator's state before the layer is kept, and the backward replays the layer from it.
    if (active_dropout) {
      std::lock_guard<std::mutex> lock(active_dropout->mutex());
      ctx->saved_data["dropout_generator"] = reinterpret_cast<int64_t>(active_dropout);
      ctx->saved_data["dropout_state"] = active_dropout->get_state();
    }
    torch::NoGradGuard no_grad;
    torch::Tensor router_logits;
    torch::Tensor out = layer->forward(x, cos, sin, mask, nullptr, 0, route ? &router_logits : nullptr);
    if (router_logits.defined()) return {out, router_logits};
    return {out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    torch::Tensor x = saved[0].detach().requires_grad_(true);
    at::Generator* generator = nullptr;
    torch::Tensor resume_state;
    if (ctx->saved_data.count("dropout_generator")) {
      generator = reinterpret_cast<at::Generator*>(ctx->saved_data["dropout_generator"].toInt());
      std::lock_guard<std::mutex> lock(generator->mutex());
      resume_state = generator->get_state();
      generator->set_state(ctx->saved_data["dropout_state"].toTensor());
    }
    {
      DropoutScope dropout(generator);
      torch::AutoGradMode enable(true);
      torch::Tensor router_logits;
      torch::Tensor out = layer->forward(x, ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor(), ctx->saved_data["mask"].toTensor(), nullptr, 0,
                                         ctx->saved_data["route"].toBool() ? &router_logits : nullptr);
      if (router_logits.defined()) {
        torch::autograd::backward({out, router_logits}, {grads[0], grads[1]});
      } else {
        torch::autograd::backward({out}, {grads[0]});
      }
    }
    if (generator) {
      std::lock_guard<std::mutex> lock(generator->mutex());
      generator->set_state(resume_state);
    }
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

DenseImpl::DenseImpl(int64_t in, int64_t out, bool with_bias, bool conv1d) : conv1d_(conv1d) {
  weight = register_parameter("weight", conv1d ? NewParameter({in, out}) : NewParameter({out, in}));
  if (with_bias) bias = register_parameter("bias", NewParameter({out}));
}

torch::Tensor DenseImpl::forward(const torch::Tensor& x) { return Project(x, conv1d_ ? weight.t() : weight, bias); }

AttentionImpl::AttentionImpl(const DecoderConfig& config)
    : num_heads_(config.num_heads),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      qk_norm_(config.qk_norm),
      scale_(config.attention_scale),
      softcap_(config.attn_softcap),
      dropout_(config.attention_dropout),
      kernel_(config.attention) {
  const int64_t q_width = config.num_heads * config.head_dim, kv_width = config.num_kv_heads * config.head_dim;
  const bool gpt2 = config.gpt2_layout;
  if (config.fused_projections) {
    qkv_proj = register_module(gpt2 ? "c_attn" : "qkv_proj", Dense(config.hidden_size, q_width + 2 * kv_width, config.qkv_bias, gpt2));
  } else {
    q_proj = register_module("q_proj", Dense(config.hidden_size, q_width, config.qkv_bias));
    k_proj = register_module("k_proj", Dense(config.hidden_size, kv_width, config.qkv_bias));
    v_proj = register_module("v_proj", Dense(config.hidden_size, kv_width, config.qkv_bias));
  }
  o_proj = register_module(gpt2 ? "c_proj" : "o_proj", Dense(q_width, config.hidden_size, config.o_bias, gpt2));
  if (config.qk_norm != QkNorm::kNone) {
    const bool per_head = config.qk_norm == QkNorm::kHead;
    q_norm = register_module("q_norm", Norm(per_head ? config.head_dim : q_width, config.rms_norm_eps, config.norm));
    k_norm = register_module("k_norm", Norm(per_head ? config.head_dim : kv_width, config.rms_norm_eps, config.norm));
  }
}

bool UsesSdpa(AttentionKernel kernel, double softcap, const torch::Device& device) {
  if (!SdpaAvailable() || softcap != 0) return false;
  return kernel == AttentionKernel::kSdpa || (kernel == AttentionKernel::kAuto && device.is_cuda());
}

bool DecodesGrouped(int64_t queries, int64_t group) { return queries == 1 && group > 1; }

AttentionKernels AttentionKernelsFor(const DecoderConfig& config, const torch::TensorOptions& options) {
  if (!UsesSdpa(config.attention, config.attn_softcap, options.device())) return {"eager", "eager", "eager"};
  // Shapes of this config at a modest length; libtorch chooses from shapes, dtype and device, not values.
  constexpr int64_t kLength = 64;
  auto heads = [&](int64_t count, int64_t length) { return torch::empty({1, count, length, config.head_dim}, options); };
  const torch::Tensor q = heads(config.num_heads, kLength), k = heads(config.num_kv_heads, kLength), v = heads(config.num_kv_heads, kLength);
  const auto mask_options = options.dtype(torch::kBool);
  const double scale = config.attention_scale;
  const std::string decode = DecodesGrouped(1, config.num_heads / config.num_kv_heads)
                                 ? "grouped"
                                 : SdpaKernel(heads(config.num_heads, 1), k, v, torch::ones({1, 1, 1, kLength}, mask_options), scale);
  return {SdpaKernel(q, k, v, torch::Tensor(), scale), SdpaKernel(q, k, v, torch::ones({1, 1, kLength, kLength}, mask_options), scale),
          decode};
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                     const torch::Tensor& mask, KVCache* cache, int64_t layer) {
  const int64_t batch = x.size(0), queries = x.size(1);
  torch::Tensor q, k, v;
  if (qkv_proj) {
    const torch::Tensor qkv = qkv_proj(x);
    const int64_t q_width = num_heads_ * head_dim_, kv_width = num_kv_heads_ * head_dim_;
    q = qkv.narrow(-1, 0, q_width);
    k = qkv.narrow(-1, q_width, kv_width);
    v = qkv.narrow(-1, q_width + kv_width, kv_width);
  } else {
    q = q_proj(x);
    k = k_proj(x);
    v = v_proj(x);
  }
  if (qk_norm_ == QkNorm::kFull) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.reshape({batch, queries, num_heads_, head_dim_});
  k = k.reshape({batch, queries, num_kv_heads_, head_dim_});
  v = v.reshape({batch, queries, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (qk_norm_ == QkNorm::kHead) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = ApplyRope(q.transpose(1, 2), cos, sin);
  k = ApplyRope(k.transpose(1, 2), cos, sin);
  if (cache) std::tie(k, v) = cache->Append(layer, k, v);
  // Grouped-query attention without copying keys/values: query heads that share a kv head are stacked along the
  // query axis, [batch, kv_heads, group * queries, head_dim].
  const int64_t group = num_heads_ / num_kv_heads_;
  const int64_t keys = k.size(2);
  torch::Tensor out;
  const double dropout = ActiveRate(dropout_);
  if (!mask.defined()) {
    out = Sdpa(q, k, v, torch::Tensor(), scale_, dropout, active_dropout);
    return o_proj(out.transpose(1, 2).reshape({batch, queries, num_heads_ * head_dim_}));
  }
  // A windowed cache returns only the most recent keys: the mask's last `keys` columns.
  const torch::Tensor key_mask = keys < mask.size(-1) ? mask.narrow(-1, mask.size(-1) - keys, keys) : mask;
  torch::Tensor grouped_q = q.reshape({batch, num_kv_heads_, group * queries, head_dim_});
  if (UsesSdpa(kernel_, softcap_, q.device()) && !DecodesGrouped(queries, group)) {
    out = Sdpa(q, k, v, key_mask.view({key_mask.size(0), 1, queries, keys}), scale_, dropout, active_dropout);
  } else if (dropout == 0 && FusedAttentionApplies(grouped_q, k, v, softcap_)) {
    out = FusedAttention(grouped_q, k, v, key_mask, group, scale_);
  } else {
    torch::Tensor scores = SoftCap(Matmul(grouped_q, k.transpose(-1, -2)) * scale_, softcap_);
    scores = scores.view({batch, num_kv_heads_, group, queries, keys}).to(torch::kFloat32);
    scores = scores.masked_fill(key_mask.logical_not(), std::numeric_limits<float>::lowest());
    const torch::Tensor probs = Dropout(torch::softmax(scores, -1).to(v.scalar_type()), dropout);
    out = Matmul(probs.view({batch, num_kv_heads_, group * queries, keys}), v);
  }
  out = out.view({batch, num_heads_, queries, head_dim_});
  return o_proj(out.transpose(1, 2).reshape({batch, queries, num_heads_ * head_dim_}));
}

MLPImpl::MLPImpl(const DecoderConfig& config, int64_t inner, const std::array<const char*, 3>& names)
    : activation_(config.activation) {
  const int64_t hidden = config.hidden_size;
  const bool conv1d = config.gpt2_layout;
  if (!config.gated_mlp) {
    up_proj = register_module(names[1], Dense(hidden, inner, config.mlp_bias, conv1d));
  } else if (config.fused_projections) {
    gate_up_proj = register_module("gate_up_proj", Dense(hidden, 2 * inner, config.mlp_bias));
  } else {
    gate_proj = register_module(names[0], Dense(hidden, inner, config.mlp_bias));
    up_proj = register_module(names[1], Dense(hidden, inner, config.mlp_bias));
  }
  down_proj = register_module(names[2], Dense(inner, hidden, config.mlp_bias, conv1d));
}

constexpr std::array<const char*, 3> kMlpNames = {"gate_proj", "up_proj", "down_proj"};
constexpr std::array<const char*, 3> kMixtralExpertNames = {"w1", "w3", "w2"};
constexpr std::array<const char*, 3> kGpt2MlpNames = {"", "c_fc", "c_proj"};

SparseMoeImpl::SparseMoeImpl(const DecoderConfig& config) : top_k_(config.experts_per_token), norm_topk_prob_(config.norm_topk_prob) {
  gate = register_module("gate", Dense(config.hidden_size, config.num_experts, false));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < config.num_experts; ++e) {
    experts->push_back(MLP(config, config.moe_intermediate_size, config.mixtral_names ? kMixtralExpertNames : kMlpNames));
  }
}

torch::Tensor SparseMoeImpl::forward(const torch::Tensor& x, torch::Tensor* router_logits) {
  const torch::Tensor flat = x.reshape({-1, x.size(-1)});
  const torch::Tensor logits = gate(flat);
  if (router_logits) *router_logits = logits;
  const torch::Tensor probs = torch::softmax(logits.to(torch::kFloat32), -1);
  auto [weights, chosen] = probs.topk(top_k_, -1);
  if (norm_topk_prob_) weights = weights / weights.sum(-1, /*keepdim=*/true);
  weights = weights.to(x.scalar_type());
  // The (token, slot) pairs sorted by expert, stably, so that each expert's tokens keep their order (a token picks an
  // expert at most once), and where each expert's run starts: the only read from the device in this layer.
  const int64_t num_experts = static_cast<int64_t>(experts->size());
  const auto [expert_of_pair, pair_order] = chosen.reshape({-1}).sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  const torch::Tensor run_starts =
      torch::searchsorted(expert_of_pair, torch::arange(num_experts + 1, expert_of_pair.options())).cpu();
  const int64_t* start = run_starts.data_ptr<int64_t>();
  const torch::Tensor token_of_pair = pair_order.div(top_k_, "floor");
  const torch::Tensor weight_of_pair = weights.reshape({-1}).index_select(0, pair_order);
  torch::Tensor out = torch::zeros_like(flat);
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t hits = start[e + 1] - start[e];
    if (hits == 0) continue;
    const torch::Tensor tokens = token_of_pair.narrow(0, start[e], hits);
    const torch::Tensor weight = weight_of_pair.narrow(0, start[e], hits).unsqueeze(-1);
    const torch::Tensor y = experts->ptr<MLPImpl>(e)->forward(flat.index_select(0, tokens)) * weight;
    out.index_add_(0, tokens, y);
  }
  return out.view(x.sizes());
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  auto activate = [&](const torch::Tensor& t) {
    switch (activation_) {
      case Activation::kSilu: return torch::silu(t);
      case Activation::kGeluTanh: return torch::gelu(t, "tanh");
      case Activation::kGeluErf: return torch::gelu(t);
    }
    TORCH_CHECK(false, "unknown activation");
  };
  if (!gate_proj && !gate_up_proj) return down_proj(activate(up_proj(x)));
  torch::Tensor gate, up;
  if (gate_up_proj) {
    const torch::Tensor both = gate_up_proj(x);
    const int64_t inner = both.size(-1) / 2;
    gate = both.narrow(-1, 0, inner);
    up = both.narrow(-1, inner, inner);
  } else {
    gate = gate_proj(x);
    up = up_proj(x);
  }
  return down_proj(activate(gate) * up);
}

DecoderLayerImpl::DecoderLayerImpl(const DecoderConfig& config, int64_t index)
    : placement_(config.norm_placement), residual_dropout_(config.residual_dropout) {
  TORCH_CHECK(residual_dropout_ == 0 || placement_ == NormPlacement::kPre, "residual dropout is placed for pre-norm layers only");
  const bool gpt2 = config.gpt2_layout;
  self_attn = register_module(gpt2 ? "attn" : "self_attn", Attention(config));
  if (config.layer_sparse[index]) {
    moe = register_module(config.mixtral_names ? "block_sparse_moe" : "mlp", SparseMoe(config));
  } else {
    mlp = register_module("mlp", MLP(config, config.intermediate_size, gpt2 ? kGpt2MlpNames : kMlpNames));
  }
  auto norm = [&](const char* name) { return register_module(name, Norm(config.hidden_size, config.rms_norm_eps, config.norm)); };
  if (placement_ != NormPlacement::kPost) input_layernorm = norm(gpt2 ? "ln_1" : "input_layernorm");
  post_attention_layernorm = norm(gpt2 ? "ln_2" : "post_attention_layernorm");
  if (placement_ == NormPlacement::kSandwich) pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
  if (placement_ != NormPlacement::kPre) post_feedforward_layernorm = norm("post_feedforward_layernorm");
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                        const torch::Tensor& mask, KVCache* cache, int64_t layer, torch::Tensor* router_logits) {
  auto feed_forward = [&](const torch::Tensor& h) { return moe ? moe(h, router_logits) : mlp(h); };
  switch (placement_) {
    case NormPlacement::kPre: {
      const torch::Tensor h = x + Dropout(self_attn(input_layernorm(x), cos, sin, mask, cache, layer), residual_dropout_);
      return h + Dropout(feed_forward(post_attention_layernorm(h)), residual_dropout_);
    }
    case NormPlacement::kSandwich: {
      const torch::Tensor h = x + post_attention_layernorm(self_attn(input_layernorm(x), cos, sin, mask, cache, layer));
      return h + post_feedforward_layernorm(feed_forward(pre_feedforward_layernorm(h)));
    }
    case NormPlacement::kPost: {
      const torch::Tensor h = x + post_attention_layernorm(self_attn(x, cos, sin, mask, cache, layer));
      return h + post_feedforward_layernorm(feed_forward(h));
    }
  }
  TORCH_CHECK(false, "unknown norm placement");
}

DecoderModelImpl::DecoderModelImpl(const DecoderConfig& config) {
  const bool gpt2 = config.gpt2_layout;
  // A given _weight also skips Embedding's own normal_ initialisation.
  const auto embedding = [](int64_t rows, int64_t width) {
    return torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, width)._weight(NewParameter({rows, width})));
  };
  embed_tokens = register_module(gpt2 ? "wte" : "embed_tokens", embedding(config.vocab_size, config.hidden_size));
  if (config.learned_positions > 0) position_embeddings = register_module("wpe", embedding(config.learned_positions, config.hidden_size));
  layers = register_module(gpt2 ? "h" : "layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderLayer(config, i));
  norm = register_module(gpt2 ? "ln_f" : "norm", Norm(config.hidden_size, config.rms_norm_eps, config.norm));
}

CausalLMImpl::CausalLMImpl(const DecoderConfig& config) : config_(config) {
  TORCH_CHECK(config.num_heads % config.num_kv_heads == 0, "num_attention_heads (", config.num_heads,
              ") must be a multiple of num_key_value_heads (", config.num_kv_heads, ")");
  TORCH_CHECK(static_cast<int64_t>(config.layer_rope.size()) == config.num_layers &&
                  static_cast<int64_t>(config.layer_window.size()) == config.num_layers,
              "layerRope and layerWindow must hold one entry per layer (", config.num_layers, ")");
  const int64_t tables = config.rope_inv_freq.size(0);
  TORCH_CHECK(static_cast<int64_t>(config.rope_attention_scaling.size()) == tables, "ropeAttentionScaling must hold one entry per rotary table");
  TORCH_CHECK(2 * config.rope_inv_freq.size(1) <= config.head_dim, "rotary tables turn ", 2 * config.rope_inv_freq.size(1),
              " features, more than head_dim ", config.head_dim);
  TORCH_CHECK(static_cast<int64_t>(config.layer_sparse.size()) == config.num_layers, "layerSparse must hold one entry per layer");
  TORCH_CHECK(config.learned_positions == 0 || config.position_limit == config.learned_positions,
              "learnedPositions needs positionLimit at the table's end (", config.learned_positions, ")");
  TORCH_CHECK(config.num_experts > 0 || std::count(config.layer_sparse.begin(), config.layer_sparse.end(), 1) == 0,
              "layerSparse marks sparse layers but numExperts is 0");
  TORCH_CHECK(config.experts_per_token <= config.num_experts, "numExpertsPerTok (", config.experts_per_token,
              ") exceeds numExperts (", config.num_experts, ")");
  for (int64_t table : config.layer_rope) TORCH_CHECK(table >= -1 && table < tables, "layerRope names rotary table ", table, " of ", tables);
  model = register_module(config.gpt2_layout ? "transformer" : "model", DecoderModel(config));
  if (!config.tie_word_embeddings) lm_head = register_module("lm_head", Dense(config.hidden_size, config.vocab_size, false));
}

torch::Tensor CausalLMImpl::forward(const ForwardInputs& inputs, KVCache* cache, std::vector<torch::Tensor>* hidden_states) {
  const int64_t queries = inputs.input_ids.size(1);
  const int64_t keys = inputs.attention_mask.size(1);
  const int64_t past = cache ? cache->length : 0;
  TORCH_CHECK(keys == past + queries, "attention mask covers ", keys, " positions, expected ", past + queries);
  torch::Tensor h = EmbeddingIntoGrad::apply(model->embed_tokens->weight, inputs.input_ids);
  // Gemma rounds √hidden to the activation dtype before scaling.
  if (config_.embed_scale) h = h * torch::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)), h.options());
  TORCH_CHECK(inputs.max_position >= 0, "forward: the largest position id was not given");
  // Checked before the lookup: an index past GPT-2's table is a device-side assert on CUDA, not a readable error.
  TORCH_CHECK(config_.position_limit == 0 || inputs.max_position < config_.position_limit, "position ", inputs.max_position,
              " is past the model's limit of ", config_.position_limit, " positions: ", config_.position_limit_reason);
  if (model->position_embeddings) h = h + model->position_embeddings(inputs.position_ids);
  const bool dropping = drops();
  TORCH_CHECK(!dropping || dropout_generator_.defined(), "training-mode dropout needs the model's dropout generator");
  DropoutScope dropout(dropping ? &dropout_generator_ : nullptr);
  h = Dropout(h, config_.embedding_dropout);
  if (hidden_states) hidden_states->push_back(h);

  // Each rotary table's cos/sin in float32 as transformers computes them, times its attention scaling, cast to the
  // activation dtype.
  const torch::Tensor positions = inputs.position_ids.to(torch::kFloat32).unsqueeze(-1);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> rotary;
  const torch::Tensor inv_freq = config_.rope_inv_freq.size(0) > 0 ? RopeInvFreqOn(h.device()) : torch::Tensor();
  for (int64_t t = 0; t < config_.rope_inv_freq.size(0); ++t) {
    const torch::Tensor freqs = positions * inv_freq[t];
    const torch::Tensor angles = torch::cat({freqs, freqs}, -1).unsqueeze(1);
    const double scaling = config_.rope_attention_scaling[t];
    rotary.emplace_back((angles.cos() * scaling).to(h.scalar_type()), (angles.sin() * scaling).to(h.scalar_type()));
  }

  // May query i attend to key j: j is a real token, not in the query's future and, for a sliding-window layer, fewer
  // than `window` positions behind it (transformers' sliding_window_overlay: j > i − window).
  const auto index_options = torch::TensorOptions().dtype(torch::kInt64).device(h.device());
  const torch::Tensor query_pos = torch::arange(past, past + queries, index_options).view({queries, 1});
  const torch::Tensor key_pos = torch::arange(keys, index_options).view({1, keys});
  const torch::Tensor real = inputs.attention_mask.to(torch::kBool).view({-1, 1, keys});
  // Right-padded rows without a cache need no mask where libtorch's SDPA runs and no window applies: its causal flag
  // alone shows each real token its keys, and leaves flash eligible (see Sdpa).
  const bool causal_flag_suffices = inputs.right_padded && !cache && UsesSdpa(config_.attention, config_.attn_softcap, h.device());
  std::map<int64_t, torch::Tensor> masks;
  auto mask_for = [&](int64_t window) -> const torch::Tensor& {
    auto found = masks.find(window);
    if (found != masks.end()) return found->second;
    if (window == 0 && causal_flag_suffices) return masks.emplace(window, torch::Tensor()).first->second;
    torch::Tensor allowed = real & (key_pos <= query_pos).unsqueeze(0);
    if (window > 0) allowed = allowed & (key_pos > query_pos - window).unsqueeze(0);
    return masks.emplace(window, allowed.view({-1, 1, 1, queries, keys})).first->second;
  };

  // The router logits of this forward's queries, weighted by whether each is a real token, when they are recorded.
  RouterRecord* record = nullptr;
  if (router_records_ && config_.num_experts > 0) {
    router_records_->push_back({{}, inputs.attention_mask.narrow(1, keys - queries, queries).reshape({-1}).to(torch::kFloat32)});
    record = &router_records_->back();
  }

  const bool checkpoint = gradient_checkpointing_ && torch::GradMode::is_enabled() && !cache;
  const int64_t num_layers = static_cast<int64_t>(model->layers->size());
  for (int64_t i = 0; i < num_layers; ++i) {
    auto layer = model->layers->ptr<DecoderLayerImpl>(i);
    const int64_t table = config_.layer_rope[i];
    const torch::Tensor cos = table >= 0 ? rotary[table].first : torch::Tensor();
    const torch::Tensor sin = table >= 0 ? rotary[table].second : torch::Tensor();
    const torch::Tensor& mask = mask_for(config_.layer_window[i]);
    torch::Tensor router_logits;
    if (checkpoint) {
      const LayerConstants constants{cos, sin, mask};
      const torch::autograd::variable_list out = CheckpointedLayer::apply(h, reinterpret_cast<int64_t>(&constants),
                                                                          reinterpret_cast<int64_t>(layer.get()), record != nullptr);
      h = out[0];
      if (out.size() > 1) router_logits = out[1];
    } else {
      h = layer->forward(h, cos, sin, mask, cache, i, record ? &router_logits : nullptr);
    }
    if (router_logits.defined()) record->logits.push_back(router_logits);
    if (hidden_states && i + 1 < num_layers) hidden_states->push_back(h);
  }
  if (cache) cache->length += queries;
  h = model->norm(h);
  if (hidden_states) hidden_states->push_back(h);
  return h;
}

bool CausalLMImpl::drops() const {
  return training_ && torch::GradMode::is_enabled() &&
         (config_.attention_dropout > 0 || config_.residual_dropout > 0 || config_.embedding_dropout > 0);
}

torch::Tensor CausalLMImpl::RopeInvFreqOn(const torch::Device& device) {
  std::lock_guard<std::mutex> lock(rope_on_device_mutex_);
  if (!rope_inv_freq_on_device_.defined() || rope_inv_freq_on_device_.device() != device) {
    rope_inv_freq_on_device_ = config_.rope_inv_freq.to(device);
  }
  return rope_inv_freq_on_device_;
}

torch::Tensor CausalLMImpl::logits(const torch::Tensor& hidden) {
  return SoftCap(Project(hidden, lm_head ? lm_head->weight : model->embed_tokens->weight, torch::Tensor()), config_.final_softcap);
}

}  // namespace comlrl
