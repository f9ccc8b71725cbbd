#pragma once
/// A read-only memory mapping of a whole file; the view model files are parsed from.

#include <cstddef>
#include <cstdint>
#include <string>

namespace cb {

class MappedFile {
 public:
  /// Maps `path` read-only; throws cb::Error naming the file if it cannot be opened or is not
  /// a regular file (a FIFO is refused, never waited on: open_regular_file). An empty file
  /// maps to size() == 0, data() == nullptr.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cb
