// One decoder whose parts the config chooses (Llama, Qwen2/3, Mistral, Gemma 2/3, Phi-3, OLMo 2, SmolLM3, GPT-2):
// RMSNorm, Gemma's (1 + w) RMSNorm or LayerNorm with bias, placed before, around or after each block; rotary tables
// per layer (or none), partial rotary, or learned absolute positions; grouped-query attention with optional biases,
// q/k norms, sliding windows and soft-capping; SiLU, GELU-tanh or exact GELU, gated or plain MLPs (sparse mixtures of
// experts too), fused projections where the checkpoint stores them. Parameter names and shapes are the Hugging Face
// ones ("model.layers.0.self_attn.q_proj.weight", GPT-2's "transformer.h.0.attn.c_attn.weight"), so checkpoints map
// one to one.
#pragma once

#include <torch/torch.h>

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace comlrl {

enum class NormKind { kRms, kRmsOnePlus, kLayer };
// Where each layer's norms sit: before attention and MLP (Llama), before and after both (Gemma), after both (OLMo 2).
enum class NormPlacement { kPre, kSandwich, kPost };
enum class Activation { kSilu, kGeluTanh, kGeluErf };
// q/k RMSNorm over each head (Qwen3, Gemma 3) or over the whole projection (OLMo 2).
enum class QkNorm { kNone, kHead, kFull };
// Which attention kernel computes softmax(q·kᵀ)·v (config.json's attn_implementation): libtorch's
// scaled_dot_product_attention on CUDA and ours on a CPU (auto), ours everywhere (eager), or libtorch's everywhere
// (sdpa). All compute the same numbers within rounding; see UsesSdpa for when libtorch's can run.
enum class AttentionKernel { kAuto, kEager, kSdpa };

struct DecoderConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;  // every norm's epsilon, LayerNorm's too
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  QkNorm qk_norm = QkNorm::kNone;
  NormKind norm = NormKind::kRms;
  NormPlacement norm_placement = NormPlacement::kPre;
  Activation activation = Activation::kSilu;
  bool fused_projections = false;  // Phi-3's qkv_proj and gate_up_proj, GPT-2's c_attn
  bool gated_mlp = true;           // act(gate) · up; false: GPT-2's act(c_fc) alone
  // GPT-2's module names (transformer.wte, transformer.h.N.attn.c_attn, ...) and Conv1D weights stored [in, out].
  bool gpt2_layout = false;
  int64_t learned_positions = 0;   // rows of a learned absolute position embedding (GPT-2's wpe); 0 = none
  // Positions at or past this are refused (0: none), with position_limit_reason saying why: GPT-2's table ends
  // there, or dynamic / longrope RoPE would start to change its frequencies with each call's length.
  int64_t position_limit = 0;
  std::string position_limit_reason;
  bool embed_scale = false;        // embeddings × √hidden_size (Gemma)
  double attention_scale = 0;      // q·k multiplier
  double attn_softcap = 0;         // tanh soft-capping of scores / final logits; 0 = none
  AttentionKernel attention = AttentionKernel::kAuto;
  double final_softcap = 0;
  torch::Tensor rope_inv_freq;                // float32 [tables, rotary_dim / 2], computed from the config in TypeScript; 0 tables: no RoPE
  std::vector<double> rope_attention_scaling;  // per table: cos and sin are multiplied by it
  std::vector<int64_t> layer_rope;             // per layer: its table, -1 for none
  std::vector<int64_t> layer_window;           // per layer: keys within this many positions of the query; 0 = all
  // Sparse mixture-of-experts MLPs on the layers marked in layer_sparse (Qwen3-MoE, Mixtral).
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;        // renormalise the chosen experts' probabilities to sum to 1
  bool mixtral_names = false;         // block_sparse_moe.experts.E.w1 / w3 / w2 rather than mlp.experts.E.gate/up/down_proj
  std::vector<int64_t> layer_sparse;  // per layer: 1 for a sparse MoE MLP
  // Coefficients of the router's auxiliary load-balancing loss added to the causal-LM loss (config.json's
  // output_router_logits) and to the policy losses (an explicit opt-in); 0: not added.
  double lm_router_aux_coef = 0;
  double policy_router_aux_coef = 0;
  // Dropout rates where transformers places them, acting only in training mode: on the attention probabilities
  // (attention_dropout, GPT-2's attn_pdrop), on each block's output before it joins the residual stream (GPT-2's and
  // Phi-3's resid_pdrop; pre-norm layers only), on the embeddings (GPT-2's embd_pdrop).
  double attention_dropout = 0;
  double residual_dropout = 0;
  double embedding_dropout = 0;
};

// One forward's router logits, kept for the auxiliary loss while a RouterAuxRecording is installed on the model.
struct RouterRecord {
  std::vector<torch::Tensor> logits;  // per sparse layer: [tokens, experts] in the activation dtype, with their graph
  torch::Tensor weight;               // float32 [tokens]: each token's weight in the loss (its attention mask)
};

