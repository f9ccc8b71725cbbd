#pragma once
/// Paged KV cache (vLLM-style): per layer, a pool of fixed-size blocks of K and V slots,
/// and per sequence a block table mapping slot s (the token at position s) to
/// (block_table[s / block_size], s % block_size). Blocks are reference counted so
/// sequences can share a prefix. Pure metadata plus host buffers (fp32) for the CPU
/// backend; the CUDA backend will keep the same metadata over device buffers.
///
/// Copy-on-write contract. A block referenced by more than one sequence (after fork) is
/// read-only: k_slot/v_slot on a slot of a shared block throw cb::Error (a caller bug),
/// never hand out a pointer that would change another sequence's tokens. Writable slots
/// are obtained through reserve(seq, n): besides allocating, it gives `seq` a private copy
/// (all layers, K and V, the valid slots) of every shared block overlapping the slots
/// [length, n) it is about to write, so "reserve (true), write [length, n), set_length(n)"
/// always works. A slot pointer is valid only until the next call that changes the cache
/// (a fork may share its block). block_shared() tells whether a slot is currently read-only. What
/// was written to slots at or past a sequence's length survives set_length and reserve's
/// allocation, but fork and copy-on-write carry only slots [0, length), and truncate leaves them
/// unspecified.

#include <cstdint>
#include <map>
#include <vector>

namespace cb::kv {

/// Caller-chosen identifier of one sequence (request) in the cache.
using SeqId = int64_t;

/// Shape of the cache; every field must be positive.
struct KvConfig {
  int n_layers = 0;     ///< transformer layers (one K and one V pool each)
  int n_kv_heads = 0;   ///< key/value heads per layer
  int head_dim = 0;     ///< floats per head
  int block_size = 16;  ///< tokens per block
  int num_blocks = 0;  ///< blocks in the pool (shared by all layers: block b exists in every layer)
  /// false: block tables and lengths only, the blocks live elsewhere (the GPU's pools in
  /// lib/cuda_model); pool and slot accessors then throw cb::Error, and the block copies of
  /// copy-on-write and fork are recorded for the blocks' owner (take_block_copies).
  bool host_pools = true;
};

/// Exact accounting of the pool at one instant.
struct KvStats {
  int num_blocks = 0;            ///< blocks in the pool
  int free_blocks = 0;           ///< blocks referenced by no sequence
  int sequences = 0;             ///< registered sequences
  int64_t tokens = 0;            ///< sum of sequence lengths
  int64_t shared_blocks = 0;     ///< blocks with refcount > 1
  uint64_t bytes_per_block = 0;  ///< K + V, all layers
};

/// A block copy made by a cache without host pools (copy-on-write or a fork's partial block):
/// slots [0, n) of block `from` into block `to`, every layer, K and V.
struct BlockCopy {
  int32_t from = 0, to = 0;
  int64_t n = 0;
};

/// Block pool plus per-sequence block tables; see the copy-on-write contract above.
/// Every operation on an unknown SeqId, or with an out-of-range argument, throws cb::Error
/// and changes nothing. Not thread-safe.
class KvCache {
 public:
  /// Allocates the pools: 2 * n_layers * num_blocks * block_size * n_kv_heads * head_dim floats.
  /// Throws cb::Error if the config is invalid (non-positive field, size overflow, host pools
  /// larger than the machine's physical memory).
  explicit KvCache(const KvConfig& cfg);

  /// Unique to this object within the process (never reused, unlike its address). A copy (or a
  /// moved-to cache) gets a new id: the GPU backend binds its device blocks to one id, and a copy
  /// of the block tables cannot share them.
  uint64_t id() const { return id_.value; }
  /// The configuration the cache was built with.
  const KvConfig& config() const { return cfg_; }
  /// Floats per slot (n_kv_heads * head_dim).
  int64_t slot_floats() const { return static_cast<int64_t>(cfg_.n_kv_heads) * cfg_.head_dim; }

