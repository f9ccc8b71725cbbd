#pragma once
/// The forward pass of every supported family over a paged KV cache, layer by layer,
/// with the two hooks CachedAttention needs: wait for a layer's preloaded KV before its
/// attention runs, and receive each layer's new K *before RoPE* (and V) to save it.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/config.h"
#include "lib/model/model_source.h"
#include "lib/model/weights.h"

namespace cb::model {

/// New tokens of one sequence for one forward call: they occupy positions
/// [cache.length(seq), cache.length(seq) + tokens.size()). A prefill chunk has many
/// tokens; a decode step has one.
struct SeqInput {
  kv::SeqId seq = 0;
  std::vector<int32_t> tokens;
  bool all_logits = false;  ///< logits for every new token (else only the last one)
  /// RoPE position of slot s is s + rope_offset (masking uses slots, i.e. relative positions).
  /// 0 in normal serving; a non-zero offset shifts every position, which must not change the
  /// logits (RoPE encodes relative positions only).
  int64_t rope_offset = 0;
};

struct LayerHooks {
  /// Called before layer `layer` reads its KV cache; returns when the layer's preloaded
  /// history is in place. Default: no-op.
  std::function<void(int layer)> wait_ready;
  /// Called once per (layer, sequence) with the new tokens' K before RoPE and V, each
  /// [n, n_kv_heads * head_dim] row-major, for positions [pos0, pos0 + n), before forward
  /// returns (the CPU backend calls it during the layer; the GPU backend copies on its write
  /// stream into a ring of four layer slots and calls it when a slot comes round, or after the
  /// last layer). Default: none.
  std::function<void(int layer, kv::SeqId seq, int64_t pos0, int64_t n, const float* k_pre_rope,
                     const float* v)>
      on_new_kv;
  /// Like on_new_kv, with k and v in the model's native_kv_type() (no conversion on the GPU,
  /// where the KV is kept in fp16 or bf16): called instead of on_new_kv when set.
  std::function<void(int layer, kv::SeqId seq, int64_t pos0, int64_t n, const void* k_pre_rope,
                     const void* v)>
      on_new_kv_native;
  /// Optional, with on_new_kv_native: where the caller keeps `seq`'s new K and V rows
  /// [pos0, pos0 + n) of `layer` ({nullptr, nullptr}: nowhere). A backend may write the rows
  /// there itself (the GPU copies a prefill chunk's rows straight into page-locked memory) and
  /// then hands those same pointers to on_new_kv_native; or ignore it (the CPU does).
  std::function<std::pair<void*, void*>(int layer, kv::SeqId seq, int64_t pos0, int64_t n)>
      native_kv_target;
};

/// The rows of one forward call, shared by the CPU and CUDA backends: item i of the batch owns
/// rows [row0[i], row0[i] + n_i); row r holds token ids[r] at slot pos[r] (RoPE position
/// rope_pos[r]); logit_rows are the rows whose logits are returned, in order.
struct BatchRows {
  std::vector<int64_t> row0, len0;  ///< per item: first row, cache length before the call
  std::vector<int32_t> ids, pos, rope_pos;
  std::vector<int64_t> logit_rows;
  int64_t rows() const { return static_cast<int64_t>(ids.size()); }
};
/// Builds and checks the rows: throws cb::Error for an item without tokens, a token id outside
/// [0, vocab) or more tokens than the sequence has KV slots reserved.
BatchRows batch_rows(const ModelConfig& c, const std::vector<SeqInput>& batch,
                     const kv::KvCache& cache);

/// What evaluation needs of a model on any backend: its config and a batched forward over a
/// paged KvCache. Model (CPU) and CudaModel (lib/cuda_model, GPU) implement it.
class ForwardModel {
 public:
  virtual ~ForwardModel() = default;
  virtual const ModelConfig& config() const = 0;
  /// Runs the batch through all layers, appending each item's tokens to its sequence.
  /// Capacity must have been reserved (cache.reserve) by the caller; token ids must be in
  /// [0, vocab). Returns logits [rows, vocab]: per item in order, one row per new token if
  /// all_logits, else one row for its last token.
  virtual std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                                     const LayerHooks& hooks) const = 0;
  std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache) const {
    return forward(batch, cache, LayerHooks{});
  }
  /// A KvConfig matching this model for a pool of `num_blocks` blocks (with host pools only
  /// when the backend keeps its KV in host memory). A cb::Error naming --ctx when the count
  /// is more than a cache can index (pools sized from a huge declared context).
  kv::KvConfig kv_config(int64_t num_blocks, int block_size = 16) const;
  /// True when forward reads and writes the cache's host pools (the CPU backend).
  virtual bool host_kv() const { return true; }
  /// Binds a cache made from kv_config, still empty, to this model before its first use (the
  /// GPU backend allocates the device blocks here, so restore_kv may precede forward). Default:
  /// nothing to do.
  virtual void bind_cache(const kv::KvCache& cache) const { (void)cache; }
  /// The precision the KV is computed in ("f32", or the GPU storage "f16" / "bf16"): stored
  /// entries are tagged with it, so entries made at one precision are not reused at another.
  virtual std::string kv_precision() const { return "f32"; }
  /// The element type of the KV as this backend keeps it (F32 on the CPU, the GPU storage
  /// type on CUDA): what on_new_kv_native hands over and restore_kv_native takes, moved without
  /// conversion.
  virtual DType native_kv_type() const { return DType::F32; }
  /// CachedAttention restore: writes n tokens of pre-RoPE K (rotated here to positions
  /// [pos0, pos0 + n) + rope_offset) and V, each [n, n_kv_heads * head_dim] fp32 row-major,
  /// into seq's slots [pos0, pos0 + n) of `layer`. Capacity must be reserved; the sequence
  /// length is not changed (call cache.set_length when all layers are in). The KV is in place
  /// for any forward call made after this returns.
  virtual void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                          const float* k_pre_rope, const float* v,
                          int64_t rope_offset = 0) const = 0;
  /// restore_kv with k_pre_rope and v in native_kv_type() (rows of n_kv_heads * head_dim
  /// elements). Default (F32 backends): restore_kv.
  virtual void restore_kv_native(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0,
                                 int64_t n, const void* k_pre_rope, const void* v,
                                 int64_t rope_offset = 0) const;
  /// Naive KV truncation baseline (NKVT): writes K exactly as given (keys that already carry
  /// the rotation of their old positions) and V into slots [pos0, pos0 + n) of `layer`.
  virtual void restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                              const float* k, const float* v) const = 0;
  /// Reads the cached (post-RoPE) K and V of slots [pos0, pos0 + n) of `seq` in `layer` into
  /// k and v ([n, n_kv_heads * head_dim] fp32 each); the slots must be below its length.
  virtual void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                       float* k, float* v) const = 0;
};

