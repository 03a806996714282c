#include "safetensors.h"


#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "../bridge/bridge.h"
#include "file_writer.h"
#include "mapped_file.h"

namespace comlrl {
namespace {

struct DtypeCode {
  const char* code;
  torch::Dtype dtype;
  size_t size;
};

const DtypeCode kDtypes[] = {
    {"BOOL", torch::kBool, 1},    {"U8", torch::kUInt8, 1},      {"I8", torch::kInt8, 1},        {"I16", torch::kInt16, 2},
    {"F16", torch::kFloat16, 2},  {"BF16", torch::kBFloat16, 2}, {"I32", torch::kInt32, 4},      {"F32", torch::kFloat32, 4},
    {"F64", torch::kFloat64, 8},  {"I64", torch::kInt64, 8},
};

const DtypeCode* FindCode(const std::string& code) {
  for (const auto& entry : kDtypes) {
    if (code == entry.code) return &entry;
  }
  return nullptr;
}

const DtypeCode& FindDtype(torch::Dtype dtype) {
  for (const auto& entry : kDtypes) {
    if (entry.dtype == dtype) return entry;
  }
  throw ArgumentError(std::string("safetensors cannot store dtype ") + c10::toString(dtype));
}

// The Python safetensors library's limit on a header; a longer one is refused there too.
constexpr uint64_t kMaxHeaderBytes = 100000000;
// A header nests three deep (tensor, entry, shape). Formatting a value recurses once per level, so a hostile header
// nested 100k deep would overflow the stack while its error is written: refused before parsing.
constexpr int kMaxHeaderDepth = 16;

// The deepest bracket nesting outside strings, stopping once past kMaxHeaderDepth.
int NestingDepth(const uint8_t* begin, const uint8_t* end) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (const uint8_t* c = begin; c < end && deepest <= kMaxHeaderDepth; ++c) {
    if (in_string) {
      if (*c == '\\') ++c;
      else if (*c == '"') in_string = false;
    } else if (*c == '"') {
      in_string = true;
    } else if (*c == '[' || *c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (*c == ']' || *c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A header value as a message shows it: at most 80 characters of its JSON.
std::string Excerpt(const nlohmann::json& value) {
  std::string text = value.dump();
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

// Two tensors may not share bytes: a loader would silently hand out one tensor's data as the other's.
void CheckDisjoint(const std::string& path, const std::map<std::string, TensorEntry>& entries) {
  std::vector<std::pair<const std::string*, const TensorEntry*>> by_offset;
  for (const auto& [name, entry] : entries) {
    if (entry.end > entry.begin) by_offset.emplace_back(&name, &entry);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [previous_name, previous] = by_offset[i - 1];
    const auto& [name, entry] = by_offset[i];
    if (entry->begin < previous->end) {
      FailReading(path, "tensors \"" + *previous_name + "\" (bytes " + std::to_string(previous->begin) + "-" + std::to_string(previous->end) +
                     ") and \"" + *name + "\" (bytes " + std::to_string(entry->begin) + "-" + std::to_string(entry->end) +
                     ") overlap in the data section");
    }
  }
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(path, 8, "the 8-byte header length") {
  const uint8_t* bytes = file_.bytes();
  const size_t size = file_.size();
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes, 8);
  if (header_size > size - 8) {
    FailReading(path, "truncated or corrupt: header claims " + std::to_string(header_size) + " bytes but the file has " +
                   std::to_string(size - 8) + " after the length");
  }
  if (header_size > kMaxHeaderBytes) {
    FailReading(path, "the header claims " + std::to_string(header_size) + " bytes, past the " + std::to_string(kMaxHeaderBytes) +
                   " the safetensors format allows");
  }
  if (NestingDepth(bytes + 8, bytes + 8 + header_size) > kMaxHeaderDepth) {
    FailReading(path, "the header nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels: not a safetensors header");
  }
  data_ = bytes + 8 + header_size;
  const size_t data_size = size - 8 - header_size;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_size);
  } catch (const std::exception& error) {
    FailReading(path, std::string("header is not valid JSON (") + error.what() + ")");
  }
  if (!header.is_object()) FailReading(path, "header is not a JSON object");
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) FailReading(path, "__metadata__ is not an object");
      for (const auto& [key, text] : value.items()) {
        if (text.is_string()) metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor \"" + name + "\"";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets")) {
      FailReading(path, where + " lacks dtype, shape or data_offsets");
    }
    const DtypeCode* code = value["dtype"].is_string() ? FindCode(value["dtype"].get<std::string>()) : nullptr;
    if (!code) FailReading(path, where + " has an unsupported dtype " + Excerpt(value["dtype"]));
    TensorEntry entry;
    entry.dtype = code->dtype;
    size_t count = 1;
    for (const auto& dim : value["shape"]) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) FailReading(path, where + " has an invalid shape " + Excerpt(value["shape"]));
      entry.shape.push_back(dim.get<int64_t>());
      // A wrapped product could match small data_offsets and hand from_blob a shape past the mapping.
      if (__builtin_mul_overflow(count, static_cast<size_t>(dim.get<int64_t>()), &count) || count > size) {
        FailReading(path, where + " has a shape " + Excerpt(value["shape"]) + " larger than the file");
      }
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      FailReading(path, where + " has invalid data_offsets " + Excerpt(offsets));
    }
    entry.begin = offsets[0].get<size_t>();
    entry.end = offsets[1].get<size_t>();
    if (entry.end < entry.begin || entry.end - entry.begin != count * code->size) {
      FailReading(path, where + " data_offsets " + Excerpt(offsets) + " do not match its shape and dtype (" +
                     std::to_string(count * code->size) + " bytes)");
    }
    if (entry.end > data_size) {
      FailReading(path, "truncated: " + where + " ends at byte " + std::to_string(entry.end) + " of the data section, which has " +
                     std::to_string(data_size));
    }
    entries_.emplace(name, std::move(entry));
  }
  CheckDisjoint(path, entries_);
}

