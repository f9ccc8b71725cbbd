#pragma once
/// The forward pass of lib/model on an NVIDIA GPU: the same families, batch rows, hooks and
/// paged KV layout, with weights and KV blocks in device memory (fp32, fp16 or bf16 storage,
/// fp32 accumulation), cuBLAS GEMMs and kernels/cuda for everything else, on one compute
/// stream, with a read stream for KV restores and a write stream for KV captures. The host
/// KvCache keeps the block tables and lengths and no host pools (kv_config makes such caches;
/// forward rejects others); its fork and copy-on-write block copies are recorded there and
/// applied to the device blocks before the next forward or restore_kv;
/// the device keeps the KV blocks of the cache most recently passed to forward, in its layout
/// (a different cache starts over and must then be empty). CUDA builds only.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/storage.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/config.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/model/weights.h"

namespace cb::model {

/// Row order of the fused QKV weight the GPU uses: output feature r of the fused weight is row
/// source_row[r] of the checkpoint's tensor (Falcon: its fused attn_qkv, in either layout; the
/// others: attn_q, attn_k, attn_v stacked, so source_row is the identity). The fused output
/// row of a token is then [q heads | k heads | v heads] for every family.
std::vector<int64_t> fused_qkv_source_rows(const ModelConfig& c);

/// Preset weights generated on the device (lib/model preset_fill's values, no host copy).
struct PresetWeights {
  uint64_t seed = 0;
};

struct CudaModelOptions {
  kernels::cuda::Storage storage = kernels::cuda::Storage::F16;
  int device = 0;
};

class CudaModel : public ForwardModel {
 public:
  /// Uploads every tensor of `w` (host fp32, as lib/model holds them) to the device in
  /// opts.storage. Throws cb::Error (with the budget and the device's free memory) when the
  /// device cannot hold them, or when there is no usable GPU.
  CudaModel(const ModelConfig& cfg, const Weights& w, CudaModelOptions opts = {});
  /// Generates a preset's weights on the device: the same values lib/model's Weights::load
  /// makes on the host for this seed (rounded to opts.storage).
  CudaModel(const ModelConfig& cfg, PresetWeights preset, CudaModelOptions opts = {});
  /// Loads `src` straight to the device: a preset is generated there (with `seed`); a GGUF
  /// file or checkpoint is uploaded one tensor at a time through pinned staging, raw when the
  /// file's dtype is opts.storage, else through fp32, so the host never holds the whole model.
  /// The device values are those of the Weights constructor above for the same source.
  CudaModel(const ModelSource& src, uint64_t seed, CudaModelOptions opts = {});
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  const ModelConfig& config() const override;
  bool host_kv() const override { return false; }
  /// Allocates the device KV blocks for `cache` (empty, from kv_config) so that restore_kv may
  /// come before the first forward.
  void bind_cache(const kv::KvCache& cache) const override;
  /// The storage type ("f32", "f16", "bf16").
  std::string kv_precision() const override;
  /// ForwardModel::restore_kv into the device blocks of the bound cache: the host rows go
  /// through pinned staging to the device on the read stream, are converted to the storage
  /// type, rotated and scattered in one kernel (kernels/cuda kv_restore); returns when they are
  /// in place. Throws cb::Error for a cache that is not bound, a bad layer or unreserved slots.
  void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                  const float* k_pre_rope, const float* v, int64_t rope_offset = 0) const override;
  /// The storage type as a DType (F32, F16 or BF16).
  DType native_kv_type() const override;
  /// As restore_kv, with the rows already in the storage type: they go to the device as they
  /// are (half the bytes of fp32 for fp16/bf16 storage) and are not converted there.
  void restore_kv_native(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                         const void* k_pre_rope, const void* v,
                         int64_t rope_offset = 0) const override;
  /// As restore_kv, with the keys written as given (kernels/cuda kv_append).
  void restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                      const float* k, const float* v) const override;
  /// Gathers the slots on the device (kernels/cuda kv_gather), converts them to fp32 and copies
  /// them to the host on the read stream; returns when they are there.
  void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n, float* k,
               float* v) const override;
  /// Bytes of device memory the weights and the current KV pools take.
  uint64_t weight_bytes() const;
  uint64_t kv_bytes() const;
  /// Whether linear layers of 1-4 rows (decode) run kernels/cuda gemv's kernel (the default)
  /// or cuBLAS; `bench gpu` measures both in one run.
  void set_decode_gemv(bool on) const;
  /// Whether decode (1-4 rows, fp16/bf16, RMSNorm models but Falcon) folds RMSNorm into the QKV
  /// and gate/up GEMVs and SwiGLU into the latter (kernels/cuda norm_gemv: the norm's scale
  /// applied after the dot products, from squares each warp sums as it reads x; passes the
  /// host emulation of its source, not yet run on a GPU; the first form, with a shared-memory
  /// prologue, ran 0.94-0.99x as fast on an H100) instead of separate norm, GEMV and SwiGLU
  /// launches (the default). Only with set_decode_gemv(true); `bench gpu` measures both in one
  /// run.
  void set_decode_fusion(bool on) const;
  /// Whether attention over single-row tiles (decode) at head sizes 64 and 128 runs the decode
  /// kernel (PagedAttentionParams::decode_kernel: every lane on keys, K and V straight into
  /// registers; passes the host emulation of its source, not yet run on a GPU) instead of the
  /// CUDA-core one (the default); `bench gpu` measures both in one run.
  void set_decode_attention(bool on) const;
  /// Whether prefill attention on tensor cores runs the FlashAttention-2-style kernel
  /// (PagedAttentionParams::fa2; the default since it ran on an H100, 1.03-1.52x faster
  /// prefills, docs/perf.md) or the wmma one it replaced; `bench gpu` measures both in one run.
  void set_prefill_attention_fa2(bool on) const;
  /// Whether SwiGLU models (LLaMA, Mistral) run their gate and up layers as one linear layer
  /// over the fused gate|up weight the device holds, with the SwiGLU in the same launch at 1-4
  /// rows (kernels/cuda launch_gemv_swiglu) or a strided SwiGLU after one GEMM otherwise,
  /// instead of two GEMMs and a SwiGLU (the default): two launches fewer a layer in decode, one
  /// in prefill. Passes the host emulation of its kernels; not yet run on a GPU. `bench gpu`
  /// measures both in one run.
  void set_mlp_fusion(bool on) const;
  /// Whether each layer rotates Q and K and appends K and V to the paged blocks in one launch
  /// (kernels/cuda launch_rope_kv_append) instead of a RoPE and an append launch (the default).
  /// Passes the host emulation of its kernel; not yet run on a GPU. `bench gpu` measures both
  /// in one run.
  void set_rope_append_fusion(bool on) const;
  /// Whether decode's GEMV kernels (1-4 rows) are launched with programmatic dependent launch
  /// (sm_90): each may start while the kernel before it finishes, prefetch its first weight
  /// vectors into L2 and wait for that kernel before reading its input, so the weight stream
  /// overlaps the small kernels between GEMVs (which let it start as soon as all their blocks
  /// have begun) and the tails of the GEMVs. Off by default, and wherever the GEMV kernels were
  /// not compiled for sm_90 or later (kc::gemv_pdl_supported) whatever is asked; returns whether
  /// it is on. Not yet run on a GPU. `bench gpu` measures both in one run.
  bool set_decode_pdl(bool on) const;

  /// As Model::forward: appends each item's tokens to its sequence (cache.reserve first),
  /// calls hooks.on_new_kv with host copies of the new pre-RoPE K and V (fp32), or
  /// hooks.on_new_kv_native with them in the storage type (copied by the device straight into
  /// page-locked memory that hooks.native_kv_target names, for items of 16 rows or more), and
  /// hooks.wait_ready before each layer's attention, returns fp32 logits [rows, vocab].
  /// Calls must not overlap (one stream, shared scratch).
  using ForwardModel::forward;
  std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                             const LayerHooks& hooks) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cb::model
