#pragma once
/// Internal to lib/cuda_model: CudaModel's state and the helpers its three source files share:
/// cuda_model.cc (the forward pass), cuda_model_load.cc (weights to the device: file upload,
/// host weights, presets generated on the device) and cuda_model_kv.cc (the KV pools, restore,
/// read-back and the cache's block copies). CUDA builds only.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/l2_prefetch.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_gemv.h"
#include "kernels/cuda/preset_fill.h"
#include "kernels/cuda/rope.h"
#include "lib/core/error.h"
#include "lib/cuda_model/cuda_model.h"
#include "lib/device/cuda_runtime.h"
#include "lib/device/host_buffer.h"
#include "lib/formats/tensor_ref.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"

namespace cb::model::cuda_detail {

std::string layer_name(int l, const char* suffix);
/// Q, K and V projections live on the device only as the fused "blk.L.qkv_fused", and SwiGLU
/// models' gate and up projections as "blk.L.gate_up_fused" (gate's rows, then up's).
bool fused_away(const ModelConfig& c, const std::string& name);
/// Whether `c`'s MLP is gate/up/down with SwiGLU (every family but Falcon).
bool has_gate_up(const ModelConfig& c);
/// Throws cb::Error naming `what` when a cuBLAS call failed.
void check_cublas(cublasStatus_t s, const char* what);
/// True when `p` is page-locked host memory (cudaHostAlloc or registered), which the device
/// copies to and from directly; false for pageable memory.
bool page_locked(const void* p);

/// Waits for stream `s` (when not null) as it goes out of scope, however the scope is left:
/// on an exception, copies still reading or writing the caller's memory or the staging
/// buffers finish before either can be freed or reused.
struct StreamDrain {
  explicit StreamDrain(cudaStream_t stream) : s(stream) {}
  cudaStream_t s = nullptr;
  StreamDrain(const StreamDrain&) = delete;
  StreamDrain& operator=(const StreamDrain&) = delete;
  ~StreamDrain() {
    if (s != nullptr) (void)cudaStreamSynchronize(s);
  }
};

}  // namespace cb::model::cuda_detail

namespace cb::model {

namespace kc = cb::kernels::cuda;

struct CudaModel::Impl {
  using Arena = device::Arena;
  ModelConfig cfg;
  kv::KvConfig kv;         // of the pools below
  uint64_t pools_for = 0;  // KvCache::id() of the cache whose blocks the pools hold
  int gpu = 0;             // device index
  int sms = 1;             // its multiprocessors
  int64_t l2_bytes = 0;    // its L2 cache
  CudaKernelPaths paths;   // which kernels run where there is a choice
  kc::Storage st;
  size_t esz;
  device::Stream stream;        // compute
  device::Stream read_stream;   // KV restore: host to device, rotate, scatter
  device::Stream write_stream;  // KV capture: device to host
  // CudaKernelPaths::decode_l2_prefetch: the L2 prefetches, each after its layer's QKV GEMV
  // (qkv_done); the compute stream waits for the last (prefetched) before the LM head.
  device::Stream prefetch_stream;
  device::Event qkv_done{false};
  device::Event prefetched{false};
  device::Event captured{false};
  device::Event copies_done{false};  // block copies on the compute stream, for the read stream
  static constexpr int kCaptureSlots = 4;  // layers of captured KV in flight
  /// An item's native rows go straight to its caller's page-locked memory from this many rows
  /// (prefill chunks; decode rows go through the staging ring, one copy for the batch).
  static constexpr int64_t kDirectCaptureRows = 16;
  device::Event copied[kCaptureSlots] = {device::Event(false), device::Event(false),
                                         device::Event(false), device::Event(false)};
  device::CublasHandle cublas;
  Arena weights_arena;
  Arena kv_arena{nullptr, 0, "KV blocks"};
  // Canonical names; Q, K, V as "blk.L.qkv_fused", gate and up as "blk.L.gate_up_fused".
  std::map<std::string, Arena::Block> w;
  std::vector<Arena::Block> k_pool, v_pool;  // per layer
  // Per-call scratch, regrown when a call needs more.
  Arena scratch{nullptr, 0, "forward scratch"};
  // Restore staging: pinned [k f32 | v f32 | block table] -> the same on the device, then
  // K and V in the storage type.
  device::HostBuffer restore_host;
  Arena restore_dev{nullptr, 0, "restore staging"};
  // Capture staging: a ring of kCaptureSlots layers' new pre-RoPE K and V in fp32,
  // [slot][k | v][rows, kv_dim], on the device and (after the write stream's copies) in pinned
  // host memory.
  device::HostBuffer capture_host;
  Arena capture_dev{nullptr, 0, "capture staging"};