torch::Tensor SafetensorsFile::view(const std::string& name) const {
  const auto found = entries_.find(name);
  if (found == entries_.end()) FailReading(path_, "has no tensor \"" + name + "\"");
  const TensorEntry& entry = found->second;
  // from_blob needs a writable pointer; callers only read it.
  return torch::from_blob(const_cast<uint8_t*>(data_ + entry.begin), entry.shape, torch::TensorOptions().dtype(entry.dtype));
}

void SafetensorsFile::release(size_t begin, size_t end) const {
  const size_t data_start = static_cast<size_t>(data_ - file_.bytes());
  file_.ReleasePages(data_start + begin, data_start + end);
}

void WriteSafetensors(const std::string& path, const std::vector<std::pair<std::string, torch::Tensor>>& tensors, torch::Dtype dtype) {
  const DtypeCode& code = FindDtype(dtype);
  // One dtype for all: the Python library's order is then by name alone.
  std::vector<std::pair<std::string, torch::Tensor>> ordered(tensors.begin(), tensors.end());
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  size_t offset = 0;
  for (const auto& [name, tensor] : ordered) {
    const size_t bytes = static_cast<size_t>(tensor.numel()) * code.size;
    header[name] = {{"dtype", code.code}, {"shape", tensor.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  FileWriter file(path);
  const uint64_t header_size = text.size();
  file.Write(&header_size, 8);
  file.Write(text.data(), text.size());
  for (const auto& [name, tensor] : ordered) {
    const torch::Tensor host = tensor.detach().to(torch::kCPU, dtype).contiguous();
    file.Write(host.data_ptr(), host.numel() * host.element_size());
  }
  // Durable before the caller renames it into place: a crash never leaves a short file under the final name.
  file.Finish();
}

}  // namespace comlrl