class Model : public ForwardModel {
 public:
  Model(ModelConfig cfg, std::unique_ptr<Weights> weights);
  /// Loads weights from `src` (presets: generated with `seed`), the matrices in `storage`.
  static std::unique_ptr<Model> load(const ModelSource& src, uint64_t seed = 0,
                                     WeightStorage storage = WeightStorage::F32);

  const ModelConfig& config() const override { return cfg_; }
  /// How the weights are held (fp32, or bf16 matrices).
  WeightStorage weight_storage() const { return w_->storage(); }

  using ForwardModel::forward;
  std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                             const LayerHooks& hooks) const override;

  /// ForwardModel::restore_kv into the cache's host pools. Keys are rotated to positions
  /// pos0 + rope_offset + t (see SeqInput::rope_offset).
  void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                  const float* k_pre_rope, const float* v, int64_t rope_offset = 0) const override;
  /// ForwardModel::restore_kv_raw into the cache's host pools.
  void restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                      const float* k, const float* v) const override;
  /// ForwardModel::read_kv from the cache's host pools.
  void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n, float* k,
               float* v) const override;
  /// Applies this model's RoPE to k [n, n_kv_heads * head_dim] in place at positions
  /// [pos0, pos0 + n) (used to produce post-RoPE keys for the NKVT baseline).
  void rotate_keys(float* k, int64_t pos0, int64_t n) const;

 private:
  ModelConfig cfg_;
  std::unique_ptr<Weights> w_;
};

}  // namespace cb::model
