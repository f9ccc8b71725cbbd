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

/// Which kernels a CudaModel runs where it has more than one for the same result. Each
/// alternative passes the same parity tests against kernels/cpu (test_cuda), and `bench gpu`
/// times the default against the others in one run. The defaults are the paths that were
/// fastest there (docs/perf.md: on an H200 on 2026-11-27, llama-2-7b and llama-2-13b).
struct CudaKernelPaths {
  /// Linear layers of 1-4 rows (decode) run kernels/cuda gemv's kernel instead of cuBLAS.
  bool decode_gemv = true;
  /// Decode (1-4 rows, fp16/bf16, RMSNorm models but Falcon; with decode_gemv) folds RMSNorm
  /// into the QKV and gate/up GEMVs and SwiGLU into the latter (kernels/cuda norm_gemv: the
  /// norm's scale applied after the dot products, from the squares each warp sums as it reads
  /// x) instead of separate norm, GEMV and SwiGLU launches.
  bool decode_fusion = true;
  /// Attention over single-row tiles (decode) at head sizes 64 and 128 runs the decode kernel
  /// (PagedAttentionParams::decode_kernel: every lane on keys, K and V straight into
  /// registers, the splits merged by the last block) instead of the CUDA-core one.
  bool decode_attention = true;
  /// Prefill attention on tensor cores runs the FlashAttention-2-style kernel
  /// (PagedAttentionParams::fa2) instead of the wmma one.
  bool prefill_fa2 = true;
  /// SwiGLU models (LLaMA, Mistral) run gate and up as one linear layer over the fused gate|up
  /// weight the device holds, with the SwiGLU in the same launch at 1-4 rows (kernels/cuda
  /// launch_gemv_swiglu) or a strided SwiGLU after one GEMM otherwise, instead of two GEMMs and
  /// a SwiGLU: two launches fewer a layer in decode, one in prefill.
  bool mlp_fusion = true;
  /// Each layer rotates Q and K and appends K and V to the paged blocks in one launch
  /// (kernels/cuda launch_rope_kv_append) instead of a RoPE and an append launch.
  bool rope_append_fusion = true;
  /// Decode's GEMV kernels are launched with programmatic dependent launch (sm_90): each may
  /// start while the kernel before it finishes, prefetch its first weight vectors into L2 and
  /// wait (griddepcontrol.wait) before reading its input. Off: 0.97-1.01x as fast, in the noise.
  bool decode_pdl = false;
  /// At 1-4 rows (fp16/bf16, with decode_gemv) each layer, once its QKV GEMV is done, asks L2
  /// for the weights of the linear layer after attention (the output projection; Falcon's MLP
  /// up projection), a prefix of every row up to half the L2, on a stream of its own
  /// (kernels/cuda l2_prefetch): HBM streams them while RoPE, the append and attention run,
  /// which read little. Changes no result. Off: 1.00-1.02x as fast on an H100 (2026-11-28).
  bool decode_l2_prefetch = false;
  /// Decode's attention (one row a tile) splits each head's keys finer: at least 32 keys a
  /// split, enough splits to fill 4 blocks per SM (instead of 64 keys and 2 blocks; llama-2-7b
  /// at batch 1 over 512 keys: 16 splits instead of 8). The H100 profile of 2026-11-28 put the
  /// decode kernel at 14.8 us a layer for 8.4 MB of K and V. Off: not yet timed on a GPU.
  bool decode_more_splits = false;
  /// Decode's attention (the decode kernel, every item one row) rotates Q and the new key in
  /// registers and appends the new K and V itself (PagedAttentionParams::rope_pos), instead of
  /// a RoPE-and-append launch before it: a LLaMA decode layer is five launches instead of six.
  /// The H100 profile of 2026-11-28 put that launch at 4.6 us a layer (0.15 ms of llama-2-7b's
  /// 5.75 ms step). Its kernel writes what the two launches write, bit for bit, in the host
  /// emulation. Off: not yet run on a GPU.
  bool decode_rope_fusion = false;
  /// At batch 1, decode's GEMV kernel and its RMSNorm-fused form without SwiGLU compiled for 4
  /// blocks an SM (GemmWtParams::deep, kernels/cuda gemv.h kGemvDeepBlocksPerSm) where that
  /// keeps the launch one wave (gemv_deep_fits: llama-2-7b's and mistral-7b's 4,096-row output
  /// and down projections; not QKV, gate/up or the LM head): ptxas issues three or four of a
  /// lane's weight vectors before the first dot product instead of one or two (nvdisasm, sm_90),
  /// at up to 64 registers a thread instead of 36-46. The H100 profile of 2026-11-28 put those
  /// projections at 0.75 and 0.83 of the copy ceiling. Same bits as the defaults. Off: not yet
  /// run on a GPU.
  bool decode_gemv_deep = false;
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
  /// The kernels this model runs where it has a choice (CudaKernelPaths' defaults unless set).
  CudaKernelPaths kernel_paths() const;
  /// Chooses them; takes effect at the next forward. decode_pdl stays off where the GEMV
  /// kernels were not compiled for sm_90 or later (kc::gemv_pdl_supported) whatever is asked.
  /// Returns the paths now in effect.
  CudaKernelPaths set_kernel_paths(const CudaKernelPaths& paths) const;

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
