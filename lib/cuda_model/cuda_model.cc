#include "lib/cuda_model/cuda_model.h"

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
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/preset_fill.h"
#include "kernels/cuda/rope.h"
#include "lib/core/error.h"
#include "lib/device/cuda_runtime.h"
#include "lib/device/host_buffer.h"
#include "lib/formats/tensor_ref.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"

namespace cb::model {
namespace {

namespace kc = cb::kernels::cuda;
using device::Arena;

std::string layer_name(int l, const char* suffix) {
  return "blk." + std::to_string(l) + "." + suffix;
}

// Q, K and V projections live on the device only as the fused "blk.L.qkv_fused".
bool fused_away(const std::string& name) {
  for (const char* s : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_qkv.weight"}) {
    const std::string suffix = s;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw make_error("cuda forward", std::string(what) + " failed: " + cublasGetStatusName(s));
  }
}

}  // namespace

std::vector<int64_t> fused_qkv_source_rows(const ModelConfig& c) {
  const int64_t hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  std::vector<int64_t> rows(static_cast<size_t>(qd + 2 * kvd));
  if (c.arch == Arch::Falcon && c.qkv_layout == QkvLayout::Grouped) {
    // Per KV group g: its `per` query heads, then its K head, then its V head.
    const int64_t per = c.n_heads / c.n_kv_heads;
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      const int64_t src = g * (per + 2) * hd;
      for (int64_t e = 0; e < per * hd; ++e) rows[static_cast<size_t>(g * per * hd + e)] = src + e;
      for (int64_t e = 0; e < hd; ++e) {
        rows[static_cast<size_t>(qd + g * hd + e)] = src + per * hd + e;
        rows[static_cast<size_t>(qd + kvd + g * hd + e)] = src + (per + 1) * hd + e;
      }
    }
  } else {
    for (size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<int64_t>(r);
  }
  return rows;
}

struct CudaModel::Impl {
  ModelConfig cfg;
  kv::KvConfig kv;         // of the pools below
  uint64_t pools_for = 0;  // KvCache::id() of the cache whose blocks the pools hold
  int gpu = 0;             // device index
  int sms = 1;             // its multiprocessors
  kc::Storage st;
  size_t esz;
  device::Stream stream;        // compute
  device::Stream read_stream;   // KV restore: host to device, rotate, scatter
  device::Stream write_stream;  // KV capture: device to host
  device::Event captured{false};
  static constexpr int kCaptureSlots = 4;  // layers of captured KV in flight
  device::Event copied[kCaptureSlots] = {device::Event(false), device::Event(false),
                                         device::Event(false), device::Event(false)};
  device::CublasHandle cublas;
  Arena weights_arena;
  Arena kv_arena{nullptr, 0, "KV blocks"};
  std::map<std::string, Arena::Block> w;     // canonical names; Q, K, V as "blk.L.qkv_fused"
  std::vector<Arena::Block> k_pool, v_pool;  // per layer
  // Per-call scratch, regrown when a call needs more.
  Arena scratch{nullptr, 0, "forward scratch"};
  uint64_t scratch_bytes = 0;
  // Restore staging: pinned [k f32 | v f32 | block table] -> the same on the device, then
  // K and V in the storage type.
  device::HostBuffer restore_host;
  Arena restore_dev{nullptr, 0, "restore staging"};
  uint64_t restore_bytes = 0;
  // Capture staging: a ring of kCaptureSlots layers' new pre-RoPE K and V in fp32,
  // [slot][k | v][rows, kv_dim], on the device and (after the write stream's copies) in pinned
  // host memory.
  device::HostBuffer capture_host;
  Arena capture_dev{nullptr, 0, "capture staging"};
  uint64_t capture_bytes = 0;

