#include "lib/kv/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <string>

#include "lib/core/error.h"
#include "lib/core/sysinfo.h"

namespace cb::kv {
namespace {

void require_positive(const char* field, int value) {
  if (value <= 0) {
    throw make_error(std::string("KvConfig.") + field,
                     "must be positive, got " + std::to_string(value),
                     "set it from the model config (n_layers, n_kv_heads, head_dim) or the "
                     "cache options (block_size, num_blocks)");
  }
}

// a * b, throwing when the product does not fit in uint64_t.
uint64_t checked_mul(uint64_t a, uint64_t b, const KvConfig& cfg) {
  if (b != 0 && a > std::numeric_limits<uint64_t>::max() / b) {
    throw make_error("KvConfig",
                     "pool size overflows (n_layers=" + std::to_string(cfg.n_layers) +
                         " x num_blocks=" + std::to_string(cfg.num_blocks) +
                         " x block_size=" + std::to_string(cfg.block_size) +
                         " x n_kv_heads=" + std::to_string(cfg.n_kv_heads) +
                         " x head_dim=" + std::to_string(cfg.head_dim) + ")",
                     "reduce num_blocks");
  }
  return a * b;
}

KvConfig validated(const KvConfig& cfg) {
  require_positive("n_layers", cfg.n_layers);
  require_positive("n_kv_heads", cfg.n_kv_heads);
  require_positive("head_dim", cfg.head_dim);
  require_positive("block_size", cfg.block_size);
  require_positive("num_blocks", cfg.num_blocks);
  uint64_t floats = 2;  // K and V
  for (int f : {cfg.n_layers, cfg.num_blocks, cfg.block_size, cfg.n_kv_heads, cfg.head_dim}) {
    floats = checked_mul(floats, static_cast<uint64_t>(f), cfg);
  }
  const uint64_t bytes = checked_mul(floats, sizeof(float), cfg);
  // A cache of block tables only (its blocks live on the GPU) allocates nothing here: the
  // device's allocator is the judge of its size.
  const uint64_t phys = physical_memory_bytes();
  if (cfg.host_pools && phys > 0 && bytes > phys) {
    throw make_error("KV cache",
                     "the K+V pool of " + std::to_string(cfg.num_blocks) + " blocks of " +
                         std::to_string(cfg.block_size) + " tokens would take " +
                         std::to_string(bytes >> 20) + " MiB, more than this machine's " +
                         std::to_string(phys >> 20) + " MiB of memory",
                     "lower --ctx (the pool holds whole windows; the default is the model's "
                     "context length), or, where the command takes them, --max-batch or "
                     "--kv-blocks");
  }
  return cfg;
}

std::string seq_name(SeqId seq) {
  return "sequence " + std::to_string(seq);
}

}  // namespace

void KvCache::require_host_pools() const {
  if (!cfg_.host_pools) {
    throw make_error("kv cache",
                     "this cache keeps block tables only (its blocks live on the GPU), so it has "
                     "no host KV to read, write or copy",
                     "use a cache with host pools for the CPU backend");
  }
}

KvCache::ObjectId::ObjectId() {
  static std::atomic<uint64_t> next_id{1};
  value = next_id.fetch_add(1);
}

KvCache::KvCache(const KvConfig& cfg) : cfg_(validated(cfg)) {
  const size_t pool = static_cast<size_t>(cfg_.n_layers) * static_cast<size_t>(layer_floats());
  if (cfg_.host_pools) {
    k_.assign(pool, 0.0f);
    v_.assign(pool, 0.0f);
  }
  refcount_.assign(static_cast<size_t>(cfg_.num_blocks), 0);
  free_list_.reserve(static_cast<size_t>(cfg_.num_blocks));
  // LIFO: block 0 on top, so a fresh cache hands out blocks in ascending order.
  for (int32_t b = cfg_.num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

int64_t KvCache::block_floats() const {
  return cfg_.block_size * slot_floats();
}

int64_t KvCache::layer_floats() const {
  return cfg_.num_blocks * block_floats();
}

const KvCache::Seq& KvCache::seq_ref(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    throw make_error("kv cache", "unknown " + seq_name(seq),
                     "add_sequence() it before use (or it was already freed)");
  }
  return it->second;
}

KvCache::Seq& KvCache::seq_ref(SeqId seq) {
  return const_cast<Seq&>(static_cast<const KvCache*>(this)->seq_ref(seq));
}

int32_t KvCache::take_block() {
  const int32_t b = free_list_.back();
  free_list_.pop_back();
  refcount_[b] = 1;
  return b;
}

void KvCache::release_block(int32_t b) {
  if (--refcount_[b] == 0) free_list_.push_back(b);
}

void KvCache::check_layer(int layer) const {
  if (layer < 0 || layer >= cfg_.n_layers) {
    throw make_error("kv cache", "layer " + std::to_string(layer) + " out of range [0, " +
                                     std::to_string(cfg_.n_layers) + ")");
  }
}

int64_t KvCache::check_pos(const Seq& s, SeqId seq, int64_t pos) const {
  const int64_t cap = static_cast<int64_t>(s.blocks.size()) * cfg_.block_size;
  if (pos < 0 || pos >= cap) {
    throw make_error("kv cache",
                     "slot " + std::to_string(pos) + " of " + seq_name(seq) +
                         " is outside its reserved capacity " + std::to_string(cap),
                     "reserve() the slots first");
  }
  return pos / cfg_.block_size;
}

void KvCache::copy_block(int32_t from, int32_t to, int64_t n) {
  if (n <= 0) return;
  if (!cfg_.host_pools) {  // the blocks' owner applies it (take_block_copies)
    copies_.push_back({from, to, n});
    return;
  }
  const int64_t bf = block_floats();
  const size_t bytes = static_cast<size_t>(n * slot_floats()) * sizeof(float);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const int64_t base = l * layer_floats();
    std::memcpy(&k_[static_cast<size_t>(base + to * bf)],
                &k_[static_cast<size_t>(base + from * bf)], bytes);
    std::memcpy(&v_[static_cast<size_t>(base + to * bf)],
                &v_[static_cast<size_t>(base + from * bf)], bytes);
  }
}

void KvCache::add_sequence(SeqId seq) {
  if (seqs_.count(seq) != 0) {
    throw make_error("kv cache", seq_name(seq) + " already exists",
                     "free_sequence() it first or pick another id");
  }
  seqs_.emplace(seq, Seq{});
}

bool KvCache::has_sequence(SeqId seq) const {
  return seqs_.count(seq) != 0;
}

bool KvCache::reserve(SeqId seq, int64_t new_len) {
  Seq& s = seq_ref(seq);
  if (new_len < 0) {
    throw make_error("kv cache", "reserve(" + seq_name(seq) + ", " + std::to_string(new_len) +
                                     "): negative length");
  }
  const int64_t bs = cfg_.block_size;
  const int64_t have = static_cast<int64_t>(s.blocks.size());
  const int64_t want = new_len / bs + (new_len % bs != 0 ? 1 : 0);  // no overflow
  const int64_t grow = std::max<int64_t>(0, want - have);
  // Shared blocks that the slots [length, new_len) overlap must be copied before writing.
  const int64_t first = s.length / bs;
  const int64_t last = std::min(want, have);  // exclusive
  int64_t copies = 0;
  for (int64_t i = first; i < last; ++i) copies += refcount_[s.blocks[i]] > 1 ? 1 : 0;
  if (grow + copies > static_cast<int64_t>(free_list_.size())) return false;

  for (int64_t i = first; i < last; ++i) {
    const int32_t old = s.blocks[i];
    if (refcount_[old] <= 1) continue;
    const int32_t fresh = take_block();
    copy_block(old, fresh, std::clamp<int64_t>(s.length - i * bs, 0, bs));
    release_block(old);
    s.blocks[i] = fresh;
  }
  for (int64_t i = 0; i < grow; ++i) s.blocks.push_back(take_block());
  return true;
}

int64_t KvCache::length(SeqId seq) const {
  return seq_ref(seq).length;
}

int64_t KvCache::capacity(SeqId seq) const {
  return static_cast<int64_t>(seq_ref(seq).blocks.size()) * cfg_.block_size;
}

void KvCache::set_length(SeqId seq, int64_t len) {
  Seq& s = seq_ref(seq);
  const int64_t cap = static_cast<int64_t>(s.blocks.size()) * cfg_.block_size;
  if (len < 0 || len > cap) {
    throw make_error("kv cache",
                     "set_length(" + seq_name(seq) + ", " + std::to_string(len) +
                         ") outside [0, capacity " + std::to_string(cap) + "]",
                     "reserve() the slots before setting the length");
  }
  s.length = len;
}

void KvCache::truncate(SeqId seq, int64_t len) {
  Seq& s = seq_ref(seq);
  if (len < 0 || len > s.length) {
    throw make_error("kv cache", "truncate(" + seq_name(seq) + ", " + std::to_string(len) +
                                     ") outside [0, length " + std::to_string(s.length) + "]");
  }
  const size_t keep = static_cast<size_t>((len + cfg_.block_size - 1) / cfg_.block_size);
  // Release tail blocks last-first so the LIFO hands them back in ascending order.
  while (s.blocks.size() > keep) {
    release_block(s.blocks.back());
    s.blocks.pop_back();
  }
  s.length = len;
}

void KvCache::free_sequence(SeqId seq) {
  Seq& s = seq_ref(seq);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) release_block(*it);
  seqs_.erase(seq);
}