// Keys and values of every layer. Generation preallocates them to the longest sequence so decode steps write in
// place, except on sliding-window layers, which keep only the last window − 1 positions (all a later query can
// see), so their memory stays at the window; training uses a growable cache whose appends are differentiable (a
// shared prompt's keys/values computed once, with gradients flowing back from every completion that attends to
// them). Append returns the most recent keys of the sequence, so attention masks cover their last k.size(2) keys.
struct KVCache {
  std::vector<torch::Tensor> keys, values;  // each [batch, kv_heads, positions, head_dim]
  std::vector<int64_t> keep;                 // per layer: positions a windowed layer retains; 0 = all
  int64_t length = 0;                        // positions filled
  bool preallocated = true;

  KVCache(const DecoderConfig& config, int64_t batch, int64_t capacity, const torch::TensorOptions& options);
  static KVCache Growable(int64_t num_layers);
  // Appends one layer's new keys/values and returns all of them so far.
  std::pair<torch::Tensor, torch::Tensor> Append(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);
  // Each row repeated `times` times in place of itself (one prompt prefill shared by several samples).
  void RepeatRows(int64_t times);
  // Row r of the result is row index[r] of the cache.
  void SelectRows(const torch::Tensor& index);

 private:
  KVCache() = default;
};

// While one lives, the modules built on this thread allocate their parameters uninitialised with its options (device
// and dtype): whoever builds a model writes every parameter next (LoadWeights, InitWeights, a clone's copy), so
// neither a float32 host copy nor an initialisation pass is paid first. Without one: float32 on the CPU.
class ParameterPlacement {
 public:
  explicit ParameterPlacement(const torch::TensorOptions& options);
  ~ParameterPlacement();
  ParameterPlacement(const ParameterPlacement&) = delete;
  ParameterPlacement& operator=(const ParameterPlacement&) = delete;

 private:
  torch::TensorOptions previous_;
};

class NormImpl : public torch::nn::Module {
 public:
  NormImpl(int64_t dim, double eps, NormKind kind);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;  // bias: LayerNorm only

 private:
  double eps_;
  NormKind kind_;
};
TORCH_MODULE(Norm);

// x·Wᵀ + b with W held as the checkpoint stores it: [out, in] as torch.nn.Linear, or [in, out] as GPT-2's Conv1D, so
// that parameter names, shapes and gradients are the checkpoint's.
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in, int64_t out, bool bias, bool conv1d = false);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;

 private:
  bool conv1d_;
};
TORCH_MODULE(Dense);

// Whether attention on this device runs in libtorch's scaled_dot_product_attention: asked for (or auto on CUDA),
// libtorch 2.5 or later (grouped-query heads without copying keys/values), and no soft-capping (it has none).
bool UsesSdpa(AttentionKernel kernel, double softcap, const torch::Device& device);

// Whether a forward of this many queries per row, with this many query heads per key/value head, attends through the
// grouped matmuls (query heads stacked on their key/value head) even where SDPA is used: a decode step of a
// grouped-query model. Why: SDPA on CUDA takes no grouped heads with a mask, and a decode step always has one (the
// cache), so K and V of the whole cache would be expanded to the query heads per layer per token (~25 GB per token at
// 7B, batch 32, 1k context); one query per head is two small matmuls over K and V read once.
bool DecodesGrouped(int64_t queries, int64_t group);

// The attention kernel each kind of forward runs for this config on a device in a dtype: "eager" (ours), "grouped"
// (decode of a grouped-query model, see DecodesGrouped), or the
// kernel libtorch's SDPA picks ("flash_attention", "efficient_attention", "cudnn_attention", "math"). training:
// right-padded rows without a cache (training and scoring forwards) on layers without a window; masked: a prefill of
// left-padded prompts, shared-prompt scoring, or a windowed layer; decode: one query against cached keys.
struct AttentionKernels {
  std::string training, masked, decode;
};
AttentionKernels AttentionKernelsFor(const DecoderConfig& config, const torch::TensorOptions& options);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const DecoderConfig& config);
  // mask: bool [batch, 1, 1, queries, keys], true where a query may attend to a key, or undefined for libtorch's SDPA
  // with its causal flag (right-padded rows, no cache, no window). cos/sin undefined: no rotary.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask,
                        KVCache* cache, int64_t layer);

  Dense q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, qkv_proj{nullptr}, o_proj{nullptr};
  Norm q_norm{nullptr}, k_norm{nullptr};

 private:
  int64_t num_heads_, num_kv_heads_, head_dim_;
  QkNorm qk_norm_;
  double scale_, softcap_, dropout_;
  AttentionKernel kernel_;
};
TORCH_MODULE(Attention);

class MLPImpl : public torch::nn::Module {
 public:
  // intermediate: the width (the dense MLP's, or one expert's); names: gate (unused without gating), up, down
  // projection names.
  MLPImpl(const DecoderConfig& config, int64_t intermediate, const std::array<const char*, 3>& names);
  torch::Tensor forward(const torch::Tensor& x);
  Dense gate_proj{nullptr}, up_proj{nullptr}, gate_up_proj{nullptr}, down_proj{nullptr};

