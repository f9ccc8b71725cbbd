#include "lib/formats/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/core/json_parse.h"
#include "lib/core/regular_file.h"

namespace cb::formats {

namespace {

using nlohmann::json;

/// The safetensors specification's limit on the JSON header.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
/// A safetensors header nests 3 levels (tensors -> entry -> shape); anything far deeper is
/// hostile and would only cost memory.
constexpr int kMaxJsonDepth = 32;

const char* const kFixCorrupt =
    "the file is corrupt or not a safetensors file; re-download or re-export the checkpoint";

/// A name from the file, quoted for a one-line message: control bytes escaped, long names cut.
std::string quote(const std::string& s) {
  std::string out = "'";
  const size_t limit = 200;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* const hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > limit) out += "...";
  return out + "'";
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Parses JSON text; syntax errors, excessive nesting and (at the top level) duplicate keys
/// become cb::Error naming `path`.
json parse_json(const std::string& path, const char* first, const char* last, const char* what) {
  // nlohmann's parser takes a NUL byte for the end of its input, so "{...}" padded with NULs,
  // or followed by anything after one, would parse; JSON has no raw NUL (a string escapes it),
  // and the safetensors reference (serde_json) refuses them: its padding is spaces.
  const void* nul = std::memchr(first, '\0', static_cast<size_t>(last - first));
  if (nul != nullptr) {
    throw make_error(path,
                     std::string(what) + " holds a NUL byte at offset " +
                         std::to_string(static_cast<const char*>(nul) - first) +
                         ", which JSON does not allow (a header is padded with spaces)",
                     kFixCorrupt);
  }
  if (json_nesting_depth(std::string_view(first, static_cast<size_t>(last - first))) >
      static_cast<size_t>(kMaxJsonDepth)) {
    throw make_error(path,
                     std::string(what) + " nests JSON more than " + std::to_string(kMaxJsonDepth) +
                         " levels deep",
                     kFixCorrupt);
  }
  json j;
  try {
    j = json::parse(first, last);
  } catch (const json::exception& e) {
    throw make_error(path, std::string(what) + " is not valid JSON (" + e.what() + ")",
                     kFixCorrupt);
  }
  DuplicateJsonKey twice;
  if (find_duplicate_json_key(std::string_view(first, static_cast<size_t>(last - first)), 1,
                              &twice)) {
    throw make_error(path, std::string(what) + " has the key " + quote(twice.key) + " twice",
                     kFixCorrupt);
  }
  return j;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// Maps a safetensors dtype string; throws for dtypes cachebench does not load or that do
/// not exist.
DType map_dtype(const std::string& path, const std::string& tensor, const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "I32") return DType::I32;
  static const char* const kKnown[] = {"BOOL", "U8",  "I8",      "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                       "I16",  "U16", "U32",     "F64",     "I64",     "U64",
                                       "C64",  "F4",  "F6_E2M3", "F6_E3M2"};
  for (const char* k : kKnown) {
    if (s == k) {
      throw make_error(
          path, "tensor " + quote(tensor) + " has dtype " + s + ", which cachebench does not load",
          "convert the checkpoint to F32/F16/BF16");
    }
  }
  throw make_error(
      path, "tensor " + quote(tensor) + " has unknown dtype " + quote(s),
      "expected a safetensors dtype such as F32, F16 or BF16; " + std::string(kFixCorrupt));
}

const json* field(const json& entry, const char* name) {
  const auto it = entry.find(name);
  return it == entry.end() ? nullptr : &*it;
}

/// A JSON integer in [0, INT64_MAX]; false for anything else (negative, float, string...).
bool as_count(const json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

struct Range {
  uint64_t begin;
  uint64_t end;
  size_t index;
};

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string join(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Shard names in an index must be plain file names inside the checkpoint directory.
bool is_plain_filename(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

/// Reads weight_map {tensor: shard} from model.safetensors.index.json.
std::vector<std::pair<std::string, std::string>> read_weight_map(const std::string& index_path) {
  const MappedFile f(index_path);
  if (f.size() > kMaxHeaderBytes) {
    throw make_error(index_path,
                     "index is " + std::to_string(f.size()) + " bytes, more than the 100 MB limit",
                     "pass a Hugging Face checkpoint directory with a valid index");
  }
  const char* text = reinterpret_cast<const char*>(f.data());
  const json j = parse_json(index_path, text, text + f.size(), "index");
  const char* fix = "fix or re-download model.safetensors.index.json";
  if (!j.is_object()) {
    throw make_error(index_path,
                     std::string("index is a JSON ") + j.type_name() + ", expected an object", fix);
  }
  const json* wm = field(j, "weight_map");
  if (wm == nullptr || !wm->is_object()) {
    throw make_error(index_path, "index has no \"weight_map\" object", fix);
  }
  if (wm->empty()) throw make_error(index_path, "index \"weight_map\" is empty", fix);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) {
      throw make_error(index_path,
                       "weight_map entry for tensor " + quote(tensor) + " is not a file name", fix);
    }
    const auto& name = shard.get_ref<const std::string&>();
    if (!is_plain_filename(name)) {
      throw make_error(index_path,
                       "weight_map puts tensor " + quote(tensor) + " in shard " + quote(name) +
                           ", which is not a plain file name inside the checkpoint directory",
                       "shard names must not contain '/' or be '..'; " + std::string(fix));
    }
    out.emplace_back(tensor, name);
  }
  return out;
}

/// Visible regular files named *.safetensors in `dir`, sorted.
std::vector<std::string> list_safetensors(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    throw make_error(dir, std::string("cannot list directory: ") + std::strerror(errno),
                     "check its permissions");
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.empty() || n[0] == '.' || !ends_with(n, ".safetensors")) continue;
    struct stat st {};
    if (::stat(join(dir, n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile(path));
  f->parse();
  return f;
}

const TensorRef* SafetensorsFile::find_tensor(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse() {
  const std::string& p = file_.path();
  const uint8_t* base = file_.data();
  const size_t size = file_.size();
  if (size < 8) {
    throw make_error(p,
                     "file is " + std::to_string(size) +
                         " bytes, too short for the 8-byte header length of a safetensors file",
                     kFixCorrupt);
  }
  const uint64_t n = read_le64(base);
  if (n > kMaxHeaderBytes) {
    throw make_error(p,
                     "header length " + std::to_string(n) +
                         " is larger than the 100 MB limit of the safetensors format",
                     kFixCorrupt);
  }
  if (n > size - 8) {
    throw make_error(p,
                     "header length " + std::to_string(n) + " is larger than the " +
                         std::to_string(size - 8) + " bytes after it (file truncated?)",
                     kFixCorrupt);
  }
  const char* text = reinterpret_cast<const char*>(base + 8);
  const json header = parse_json(p, text, text + n, "header");
  if (!header.is_object()) {
    throw make_error(
        p,
        std::string("header is a JSON ") + header.type_name() + ", expected an object of tensors",
        kFixCorrupt);
  }

  const uint8_t* buffer = base + 8 + n;
  const uint64_t buffer_size = size - 8 - n;
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw make_error(p, "header field __metadata__ is not an object of strings", kFixCorrupt);
      }
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) {
          throw make_error(p, "__metadata__ value for " + quote(k) + " is not a string",
                           kFixCorrupt);
        }
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor " + quote(name);
    if (!entry.is_object()) {
      throw make_error(p, where + " is not an object with dtype, shape and data_offsets",
                       kFixCorrupt);
    }
    const json* dtype = field(entry, "dtype");
    const json* shape = field(entry, "shape");
    const json* offsets = field(entry, "data_offsets");
    if (dtype == nullptr || !dtype->is_string()) {
      throw make_error(p, where + " has no \"dtype\" string", kFixCorrupt);
    }
    if (shape == nullptr || !shape->is_array()) {
      throw make_error(p, where + " has no \"shape\" array", kFixCorrupt);
    }
    if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2) {
      throw make_error(p, where + " has no \"data_offsets\" array of two integers", kFixCorrupt);
    }

    TensorRef t;
    t.name = name;
    t.file = p;
    t.dtype = map_dtype(p, name, dtype->get_ref<const std::string&>());
    // numel() multiplies in order with int64: the product of the non-zero dims must fit so
    // that no prefix product can overflow.
    uint64_t nonzero_product = 1;
    bool has_zero = false;
    for (const json& d : *shape) {
      uint64_t v = 0;
      if (!as_count(d, &v)) {
        throw make_error(p,
                         where + " has shape dimension " + d.dump() +
                             "; dimensions must be non-negative integers",
                         kFixCorrupt);
      }
      if (v == 0) {
        has_zero = true;
      } else if (nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v) {
        throw make_error(p, where + " has a shape whose element count overflows 64 bits",
                         kFixCorrupt);
      } else {
        nonzero_product *= v;
      }
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const uint64_t numel = has_zero ? 0 : nonzero_product;

    uint64_t begin = 0;
    uint64_t end = 0;
    if (!as_count((*offsets)[0], &begin) || !as_count((*offsets)[1], &end)) {
      throw make_error(p,
                       where + " has data_offsets " + offsets->dump() +
                           "; they must be two non-negative integers",
                       kFixCorrupt);
    }
    const std::string off_str = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    if (begin > end) {
      throw make_error(p, where + " has data_offsets " + off_str + " with begin > end",
                       kFixCorrupt);
    }
    if (end > buffer_size) {
      throw make_error(p,
                       where + " has data_offsets " + off_str + " past the end of the " +
                           std::to_string(buffer_size) + "-byte data buffer (file truncated?)",
                       kFixCorrupt);
    }
    const uint64_t esize = dtype_block_bytes(t.dtype);
    const uint64_t have = end - begin;
    if (numel > have / esize || numel * esize != have) {
      const bool fits = numel <= std::numeric_limits<uint64_t>::max() / esize;
      throw make_error(p,
                       where + " has data_offsets " + off_str + " holding " + std::to_string(have) +
                           " bytes, but " + dtype->get<std::string>() + " " + dims_str(t.shape) +
                           " needs " + (fits ? std::to_string(numel * esize) : "over 2^64") +
                           " bytes (size mismatch)",
                       kFixCorrupt);
    }
    t.data = buffer + begin;
    t.nbytes = static_cast<size_t>(have);
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }

  // File order; empty tensors occupy nothing and cannot overlap.
  std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return tensors_[a.index].name < tensors_[b.index].name;
  });
  const Range* last = nullptr;
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;
    if (last != nullptr && r.begin < last->end) {
      throw make_error(p,
                       "tensors " + quote(tensors_[last->index].name) + " and " +
                           quote(tensors_[r.index].name) + " overlap in the data buffer",
                       kFixCorrupt);
    }
    if (last == nullptr || r.end > last->end) last = &r;
  }
  std::vector<TensorRef> ordered;
  ordered.reserve(tensors_.size());
  for (const Range& r : ranges) ordered.push_back(std::move(tensors_[r.index]));
  tensors_ = std::move(ordered);
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const TensorRef* SafetensorsCheckpoint::find_tensor(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

/// What a checkpoint directory's weights are: the index's weight_map and shards (file names,
/// sorted), or one model.safetensors, or every *.safetensors.
struct DirWeights {
  std::string index_path;  ///< empty without an index
  std::vector<std::pair<std::string, std::string>> weight_map;
  std::vector<std::string> files;  ///< paths
};

DirWeights dir_weights(const std::string& dir) {
  const char* fix_dir = "pass a Hugging Face checkpoint directory";
  if (!is_directory(dir)) {
    throw make_error(
        dir, path_exists(dir) ? "not a directory" : "is not a directory (it does not exist)",
        fix_dir);
  }
  DirWeights w;
  const std::string index_path = join(dir, "model.safetensors.index.json");
  const std::string single_path = join(dir, "model.safetensors");
  // Checked, not stat'ed: a symbolic link loop or a link to nothing is named, not taken for
  // a file that is not there (which would load other files).
  const bool has_index = path_exists_checked(index_path);
  const bool has_single = path_exists_checked(single_path);
  if (has_index && has_single) {
    // transformers' from_pretrained loads model.safetensors, vLLM the index's shards: which
    // model runs would depend on the tool, so neither is guessed.
    throw make_error(dir,
                     "holds both model.safetensors and model.safetensors.index.json, which "
                     "loaders read differently (transformers loads model.safetensors, vLLM the "
                     "shards the index lists)",
                     "remove the one that is not this checkpoint's weights");
  }
  if (has_index) {
    w.index_path = index_path;
    w.weight_map = read_weight_map(index_path);
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : w.weight_map) shards.insert(shard);
    for (const std::string& shard : shards) {
      const std::string shard_path = join(dir, shard);
      if (!path_exists_checked(shard_path)) {
        std::string example;
        for (const auto& [tensor, s] : w.weight_map) {
          if (s == shard) {
            example = tensor;
            break;
          }
        }
        throw make_error(index_path,
                         "weight_map names shard " + quote(shard) + " (for tensor " +
                             quote(example) + "), but " + shard_path + " does not exist",
                         "download every shard of the checkpoint");
      }
      w.files.push_back(shard_path);
    }
  } else if (has_single) {
    w.files.push_back(single_path);
  } else {
    for (const auto& n : list_safetensors(dir)) w.files.push_back(join(dir, n));
    if (w.files.empty()) {
      throw make_error(
          dir, "no model.safetensors, model.safetensors.index.json or *.safetensors in " + dir,
          fix_dir);
    }
  }
  return w;
}

}  // namespace

