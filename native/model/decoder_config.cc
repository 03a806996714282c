#include "decoder_config.h"

#include <map>

#include "../bridge/bridge.h"

namespace comlrl {
namespace {

template <typename Enum>
Enum EnumField(const Napi::Object& config, const char* field, const std::map<std::string, Enum>& names) {
  const std::string value = StringField(config, field);
  const auto found = names.find(value);
  if (found == names.end()) {
    std::string known;
    for (const auto& [name, _] : names) known += (known.empty() ? "" : ", ") + name;
    throw ArgumentError(std::string("config.") + field + " \"" + value + "\" is not one of " + known);
  }
  return found->second;
}

// A JS array of numbers.
std::vector<double> NumberList(const Napi::Value& value, const std::string& name) {
  if (!value.IsArray()) throw ArgumentError("config." + name + " must be an array of numbers");
  const Napi::Array array = value.As<Napi::Array>();
  std::vector<double> out(array.Length());
  for (uint32_t i = 0; i < array.Length(); ++i) {
    const Napi::Value item = array.Get(i);
    if (!item.IsNumber()) throw ArgumentError("config." + name + " must be an array of numbers");
    out[i] = item.As<Napi::Number>().DoubleValue();
  }
  return out;
}

}  // namespace

DecoderConfig ReadDecoderConfig(const Napi::Object& config) {
  DecoderConfig out;
  auto integer = [&](const char* field) { return static_cast<int64_t>(NumberField(config, field)); };
  out.vocab_size = integer("vocabSize");
  out.hidden_size = integer("hiddenSize");
  out.intermediate_size = integer("intermediateSize");
  out.num_layers = integer("numLayers");
  out.num_heads = integer("numHeads");
  out.num_kv_heads = integer("numKvHeads");
  out.head_dim = integer("headDim");
  out.rms_norm_eps = NumberField(config, "rmsNormEps");
  out.tie_word_embeddings = BoolFieldOr(config, "tieWordEmbeddings", false);
  out.qkv_bias = BoolFieldOr(config, "qkvBias", false);
  out.o_bias = BoolFieldOr(config, "oBias", false);
  out.mlp_bias = BoolFieldOr(config, "mlpBias", false);
  out.qk_norm = EnumField<QkNorm>(config, "qkNorm", {{"none", QkNorm::kNone}, {"head", QkNorm::kHead}, {"full", QkNorm::kFull}});
  out.norm = EnumField<NormKind>(config, "norm", {{"rms", NormKind::kRms}, {"rms_one_plus", NormKind::kRmsOnePlus}, {"layer", NormKind::kLayer}});
  out.norm_placement = EnumField<NormPlacement>(
      config, "normPlacement", {{"pre", NormPlacement::kPre}, {"sandwich", NormPlacement::kSandwich}, {"post", NormPlacement::kPost}});
  out.activation = EnumField<Activation>(config, "activation", {{"silu", Activation::kSilu}, {"gelu_tanh", Activation::kGeluTanh}, {"gelu", Activation::kGeluErf}});
  out.fused_projections = BoolFieldOr(config, "fusedProjections", false);
  out.gated_mlp = BoolFieldOr(config, "gatedMlp", true);
  out.gpt2_layout = BoolFieldOr(config, "gpt2Layout", false);
  out.learned_positions = static_cast<int64_t>(NumberFieldOr(config, "learnedPositions", 0));
  out.position_limit = static_cast<int64_t>(NumberFieldOr(config, "positionLimit", 0));
  if (out.position_limit > 0) out.position_limit_reason = StringField(config, "positionLimitReason");
  out.embed_scale = BoolFieldOr(config, "embedScale", false);
  out.attention_scale = NumberField(config, "attentionScale");
  out.attn_softcap = NumberFieldOr(config, "attnSoftcap", 0);
  out.final_softcap = NumberFieldOr(config, "finalSoftcap", 0);
  out.attention = EnumField<AttentionKernel>(config, "attention", {{"auto", AttentionKernel::kAuto}, {"eager", AttentionKernel::kEager}, {"sdpa", AttentionKernel::kSdpa}});
  out.layer_rope = IntListField(config, "layerRope");
  out.layer_window = IntListField(config, "layerWindow");
  out.num_experts = static_cast<int64_t>(NumberFieldOr(config, "numExperts", 0));
  out.experts_per_token = static_cast<int64_t>(NumberFieldOr(config, "numExpertsPerTok", 0));
  out.moe_intermediate_size = static_cast<int64_t>(NumberFieldOr(config, "moeIntermediateSize", 0));
  out.norm_topk_prob = BoolFieldOr(config, "normTopkProb", false);
  out.mixtral_names = BoolFieldOr(config, "mixtralNames", false);
  out.layer_sparse = IntListField(config, "layerSparse");
  out.lm_router_aux_coef = NumberFieldOr(config, "lmRouterAuxCoef", 0);
  out.policy_router_aux_coef = NumberFieldOr(config, "policyRouterAuxCoef", 0);
  out.attention_dropout = NumberFieldOr(config, "attentionDropout", 0);
  out.residual_dropout = NumberFieldOr(config, "residualDropout", 0);
  out.embedding_dropout = NumberFieldOr(config, "embeddingDropout", 0);
  for (const double rate : {out.attention_dropout, out.residual_dropout, out.embedding_dropout}) {
    if (!(rate >= 0 && rate < 1)) throw ArgumentError("config's dropout rates must be in [0, 1)");
  }
  // Rotary tables: ropeInvFreq is one array of inverse frequencies per table, all the same length; none without RoPE.
  out.rope_attention_scaling = NumberList(config.Get("ropeAttentionScaling"), "ropeAttentionScaling");
  const Napi::Value tables = config.Get("ropeInvFreq");
  if (!tables.IsArray()) throw ArgumentError("config.ropeInvFreq must be an array of arrays of numbers");
  std::vector<torch::Tensor> rows;
  for (uint32_t t = 0; t < tables.As<Napi::Array>().Length(); ++t) {
    const std::vector<double> row = NumberList(tables.As<Napi::Array>().Get(t), "ropeInvFreq[" + std::to_string(t) + "]");
    if (!rows.empty() && static_cast<int64_t>(row.size()) != rows[0].numel()) {
      throw ArgumentError("config.ropeInvFreq tables must all hold the same number of frequencies");
    }
    rows.push_back(torch::tensor(row, torch::kFloat64).to(torch::kFloat32));
  }
  out.rope_inv_freq = rows.empty() ? torch::zeros({0, 0}) : torch::stack(rows);
  return out;
}

}  // namespace comlrl
