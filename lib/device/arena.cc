#include "lib/device/arena.h"

#include <map>
#include <mutex>
#include <utility>

#include "lib/core/error.h"

namespace cb::device {
namespace {

std::string bytes_str(uint64_t n) {
  return std::to_string(n) + " bytes";
}

}  // namespace

struct Arena::State {
  std::shared_ptr<void> memory;
  uint64_t bytes = 0;
  uint64_t alignment = 256;
  std::string name;

  mutable std::mutex mu;
  std::map<uint64_t, uint64_t> free;  // offset -> length: disjoint, never adjacent
  std::map<uint64_t, uint64_t> live;  // offset -> rounded length
  uint64_t used = 0;
  uint64_t peak = 0;

  uint64_t largest_free_locked() const {
    uint64_t best = 0;
    for (const auto& [off, len] : free) best = len > best ? len : best;
    return best;
  }

  // First fit; returns false when no free range holds `len` (already rounded).
  bool take(uint64_t len, uint64_t* offset) {
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < len) continue;
      *offset = it->first;
      const uint64_t rest = it->second - len;
      const uint64_t rest_off = it->first + len;
      free.erase(it);
      if (rest > 0) free.emplace(rest_off, rest);
      live.emplace(*offset, len);
      used += len;
      peak = used > peak ? used : peak;
      return true;
    }
    return false;
  }

  void give_back(uint64_t offset) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = live.find(offset);
    if (it == live.end()) return;  // unreachable: only Blocks call this, once each
    uint64_t off = offset;
    uint64_t len = it->second;
    used -= len;
    live.erase(it);
    auto next = free.lower_bound(off);
    if (next != free.end() && next->first == off + len) {
      len += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        off = prev->first;
        len += prev->second;
        free.erase(prev);
      }
    }
    free.emplace(off, len);
  }
};

Arena::Arena(std::shared_ptr<void> memory, uint64_t bytes, std::string name, uint64_t alignment)
    : s_(std::make_shared<State>()) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw make_error("arena " + name,
                     "alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (bytes > 0 && memory == nullptr) {
    throw make_error("arena " + name, "no memory for a budget of " + bytes_str(bytes));
  }
  s_->memory = std::move(memory);
  s_->alignment = alignment;
  s_->bytes = bytes / alignment * alignment;  // the tail past the last granule is never used
  s_->name = std::move(name);
  if (s_->bytes > 0) s_->free.emplace(0, s_->bytes);
}

std::optional<Arena::Block> Arena::try_allocate(uint64_t bytes) {
  const uint64_t a = s_->alignment;
  if (bytes > s_->bytes) return std::nullopt;  // also guards the rounding below
  const uint64_t len = bytes == 0 ? a : (bytes + a - 1) / a * a;
  uint64_t off = 0;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (!s_->take(len, &off)) return std::nullopt;
  }
  void* p = static_cast<char*>(s_->memory.get()) + off;
  return Block(s_, off, bytes, p);
}

Arena::Block Arena::allocate(uint64_t bytes, const std::string& what) {
  std::optional<Block> b = try_allocate(bytes);
  if (b) return std::move(*b);
  uint64_t used = 0;
  uint64_t largest = 0;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    used = s_->used;
    largest = s_->largest_free_locked();
  }
  throw make_error("arena " + s_->name,
                   "cannot fit " + bytes_str(bytes) + " for " + what + ": " + bytes_str(used) +
                       " of " + bytes_str(s_->bytes) + " in use, largest free range " +
                       bytes_str(largest),
                   "raise the budget (--gpu-memory) or use a smaller model, batch or context");
}

const std::string& Arena::name() const {
  return s_->name;
}
uint64_t Arena::budget() const {
  return s_->bytes;
}
uint64_t Arena::alignment() const {
  return s_->alignment;
}
uint64_t Arena::used() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->used;
}
uint64_t Arena::peak() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->peak;
}
uint64_t Arena::largest_free() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->largest_free_locked();
}
size_t Arena::blocks() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->live.size();
}
void* Arena::base() const {
  return s_->memory.get();
}

Arena::Block::~Block() {
  reset();
}

Arena::Block::Block(Block&& o) noexcept
    : s_(std::move(o.s_)), offset_(o.offset_), size_(o.size_), data_(o.data_) {
  o.offset_ = 0;
  o.size_ = 0;
  o.data_ = nullptr;
}

Arena::Block& Arena::Block::operator=(Block&& o) noexcept {
  if (this != &o) {
    reset();
    s_ = std::move(o.s_);
    offset_ = o.offset_;
    size_ = o.size_;
    data_ = o.data_;
    o.offset_ = 0;
    o.size_ = 0;
    o.data_ = nullptr;
  }
  return *this;
}

void Arena::Block::reset() {
  if (s_) s_->give_back(offset_);
  s_.reset();
  offset_ = 0;
  size_ = 0;
  data_ = nullptr;
}

}  // namespace cb::device