  Impl(const ModelConfig& c, kc::Storage s, int dev)
      : cfg(c),
        gpu(dev),
        st(s),
        esz(kc::storage_bytes(s)),
        weights_arena(device::make_device_arena(weight_budget(c, s), "weights")) {
    CB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, gpu));
  }

  static uint64_t padded(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

  static uint64_t weight_budget(const ModelConfig& c, kc::Storage s) {
    uint64_t total = 0;
    for (const TensorSpec& t : expected_tensors(c)) {
      if (!fused_away(t.name))
        total += padded(static_cast<uint64_t>(t.numel()) * kc::storage_bytes(s));
    }
    // One fused QKV matrix per layer.
    const uint64_t qkv = static_cast<uint64_t>(c.q_dim() + 2 * c.kv_dim()) * c.hidden;
    return total + static_cast<uint64_t>(c.n_layers) * padded(qkv * kc::storage_bytes(s));
  }

  static uint64_t kv_budget(const ModelConfig& c, const kv::KvConfig& k, kc::Storage s) {
    const uint64_t per_pool =
        static_cast<uint64_t>(k.num_blocks) * k.block_size * c.kv_dim() * kc::storage_bytes(s);
    return 2 * static_cast<uint64_t>(c.n_layers) * padded(per_pool);
  }

  // Host fp32 rows -> device block in the storage type, through pinned staging.
  Arena::Block upload(const float* src, int64_t numel, const std::string& name) {
    Arena::Block b = weights_arena.allocate(static_cast<uint64_t>(numel) * esz, name);
    const uint64_t bytes = static_cast<uint64_t>(numel) * 4;
    device::HostBuffer pinned(bytes);
    std::memcpy(pinned.data(), src, bytes);
    if (st == kc::Storage::F32) {
      CB_CUDA_CHECK(
          cudaMemcpyAsync(b.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, stream.get()));
    } else {
      Arena tmp = device::make_device_arena(bytes, "upload staging");
      Arena::Block f = tmp.allocate(bytes, name);
      CB_CUDA_CHECK(
          cudaMemcpyAsync(f.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, stream.get()));
      kc::ConvertToHalfParams p;
      p.src = static_cast<const float*>(f.data());
      p.dst = static_cast<uint16_t*>(b.data());
      p.n = static_cast<size_t>(numel);
      p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
      CB_CUDA_CHECK(kc::launch_convert_to_half(p, stream.get()));
    }
    stream.synchronize();  // the staging buffers go away here
    return b;
  }

  void upload_all(const Weights& src) {
    const int64_t H = cfg.hidden, qd = cfg.q_dim(), kvd = cfg.kv_dim();
    for (const TensorSpec& t : expected_tensors(cfg)) {
      if (fused_away(t.name)) continue;
      const float* p = src.find(t.name);
      if (p == nullptr) {
        throw make_error("cuda model", "tensor " + t.name + " is missing from the weights");
      }
      w.emplace(t.name, upload(p, t.numel(), t.name));
    }
    const std::vector<int64_t> order = fused_qkv_source_rows(cfg);
    std::vector<float> fused(static_cast<size_t>((qd + 2 * kvd) * H));
    for (int l = 0; l < cfg.n_layers; ++l) {
      if (cfg.arch == Arch::Falcon) {
        const float* qkv = src.get(layer_name(l, "attn_qkv.weight"));
        for (size_t r = 0; r < order.size(); ++r) {
          std::memcpy(fused.data() + r * H, qkv + order[r] * H, static_cast<size_t>(H) * 4);
        }
      } else {
        std::memcpy(fused.data(), src.get(layer_name(l, "attn_q.weight")),
                    static_cast<size_t>(qd * H) * 4);
        std::memcpy(fused.data() + qd * H, src.get(layer_name(l, "attn_k.weight")),
                    static_cast<size_t>(kvd * H) * 4);
        std::memcpy(fused.data() + (qd + kvd) * H, src.get(layer_name(l, "attn_v.weight")),
                    static_cast<size_t>(kvd * H) * 4);
      }
      const std::string name = layer_name(l, "qkv_fused");
      w.emplace(name, upload(fused.data(), (qd + 2 * kvd) * H, name));
    }
  }

  // Direct upload from a model file, one tensor at a time through one reusable pinned buffer
  // (no host copy of the whole model): rows of `t` (row r of the result is row order[r] of the
  // file's tensor; all rows in order when `order` is null) into `dst` in the storage type.
  // A file tensor already in the storage type is copied raw; any other goes through fp32
  // (F16/BF16 exactly, quantized types dequantized), then is converted on the device.
  device::HostBuffer upload_host;
  Arena upload_dev{nullptr, 0, "upload staging"};
  uint64_t upload_bytes = 0;

  void upload_ref(const formats::TensorRef& t, const std::vector<int64_t>* order, void* dst) {
    const int64_t rows = t.shape.size() <= 1 ? 1 : t.shape.front();
    const int64_t cols = t.numel() / rows;
    const int64_t out_rows = order ? static_cast<int64_t>(order->size()) : rows;
    const bool raw = (t.dtype == DType::F32 && st == kc::Storage::F32) ||
                     (t.dtype == DType::F16 && st == kc::Storage::F16) ||
                     (t.dtype == DType::BF16 && st == kc::Storage::BF16);
    const size_t row_bytes = static_cast<size_t>(cols) * (raw ? esz : 4);
    const uint64_t bytes = static_cast<uint64_t>(out_rows) * row_bytes;
    grow(&upload_host, &upload_dev, &upload_bytes, bytes + 256, stream, "upload staging");
    const uint8_t* src = t.data;
    std::vector<float> f32;
    if (!raw) {
      f32.resize(static_cast<size_t>(t.numel()));
      formats::to_f32(t, f32.data());
      src = reinterpret_cast<const uint8_t*>(f32.data());
    }
    auto* h = static_cast<uint8_t*>(upload_host.data());
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t from = order ? (*order)[static_cast<size_t>(r)] : r;
      std::memcpy(h + r * row_bytes, src + from * row_bytes, row_bytes);
    }
    if (raw) {
      CB_CUDA_CHECK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, stream.get()));
    } else {
      Arena::Block f = upload_dev.allocate(bytes, "upload staging");
      CB_CUDA_CHECK(cudaMemcpyAsync(st == kc::Storage::F32 ? dst : f.data(), h, bytes,
                                    cudaMemcpyHostToDevice, stream.get()));
      if (st != kc::Storage::F32) {
        kc::ConvertToHalfParams p;
        p.src = static_cast<const float*>(f.data());
        p.dst = static_cast<uint16_t*>(dst);
        p.n = static_cast<size_t>(out_rows * cols);
        p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
        CB_CUDA_CHECK(kc::launch_convert_to_half(p, stream.get()));
      }
    }
    stream.synchronize();  // the staging is reused by the next tensor
  }

  // Allocates every device tensor and has it filled: fill_plain(spec, dst) for each tensor
  // kept as it is, then fill_fused(layer, q, k, v) for each layer's fused QKV matrix, with the
  // Q, K and V row blocks' destinations (Falcon's fused tensor fills all three from q).
  template <typename Plain, typename Fused>
  void make_tensors(Plain&& fill_plain, Fused&& fill_fused) {
    const int64_t H = cfg.hidden, qd = cfg.q_dim(), kvd = cfg.kv_dim();
    for (const TensorSpec& t : expected_tensors(cfg)) {
      if (fused_away(t.name)) continue;
      Arena::Block b = weights_arena.allocate(static_cast<uint64_t>(t.numel()) * esz, t.name);
      fill_plain(t, b.data());
      w.emplace(t.name, std::move(b));
    }
    for (int l = 0; l < cfg.n_layers; ++l) {
      const std::string name = layer_name(l, "qkv_fused");
      Arena::Block b =
          weights_arena.allocate(static_cast<uint64_t>((qd + 2 * kvd) * H) * esz, name);
      char* base = static_cast<char*>(b.data());
      fill_fused(l, base, base + static_cast<size_t>(qd * H) * esz,
                 base + static_cast<size_t>((qd + kvd) * H) * esz);
      w.emplace(name, std::move(b));
    }
  }

  void upload_file(const ModelSource& src) {
    const auto ref = [&](const std::string& name) -> const formats::TensorRef& {
      const formats::TensorRef* t = src.tensor(name);
      if (t == nullptr) throw make_error(src.location(), "missing tensor '" + name + "'");
      return *t;
    };
    const std::vector<int64_t> order = fused_qkv_source_rows(cfg);
    make_tensors([&](const TensorSpec& t, void* dst) { upload_ref(ref(t.name), nullptr, dst); },
                 [&](int l, char* q, char* k, char* v) {
                   if (cfg.arch == Arch::Falcon) {
                     upload_ref(ref(layer_name(l, "attn_qkv.weight")), &order, q);
                   } else {
                     upload_ref(ref(layer_name(l, "attn_q.weight")), nullptr, q);
                     upload_ref(ref(layer_name(l, "attn_k.weight")), nullptr, k);
                     upload_ref(ref(layer_name(l, "attn_v.weight")), nullptr, v);
                   }
                 });
    upload_dev = Arena(nullptr, 0, "upload staging");  // only needed while loading
    upload_host = device::HostBuffer();
    upload_bytes = 0;
  }

  // Generates `rows` rows of `spec` (1 for a vector) into `out`, through `row_map` if given.
  void fill(void* out, const TensorSpec& spec, int64_t rows, uint64_t seed,
            const int32_t* row_map) {
    const PresetFill f = preset_fill_params(cfg, spec, seed);
    kc::PresetFillParams p;
    p.out = out;
    p.rows = rows;
    p.cols = spec.numel() / rows;
    p.row_map = row_map;
    p.constant = f.constant;
    p.value = f.value;
    p.key = f.key;
    p.scale = f.scale;
    p.storage = st;
    CB_CUDA_CHECK(kc::launch_preset_fill(p, stream.get()));
  }

  void generate_all(uint64_t seed) {
    const int64_t qd = cfg.q_dim(), kvd = cfg.kv_dim();
    std::map<std::string, TensorSpec> specs;
    for (const TensorSpec& t : expected_tensors(cfg)) specs.emplace(t.name, t);
    const std::vector<int64_t> order = fused_qkv_source_rows(cfg);
    const std::vector<int32_t> order32(order.begin(), order.end());
    Arena map_arena = device::make_device_arena(order32.size() * 4, "QKV row map");
    Arena::Block map = map_arena.allocate(order32.size() * 4, "QKV row map");
    CB_CUDA_CHECK(cudaMemcpyAsync(map.data(), order32.data(), order32.size() * 4,
                                  cudaMemcpyHostToDevice, stream.get()));
    make_tensors(
        [&](const TensorSpec& t, void* dst) {
          fill(dst, t, t.shape.size() == 1 ? 1 : t.shape.front(), seed, nullptr);
        },
        [&](int l, char* q, char* k, char* v) {
          if (cfg.arch == Arch::Falcon) {
            fill(q, specs.at(layer_name(l, "attn_qkv.weight")), qd + 2 * kvd, seed,
                 static_cast<const int32_t*>(map.data()));
          } else {
            fill(q, specs.at(layer_name(l, "attn_q.weight")), qd, seed, nullptr);
            fill(k, specs.at(layer_name(l, "attn_k.weight")), kvd, seed, nullptr);
            fill(v, specs.at(layer_name(l, "attn_v.weight")), kvd, seed, nullptr);
          }
        });
    stream.synchronize();  // the row map goes away here
  }

  // Device pools for `cache`: kept when it is the cache of the last call with the same
  // config, else made anew, which is only valid when the batch starts every sequence afresh.
  void ensure_pools(const kv::KvCache& cache) {
    CB_CUDA_CHECK(cudaSetDevice(gpu));
    const kv::KvConfig& c = cache.config();
    if (c.host_pools) {
      throw make_error("cuda forward",
                       "the KV cache has host pools, which the GPU backend would leave stale",
                       "make the cache from the model's kv_config (block tables only)");
    }
    if (cache.id() == pools_for) return;
    if (c.n_layers != cfg.n_layers || c.n_kv_heads != cfg.n_kv_heads ||
        c.head_dim != cfg.head_dim) {
      throw make_error("cuda forward", "the KV cache's layers or heads differ from the model's");
    }
    if (cache.stats().tokens != 0) {
      throw make_error("cuda forward",
                       "this KV cache holds history the device does not have (the CUDA "
                       "backend keeps the blocks of one cache, the one last passed to forward)",
                       "start with an empty cache or keep using one cache");
    }
    stream.synchronize();
    read_stream.synchronize();
    k_pool.clear();
    v_pool.clear();
    kv_arena = Arena(nullptr, 0, "KV blocks");
    kv_arena = device::make_device_arena(kv_budget(cfg, c, st), "KV blocks");
    const uint64_t pool = static_cast<uint64_t>(c.num_blocks) * c.block_size * cfg.kv_dim() * esz;
    for (int l = 0; l < cfg.n_layers; ++l) {
      k_pool.push_back(kv_arena.allocate(pool, layer_name(l, "k_pool")));
      v_pool.push_back(kv_arena.allocate(pool, layer_name(l, "v_pool")));
    }
    kv = c;
    pools_for = cache.id();
  }

  void* wt(const std::string& name) const {
    const auto it = w.find(name);
    if (it == w.end()) throw make_error("cuda model", "no device tensor " + name);
    return it->second.data();
  }

  void gemm(const void* x, const std::string& weight, void* y, int64_t n, int64_t in, int64_t out,
            bool accumulate = false) {
    kc::GemmWtParams p;
    p.x = x;
    p.w = wt(weight);
    p.y = y;
    p.n = n;
    p.in = in;
    p.out = out;
    p.storage = st;
    p.accumulate = accumulate;
    check_cublas(kc::gemm_wt(cublas.get(), p, stream.get()), weight.c_str());
  }

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
    if (need > scratch_bytes) {
      stream.synchronize();
      scratch = Arena(nullptr, 0, "forward scratch");
      scratch = device::make_device_arena(need * 5 / 4, "forward scratch");
      scratch_bytes = scratch.budget();
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
      kc::ConvertToFloatParams p;
      p.src = static_cast<const uint16_t*>(src);
      p.dst = static_cast<float*>(f32_scratch);
      p.n = static_cast<size_t>(n);
      p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
      CB_CUDA_CHECK(kc::launch_convert_to_float(p, stream.get()));
      from = f32_scratch;
    }
    CB_CUDA_CHECK(
        cudaMemcpyAsync(h.data(), from, h.size() * 4, cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    return h;
  }

  // Grows a pinned host buffer and a device arena to at least `bytes` each (both empty
  // after growing); `wait` is the stream whose work may still use the old ones.
  static void grow(device::HostBuffer* host, Arena* dev, uint64_t* have, uint64_t bytes,
                   const device::Stream& wait, const char* name) {
    if (bytes <= *have) return;
    wait.synchronize();
    *have = 0;  // stays 0 if the allocation below throws
    *dev = Arena(nullptr, 0, name);
    *host = device::HostBuffer();
    const uint64_t want = bytes * 5 / 4;
    *dev = device::make_device_arena(want, name);
    *host = device::HostBuffer(want);
    *have = want;
  }

  // Checks that `cache` is the bound one, `layer` exists and slots [pos0, pos0 + n) lie below
  // `limit`; applies the cache's pending block copies; returns the sequence's block table.
  const std::vector<int32_t>& prepare_kv_access(kv::KvCache& cache, kv::SeqId seq, int layer,
                                                int64_t pos0, int64_t n, int64_t limit,
                                                const char* what, const char* below) {
    CB_CUDA_CHECK(cudaSetDevice(gpu));
    if (cache.id() != pools_for) {
      throw make_error(what, "this KV cache is not the one bound to the device",
                       "call bind_cache (or forward) with it first");
    }
    if (layer < 0 || layer >= cfg.n_layers) {
      throw make_error(what, "layer " + std::to_string(layer) + " is out of range");
    }
    if (pos0 < 0 || pos0 + n > limit) {
      throw make_error(what, "slots [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n) +
                                 ") are beyond the sequence's " + below);
    }
    apply_block_copies(cache, read_stream);
    return cache.block_table(seq);
  }

  // restore_kv (rotate: pre-RoPE keys rotated to their positions) or restore_kv_raw (keys as
  // given), through pinned staging on the read stream.
  void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                  const float* k, const float* v, int64_t rope_offset, bool rotate = true) {
    if (n <= 0) return;
    const std::vector<int32_t>& table = prepare_kv_access(
        cache, seq, layer, pos0, n, cache.capacity(seq), "cuda restore_kv", "reserved capacity");
    const int64_t kvd = cfg.kv_dim();
    const uint64_t f32 = static_cast<uint64_t>(n * kvd) * 4;
    const uint64_t tb = table.size() * 4;
    const uint64_t half = static_cast<uint64_t>(n * kvd) * esz;
    const uint64_t host_bytes = 2 * f32 + tb;
    grow(&restore_host, &restore_dev, &restore_bytes, host_bytes + 2 * half + 1024, read_stream,
         "restore staging");
    char* h = static_cast<char*>(restore_host.data());
    std::memcpy(h, k, f32);
    std::memcpy(h + f32, v, f32);
    std::memcpy(h + 2 * f32, table.data(), tb);
    Arena::Block staged = restore_dev.allocate(host_bytes, "restore staging");
    char* d = static_cast<char*>(staged.data());
    CB_CUDA_CHECK(cudaMemcpyAsync(d, h, host_bytes, cudaMemcpyHostToDevice, read_stream.get()));
    const void* ks = d;
    const void* vs = d + f32;
    Arena::Block conv;
    if (st != kc::Storage::F32) {
      conv = restore_dev.allocate(2 * half, "restore staging");
      kc::ConvertToHalfParams p;
      p.src = reinterpret_cast<const float*>(d);
      p.dst = static_cast<uint16_t*>(conv.data());
      p.n = static_cast<size_t>(2 * n * kvd);
      p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
      CB_CUDA_CHECK(kc::launch_convert_to_half(p, read_stream.get()));
      ks = conv.data();
      vs = static_cast<const char*>(conv.data()) + half;
    }
    kc::KvRestoreParams rp;
    rp.k_stage = ks;
    rp.v_stage = vs;
    rp.k_pool = k_pool[static_cast<size_t>(layer)].data();
    rp.v_pool = v_pool[static_cast<size_t>(layer)].data();
    rp.view = {reinterpret_cast<const int32_t*>(d + 2 * f32), kv.block_size, kvd};
    rp.pos0 = pos0;
    rp.n = n;
    rp.heads = cfg.n_kv_heads;
    rp.head_dim = cfg.head_dim;
    rp.rope_dims = cfg.rope_dims;
    rp.rope_offset = rope_offset;
    rp.theta = cfg.rope_theta;
    rp.style = rope_style();
    rp.storage = st;
    if (rotate) {
      CB_CUDA_CHECK(kc::launch_kv_restore(rp, read_stream.get()));
    } else {
      kc::KvAppendParams ap;
      ap.k_src = ks;
      ap.v_src = vs;
      ap.src_stride = kvd;
      ap.k_pool = rp.k_pool;
      ap.v_pool = rp.v_pool;
      ap.view = rp.view;
      ap.pos0 = pos0;
      ap.n = n;
      ap.storage = st;
      CB_CUDA_CHECK(kc::launch_kv_append(ap, read_stream.get()));
    }
    // The staging is reused by the next call; the compute stream's later work is enqueued
    // after this returns, so it sees the restored blocks.
    read_stream.synchronize();
  }

  // Slots [pos0, pos0 + n) of `seq` in `layer` as cached, to host fp32 rows.
  void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n, float* k,
               float* v) {
    if (n <= 0) return;
    const std::vector<int32_t>& table =
        prepare_kv_access(cache, seq, layer, pos0, n, cache.length(seq), "cuda read_kv", "length");
    const int64_t kvd = cfg.kv_dim();
    const uint64_t f32 = static_cast<uint64_t>(n * kvd) * 4;
    const uint64_t tb = table.size() * 4;
    const uint64_t half = static_cast<uint64_t>(n * kvd) * esz;
    grow(&restore_host, &restore_dev, &restore_bytes, 2 * f32 + tb + 2 * half + 1024, read_stream,
         "restore staging");
    auto* h = static_cast<char*>(restore_host.data());
    std::memcpy(h, table.data(), tb);
    Arena::Block dt = restore_dev.allocate(tb, "restore staging");
    Arena::Block rows = restore_dev.allocate(2 * half, "restore staging");
    CB_CUDA_CHECK(cudaMemcpyAsync(dt.data(), h, tb, cudaMemcpyHostToDevice, read_stream.get()));
    kc::KvGatherParams gp;
    gp.k_pool = k_pool[static_cast<size_t>(layer)].data();
    gp.v_pool = v_pool[static_cast<size_t>(layer)].data();
    gp.view = {static_cast<const int32_t*>(dt.data()), kv.block_size, kvd};
    gp.pos0 = pos0;
    gp.n = n;
    gp.k_out = rows.data();
    gp.v_out = static_cast<char*>(rows.data()) + half;
    gp.storage = st;
    CB_CUDA_CHECK(kc::launch_kv_gather(gp, read_stream.get()));
    const void* from = rows.data();
    Arena::Block wide;
    if (st != kc::Storage::F32) {
      wide = restore_dev.allocate(2 * f32, "restore staging");
      kc::ConvertToFloatParams p;
      p.src = static_cast<const uint16_t*>(rows.data());
      p.dst = static_cast<float*>(wide.data());
      p.n = static_cast<size_t>(2 * n * kvd);
      p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
      CB_CUDA_CHECK(kc::launch_convert_to_float(p, read_stream.get()));
      from = wide.data();
    }
    // The pinned buffer's table bytes were consumed by the H2D above (ordered on this stream).
    CB_CUDA_CHECK(
        cudaMemcpyAsync(h + tb, from, 2 * f32, cudaMemcpyDeviceToHost, read_stream.get()));
    read_stream.synchronize();
    std::memcpy(k, h + tb, f32);
    std::memcpy(v, h + tb + f32, f32);
  }

  // The cache's copy-on-write and fork copies since the last call, applied in order to the
  // device blocks on `s` (before anything reads or writes them there).
  void apply_block_copies(kv::KvCache& cache, const device::Stream& s) {
    const std::vector<kv::BlockCopy> copies = cache.take_block_copies();
    if (copies.empty()) return;
    const uint64_t block = static_cast<uint64_t>(kv.block_size) * cfg.kv_dim() * esz;
    const uint64_t slot = static_cast<uint64_t>(cfg.kv_dim()) * esz;
    for (const kv::BlockCopy& bc : copies) {
      for (int l = 0; l < cfg.n_layers; ++l) {
        for (const auto* pool : {&k_pool, &v_pool}) {
          char* base = static_cast<char*>((*pool)[static_cast<size_t>(l)].data());
          CB_CUDA_CHECK(cudaMemcpyAsync(base + bc.to * block, base + bc.from * block,
                                        static_cast<uint64_t>(bc.n) * slot,
                                        cudaMemcpyDeviceToDevice, s.get()));
        }
      }
    }
  }

  kc::RopeStyle rope_style() const {
    return cfg.rope_style == RopeStyle::Interleaved ? kc::RopeStyle::Interleaved
                                                    : kc::RopeStyle::RotateHalf;
  }

  std::vector<float> forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                             const LayerHooks& hooks);
};

