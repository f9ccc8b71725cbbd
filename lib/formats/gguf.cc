#include "lib/formats/gguf.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "lib/core/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

namespace cb::formats {
namespace {

constexpr const char* kCorrupt = "the file is truncated or corrupt — re-download or re-convert it";
constexpr const char* kInvalid =
    "the file is corrupt or was written by a broken converter — re-download or re-convert it";
constexpr const char* kReconvert =
    "re-convert the model with a current llama.cpp convert script (convert_hf_to_gguf.py)";

/// Upper bound on metadata values (scalars plus array elements) in one file. Each value
/// costs ~100 bytes of memory, so without it a corrupt array count in a multi-GB model
/// file would exhaust memory before the corruption shows; real files hold < 2M (a 256K-token
/// vocabulary's tokens, scores and types: 0.8M). 4M values: at most ~0.4 GB (at 2^24 a 16 MB
/// file of one byte array took 1.75 GB).
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;
/// Arrays may nest (arrays of arrays); deeper nesting than this is treated as corrupt
/// rather than recursing without bound.
constexpr int kMaxArrayDepth = 16;
constexpr uint32_t kMaxDims = 4;
/// Counts read from the file are checked against the bytes left, but an element in
/// memory is larger than its encoding, so up-front reservations are capped as well.
constexpr uint64_t kMaxReserve = uint64_t{1} << 16;

/// Fewest bytes a value of type `t` occupies (for count checks before allocating).
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING: return 8;  // u64 length
    case GgufType::ARRAY: return 12;  // u32 element type + u64 count
  }
  return 1;
}

bool valid_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::FLOAT64);
}

/// ggml type ids: the supported ones map to a DType; the rest get a name for messages.
bool ggml_dtype(uint32_t id, DType* out) {
  switch (id) {
    case 0: *out = DType::F32; return true;
    case 1: *out = DType::F16; return true;
    case 2: *out = DType::Q4_0; return true;
    case 3: *out = DType::Q4_1; return true;
    case 6: *out = DType::Q5_0; return true;
    case 7: *out = DType::Q5_1; return true;
    case 8: *out = DType::Q8_0; return true;
    case 10: *out = DType::Q2_K; return true;
    case 11: *out = DType::Q3_K; return true;
    case 12: *out = DType::Q4_K; return true;
    case 13: *out = DType::Q5_K; return true;
    case 14: *out = DType::Q6_K; return true;
    case 30: *out = DType::BF16; return true;
    default: return false;
  }
}