  Impl(const ModelConfig& c, kc::Storage s, int dev)
      : cfg(c),
        gpu(dev),
        st(s),
        esz(kc::storage_bytes(s)),
        weights_arena(device::make_device_arena(weight_budget(c, s), "weights")) {
    CB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
    int l2 = 0;
    CB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, gpu));
    l2_bytes = l2;
  }

  static uint64_t padded(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

  static uint64_t weight_budget(const ModelConfig& c, kc::Storage s) {
    uint64_t total = 0;
    for (const TensorSpec& t : expected_tensors(c)) {
      if (!cuda_detail::fused_away(c, t.name))
        total += padded(static_cast<uint64_t>(t.numel()) * kc::storage_bytes(s));
    }
    // One fused QKV matrix per layer, and one fused gate|up matrix for SwiGLU models.
    const uint64_t qkv = static_cast<uint64_t>(c.q_dim() + 2 * c.kv_dim()) * c.hidden;
    const uint64_t gate_up =
        cuda_detail::has_gate_up(c) ? 2 * static_cast<uint64_t>(c.ffn_hidden) * c.hidden : 0;
    return total + static_cast<uint64_t>(c.n_layers) *
                       (padded(qkv * kc::storage_bytes(s)) +
                        (gate_up > 0 ? padded(gate_up * kc::storage_bytes(s)) : 0));
  }

  static uint64_t kv_budget(const ModelConfig& c, const kv::KvConfig& k, kc::Storage s) {
    const uint64_t per_pool =
        static_cast<uint64_t>(k.num_blocks) * k.block_size * c.kv_dim() * kc::storage_bytes(s);
    return 2 * static_cast<uint64_t>(c.n_layers) * padded(per_pool);
  }

  // Upload, one tensor at a time through one reusable pinned buffer (no host copy of the whole
  // model): rows of `t` (row r of the result is row order[r] of the tensor; all rows in order
  // when `order` is null) into `dst` in the storage type. A tensor already in the storage type
  // is copied raw; any other goes through fp32 (F32 as it is, F16/BF16 exactly, quantized types
  // dequantized), then is converted on the device.
  device::HostBuffer upload_host;
  Arena upload_dev{nullptr, 0, "upload staging"};

  void upload_ref(const formats::TensorRef& t, const std::vector<int64_t>* order, void* dst);

  // Uploads every tensor, `ref(name)` giving each canonical tensor (a file's, or lib/model's
  // fp32 Weights seen as F32 tensors), then frees the staging.
  template <typename Ref>
  void upload_tensors(Ref&& ref);
  void upload_all(const Weights& src);

  // Allocates every device tensor and has it filled: fill_plain(spec, dst) for each tensor
  // kept as it is, then fill_fused(layer, q, k, v) for each layer's fused QKV matrix, with the
  // Q, K and V row blocks' destinations (Falcon's fused tensor fills all three from q), and
  // fill_plain(spec, dst) for the gate and up tensors' row blocks of a fused gate|up matrix.
  template <typename Plain, typename Fused>
  void make_tensors(Plain&& fill_plain, Fused&& fill_fused);

  void upload_file(const ModelSource& src);

  // fp32 -> the (half) storage type and back, n elements on `s`.
  void half_from_f32(const float* src, void* dst, size_t n, const device::Stream& s) {
    kc::ConvertToHalfParams p;
    p.src = src;
    p.dst = static_cast<uint16_t*>(dst);
    p.n = n;
    p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
    CB_CUDA_CHECK(kc::launch_convert_to_half(p, s.get()));
  }
  void f32_from_half(const void* src, float* dst, size_t n, const device::Stream& s) {
    kc::ConvertToFloatParams p;
    p.src = static_cast<const uint16_t*>(src);
    p.dst = dst;
    p.n = n;
    p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
    CB_CUDA_CHECK(kc::launch_convert_to_float(p, s.get()));
  }

  // Generates `rows` rows of `spec` (1 for a vector) into `out`, through `row_map` if given.
  void fill(void* out, const TensorSpec& spec, int64_t rows, uint64_t seed, const int32_t* row_map);

  void generate_all(uint64_t seed);

  // Device pools for `cache`: kept when it is the cache of the last call with the same
  // config, else made anew, which is only valid when the batch starts every sequence afresh.
  void ensure_pools(const kv::KvCache& cache);

  void* wt(const std::string& name) const {
    const auto it = w.find(name);
    if (it == w.end()) throw make_error("cuda model", "no device tensor " + name);
    return it->second.data();
  }

  void gemm(const void* x, const std::string& weight, void* y, int64_t n, int64_t in, int64_t out,
            bool accumulate = false) {
    gemm(x, wt(weight), weight, y, n, in, out, accumulate);
  }
  void gemm(const void* x, const void* weight_data, const std::string& weight, void* y, int64_t n,
            int64_t in, int64_t out, bool accumulate = false) {
    kc::GemmWtParams p;
    p.x = x;
    p.w = weight_data;
    p.y = y;
    p.n = n;
    p.in = in;
    p.out = out;
    p.storage = st;
    p.accumulate = accumulate;
    p.gemv = paths.decode_gemv;
    p.pdl = paths.decode_pdl;
    p.deep = paths.decode_gemv_deep && kc::gemv_deep_fits(out, sms);
    cuda_detail::check_cublas(kc::gemm_wt(cublas.get(), p, stream.get()), weight.c_str());
  }

  /// Decode's fused layers (kernels/cuda norm_gemv): y = RMSNorm(x) . w^T, or with weight2,
  /// y = silu(RMSNorm(x) . w^T) * (RMSNorm(x) . w2^T). Returns false, launching nothing, where
  /// the kernel does not apply (prefill, fp32, LayerNorm models, Falcon, fusion or the GEMV
  /// off); the caller then runs norm, gemm and swiglu.
  bool fused_norm_gemv(const void* x, const std::string& norm_base, const void* weight,
                       const void* weight2, void* y, int64_t n, int64_t in, int64_t out) {
    if (!paths.decode_fusion || !paths.decode_gemv || cfg.norm != NormType::RmsNorm ||
        cfg.arch == Arch::Falcon) {
      return false;
    }
    kc::NormGemvParams p;
    p.x = x;
    p.norm_w = wt(norm_base + ".weight");
    p.norm_eps = cfg.norm_eps;
    p.w = weight;
    p.w2 = weight2;
    p.y = y;
    p.n = n;
    p.in = in;
    p.out = out;
    p.storage = st;
    p.pdl = paths.decode_pdl;
    p.deep = paths.decode_gemv_deep && kc::gemv_deep_fits(out, sms);
    if (!kc::norm_gemv_applies(p)) return false;
    CB_CUDA_CHECK(kc::launch_norm_gemv(p, stream.get()));
    return true;
  }

  /// The gate and up row blocks of layer l's fused gate|up matrix.
  std::pair<const char*, const char*> gate_up(int l) const {
    const char* g = static_cast<const char*>(wt(cuda_detail::layer_name(l, "gate_up_fused")));
    return {g, g + static_cast<size_t>(cfg.ffn_hidden) * static_cast<size_t>(cfg.hidden) * esz};
  }

  /// silu(x . gate^T) * (x . up^T) of layer l (gate_w, up_w: gate_up(l)) into y [n, ffn_hidden],
  /// as paths.mlp_fusion chooses: gate and up GEMMs, then SwiGLU (`up_out`: [n, ffn_hidden]
  /// scratch); or one launch at 1-4 rows; or one GEMM over the fused matrix into `up_out`
  /// ([n, 2 * ffn_hidden] scratch) and a SwiGLU over its halves.
  void gate_up_swiglu(int l, const char* gate_w, const char* up_w, const void* x, void* y,
                      void* up_out, int64_t n);

  /// Layer l's RoPE of Q and K in the fused rows `qkv` [n, q_dim + 2 * kv_dim], and the append
  /// of K and V to its blocks (row r to sequence row_seq[r]'s slot row_slot[r]): one launch with
  /// paths.rope_append_fusion (the rows keep pre-RoPE K), else a RoPE and an append launch.
  void rope_and_append(void* qkv, const int32_t* rope_pos, const int32_t* row_seq,
                       const int32_t* row_slot, const int32_t* tables, int64_t table_stride,
                       int64_t n, int l);

  void norm(const std::string& base, const void* x, void* y, int64_t n) {
    if (cfg.norm == NormType::RmsNorm) {
      kc::RmsNormParams p;
      p.x = x;
      p.w = wt(base + ".weight");
      p.y = y;
      p.rows = n;
      p.dim = cfg.hidden;
      p.eps = cfg.norm_eps;
      p.storage = st;
      CB_CUDA_CHECK(kc::launch_rmsnorm(p, stream.get()));
    } else {
      kc::LayerNormParams p;
      p.x = x;
      p.w = wt(base + ".weight");
      p.b = wt(base + ".bias");
      p.y = y;
      p.rows = n;
      p.dim = cfg.hidden;
      p.eps = cfg.norm_eps;
      p.storage = st;
      CB_CUDA_CHECK(kc::launch_layernorm(p, stream.get()));
    }
  }

  void add(void* y, const void* x, int64_t n) {
    kc::AddParams p;
    p.y = y;
    p.x = x;
    p.n = n;
    p.storage = st;
    CB_CUDA_CHECK(kc::launch_add(p, stream.get()));
  }

  // Carves `sizes` (bytes) out of the scratch arena, regrowing it first when needed.
  std::vector<Arena::Block> scratch_blocks(const std::vector<uint64_t>& sizes) {
    uint64_t need = 0;
    for (uint64_t s : sizes) need += padded(s == 0 ? 1 : s);
    if (need > scratch.budget()) {
      stream.synchronize();
      scratch = Arena(nullptr, 0, "forward scratch");
      scratch = device::make_device_arena(need * 5 / 4, "forward scratch");
    }
    std::vector<Arena::Block> out;
    for (uint64_t s : sizes) out.push_back(scratch.allocate(s, "forward scratch"));
    return out;
  }

  template <typename T>
  void to_device(void* dst, const std::vector<T>& v) {
    if (v.empty()) return;
    CB_CUDA_CHECK(
        cudaMemcpyAsync(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream.get()));
  }

  // Device rows in the storage type -> host fp32.
  std::vector<float> to_host_f32(const void* src, int64_t n, void* f32_scratch) {
    std::vector<float> h(static_cast<size_t>(n));
    const void* from = src;
    if (st != kc::Storage::F32) {
      f32_from_half(src, static_cast<float*>(f32_scratch), static_cast<size_t>(n), stream);
      from = f32_scratch;
    }
    CB_CUDA_CHECK(
        cudaMemcpyAsync(h.data(), from, h.size() * 4, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return h;
  }

  // Grows a pinned host buffer and a device arena to at least `bytes` each (both empty
  // after growing); `wait` is the stream whose work may still use the old ones.
  static void grow(device::HostBuffer* host, Arena* dev, uint64_t bytes, const device::Stream& wait,
                   const char* name);

  // Checks that `cache` is the bound one, `layer` exists and slots [pos0, pos0 + n) lie below
  // `limit`; applies the cache's pending block copies; returns the sequence's block table.
  const std::vector<int32_t>& prepare_kv_access(kv::KvCache& cache, kv::SeqId seq, int layer,
                                                int64_t pos0, int64_t n, int64_t limit,
                                                const char* what, const char* below);

  // restore_kv (rotate: pre-RoPE keys rotated to their positions) or restore_kv_raw (keys as
  // given), through pinned staging on the read stream; k and v are fp32 rows, or rows in the
  // storage type when `native` (restore_kv_native).
  void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                  const void* k, const void* v, int64_t rope_offset, bool rotate = true,
                  bool native = false);

  // Slots [pos0, pos0 + n) of `seq` in `layer` as cached, to host fp32 rows.
  void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n, float* k,
               float* v);

  // The cache's copy-on-write and fork copies since the last call, applied in order to the
  // device blocks on `s` (before anything reads or writes them there); true when there were any.
  bool apply_block_copies(kv::KvCache& cache, const device::Stream& s);

  kc::RopeStyle rope_style() const {
    return cfg.rope_style == RopeStyle::Interleaved ? kc::RopeStyle::Interleaved
                                                    : kc::RopeStyle::RotateHalf;
  }

  std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                             const LayerHooks& hooks);
};

}  // namespace cb::model
