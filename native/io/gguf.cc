#include "gguf.h"

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <cstring>

#include "../bridge/bridge.h"
#include "mapped_file.h"

namespace comlrl {
namespace {

// ggml_type codes (ggml.h) with their block layout: elements per block and bytes per block.
struct GgmlType {
  uint32_t code;
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
};

const GgmlType kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},
    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},
    {25, "I16", 1, 2},      {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},      {30, "BF16", 1, 2},
};

const GgmlType* FindType(uint32_t code) {
  for (const auto& type : kTypes) {
    if (type.code == code) return &type;
  }
  return nullptr;
}

// GGUF metadata value types (gguf.md).
enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Arrays of arrays are legal; no real file nests deeper than one level, and a hostile one must not recurse unbounded.
constexpr int kMaxArrayDepth = 4;

// Reads the header a field at a time, every read checked against the end of the file.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* begin, size_t size) : path_(path), begin_(begin), size_(size) {}

  size_t offset() const { return offset_; }

  template <typename T>
  T Read(const std::string& what) {
    Need(sizeof(T), what);
    T value;
    std::memcpy(&value, begin_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  std::string ReadString(const std::string& what) {
    const uint64_t length = Read<uint64_t>(what);
    Need(length, what);
    std::string text(reinterpret_cast<const char*>(begin_ + offset_), length);
    offset_ += length;
    return text;
  }

  // An array's count is checked against the bytes left, so a corrupt count cannot ask for a huge allocation.
  void NeedItems(uint64_t count, size_t min_item_bytes, const std::string& what) {
    if (min_item_bytes > 0 && count > (size_ - offset_) / min_item_bytes) Truncated(what);
  }

 private:
  void Need(uint64_t bytes, const std::string& what) {
    if (bytes > size_ - offset_) Truncated(what);
  }
  [[noreturn]] void Truncated(const std::string& what) {
    FailReading(path_, "truncated or corrupt: " + what + " runs past the end of the file (" + std::to_string(size_) + " bytes)");
  }

  const std::string& path_;
  const uint8_t* begin_;
  size_t size_;
  size_t offset_ = 0;
};

size_t MinimumBytes(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    default: return 8;  // strings (their length), 64-bit numbers, arrays (type and count)
  }
}

GgufValue ReadValue(Cursor& cursor, uint32_t type, const std::string& key, const std::string& path, int depth) {
  GgufValue value;
  const std::string what = "metadata \"" + key + "\"";
  switch (type) {
    case kU8: value.number = cursor.Read<uint8_t>(what); break;
    case kI8: value.number = cursor.Read<int8_t>(what); break;
    case kU16: value.number = cursor.Read<uint16_t>(what); break;
    case kI16: value.number = cursor.Read<int16_t>(what); break;
    case kU32: value.number = cursor.Read<uint32_t>(what); break;
    case kI32: value.number = cursor.Read<int32_t>(what); break;
    case kF32: value.number = cursor.Read<float>(what); break;
    case kU64: value.number = static_cast<double>(cursor.Read<uint64_t>(what)); break;
    case kI64: value.number = static_cast<double>(cursor.Read<int64_t>(what)); break;
    case kF64: value.number = cursor.Read<double>(what); break;
    case kBool:
      value.kind = GgufValue::Kind::kBool;
      value.boolean = cursor.Read<uint8_t>(what) != 0;
      break;
    case kString:
      value.kind = GgufValue::Kind::kString;
      value.text = cursor.ReadString(what);
      break;
    case kArray: {
      if (depth >= kMaxArrayDepth) FailReading(path, what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth) + " levels");
      value.kind = GgufValue::Kind::kArray;
      const uint32_t item_type = cursor.Read<uint32_t>(what);
      const uint64_t count = cursor.Read<uint64_t>(what);
      if (item_type > kF64) FailReading(path, what + " is an array of unknown value type " + std::to_string(item_type));
      cursor.NeedItems(count, MinimumBytes(item_type), what);
      value.items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) value.items.push_back(ReadValue(cursor, item_type, key, path, depth + 1));
      break;
    }
    default:
      FailReading(path, what + " has unknown value type " + std::to_string(type));
  }
  return value;
}