  /// Registers an empty sequence; throws cb::Error if it exists.
  void add_sequence(SeqId seq);
  /// Whether `seq` is registered.
  bool has_sequence(SeqId seq) const;
  /// Ensures `seq` has writable slots for `new_len` tokens: allocates blocks as needed and
  /// copies any shared block overlapping [length, new_len) (copy-on-write). Returns false,
  /// changing nothing, when the pool has too few free blocks (an expected outcome).
  /// Never releases blocks (truncate does); new_len < 0 throws cb::Error.
  bool reserve(SeqId seq, int64_t new_len);
  /// Tokens currently valid in `seq` (slots [0, length)).
  int64_t length(SeqId seq) const;
  /// Slots `seq` holds blocks for (block_table(seq).size() * block_size).
  int64_t capacity(SeqId seq) const;
  /// Sets the valid length (0 <= len <= capacity, else cb::Error); used after writing slots.
  void set_length(SeqId seq, int64_t len);
  /// Drops slots past `len` (0 <= len <= length, else cb::Error): the length becomes `len`
  /// and blocks wholly past it are released (freed when no other sequence shares them).
  void truncate(SeqId seq, int64_t len);
  /// Frees the sequence and releases its blocks.
  void free_sequence(SeqId seq);
  /// New sequence `dst` sharing the first `len` slots of `src` (0 <= len <= length(src)):
  /// full blocks shared by refcount, a partial last block copied into a fresh block (all
  /// layers, K and V). Returns false, changing nothing, when that copy finds no free block.
  /// Throws cb::Error if `src` is unknown or `dst` exists.
  bool fork(SeqId src, SeqId dst, int64_t len);

  /// Block ids of `seq` in slot order. The reference is invalidated by any call that
  /// changes `seq` (reserve, truncate, free_sequence).
  const std::vector<int32_t>& block_table(SeqId seq) const;
  /// Whether slot `pos` (< capacity) of `seq` lives in a block shared with another sequence,
  /// i.e. is read-only until reserve() copies it.
  bool block_shared(SeqId seq, int64_t pos) const;
  /// Base of layer `layer`'s K (or V) pool: [num_blocks, block_size, n_kv_heads, head_dim].
  float* k_pool(int layer);
  /// See k_pool.
  float* v_pool(int layer);
  /// Read-only view of layer `layer`'s K pool.
  const float* k_pool(int layer) const;
  /// Read-only view of layer `layer`'s V pool.
  const float* v_pool(int layer) const;
  /// Writable pointer to slot `pos` of `seq` in layer `layer` (pos < capacity); throws
  /// cb::Error when the slot's block is shared (see the copy-on-write contract).
  float* k_slot(int layer, SeqId seq, int64_t pos);
  /// See k_slot.
  float* v_slot(int layer, SeqId seq, int64_t pos);

  /// The block copies recorded since the last call, in order, and forgets them (always empty
  /// with host pools, which copy at once). The blocks' owner must apply them, in this order,
  /// before it next reads or writes the blocks.
  std::vector<BlockCopy> take_block_copies();

  /// Current accounting (O(num_blocks + sequences)).
  KvStats stats() const;
  /// Blocks referenced by no sequence (stats().free_blocks in O(1)).
  int free_blocks() const { return static_cast<int>(free_list_.size()); }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int64_t length = 0;
  };
  const Seq& seq_ref(SeqId seq) const;
  Seq& seq_ref(SeqId seq);
  int32_t take_block();
  void release_block(int32_t b);
  void check_layer(int layer) const;
  int64_t check_pos(const Seq& s, SeqId seq, int64_t pos) const;  // returns the block index
  float* writable_slot(std::vector<float>& pool, int layer, SeqId seq, int64_t pos);
  /// Copies slots [0, n) of block `from` into block `to`, every layer, K and V.
  void copy_block(int32_t from, int32_t to, int64_t n);
  int64_t layer_floats() const;
  int64_t block_floats() const;

  void require_host_pools() const;

  KvConfig cfg_;
  /// A process-unique number that copying and moving do not carry over.
  struct ObjectId {
    uint64_t value;
    ObjectId();
    ObjectId(const ObjectId&) : ObjectId() {}
    ObjectId& operator=(const ObjectId&) {
      value = ObjectId().value;
      return *this;
    }
  };
  ObjectId id_;
  std::vector<float> k_, v_;        // [n_layers][num_blocks][block_size][slot]
  std::vector<int32_t> free_list_;  // LIFO of free block ids
  std::vector<BlockCopy> copies_;   // without host pools: not yet applied by the owner
  std::vector<int32_t> refcount_;
  std::map<SeqId, Seq> seqs_;
};

}  // namespace cb::kv