bool KvCache::fork(SeqId src, SeqId dst, int64_t len) {
  const Seq& s = seq_ref(src);
  if (seqs_.count(dst) != 0) {
    throw make_error(
        "kv cache", "fork(" + seq_name(src) + "): destination " + seq_name(dst) + " already exists",
        "free_sequence() it first or pick another id");
  }
  if (len < 0 || len > s.length) {
    throw make_error("kv cache", "fork(" + seq_name(src) + ", " + std::to_string(len) +
                                     ") outside [0, length " + std::to_string(s.length) + "]");
  }
  const int64_t bs = cfg_.block_size;
  const int64_t full = len / bs;
  const int64_t tail = len % bs;
  if (tail != 0 && free_list_.empty()) return false;
  Seq d;
  d.length = len;
  d.blocks.reserve(static_cast<size_t>(full + (tail != 0 ? 1 : 0)));
  for (int64_t i = 0; i < full; ++i) {
    ++refcount_[s.blocks[i]];
    d.blocks.push_back(s.blocks[i]);
  }
  if (tail != 0) {
    const int32_t fresh = take_block();
    copy_block(s.blocks[full], fresh, tail);
    d.blocks.push_back(fresh);
  }
  seqs_.emplace(dst, std::move(d));
  return true;
}

const std::vector<int32_t>& KvCache::block_table(SeqId seq) const {
  return seq_ref(seq).blocks;
}