float HalfToFloat(const uint8_t* bytes) {
  uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

float BFloat16ToFloat(const uint8_t* bytes) {
  uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block's 12 packed scale bytes.
void ScaleMinK4(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One block of each type into `out`. The float operations are those of gguf.quants' dequantize_blocks, in its
// order (a scale times a quant, then the offset), so each value rounds the same.
void DequantizeBlock(uint32_t type, const uint8_t* b, float* out) {
  switch (type) {
    case 0: std::memcpy(out, b, 4); break;
    case 1: out[0] = HalfToFloat(b); break;
    case 30: out[0] = BFloat16ToFloat(b); break;
    case 8: {  // Q8_0: d, 32 × int8
      const float d = HalfToFloat(b);
      for (int i = 0; i < 32; ++i) out[i] = static_cast<float>(static_cast<int8_t>(b[2 + i])) * d;
      break;
    }
    case 2: {  // Q4_0: d, 16 bytes of nibbles (low nibbles first), q - 8
      const float d = HalfToFloat(b);
      for (int i = 0; i < 16; ++i) {
        out[i] = d * static_cast<float>((b[2 + i] & 0xF) - 8);
        out[i + 16] = d * static_cast<float>((b[2 + i] >> 4) - 8);
      }
      break;
    }
    case 3: {  // Q4_1: d, m, nibbles; d·q + m
      const float d = HalfToFloat(b), m = HalfToFloat(b + 2);
      for (int i = 0; i < 16; ++i) {
        out[i] = d * static_cast<float>(b[4 + i] & 0xF) + m;
        out[i + 16] = d * static_cast<float>(b[4 + i] >> 4) + m;
      }
      break;
    }
    case 6:    // Q5_0: d, 32 high bits, nibbles; q - 16
    case 7: {  // Q5_1: d, m, 32 high bits, nibbles; d·q + m
      const bool with_min = type == 7;
      const float d = HalfToFloat(b), m = with_min ? HalfToFloat(b + 2) : 0.0f;
      const uint8_t* p = b + (with_min ? 4 : 2);
      uint32_t high;
      std::memcpy(&high, p, 4);
      const uint8_t* qs = p + 4;
      for (int i = 0; i < 32; ++i) {
        const int low = i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
        const int q = low | static_cast<int>(((high >> i) & 1) << 4);
        out[i] = with_min ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 16);
      }
      break;
    }
    case 12:    // Q4_K: d, dmin, 12 scale bytes, 128 bytes of nibbles; 8 sub-blocks of 32
    case 13: {  // Q5_K: as Q4_K with 32 bytes of fifth bits before the nibbles
      const bool five = type == 13;
      const float d = HalfToFloat(b), dmin = HalfToFloat(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* high = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int j = 0; j < 8; ++j) {
        uint8_t scale, min;
        ScaleMinK4(j, scales, scale, min);
        const float dj = d * static_cast<float>(scale), mj = dmin * static_cast<float>(min);
        const uint8_t* q = qs + (j / 2) * 32;
        for (int l = 0; l < 32; ++l) {
          int value = j % 2 == 0 ? (q[l] & 0xF) : (q[l] >> 4);
          if (five) value |= ((high[l] >> j) & 1) << 4;
          out[j * 32 + l] = dj * static_cast<float>(value) - mj;
        }
      }
      break;
    }
    case 14: {  // Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales, d; q - 32
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
      const float d = HalfToFloat(b + 208);
      for (int half = 0; half < 2; ++half) {
        const uint8_t* low = ql + half * 64;
        const uint8_t* hi = qh + half * 32;
        // Four runs of 32 per half: the low nibbles of low[0..32) and low[32..64), then their high nibbles.
        for (int run = 0; run < 4; ++run) {
          for (int l = 0; l < 32; ++l) {
            const uint8_t source = low[l + (run % 2) * 32];
            const int nibble = run < 2 ? (source & 0xF) : (source >> 4);
            const int q = (nibble | (((hi[l] >> (2 * run)) & 3) << 4)) - 32;
            const int index = half * 128 + run * 32 + l;
            out[index] = (d * static_cast<float>(scales[index / 16])) * static_cast<float>(q);
          }
        }
      }
      break;
    }
    default:
      break;
  }
}

bool Dequantizable(uint32_t type) {
  switch (type) {
    case 0: case 1: case 2: case 3: case 6: case 7: case 8: case 12: case 13: case 14: case 30: return true;
    default: return false;
  }
}

}  // namespace

std::string GgmlTypeName(uint32_t type) {
  const GgmlType* found = FindType(type);
  return found ? found->name : "type " + std::to_string(type);
}

GgufFile::GgufFile(const std::string& path) : path_(path), file_(path, 24, "a GGUF header") { Parse(); }

void GgufFile::Parse() {
  const std::string& path = path_;
  const uint8_t* bytes = file_.bytes();
  const size_t size = file_.size();
  if (std::memcmp(bytes, "GGUF", 4) != 0) FailReading(path, "not a GGUF file (it does not start with \"GGUF\")");
  Cursor cursor(path, bytes, size);
  cursor.Read<uint32_t>("magic");
  const uint32_t version = cursor.Read<uint32_t>("version");
  if (version != 2 && version != 3) FailReading(path, "GGUF version " + std::to_string(version) + " is not supported (2 and 3 are)");
  const uint64_t tensor_count = cursor.Read<uint64_t>("tensor count");
  const uint64_t metadata_count = cursor.Read<uint64_t>("metadata count");
  cursor.NeedItems(metadata_count, 12, "the metadata table");
  cursor.NeedItems(tensor_count, 24, "the tensor table");

  uint64_t alignment = 32;
  for (uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = cursor.ReadString("metadata key " + std::to_string(i));
    const uint32_t type = cursor.Read<uint32_t>("metadata \"" + key + "\"");
    GgufValue value = ReadValue(cursor, type, key, path, 0);
    if (key == "general.alignment") {
      if (value.kind != GgufValue::Kind::kNumber || value.number < 1 || value.number > 65536 ||
          (static_cast<uint64_t>(value.number) & (static_cast<uint64_t>(value.number) - 1)) != 0) {
        FailReading(path, "metadata \"general.alignment\" must be a power of two");
      }
      alignment = static_cast<uint64_t>(value.number);
    }
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  std::vector<std::pair<std::string, uint64_t>> offsets;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    std::string name = cursor.ReadString("tensor name " + std::to_string(i));
    const std::string where = "tensor \"" + name + "\"";
    const uint32_t dims = cursor.Read<uint32_t>(where);
    if (dims > 4) FailReading(path, where + " has " + std::to_string(dims) + " dimensions (GGUF allows at most 4)");
    GgufTensorInfo tensor;
    uint64_t count = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t extent = cursor.Read<uint64_t>(where);
      if (extent > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(count, extent, &count) || count > size * 256) {
        FailReading(path, where + " has a shape larger than the file");
      }
      tensor.shape.insert(tensor.shape.begin(), static_cast<int64_t>(extent));
    }
    tensor.type = cursor.Read<uint32_t>(where);
    const uint64_t offset = cursor.Read<uint64_t>(where);
    const GgmlType* type = FindType(tensor.type);
    if (type == nullptr) FailReading(path, where + " has unknown ggml type " + std::to_string(tensor.type));
    const int64_t row = tensor.shape.empty() ? 1 : tensor.shape.back();
    if (row % type->block_elements != 0) {
      FailReading(path, where + " has rows of " + std::to_string(row) + " values, not a multiple of " + type->name + "'s block of " +
                     std::to_string(type->block_elements));
    }
    if (offset % alignment != 0) FailReading(path, where + " starts at offset " + std::to_string(offset) + ", not aligned to " + std::to_string(alignment));
    tensor.begin = offset;
    if (__builtin_add_overflow(offset, count / type->block_elements * type->block_bytes, &tensor.end)) {
      FailReading(path, where + " has an offset past any file (" + std::to_string(offset) + ")");
    }
    if (!tensors_.emplace(name, std::move(tensor)).second) FailReading(path, where + " appears twice in the tensor table");
  }
  const size_t data_start = (cursor.offset() + alignment - 1) / alignment * alignment;
  if (data_start > size) FailReading(path, "truncated: the data section would start at byte " + std::to_string(data_start) + " of " + std::to_string(size));
  data_ = bytes + data_start;
  const size_t data_size = size - data_start;
  for (const auto& [name, tensor] : tensors_) {
    if (tensor.end > data_size) {
      FailReading(path, "truncated: tensor \"" + name + "\" ends at byte " + std::to_string(tensor.end) + " of the data section, which has " +
                     std::to_string(data_size));
    }
  }
}

torch::Tensor GgufFile::Dequantize(const std::string& name) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) FailReading(path_, "has no tensor \"" + name + "\"");
  const GgufTensorInfo& tensor = found->second;
  if (!Dequantizable(tensor.type)) {
    FailReading(path_, "tensor \"" + name + "\" is " + GgmlTypeName(tensor.type) +
                    ", which comlrl does not read (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K are read)");
  }
  const GgmlType& type = *FindType(tensor.type);
  torch::Tensor out = torch::empty(tensor.shape, torch::kFloat32);
  const int64_t blocks = out.numel() / type.block_elements;
  float* values = out.data_ptr<float>();
  const uint8_t* source = data_ + tensor.begin;
  at::parallel_for(0, blocks, 4096, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) DequantizeBlock(tensor.type, source + i * type.block_bytes, values + i * type.block_elements);
  });
  const size_t start = static_cast<size_t>(source - file_.bytes());
  file_.ReleasePages(start, start + (tensor.end - tensor.begin));
  return out;
}

}  // namespace comlrl
