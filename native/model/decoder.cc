#include "decoder.h"

#include <cmath>

#include "../kernels/cpu_features.h"
#include "../kernels/rms_norm.h"
#include "../kernels/rope.h"
#include "../kernels/small_batch_linear.h"

namespace comlrl {

KVCache::KVCache(const DecoderConfig& config, int64_t batch, int64_t capacity, const torch::TensorOptions& options) {
  for (int64_t i = 0; i < config.num_layers; ++i) {
    keys.push_back(torch::empty({batch, config.num_kv_heads, capacity, config.head_dim}, options));
    values.push_back(torch::empty({batch, config.num_kv_heads, capacity, config.head_dim}, options));
  }
}

KVCache KVCache::Growable(int64_t num_layers) {
  KVCache cache;
  cache.keys.resize(num_layers);
  cache.values.resize(num_layers);
  cache.preallocated = false;
  return cache;
}

std::pair<torch::Tensor, torch::Tensor> KVCache::Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t added = k.size(2);
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
  for (auto& tensor : keys) tensor = tensor.index_select(0, index);
  for (auto& tensor : values) tensor = tensor.index_select(0, index);
}

void KVCache::RepeatRows(int64_t times) {
  if (times == 1) return;
  for (auto& tensor : keys) tensor = tensor.repeat_interleave(times, 0);
  for (auto& tensor : values) tensor = tensor.repeat_interleave(times, 0);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

// As transformers: normalise in float32, cast back, then scale.
torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (FusedRmsNormApplies(x, weight)) return FusedRmsNorm(x, weight, eps_);
  const torch::Tensor h = x.to(torch::kFloat32);
  const torch::Tensor normed = h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

namespace {

torch::nn::Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// A bf16 matmul on a CPU without bf16 instructions runs in fp32 on widened copies, rounded once to bf16: what a bf16
// GEMM accumulating in fp32 computes, ~35× sooner. Autograd carries the casts, so gradients reach the bf16 weights.
bool WidenForMatmul(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 && t.device().is_cpu() && !CpuHasNativeBf16();
}

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

torch::Tensor Project(const torch::nn::Linear& linear, const torch::Tensor& x) {
  return Project(x, linear->weight, linear->bias);
}

torch::Tensor RotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// cos, sin: [batch, 1, queries, head_dim], broadcast over heads.
torch::Tensor ApplyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (FusedRopeApplies(x, cos)) return FusedRope(x, cos, sin);
  return x * cos + RotateHalf(x) * sin;
}

// Reentrant gradient checkpointing for one decoder layer: the forward keeps only the layer's input; the backward
// recomputes the layer with grad enabled and backpropagates through it (accumulating its parameters' gradients).
struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor cos, torch::Tensor sin,
                               torch::Tensor mask, int64_t layer_address) {
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(layer_address);
    ctx->save_for_backward({x, cos, sin, mask});
    ctx->saved_data["layer"] = layer_address;
    torch::NoGradGuard no_grad;
    return layer->forward(x, cos, sin, mask, nullptr, 0);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    torch::Tensor x = saved[0].detach().requires_grad_(true);
    {
      torch::AutoGradMode enable(true);
      torch::Tensor out = layer->forward(x, saved[1], saved[2], saved[3], nullptr, 0);
      torch::autograd::backward({out}, {grads[0]});
    }
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

AttentionImpl::AttentionImpl(const DecoderConfig& config)
    : num_heads_(config.num_heads), num_kv_heads_(config.num_kv_heads), head_dim_(config.head_dim) {
  q_proj = register_module("q_proj", MakeLinear(config.hidden_size, config.num_heads * config.head_dim, config.qkv_bias));
  k_proj = register_module("k_proj", MakeLinear(config.hidden_size, config.num_kv_heads * config.head_dim, config.qkv_bias));
  v_proj = register_module("v_proj", MakeLinear(config.hidden_size, config.num_kv_heads * config.head_dim, config.qkv_bias));
  o_proj = register_module("o_proj", MakeLinear(config.num_heads * config.head_dim, config.hidden_size, config.o_bias));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(config.head_dim, config.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(config.head_dim, config.rms_norm_eps));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                     const torch::Tensor& mask, KVCache* cache, int64_t layer) {
  const int64_t batch = x.size(0), queries = x.size(1);
  torch::Tensor q = Project(q_proj, x).view({batch, queries, num_heads_, head_dim_});
  torch::Tensor k = Project(k_proj, x).view({batch, queries, num_kv_heads_, head_dim_});
  torch::Tensor v = Project(v_proj, x).view({batch, queries, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm) {
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
  torch::Tensor grouped_q = q.reshape({batch, num_kv_heads_, group * queries, head_dim_});
  torch::Tensor scores = Matmul(grouped_q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
  scores = scores.view({batch, num_kv_heads_, group, queries, keys}).to(torch::kFloat32);
  scores = scores.masked_fill(mask.logical_not(), std::numeric_limits<float>::lowest());
  torch::Tensor weights = torch::softmax(scores, -1).to(v.scalar_type()).view({batch, num_kv_heads_, group * queries, keys});
  torch::Tensor out = Matmul(weights, v).view({batch, num_heads_, queries, head_dim_});
  return Project(o_proj, out.transpose(1, 2).reshape({batch, queries, num_heads_ * head_dim_}));
}

MLPImpl::MLPImpl(const DecoderConfig& config) {
  gate_proj = register_module("gate_proj", MakeLinear(config.hidden_size, config.intermediate_size, config.mlp_bias));
  up_proj = register_module("up_proj", MakeLinear(config.hidden_size, config.intermediate_size, config.mlp_bias));
  down_proj = register_module("down_proj", MakeLinear(config.intermediate_size, config.hidden_size, config.mlp_bias));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return Project(down_proj, torch::silu(Project(gate_proj, x)) * Project(up_proj, x));
}

DecoderLayerImpl::DecoderLayerImpl(const DecoderConfig& config) {
  self_attn = register_module("self_attn", Attention(config));
  mlp = register_module("mlp", MLP(config));
  input_layernorm = register_module("input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                        const torch::Tensor& mask, KVCache* cache, int64_t layer) {
  const torch::Tensor h = x + self_attn(input_layernorm(x), cos, sin, mask, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

DecoderModelImpl::DecoderModelImpl(const DecoderConfig& config) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_layers; ++i) layers->push_back(DecoderLayer(config));
  norm = register_module("norm", RMSNorm(config.hidden_size, config.rms_norm_eps));
}

CausalLMImpl::CausalLMImpl(const DecoderConfig& config) : config_(config) {
  TORCH_CHECK(config.num_heads % config.num_kv_heads == 0, "num_attention_heads (", config.num_heads,
              ") must be a multiple of num_key_value_heads (", config.num_kv_heads, ")");
  TORCH_CHECK(config.head_dim % 2 == 0, "head_dim must be even for rotary embeddings, got ", config.head_dim);
  model = register_module("model", DecoderModel(config));
  if (!config.tie_word_embeddings) lm_head = register_module("lm_head", MakeLinear(config.hidden_size, config.vocab_size, false));
}

torch::Tensor CausalLMImpl::forward(const ForwardInputs& inputs, KVCache* cache, std::vector<torch::Tensor>* hidden_states) {
  const int64_t queries = inputs.input_ids.size(1);
  const int64_t keys = inputs.attention_mask.size(1);
  const int64_t past = cache ? cache->length : 0;
  TORCH_CHECK(keys == past + queries, "attention mask covers ", keys, " positions, expected ", past + queries);
  torch::Tensor h = model->embed_tokens(inputs.input_ids);
  if (hidden_states) hidden_states->push_back(h);

  // Rotary tables in float32 as transformers computes them, cast to the activation dtype.
  const auto float_options = torch::TensorOptions().dtype(torch::kFloat32).device(h.device());
  const torch::Tensor exponents = torch::arange(0, config_.head_dim, 2, float_options.dtype(torch::kInt64)).to(torch::kFloat32);
  const torch::Tensor inv_freq = 1.0 / torch::pow(config_.rope_theta, exponents / static_cast<double>(config_.head_dim));
  const torch::Tensor freqs = inputs.position_ids.to(torch::kFloat32).unsqueeze(-1) * inv_freq;
  const torch::Tensor angles = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  const torch::Tensor cos = angles.cos().to(h.scalar_type()), sin = angles.sin().to(h.scalar_type());

  // May query i attend to key j: j is a real token and not in the query's future.
  torch::Tensor allowed = inputs.attention_mask.to(torch::kBool).view({-1, 1, keys});
  if (queries > 1) {
    const auto index_options = torch::TensorOptions().dtype(torch::kInt64).device(h.device());
    const torch::Tensor query_pos = torch::arange(past, past + queries, index_options).view({queries, 1});
    allowed = allowed & (torch::arange(keys, index_options).view({1, keys}) <= query_pos).unsqueeze(0);
  }
  const torch::Tensor mask = allowed.view({-1, 1, 1, queries, keys});

  const bool checkpoint = gradient_checkpointing_ && torch::GradMode::is_enabled() && !cache;
  const int64_t num_layers = static_cast<int64_t>(model->layers->size());
  for (int64_t i = 0; i < num_layers; ++i) {
    auto layer = model->layers->ptr<DecoderLayerImpl>(i);
    h = checkpoint ? CheckpointedLayer::apply(h, cos, sin, mask, reinterpret_cast<int64_t>(layer.get()))
                   : layer->forward(h, cos, sin, mask, cache, i);
    if (hidden_states && i + 1 < num_layers) hidden_states->push_back(h);
  }
  if (cache) cache->length += queries;
  h = model->norm(h);
  if (hidden_states) hidden_states->push_back(h);
  return h;
}

torch::Tensor CausalLMImpl::logits(const torch::Tensor& hidden) {
  return Project(hidden, lm_head ? lm_head->weight : model->embed_tokens->weight, torch::Tensor());
}

}  // namespace comlrl