const char* ggml_type_name(uint32_t id) {
  // Indexed by ggml type id (ggml.h enum ggml_type); ids 4-5 and 31-33, 36-38 were removed.
  // clang-format off
  static const char* const names[] = {
      "f32", "f16", "q4_0", "q4_1", "removed", "removed", "q5_0", "q5_1", "q8_0", "q8_1",
      "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
      "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64", "iq1_m",
      "bf16", "removed", "removed", "removed", "tq1_0", "tq2_0", "removed", "removed",
      "removed", "mxfp4", "nvfp4", "q1_0"};
  // clang-format on
  return id < sizeof(names) / sizeof(names[0]) ? names[id] : "unknown";
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

/// Names the field being read, for error messages; built into a string only on failure
/// (metadata arrays can hold hundreds of thousands of elements).
struct Field {
  Field(const char* w) : what(w) {}                 // NOLINT: implicit by design
  Field(const std::string& w) : what(w.c_str()) {}  // NOLINT; `w` must outlive the call
  Field(const char* w, const std::string& k) : what(w), key(&k) {}
  std::string str() const {
    return key == nullptr ? std::string(what)
                          : std::string(what) + " of metadata key '" + *key + "'";
  }
  const char* what;
  const std::string* key = nullptr;
};

/// Bounds-checked little-endian cursor over the mapped file.
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what, const std::string& fix = kCorrupt) const {
    throw make_error(path_, what, fix);
  }

  /// Throws unless `n` more bytes are available for `field`.
  void need(uint64_t n, const Field& field) const {
    if (n > remaining()) {
      fail("truncated: " + field.str() + " at offset " + std::to_string(pos_) + " needs " +
           std::to_string(n) + " bytes but only " + std::to_string(remaining()) +
           " remain (file size " + std::to_string(size_) + ")");
    }
  }

  template <typename T>
  T read(const Field& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  /// Reads a u64-length-prefixed string, checking the length against the bytes left.
  std::string str(const Field& field) {
    const uint64_t len = read<uint64_t>(field);
    if (len > remaining()) {
      fail("string length " + std::to_string(len) + " of " + field.str() + " at offset " +
           std::to_string(pos_ - 8) + " runs past end of file (" + std::to_string(remaining()) +
           " bytes remain)");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Parses metadata values, counting them against kMaxMetadataValues.
class ValueParser {
 public:
  explicit ValueParser(Reader& r) : r_(r) {}

  GgufValue parse(GgufType type, const std::string& key, int depth) {
    if (++values_ > kMaxMetadataValues) {
      r_.fail("metadata holds more than " + std::to_string(kMaxMetadataValues) +
              " values (at key " + quoted(key) + "); an array count is likely corrupt");
    }
    GgufValue v;
    v.type = type;
    const Field field("value", key);
    switch (type) {
      case GgufType::UINT8: set_u(v, r_.read<uint8_t>(field)); break;
      case GgufType::UINT16: set_u(v, r_.read<uint16_t>(field)); break;
      case GgufType::UINT32: set_u(v, r_.read<uint32_t>(field)); break;
      case GgufType::UINT64: set_u(v, r_.read<uint64_t>(field)); break;
      case GgufType::INT8: set_i(v, r_.read<int8_t>(field)); break;
      case GgufType::INT16: set_i(v, r_.read<int16_t>(field)); break;
      case GgufType::INT32: set_i(v, r_.read<int32_t>(field)); break;
      case GgufType::INT64: set_i(v, r_.read<int64_t>(field)); break;
      case GgufType::FLOAT32: v.f = static_cast<double>(r_.read<float>(field)); break;
      case GgufType::FLOAT64: v.f = r_.read<double>(field); break;
      case GgufType::BOOL: {
        const uint8_t b = r_.read<uint8_t>(field);
        if (b > 1) {
          r_.fail("bool value " + std::to_string(b) + " of metadata key " + quoted(key) +
                      " at offset " + std::to_string(r_.pos() - 1) + " is not 0 or 1",
                  kInvalid);
        }
        set_i(v, b);
        break;
      }
      case GgufType::STRING: v.s = r_.str(field); break;
      case GgufType::ARRAY: parse_array(v, key, depth); break;
    }
    return v;
  }

  /// Reads a u32 value type id, rejecting ids outside the specification.
  GgufType read_type(const std::string& key, const char* what) {
    const uint32_t t = r_.read<uint32_t>(Field(what, key));
    if (!valid_type(t)) {
      r_.fail("metadata key " + quoted(key) + " has unknown " + what + " " + std::to_string(t) +
                  " at offset " + std::to_string(r_.pos() - 4) + " (valid: 0..12)",
              kInvalid);
    }
    return static_cast<GgufType>(t);
  }

 private:
  static void set_u(GgufValue& v, uint64_t x) {
    v.u = x;
    if (x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      v.i = static_cast<int64_t>(x);
    }
  }
  static void set_i(GgufValue& v, int64_t x) {
    v.i = x;
    if (x >= 0) v.u = static_cast<uint64_t>(x);
  }

  void parse_array(GgufValue& v, const std::string& key, int depth) {
    if (depth >= kMaxArrayDepth) {
      r_.fail("metadata key " + quoted(key) + " nests arrays more than " +
                  std::to_string(kMaxArrayDepth) + " deep",
              kInvalid);
    }
    v.elem_type = read_type(key, "array element type");
    const uint64_t count = r_.read<uint64_t>(Field("array count", key));
    const uint64_t fit = r_.remaining() / min_value_bytes(v.elem_type);
    if (count > fit) {
      r_.fail("array count " + std::to_string(count) + " of metadata key " + quoted(key) + " (" +
              gguf_type_name(v.elem_type) + " elements) at offset " + std::to_string(r_.pos() - 8) +
              " exceeds what the remaining " + std::to_string(r_.remaining()) + " bytes can hold");
    }
    if (count > kMaxMetadataValues - std::min(values_, kMaxMetadataValues)) {
      r_.fail("array count " + std::to_string(count) + " of metadata key " + quoted(key) +
              " exceeds the limit of " + std::to_string(kMaxMetadataValues) +
              " metadata values per file");
    }
    v.array.reserve(static_cast<size_t>(std::min(count, kMaxReserve)));
    for (uint64_t j = 0; j < count; ++j) v.array.push_back(parse(v.elem_type, key, depth + 1));
  }

  Reader& r_;
  uint64_t values_ = 0;
};

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  DType dtype = DType::F32;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

std::string describe(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return gguf_type_name(v.type);
  return std::string("array of ") + gguf_type_name(v.elem_type);
}

std::string render_scalar(const GgufValue& v) {
  char buf[64];
  switch (v.type) {
    case GgufType::UINT8:
    case GgufType::UINT16:
    case GgufType::UINT32:
    case GgufType::UINT64: return std::to_string(v.u);
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return std::to_string(v.i);
    case GgufType::FLOAT32: std::snprintf(buf, sizeof buf, "%.9g", v.f); return buf;
    case GgufType::FLOAT64: std::snprintf(buf, sizeof buf, "%.17g", v.f); return buf;
    case GgufType::BOOL: return v.i != 0 ? "true" : "false";
    case GgufType::STRING: {
      std::string out = "\"";
      const size_t shown = std::min<size_t>(v.s.size(), 80);
      for (size_t k = 0; k < shown; ++k) {
        const auto c = static_cast<unsigned char>(v.s[k]);
        if (c == '"' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
      }
      if (shown < v.s.size()) out += "...";
      return out + "\"";
    }
    case GgufType::ARRAY: break;
  }
  return "?";
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64: return true;
    default: return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufType::FLOAT32 || type == GgufType::FLOAT64;
}

std::string GgufValue::to_string(size_t max_elems) const {
  if (type != GgufType::ARRAY) return render_scalar(*this);
  std::string out = "[";
  const size_t shown = std::min(array.size(), max_elems);
  for (size_t k = 0; k < shown; ++k) {
    if (k != 0) out += ", ";
    out += array[k].to_string(max_elems);
  }
  if (shown < array.size()) {
    out += (shown != 0 ? ", ... (" : "... (") + std::to_string(array.size()) + " total)";
  }
  return out + "]";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile(path));
  f->parse();
  return f;
}

void GgufFile::parse() {
  const std::string& p = file_.path();
  const size_t size = file_.size();
  if (size == 0) {
    throw make_error(p, "file is empty (0 bytes), not a GGUF model",
                     "check the path, or re-download the file");
  }
  Reader r(p, file_.data(), size);

  // ---- header ----
  if (size < 4) {
    throw make_error(p,
                     "file is only " + std::to_string(size) + " bytes, too short for a GGUF header",
                     "the file is truncated or not a model — check the path or re-download it");
  }
  if (std::memcmp(file_.data(), "GGUF", 4) != 0) {
    char buf[64];
    const uint8_t* d = file_.data();
    std::snprintf(buf, sizeof buf, "bad magic %02x %02x %02x %02x", d[0], d[1], d[2], d[3]);
    throw make_error(p, std::string(buf) + " (expected \"GGUF\"); this is not a GGUF file",
                     "check the path; safetensors and PyTorch files need their own loaders");
  }
  r.read<uint32_t>("magic");
  version_ = r.read<uint32_t>("version");
  if (version_ == 1) {
    r.fail("GGUF version 1 is not supported (only versions 2 and 3)", kReconvert);
  }
  if (version_ == 0x02000000u || version_ == 0x03000000u) {
    r.fail("big-endian GGUF files are not supported (version field is byte-swapped)",
           "convert the model with the default little-endian output");
  }
  if (version_ != 2 && version_ != 3) {
    r.fail("unsupported GGUF version " + std::to_string(version_) + " (expected 2 or 3)",
           "the file is corrupt or from a newer format revision; " + std::string(kReconvert));
  }
  const uint64_t tensor_count = r.read<uint64_t>("tensor_count");
  const uint64_t kv_count = r.read<uint64_t>("kv_count");
  // Cheapest possible entries: key (8 + 0) + type (4) + u8 value (1); a tensor info is
  // name (8 + 0) + n_dims (4) + one ne (8) + type (4) + offset (8).
  constexpr uint64_t kMinKv = 13, kMinTensor = 32;
  if (kv_count > r.remaining() / kMinKv) {
    r.fail("kv_count " + std::to_string(kv_count) + " is impossible: the remaining " +
           std::to_string(r.remaining()) + " bytes hold at most " +
           std::to_string(r.remaining() / kMinKv) + " key/value pairs");
  }
  if (tensor_count > (r.remaining() - kv_count * kMinKv) / kMinTensor) {
    r.fail("tensor_count " + std::to_string(tensor_count) + " is impossible: the remaining " +
           std::to_string(r.remaining()) + " bytes cannot hold that many tensor infos");
  }

  // ---- metadata ----
  ValueParser vp(r);
  if (kv_count > kMaxMetadataValues) {
    r.fail("kv_count " + std::to_string(kv_count) + " exceeds the limit of " +
           std::to_string(kMaxMetadataValues) + " metadata values per file");
  }
  kv_.reserve(static_cast<size_t>(std::min(kv_count, kMaxReserve)));
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key = r.str("key of metadata pair #" + std::to_string(k));
    if (kv_index_.count(key) != 0) {
      r.fail("duplicate metadata key " + quoted(key) + " (pair #" + std::to_string(k) + ")",
             kInvalid);
    }
    const GgufType t = vp.read_type(key, "value type");
    GgufValue v = vp.parse(t, key, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::UINT32) {
      r.fail("metadata key 'general.alignment' has type " + describe(*a) + ", expected uint32",
             kReconvert);
    }
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      r.fail("general.alignment " + std::to_string(a->u) + " is not a nonzero power of two",
             kInvalid);
    }
    alignment_ = a->u;
  }

  // ---- tensor infos ----
  std::vector<RawTensor> raw;
  raw.reserve(static_cast<size_t>(std::min(tensor_count, kMaxReserve)));
  for (uint64_t k = 0; k < tensor_count; ++k) {
    RawTensor t;
    t.name = r.str("name of tensor info #" + std::to_string(k));
    const std::string tn = "tensor " + quoted(t.name);
    if (tensor_index_.count(t.name) != 0)
      r.fail("duplicate tensor name " + quoted(t.name), kInvalid);
    tensor_index_.emplace(t.name, k);
    const uint32_t n_dims = r.read<uint32_t>("n_dims of " + tn);
    if (n_dims < 1 || n_dims > kMaxDims) {
      r.fail(tn + " has n_dims " + std::to_string(n_dims) + " (must be 1.." +
                 std::to_string(kMaxDims) + ")",
             kInvalid);
    }
    uint64_t numel = 1;
    for (uint32_t j = 0; j < n_dims; ++j) {
      const uint64_t ne = r.read<uint64_t>("ne[" + std::to_string(j) + "] of " + tn);
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        r.fail(tn + " has invalid dimension ne[" + std::to_string(j) + "] = " + std::to_string(ne) +
                   " (must be 1..2^63-1)",
               kInvalid);
      }
      if (__builtin_mul_overflow(numel, ne, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        r.fail(tn + " element count overflows: the product of its dimensions exceeds 2^63-1",
               kInvalid);
      }
      t.ne.push_back(ne);
    }
    const uint32_t type_id = r.read<uint32_t>("ggml type of " + tn);
    if (!ggml_dtype(type_id, &t.dtype)) {
      r.fail(tn + " has ggml type id " + std::to_string(type_id) + " (" + ggml_type_name(type_id) +
                 "), which cachebench does not support",
             "supported tensor types are f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and "
             "q2_K-q6_K; re-quantize the model to one of them with llama-quantize");
    }
    t.offset = r.read<uint64_t>("data offset of " + tn);
    if (dtype_is_quantized(t.dtype) && t.ne[0] % dtype_block_elems(t.dtype) != 0) {
      r.fail(tn + " is " + dtype_name(t.dtype) + " but its row length ne[0] = " +
                 std::to_string(t.ne[0]) + " is not a multiple of the " +
                 std::to_string(dtype_block_elems(t.dtype)) + "-element block",
             kInvalid);
    }
    if (__builtin_mul_overflow(numel / dtype_block_elems(t.dtype), dtype_block_bytes(t.dtype),
                               &t.nbytes)) {
      t.nbytes = std::numeric_limits<uint64_t>::max();
    }
    raw.push_back(std::move(t));
  }

  // ---- tensor data ----
  const uint64_t data_start = (static_cast<uint64_t>(r.pos()) + alignment_ - 1) & ~(alignment_ - 1);
  for (const RawTensor& t : raw) {
    const std::string tn = "tensor " + quoted(t.name);
    if (t.offset % alignment_ != 0) {
      r.fail(tn + " data offset " + std::to_string(t.offset) +
                 " is misaligned: not a multiple of the alignment " + std::to_string(alignment_),
             kInvalid);
    }
    if (data_start > size || t.offset > size - data_start ||
        t.nbytes > size - data_start - t.offset) {
      const std::string nb = t.nbytes == std::numeric_limits<uint64_t>::max()
                                 ? std::string("more than 2^64")
                                 : std::to_string(t.nbytes);
      r.fail(tn + " data [offset " + std::to_string(t.offset) + ", " + nb +
             " bytes] extends past end of file (data section starts at " +
             std::to_string(data_start) + ", file size " + std::to_string(size) + ")");
    }
  }
  std::vector<size_t> order(raw.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return raw[a].offset < raw[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const RawTensor& a = raw[order[k - 1]];
    const RawTensor& b = raw[order[k]];
    if (a.offset + a.nbytes > b.offset) {
      r.fail("tensors " + quoted(a.name) + " [offset " + std::to_string(a.offset) + ", " +
                 std::to_string(a.nbytes) + " bytes] and " + quoted(b.name) + " [offset " +
                 std::to_string(b.offset) + ", " + std::to_string(b.nbytes) + " bytes] overlap",
             kInvalid);
    }
  }

  tensors_.reserve(raw.size());
  for (RawTensor& t : raw) {
    TensorRef ref;
    ref.name = std::move(t.name);
    ref.dtype = t.dtype;
    for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) {
      ref.shape.push_back(static_cast<int64_t>(*it));
    }
    ref.data = file_.data() + data_start + t.offset;
    ref.nbytes = static_cast<size_t>(t.nbytes);
    ref.file = p;
    tensors_.push_back(std::move(ref));
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

[[noreturn]] void type_mismatch(const std::string& path, const std::string& key, const GgufValue& v,
                                const std::string& expected) {
  throw make_error(
      path, "metadata key " + quoted(key) + " has type " + describe(v) + ", expected " + expected,
      "the file does not follow the GGUF conventions for this key; " + std::string(kReconvert));
}

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64;
}

}  // namespace

std::optional<uint64_t> GgufFile::get_u64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) type_mismatch(path(), key, *v, "an unsigned integer");
  if (!is_unsigned(v->type) && v->i < 0) {
    throw make_error(path(),
                     "metadata key " + quoted(key) + " is negative (" + std::to_string(v->i) +
                         "), expected a non-negative integer",
                     kReconvert);
  }
  return v->u;
}

