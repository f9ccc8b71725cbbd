#pragma once
/// GGUF v2/v3 reader (the llama.cpp model file format): metadata of every value type
/// including nested arrays, tensor infos, alignment, memory-mapped tensor data.
/// Every offset, count and size read from the file is bounds-checked before use; a
/// malformed file gives a cb::Error naming the file and the offending field.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/mapped_file.h"
#include "lib/formats/tensor_ref.h"

namespace cb::formats {

/// GGUF metadata value types, numbered as in the specification.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12
};
const char* gguf_type_name(GgufType t);

/// One metadata value. Scalars are held widened (integers in i/u, floats in f);
/// arrays keep their element type and hold elements in `array`.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  int64_t i = 0;   ///< signed integer types and BOOL
  uint64_t u = 0;  ///< unsigned integer types (also mirrors non-negative signed)
  double f = 0.0;  ///< FLOAT32 / FLOAT64
  std::string s;   ///< STRING
  GgufType elem_type = GgufType::UINT8;  ///< ARRAY element type
  std::vector<GgufValue> array;          ///< ARRAY elements

  bool is_integer() const;
  bool is_float() const;
  /// Short human-readable rendering; arrays longer than `max_elems` are elided.
  std::string to_string(size_t max_elems = 8) const;
};

class GgufFile {
 public:
  /// Opens, maps and fully validates `path`. Throws cb::Error on any malformation.
  static std::unique_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

  /// Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }

  /// Typed getters: nullopt when the key is absent; cb::Error (naming key, file,
  /// expected and found type) when present with an incompatible type.
  std::optional<uint64_t> get_u64(const std::string& key) const;
  std::optional<int64_t> get_i64(const std::string& key) const;
  std::optional<double> get_f64(const std::string& key) const;  ///< accepts ints too
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<std::vector<std::string>> get_string_array(const std::string& key) const;
  std::optional<std::vector<float>> get_f32_array(const std::string& key) const;
  std::optional<std::vector<int32_t>> get_i32_array(const std::string& key) const;

  /// Tensors in file order; shapes are row-major (GGUF's ne[] reversed).
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find_tensor(const std::string& name) const;

 private:
  explicit GgufFile(const std::string& path) : file_(path) {}
  void parse();

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace cb::formats
