#pragma once
/// SHA-256 (FIPS 180-4) of dataset files, recorded in results so a number can be tied to
/// the exact bytes it was measured on. Small and dependency-free on purpose.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cb::datasets {

/// Incremental SHA-256: update() any number of times, then digest() once.
class Sha256 {
 public:
  /// Starts an empty hash.
  Sha256();

  /// Feeds `size` bytes.
  void update(const void* data, size_t size);
  /// Feeds the bytes of `s`.
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// Pads, finishes and returns the 32-byte digest; the object must not be updated after.
  std::array<uint8_t, 32> digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

/// Lowercase hex of a digest (64 characters).
std::string to_hex(const std::array<uint8_t, 32>& digest);

/// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

/// Lowercase hex SHA-256 of a file's bytes; throws cb::Error naming the file if unreadable.
std::string sha256_file_hex(const std::string& path);

}  // namespace cb::datasets