std::optional<int64_t> GgufFile::get_i64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) type_mismatch(path(), key, *v, "an integer");
  if (is_unsigned(v->type) && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw make_error(
        path(),
        "metadata key " + quoted(key) + " value " + std::to_string(v->u) + " does not fit in int64",
        kReconvert);
  }
  return v->i;
}

std::optional<double> GgufFile::get_f64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_float()) return v->f;
  if (!v->is_integer()) type_mismatch(path(), key, *v, "a number");
  return is_unsigned(v->type) ? static_cast<double>(v->u) : static_cast<double>(v->i);
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::BOOL) type_mismatch(path(), key, *v, "bool");
  return v->i != 0;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::STRING) type_mismatch(path(), key, *v, "string");
  return v->s;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING) {
    type_mismatch(path(), key, *v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(e.s);
  return out;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::ARRAY ||
      (v->elem_type != GgufType::FLOAT32 && v->elem_type != GgufType::FLOAT64)) {
    type_mismatch(path(), key, *v, "array of float32");
  }
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(static_cast<float>(e.f));
  return out;
}

std::optional<std::vector<int32_t>> GgufFile::get_i32_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  GgufValue probe;
  probe.type = v->elem_type;
  if (v->type != GgufType::ARRAY || !probe.is_integer()) {
    type_mismatch(path(), key, *v, "array of int32");
  }
  const bool uns = is_unsigned(v->elem_type);
  std::vector<int32_t> out;
  out.reserve(v->array.size());
  for (size_t j = 0; j < v->array.size(); ++j) {
    const GgufValue& e = v->array[j];
    const bool fits = uns ? e.u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
                          : (e.i >= std::numeric_limits<int32_t>::min() &&
                             e.i <= std::numeric_limits<int32_t>::max());
    if (!fits) {
      throw make_error(path(),
                       "metadata key " + quoted(key) + " element " + std::to_string(j) + " (" +
                           e.to_string() + ") does not fit in int32",
                       kReconvert);
    }
    out.push_back(static_cast<int32_t>(uns ? static_cast<int64_t>(e.u) : e.i));
  }
  return out;
}

const TensorRef* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace cb::formats
