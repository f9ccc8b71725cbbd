#pragma once
/// A fixed memory budget handed out as aligned blocks: what the CUDA backend carves its
/// weights, paged KV blocks and work space from, so that running out is a clear error at a
/// known budget instead of a failed cudaMalloc deep inside a step. The arena takes any
/// memory (device memory from make_device_arena in lib/device/cuda_runtime.h; host memory in
/// tests), so its bookkeeping is tested without a GPU.
///
/// Allocation is first fit over free ranges kept sorted by offset; a freed block merges with
/// free neighbours. Blocks keep the arena's memory alive: the memory's deleter runs when the
/// arena and its last block are gone. Thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cb::device {

class Arena {
 public:
  class Block;

  /// Manages `bytes` bytes at `memory` (its deleter frees them). `name` ("weights", "KV
  /// blocks") appears in errors. `alignment` (a power of two) is every block's offset and
  /// size granule. Throws cb::Error when memory is null with bytes > 0 or the alignment is bad.
  Arena(std::shared_ptr<void> memory, uint64_t bytes, std::string name, uint64_t alignment = 256);

  /// A block of at least `bytes` for `what` (named in the error). Throws cb::Error with the
  /// request, the bytes in use, the budget and the largest free range when it does not fit.
  Block allocate(uint64_t bytes, const std::string& what);
  /// As allocate, but an empty optional when the block does not fit.
  std::optional<Block> try_allocate(uint64_t bytes);

  const std::string& name() const;
  uint64_t budget() const;
  uint64_t alignment() const;
  uint64_t used() const;          ///< bytes in live blocks (rounded to the alignment)
  uint64_t peak() const;          ///< the most bytes ever in use at once
  uint64_t largest_free() const;  ///< the largest block that would fit now
  size_t blocks() const;          ///< live blocks
  void* base() const;             ///< start of the managed memory

 private:
  struct State;
  std::shared_ptr<State> s_;
};

/// A block of an Arena (move-only); returns its range to the arena when destroyed.
class Arena::Block {
 public:
  Block() = default;
  ~Block();
  Block(Block&& o) noexcept;
  Block& operator=(Block&& o) noexcept;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  void* data() const { return data_; }
  uint64_t size() const { return size_; }      ///< as requested
  uint64_t offset() const { return offset_; }  ///< from the arena's base
  explicit operator bool() const { return data_ != nullptr || size_ != 0; }
  /// Returns the range now (the block becomes empty).
  void reset();

 private:
  friend class Arena;
  Block(std::shared_ptr<State> s, uint64_t offset, uint64_t size, void* data)
      : s_(std::move(s)), offset_(offset), size_(size), data_(data) {}

  std::shared_ptr<State> s_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
  void* data_ = nullptr;
};

}  // namespace cb::device