std::vector<float> CudaModel::Impl::forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                                            const LayerHooks& hooks) {
  const ModelConfig& c = cfg;
  const int64_t H = c.hidden, qd = c.q_dim(), kvd = c.kv_dim(), F = c.ffn_hidden;
  const int64_t QKV = qd + 2 * kvd, V = c.vocab_size;
  CB_CUDA_CHECK(cudaSetDevice(gpu));
  const BatchRows br = batch_rows(c, batch, cache);
  ensure_pools(cache);
  apply_block_copies(cache, stream);
  const int64_t N = br.rows(), R = static_cast<int64_t>(br.logit_rows.size());
  const int64_t items = static_cast<int64_t>(batch.size());

  // Per-row and per-item index arrays for the kernels.
  std::vector<int32_t> q_seq(static_cast<size_t>(N)), n_ctx(static_cast<size_t>(items));
  int64_t stride = 1;
  for (int64_t i = 0; i < items; ++i) {
    const int64_t n = static_cast<int64_t>(batch[static_cast<size_t>(i)].tokens.size());
    for (int64_t t = 0; t < n; ++t)
      q_seq[static_cast<size_t>(br.row0[i] + t)] = static_cast<int32_t>(i);
    n_ctx[static_cast<size_t>(i)] = static_cast<int32_t>(br.len0[static_cast<size_t>(i)] + n);
    stride = std::max<int64_t>(
        stride, static_cast<int64_t>(cache.block_table(batch[static_cast<size_t>(i)].seq).size()));
  }
  std::vector<int32_t> tables(static_cast<size_t>(items * stride), 0);
  for (int64_t i = 0; i < items; ++i) {
    const auto& t = cache.block_table(batch[static_cast<size_t>(i)].seq);
    std::copy(t.begin(), t.end(), tables.begin() + i * stride);
  }
  // Prefill-sized batches in fp16/bf16 run the tensor-core attention (64-row tiles, no key
  // splitting); decode and fp32 the CUDA-core one.
  const bool mma = kc::attention_uses_mma(st, c.head_dim, N, items);
  const int64_t tile_rows = mma ? kc::kAttentionMmaTileRows : kc::kAttentionTileRows;
  const std::vector<int32_t> tiles = kc::plan_attention_tiles(q_seq, tile_rows);
  std::vector<int32_t> sel(br.logit_rows.begin(), br.logit_rows.end());
  int64_t max_ctx = 1;
  for (int32_t n : n_ctx) max_ctx = std::max<int64_t>(max_ctx, n);
  const int64_t n_tiles = static_cast<int64_t>(tiles.size() / 2);
  const int64_t splits = mma ? 1 : kc::plan_attention_splits(n_tiles, c.n_heads, max_ctx, sms);
  const int64_t ws = kc::attention_workspace_floats(N, c.n_heads, c.head_dim, splits);

  const auto e = [&](int64_t n) { return static_cast<uint64_t>(n) * esz; };
  const auto i32 = [](size_t n) { return static_cast<uint64_t>(n) * 4; };
  std::vector<Arena::Block> b =
      scratch_blocks({e(N * H),
                      e(N * H),
                      e(N * H),
                      e(N * QKV),
                      e(N * qd),
                      e(N * qd),
                      e(N * F),
                      e(N * F),
                      e(R * H),
                      e(R * H),
                      e(R * V),
                      static_cast<uint64_t>(std::max<int64_t>(R * V, N * kvd)) * 4,
                      e(N * kvd),
                      e(N * kvd),
                      static_cast<uint64_t>(ws) * 4,
                      i32(br.ids.size()),
                      i32(br.pos.size()),
                      i32(br.rope_pos.size()),
                      i32(q_seq.size()),
                      i32(n_ctx.size()),
                      i32(tables.size()),
                      i32(tiles.size()),
                      i32(sel.size()),
                      4});
  void *x = b[0].data(), *h = b[1].data(), *h2 = b[2].data(), *qkv = b[3].data(), *q = b[4].data(),
       *attn = b[5].data(), *gate = b[6].data(), *up = b[7].data(), *xs = b[8].data(),
       *xn = b[9].data(), *logits = b[10].data(), *f32 = b[11].data(), *kcap = b[12].data(),
       *vcap = b[13].data();
  float* workspace = ws > 0 ? static_cast<float*>(b[14].data()) : nullptr;
  auto* d_ids = static_cast<int32_t*>(b[15].data());
  auto* d_pos = static_cast<int32_t*>(b[16].data());
  auto* d_rope = static_cast<int32_t*>(b[17].data());
  auto* d_seq = static_cast<int32_t*>(b[18].data());
  auto* d_ctx = static_cast<int32_t*>(b[19].data());
  auto* d_tables = static_cast<int32_t*>(b[20].data());
  auto* d_tiles = static_cast<int32_t*>(b[21].data());
  auto* d_sel = static_cast<int32_t*>(b[22].data());
  auto* d_bad = static_cast<int32_t*>(b[23].data());
  to_device(d_ids, br.ids);
  to_device(d_pos, br.pos);
  to_device(d_rope, br.rope_pos);
  to_device(d_seq, q_seq);
  to_device(d_ctx, n_ctx);
  to_device(d_tables, tables);
  to_device(d_tiles, tiles);
  to_device(d_sel, sel);
  CB_CUDA_CHECK(cudaMemsetAsync(d_bad, 0, 4, stream.get()));

  kc::EmbeddingParams emb;
  emb.table = wt("token_embd.weight");
  emb.ids = d_ids;
  emb.out = x;
  emb.n = N;
  emb.rows = V;
  emb.dim = H;
  emb.bad_id = d_bad;
  emb.storage = st;
  CB_CUDA_CHECK(kc::launch_embedding(emb, stream.get()));
  const kc::RopeStyle rope = rope_style();
  // New pre-RoPE K and V for hooks.on_new_kv: per layer, captured in fp32 on the compute
  // stream into a ring slot and copied to pinned host memory on the write stream; a layer's
  // hooks run when its slot comes round again (its copy long finished) or after the last
  // layer, so the loop rarely waits.
  const bool capture = static_cast<bool>(hooks.on_new_kv);
  const uint64_t cap_layer = static_cast<uint64_t>(2 * N * kvd) * 4;  // k | v, fp32
  float* cap_dev = nullptr;
  Arena::Block cap_block;
  if (capture) {
    grow(&capture_host, &capture_dev, &capture_bytes, cap_layer * kCaptureSlots + 256, write_stream,
         "capture staging");
    cap_block = capture_dev.allocate(cap_layer * kCaptureSlots, "capture staging");
    cap_dev = static_cast<float*>(cap_block.data());
  }
  const auto hand_over = [&](int layer) {  // its slot's copy has finished
    const float* hk = static_cast<const float*>(capture_host.data()) +
                      static_cast<size_t>(layer % kCaptureSlots) * 2 * N * kvd;
    const float* hv = hk + N * kvd;
    for (int64_t i = 0; i < items; ++i) {
      const SeqInput& in = batch[static_cast<size_t>(i)];
      hooks.on_new_kv(layer, in.seq, br.len0[static_cast<size_t>(i)],
                      static_cast<int64_t>(in.tokens.size()), hk + br.row0[i] * kvd,
                      hv + br.row0[i] * kvd);
    }
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  char* const qkv_bytes = static_cast<char*>(qkv);

  for (int l = 0; l < c.n_layers; ++l) {
    norm(layer_name(l, "attn_norm"), x, h, N);
    gemm(h, layer_name(l, "qkv_fused"), qkv, N, H, QKV);
    if (capture) {
      const int slot = l % kCaptureSlots;
      if (l >= kCaptureSlots) {  // the slot's previous layer: copied, then handed over
        copied[slot].synchronize();
        hand_over(l - kCaptureSlots);
      }
      float* dk = cap_dev + static_cast<size_t>(slot) * 2 * N * kvd;
      float* dv = dk + N * kvd;
      kc::KvCaptureParams cp;
      cp.k_src = qkv_bytes + e(qd);
      cp.v_src = qkv_bytes + e(qd + kvd);
      cp.src_stride = QKV;
      cp.k_stage = st == kc::Storage::F32 ? static_cast<void*>(dk) : kcap;
      cp.v_stage = st == kc::Storage::F32 ? static_cast<void*>(dv) : vcap;
      cp.n = N;
      cp.kv_dim = kvd;
      cp.storage = st;
      CB_CUDA_CHECK(kc::launch_kv_capture(cp, stream.get()));
      if (st != kc::Storage::F32) {
        for (const auto& [from, to] : {std::pair<void*, float*>{kcap, dk}, {vcap, dv}}) {
          kc::ConvertToFloatParams p;
          p.src = static_cast<const uint16_t*>(from);
          p.dst = to;
          p.n = static_cast<size_t>(N * kvd);
          p.kind = st == kc::Storage::F16 ? kc::HalfKind::F16 : kc::HalfKind::BF16;
          CB_CUDA_CHECK(kc::launch_convert_to_float(p, stream.get()));
        }
      }
      captured.record(stream);
      captured.wait_on(write_stream);
      CB_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(capture_host.data()) + slot * cap_layer, dk,
                                    cap_layer, cudaMemcpyDeviceToHost, write_stream.get()));
      copied[slot].record(write_stream);
    }
    for (const auto& [off, heads] : {std::pair<int64_t, int64_t>{0, c.n_heads},
                                     std::pair<int64_t, int64_t>{qd, c.n_kv_heads}}) {
      kc::RopeParams rp;
      rp.x = qkv_bytes + e(off);
      rp.positions = d_rope;
      rp.n = N;
      rp.heads = heads;
      rp.head_dim = c.head_dim;
      rp.rope_dims = c.rope_dims;
      rp.token_stride = QKV;
      rp.theta = c.rope_theta;
      rp.style = rope;
      rp.storage = st;
      CB_CUDA_CHECK(kc::launch_rope(rp, stream.get()));
    }
    {  // every item's new K (rotated) and V into its blocks: one launch for the batch
      kc::KvAppendParams ap;
      ap.k_src = qkv_bytes + e(qd);
      ap.v_src = qkv_bytes + e(qd + kvd);
      ap.src_stride = QKV;
      ap.k_pool = k_pool[static_cast<size_t>(l)].data();
      ap.v_pool = v_pool[static_cast<size_t>(l)].data();
      ap.view = {d_tables, kv.block_size, kvd};
      ap.n = N;
      ap.row_seq = d_seq;
      ap.row_slot = d_pos;
      ap.table_stride = stride;
      ap.storage = st;
      CB_CUDA_CHECK(kc::launch_kv_append(ap, stream.get()));
    }
    // Q rows out of the fused output, contiguous for attention.
    CB_CUDA_CHECK(cudaMemcpy2DAsync(q, e(qd), qkv, e(QKV), e(qd), static_cast<size_t>(N),
                                    cudaMemcpyDeviceToDevice, stream.get()));
    // The layer's preloaded history: restore_kv runs on the read stream and returns when it
    // is in place, while this stream goes on with the work already enqueued.
    if (hooks.wait_ready) hooks.wait_ready(l);
    kc::PagedAttentionParams ap;
    ap.q = q;
    ap.out = attn;
    ap.q_pos = d_pos;
    ap.q_seq = d_seq;
    ap.rows = N;
    ap.n_heads = c.n_heads;
    ap.n_kv_heads = c.n_kv_heads;
    ap.head_dim = c.head_dim;
    ap.k_pool = k_pool[static_cast<size_t>(l)].data();
    ap.v_pool = v_pool[static_cast<size_t>(l)].data();
    ap.block_tables = d_tables;
    ap.table_stride = stride;
    ap.n_ctx = d_ctx;
    ap.block_size = kv.block_size;
    ap.window = c.sliding_window;
    ap.scale = scale;
    ap.storage = st;
    ap.tiles = d_tiles;
    ap.n_tiles = n_tiles;
    ap.splits = splits;
    ap.workspace = workspace;
    ap.tile_rows = tile_rows;
    CB_CUDA_CHECK(kc::launch_paged_attention(ap, stream.get()));
    if (c.arch == Arch::Falcon) {
      // Parallel block: x += attn_out(attn) + mlp(norm(x)); both read the block input.
      const void* mlp_in = h;
      if (c.separate_mlp_norm) {
        norm(layer_name(l, "attn_norm_2"), x, h2, N);
        mlp_in = h2;
      }
      gemm(mlp_in, layer_name(l, "ffn_up.weight"), up, N, H, F);
      kc::GeluParams gp;
      gp.x = up;
      gp.n = N * F;
      gp.storage = st;
      CB_CUDA_CHECK(kc::launch_gelu(gp, stream.get()));
      gemm(attn, layer_name(l, "attn_output.weight"), x, N, qd, H, /*accumulate=*/true);
      gemm(up, layer_name(l, "ffn_down.weight"), x, N, F, H, /*accumulate=*/true);
    } else {
      gemm(attn, layer_name(l, "attn_output.weight"), x, N, qd, H, /*accumulate=*/true);
      norm(layer_name(l, "ffn_norm"), x, h, N);
      gemm(h, layer_name(l, "ffn_gate.weight"), gate, N, H, F);
      gemm(h, layer_name(l, "ffn_up.weight"), up, N, H, F);
      kc::SwigluParams sp;
      sp.gate = gate;
      sp.up = up;
      sp.out = gate;
      sp.n = N * F;
      sp.storage = st;
      CB_CUDA_CHECK(kc::launch_swiglu(sp, stream.get()));
      gemm(gate, layer_name(l, "ffn_down.weight"), x, N, F, H, /*accumulate=*/true);
    }
  }

  // Final norm and LM head on the rows whose logits are wanted (gathered like embeddings).
  kc::EmbeddingParams g;
  g.table = x;
  g.ids = d_sel;
  g.out = xs;
  g.n = R;
  g.rows = N;
  g.dim = H;
  g.storage = st;
  CB_CUDA_CHECK(kc::launch_embedding(g, stream.get()));
  norm("output_norm", xs, xn, R);
  gemm(xn, c.tied_embeddings ? "token_embd.weight" : "output.weight", logits, R, H, V);
  std::vector<float> out = to_host_f32(logits, R * V, f32);
  int32_t bad = 0;
  CB_CUDA_CHECK(cudaMemcpy(&bad, d_bad, 4, cudaMemcpyDeviceToHost));
  if (bad != 0) throw make_error("cuda forward", "a token id was outside the vocabulary");
  for (size_t i = 0; i < batch.size(); ++i) {
    cache.set_length(batch[i].seq, br.len0[i] + static_cast<int64_t>(batch[i].tokens.size()));
  }
  if (capture) {
    write_stream.synchronize();
    for (int l = std::max(0, c.n_layers - kCaptureSlots); l < c.n_layers; ++l) hand_over(l);
  }
  return out;
}