std::vector<BlockCopy> KvCache::take_block_copies() {
  std::vector<BlockCopy> out;
  out.swap(copies_);
  return out;
}

bool KvCache::block_shared(SeqId seq, int64_t pos) const {
  const Seq& s = seq_ref(seq);
  return refcount_[s.blocks[check_pos(s, seq, pos)]] > 1;
}

float* KvCache::k_pool(int layer) {
  require_host_pools();
  check_layer(layer);
  return k_.data() + layer * layer_floats();
}

float* KvCache::v_pool(int layer) {
  require_host_pools();
  check_layer(layer);
  return v_.data() + layer * layer_floats();
}

const float* KvCache::k_pool(int layer) const {
  require_host_pools();
  check_layer(layer);
  return k_.data() + layer * layer_floats();
}

const float* KvCache::v_pool(int layer) const {
  require_host_pools();
  check_layer(layer);
  return v_.data() + layer * layer_floats();
}

float* KvCache::writable_slot(std::vector<float>& pool, int layer, SeqId seq, int64_t pos) {
  require_host_pools();
  check_layer(layer);
  const Seq& s = seq_ref(seq);
  const int32_t b = s.blocks[check_pos(s, seq, pos)];
  if (refcount_[b] > 1) {
    throw make_error("kv cache",
                     "slot " + std::to_string(pos) + " of " + seq_name(seq) + " is in block " +
                         std::to_string(b) + ", shared with " + std::to_string(refcount_[b] - 1) +
                         " other sequence(s), so it is read-only",
                     "reserve() the slots to be written first (it copies shared blocks)");
  }
  const int64_t off =
      layer * layer_floats() + b * block_floats() + (pos % cfg_.block_size) * slot_floats();
  return pool.data() + off;
}

float* KvCache::k_slot(int layer, SeqId seq, int64_t pos) {
  return writable_slot(k_, layer, seq, pos);
}

float* KvCache::v_slot(int layer, SeqId seq, int64_t pos) {
  return writable_slot(v_, layer, seq, pos);
}

KvStats KvCache::stats() const {
  KvStats st;
  st.num_blocks = cfg_.num_blocks;
  st.free_blocks = static_cast<int>(free_list_.size());
  st.sequences = static_cast<int>(seqs_.size());
  for (const auto& entry : seqs_) st.tokens += entry.second.length;
  for (int32_t rc : refcount_) st.shared_blocks += rc > 1 ? 1 : 0;
  st.bytes_per_block = 2 * static_cast<uint64_t>(cfg_.n_layers) *
                       static_cast<uint64_t>(block_floats()) * sizeof(float);
  return st;
}

}  // namespace cb::kv
