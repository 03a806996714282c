// safetensors files: a validating mmap reader and a writer whose bytes match the Python `safetensors` library's
// (the writer transformers' save_pretrained uses), so Python users load what we save unchanged.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mapped_file.h"

namespace comlrl {

struct TensorEntry {
  torch::Dtype dtype;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets into the data section
  size_t end = 0;
};

// A safetensors file mapped read-only. Opening validates the whole header against the file: every error names the
// file and, where one is at fault, the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) > 0; }

  // The tensor's bytes in the mapping, as a tensor that does not own them: valid while the file is open, and only
  // to be read (the mapping is read-only).
  torch::Tensor view(const std::string& name) const;
  // Drops the mapped pages under bytes [begin, end) of the data section from this process's memory once they have
  // been read (the kernel's page cache keeps them; a later read maps them again): a load then holds no more of the
  // file than what it is copying.
  void release(size_t begin, size_t end) const;

 private:
  std::string path_;
  MappedFile file_;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors in dtype with {"format": "pt"} metadata, tensors ordered as the Python library orders them (larger
// dtypes first, then by name), data contiguous and little-endian. Each tensor is copied to the host (and converted)
// only as it is written, so a model on a GPU never has a second full copy on the host.
void WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors, torch::Dtype dtype);

}  // namespace comlrl