 private:
  Activation activation_;
};
TORCH_MODULE(MLP);

// Top-k routing as transformers: softmax over all experts in float32, the k largest (optionally renormalised), each
// token's output the weighted sum of its chosen experts' SwiGLU MLPs. Tokens are gathered per expert.
class SparseMoeImpl : public torch::nn::Module {
 public:
  explicit SparseMoeImpl(const DecoderConfig& config);
  // router_logits (optional) receives the router's logits, [tokens, experts].
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* router_logits = nullptr);
  Dense gate{nullptr};  // the router: hidden → experts, no bias
  torch::nn::ModuleList experts;

 private:
  int64_t top_k_;
  bool norm_topk_prob_;
};
TORCH_MODULE(SparseMoe);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const DecoderConfig& config, int64_t index);
  // router_logits (optional) receives a sparse layer's router logits.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, const torch::Tensor& mask,
                        KVCache* cache, int64_t layer, torch::Tensor* router_logits = nullptr);
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
  SparseMoe moe{nullptr};  // in place of mlp on sparse layers
  // HF names: post_attention_layernorm is the pre-MLP norm in the pre placement, the post-attention one otherwise;
  // GPT-2 calls the two pre norms ln_1 and ln_2.
  Norm input_layernorm{nullptr}, post_attention_layernorm{nullptr}, pre_feedforward_layernorm{nullptr},
      post_feedforward_layernorm{nullptr};

 private:
  NormPlacement placement_;
  double residual_dropout_;
};
TORCH_MODULE(DecoderLayer);

// The transformer body ("model." in HF names; GPT-2's "transformer." with wte, wpe, h, ln_f).
class DecoderModelImpl : public torch::nn::Module {
 public:
  explicit DecoderModelImpl(const DecoderConfig& config);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};  // learned absolute positions, or null
  torch::nn::ModuleList layers;
  Norm norm{nullptr};
};
TORCH_MODULE(DecoderModel);

struct ForwardInputs {
  torch::Tensor input_ids;       // int64 [batch, queries]
  torch::Tensor position_ids;    // int64 [batch, queries]
  torch::Tensor attention_mask;  // bool [batch, keys]: keys = cached + queries; true for real tokens
  // The largest of position_ids, which every caller knows on the host: the position limit is checked against it
  // without reading position_ids back from the device.
  int64_t max_position = -1;
  // Every row's real tokens come first, at positions 0, 1, ...: pads only follow them (a causal mask then covers
  // the padding).
  bool right_padded = false;
};

// Whether a matmul with this operand runs on float32 copies (bf16 on a CPU without bf16 instructions).
bool WidenForMatmul(const torch::Tensor& t);
// tanh soft-capping, cap · tanh(x / cap); x itself when cap is 0.
torch::Tensor SoftCap(const torch::Tensor& x, double cap);

class CausalLMImpl : public torch::nn::Module {
 public:
  explicit CausalLMImpl(const DecoderConfig& config);

  // Final-norm hidden states [batch, queries, hidden]. With a cache, the queries follow its filled positions and
  // their keys/values are appended. hidden_states (optional) receives HF's output_hidden_states list.
  torch::Tensor forward(const ForwardInputs& inputs, KVCache* cache = nullptr,
                        std::vector<torch::Tensor>* hidden_states = nullptr);
  // Vocabulary logits for hidden states of any leading shape.
  torch::Tensor logits(const torch::Tensor& hidden);

  // Recompute each layer in the backward pass instead of keeping its activations.
  void set_gradient_checkpointing(bool enabled) { gradient_checkpointing_ = enabled; }
  bool gradient_checkpointing() const { return gradient_checkpointing_; }

  // Training mode, as torch's module.train(): the config's dropout acts in forwards that record gradients (the
  // losses' forwards), drawing its masks from dropout_generator; generation and scoring never drop.
  void set_training(bool enabled) { training_ = enabled; }
  bool training() const { return training_; }
  void set_dropout_generator(at::Generator generator) { dropout_generator_ = std::move(generator); }
  // Whether a forward started now would drop: training mode, gradients recorded, some rate above 0.
  bool drops() const;

  const DecoderConfig& config() const { return config_; }
  // Where forwards record their router logits (null: nowhere); see RouterAuxRecording.
  std::vector<RouterRecord>* router_records() const { return router_records_; }
  void set_router_records(std::vector<RouterRecord>* records) { router_records_ = records; }

  DecoderModel model{nullptr};
  Dense lm_head{nullptr};  // null when tied to the embeddings

 private:
  // config_.rope_inv_freq on the device of the forward that asked for it, copied once per device rather than once
  // per forward (a host-to-device copy waits for the device).
  torch::Tensor RopeInvFreqOn(const torch::Device& device);

  DecoderConfig config_;
  std::mutex rope_on_device_mutex_;
  torch::Tensor rope_inv_freq_on_device_;
  bool gradient_checkpointing_ = false;
  bool training_ = false;
  at::Generator dropout_generator_;
  std::vector<RouterRecord>* router_records_ = nullptr;
};
TORCH_MODULE(CausalLM);

}  // namespace comlrl
