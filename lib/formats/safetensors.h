#pragma once
/// safetensors reader: the 8-byte little-endian header length, the JSON header
/// ({name: {dtype, shape, data_offsets}}, optional __metadata__), memory-mapped data.
/// Single files and sharded Hugging Face checkpoints (model.safetensors.index.json).
/// Every offset and size is validated (in bounds, matching dtype x shape, no overlap).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/mapped_file.h"
#include "lib/formats/tensor_ref.h"

namespace cb::formats {

class SafetensorsFile {
 public:
  /// Opens and validates one .safetensors file; throws cb::Error naming the file,
  /// the tensor or header field, and what is wrong.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find_tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  explicit SafetensorsFile(const std::string& path) : file_(path) {}
  void parse();

  MappedFile file_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// All tensors of a Hugging Face checkpoint directory: `model.safetensors`, or the
/// shards listed in `model.safetensors.index.json` (weight_map), or, failing both,
/// every `*.safetensors` file in the directory. A directory holding both the index and
/// model.safetensors is refused (transformers loads the one, vLLM the other). Tensor names
/// must be unique across shards, and every name in the index must be found in the shard it
/// names.
class SafetensorsCheckpoint {
 public:
  static std::unique_ptr<SafetensorsCheckpoint> open_dir(const std::string& dir);
  /// The paths of the files open_dir(dir) loads, in its order, found as it finds them (the
  /// index read, the shards' existence checked) but not opened.
  static std::vector<std::string> weight_files(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find_tensor(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorRef> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace cb::formats