CudaModel::CudaModel(const ModelConfig& cfg, const Weights& w, CudaModelOptions opts) {
  device::use_gpu(opts.device, "--backend cuda", "run with --backend cpu");
  impl_ = std::make_unique<Impl>(cfg, opts.storage, opts.device);
  impl_->upload_all(w);
}

CudaModel::CudaModel(const ModelConfig& cfg, PresetWeights preset, CudaModelOptions opts) {
  device::use_gpu(opts.device, "--backend cuda", "run with --backend cpu");
  impl_ = std::make_unique<Impl>(cfg, opts.storage, opts.device);
  impl_->generate_all(preset.seed);
}

CudaModel::CudaModel(const ModelSource& src, uint64_t seed, CudaModelOptions opts) {
  if (src.vocab_only()) {
    throw make_error(src.location(), "the file holds a vocabulary but no weights",
                     "pass a model file with tensors");
  }
  device::use_gpu(opts.device, "--backend cuda", "run with --backend cpu");
  impl_ = std::make_unique<Impl>(src.config(), opts.storage, opts.device);
  if (src.kind() == SourceKind::Preset) {
    impl_->generate_all(seed);
  } else {
    impl_->upload_file(src);
  }
}

CudaModel::~CudaModel() = default;

const ModelConfig& CudaModel::config() const {
  return impl_->cfg;
}
uint64_t CudaModel::weight_bytes() const {
  return impl_->weights_arena.used();
}
uint64_t CudaModel::kv_bytes() const {
  return impl_->kv_arena.used();
}

std::vector<float> CudaModel::forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                                      const LayerHooks& hooks) const {
  return impl_->forward(batch, cache, hooks);
}

void CudaModel::bind_cache(const kv::KvCache& cache) const {
  impl_->ensure_pools(cache);
}

std::string CudaModel::kv_precision() const {
  return kc::storage_name(impl_->st);
}

void CudaModel::restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                           const float* k_pre_rope, const float* v, int64_t rope_offset) const {
  impl_->restore_kv(cache, seq, layer, pos0, n, k_pre_rope, v, rope_offset);
}

void CudaModel::restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0,
                               int64_t n, const float* k, const float* v) const {
  impl_->restore_kv(cache, seq, layer, pos0, n, k, v, 0, /*rotate=*/false);
}

void CudaModel::read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                        float* k, float* v) const {
  impl_->read_kv(cache, seq, layer, pos0, n, k, v);
}

}  // namespace cb::model