std::vector<std::string> SafetensorsCheckpoint::weight_files(const std::string& dir) {
  return dir_weights(dir).files;
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open_dir(const std::string& dir) {
  const DirWeights w = dir_weights(dir);
  auto ck = std::make_unique<SafetensorsCheckpoint>();
  ck->dir_ = dir;
  std::map<std::string, const SafetensorsFile*> by_path;
  for (const std::string& path : w.files) {
    ck->files_.push_back(SafetensorsFile::open(path));
    by_path[path] = ck->files_.back().get();
  }
  for (const auto& [tensor, shard] : w.weight_map) {
    if (by_path.at(join(dir, shard))->find_tensor(tensor) == nullptr) {
      throw make_error(w.index_path,
                       "weight_map puts tensor " + quote(tensor) + " in shard " + quote(shard) +
                           ", but " + join(dir, shard) + " has no such tensor",
                       "the index and the shards come from different exports; re-download the "
                       "checkpoint");
    }
  }

  for (const auto& f : ck->files_) {
    for (const TensorRef& t : f->tensors()) {
      const auto [it, inserted] = ck->index_.emplace(t.name, ck->tensors_.size());
      if (!inserted) {
        throw make_error(dir,
                         "tensor " + quote(t.name) + " appears in both " +
                             ck->tensors_[it->second].file + " and " + f->path(),
                         "a checkpoint must hold each tensor once; remove stray shards");
      }
      ck->tensors_.push_back(t);
    }
  }
  return ck;
}

}  // namespace cb::formats
