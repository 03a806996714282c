// A decoder's weights from a GGUF file, and the file's metadata and tensors for JS: which GGUF tensor fills which
// parameter is decided in TypeScript (src/models/gguf.ts), per architecture; this side dequantizes, undoes
// llama.cpp's conversions and copies.
#pragma once

#include <napi.h>

#include <string>
#include <vector>

#include "decoder.h"

namespace comlrl {

// Where one parameter comes from.
struct GgufSource {
  std::string parameter;   // the model's (Hugging Face) name
  std::string tensor;      // the GGUF tensor's name
  int64_t permute_heads = 0;  // > 0: undo llama.cpp's rotary row permutation over this many heads
  double offset = 0;       // added after dequantizing (Gemma's norms are stored as 1 + w)
};

// Fills every parameter from the file as `plan` says, dequantized and converted to the parameter's dtype and device.
// A parameter the plan omits, a tensor the file lacks, a shape mismatch or an unsupported tensor type is an error
// naming the file and the tensor.
void LoadGgufWeights(CausalLMImpl& model, const std::string& path, const std::vector<GgufSource>& plan);

// The plan as JS gives it: [{ parameter, tensor, permuteHeads?, offset? }].
std::vector<GgufSource> ReadGgufPlan(const Napi::Value& value);

// readGguf(path) -> { metadata, tensors: [{ name, type, shape }] }; ggufTensor(path, name) -> { shape, values }.
void InitGguf(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
