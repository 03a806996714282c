// GGUF files (llama.cpp's format): a validating mmap reader of the header, the metadata and the tensor table, and
// dequantization of the tensor types a published model uses (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
// Q6_K) to float32, computed in the same order as the `gguf` Python package's dequantize, so the values match it bit
// for bit.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mapped_file.h"

namespace comlrl {

// One metadata value. Numbers of every GGUF integer and float type are held as double (token ids, sizes and counts
// are far below 2^53), strings as bytes, arrays as their items.
struct GgufValue {
  enum class Kind { kNumber, kBool, kString, kArray };
  Kind kind = Kind::kNumber;
  double number = 0;
  bool boolean = false;
  std::string text;
  std::vector<GgufValue> items;
};

struct GgufTensorInfo {
  uint32_t type = 0;            // ggml_type
  std::vector<int64_t> shape;   // PyTorch order: outermost first (GGUF lists the innermost first)
  size_t begin = 0;             // byte offsets into the data section
  size_t end = 0;
};

// The ggml type's name ("Q4_K"), or "type N" for one this reader does not know.
std::string GgmlTypeName(uint32_t type);

// A GGUF file mapped read-only. Opening validates the header, every metadata entry and the tensor table against the
// file's size: a truncated or corrupt file is an error naming the file and the key or tensor at fault.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::map<std::string, GgufTensorInfo>& tensors() const { return tensors_; }

  // The tensor's values as a new float32 CPU tensor of its shape; an unsupported type is an error naming the tensor.
  // The mapped pages it was read from are dropped from this process's memory afterwards.
  torch::Tensor Dequantize(const std::string& name) const;

 private:
  // Reads and checks the header, the metadata and the tensor table from the mapping.
  void Parse();

  std::string path_;
  MappedFile file_;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, GgufTensorInfo> tensors_;
};

}  // namespace comlrl
