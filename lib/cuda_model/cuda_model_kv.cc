// CudaModel's KV: device pools bound to one cache, restore and read-back on the read stream,
// the cache's recorded block copies, and the staging buffers' growth.
#include "lib/cuda_model/cuda_model_impl.h"

namespace cb::model {

using cuda_detail::fused_away;
using cuda_detail::layer_name;
using cuda_detail::page_locked;
using device::Arena;

bool cuda_detail::page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

void CudaModel::Impl::grow(device::HostBuffer* host, Arena* dev, uint64_t bytes,
                           const device::Stream& wait, const char* name) {
  if (dev->budget() >= bytes && host->size() >= bytes) return;
  wait.synchronize();
  *dev = Arena(nullptr, 0, name);
  *host = device::HostBuffer();
  const uint64_t want = bytes * 5 / 4;
  *dev = device::make_device_arena(want, name);
  *host = device::HostBuffer(want);
}

void CudaModel::Impl::ensure_pools(const kv::KvCache& cache) {
  CB_CUDA_CHECK(cudaSetDevice(gpu));
  const kv::KvConfig& c = cache.config();
  if (c.host_pools) {
    throw make_error("cuda forward",
                     "the KV cache has host pools, which the GPU backend would leave stale",
                     "make the cache from the model's kv_config (block tables only)");
  }
  if (cache.id() == pools_for) return;
  if (c.n_layers != cfg.n_layers || c.n_kv_heads != cfg.n_kv_heads || c.head_dim != cfg.head_dim) {
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

const std::vector<int32_t>& CudaModel::Impl::prepare_kv_access(kv::KvCache& cache, kv::SeqId seq,
                                                               int layer, int64_t pos0, int64_t n,
                                                               int64_t limit, const char* what,
                                                               const char* below) {
  CB_CUDA_CHECK(cudaSetDevice(gpu));
  if (cache.id() != pools_for) {
    throw make_error(what, "this KV cache is not the one bound to the device",
                     "call bind_cache (or forward) with it first");
  }
  if (layer < 0 || layer >= cfg.n_layers) {
    throw make_error(what, "layer " + std::to_string(layer) + " is out of range");
  }
  if (pos0 < 0 || n < 0 || pos0 + n > limit) {
    throw make_error(what, "slots [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n) +
                               ") are beyond the sequence's " + below);
  }
  apply_block_copies(cache, read_stream);
  return cache.block_table(seq);
}

void CudaModel::Impl::restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0,
                                 int64_t n, const void* k, const void* v, int64_t rope_offset,
                                 bool rotate, bool native) {
  if (n == 0) return;
  const std::vector<int32_t>& table = prepare_kv_access(
      cache, seq, layer, pos0, n, cache.capacity(seq), "cuda restore_kv", "reserved capacity");
  // Block copies and the copies below read the caller's rows: finished however this ends.
  const cuda_detail::StreamDrain drain{read_stream.get()};
  const int64_t kvd = cfg.kv_dim();
  // The host rows: fp32, or the storage type's (native); converted on the device unless they
  // are already in the storage type.
  const bool convert = !native && st != kc::Storage::F32;
  const uint64_t rows = static_cast<uint64_t>(n * kvd) * (native ? esz : 4);
  const uint64_t tb = table.size() * 4;
  const uint64_t half = static_cast<uint64_t>(n * kvd) * esz;
  const uint64_t host_bytes = 2 * rows + tb;
  grow(&restore_host, &restore_dev, host_bytes + (convert ? 2 * half : 0) + 1024, read_stream,
       "restore staging");
  char* h = static_cast<char*>(restore_host.data());
  Arena::Block staged = restore_dev.allocate(host_bytes, "restore staging");
  char* d = static_cast<char*>(staged.data());
  if (page_locked(k) && page_locked(v)) {
    // The caller's rows are page-locked (the engine's buffers): copied from there, with no
    // host copy; only the block table goes through the staging.
    std::memcpy(h, table.data(), tb);
    CB_CUDA_CHECK(cudaMemcpyAsync(d, k, rows, cudaMemcpyHostToDevice, read_stream.get()));
    CB_CUDA_CHECK(cudaMemcpyAsync(d + rows, v, rows, cudaMemcpyHostToDevice, read_stream.get()));
    CB_CUDA_CHECK(cudaMemcpyAsync(d + 2 * rows, h, tb, cudaMemcpyHostToDevice, read_stream.get()));
  } else {
    std::memcpy(h, k, rows);
    std::memcpy(h + rows, v, rows);
    std::memcpy(h + 2 * rows, table.data(), tb);
    CB_CUDA_CHECK(cudaMemcpyAsync(d, h, host_bytes, cudaMemcpyHostToDevice, read_stream.get()));
  }
  const void* ks = d;
  const void* vs = d + rows;
  Arena::Block conv;
  if (convert) {
    conv = restore_dev.allocate(2 * half, "restore staging");
    half_from_f32(reinterpret_cast<const float*>(d), conv.data(), static_cast<size_t>(2 * n * kvd),
                  read_stream);
    ks = conv.data();
    vs = static_cast<const char*>(conv.data()) + half;
  }
  kc::KvRestoreParams rp;
  rp.k_stage = ks;
  rp.v_stage = vs;
  rp.k_pool = k_pool[static_cast<size_t>(layer)].data();
  rp.v_pool = v_pool[static_cast<size_t>(layer)].data();
  rp.view = {reinterpret_cast<const int32_t*>(d + 2 * rows), kv.block_size, kvd};
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

void CudaModel::Impl::read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                              float* k, float* v) {
  if (n == 0) return;
  const std::vector<int32_t>& table =
      prepare_kv_access(cache, seq, layer, pos0, n, cache.length(seq), "cuda read_kv", "length");
  const cuda_detail::StreamDrain drain{read_stream.get()};  // as in restore_kv
  const int64_t kvd = cfg.kv_dim();
  const uint64_t f32 = static_cast<uint64_t>(n * kvd) * 4;
  const uint64_t tb = table.size() * 4;
  const uint64_t half = static_cast<uint64_t>(n * kvd) * esz;
  grow(&restore_host, &restore_dev, 2 * f32 + tb + 2 * half + 1024, read_stream, "restore staging");
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
    f32_from_half(rows.data(), static_cast<float*>(wide.data()), static_cast<size_t>(2 * n * kvd),
                  read_stream);
    from = wide.data();
  }
  // The pinned buffer's table bytes were consumed by the H2D above (ordered on this stream).
  CB_CUDA_CHECK(cudaMemcpyAsync(h + tb, from, 2 * f32, cudaMemcpyDeviceToHost, read_stream.get()));
  read_stream.synchronize();
  std::memcpy(k, h + tb, f32);
  std::memcpy(v, h + tb + f32, f32);
}

bool CudaModel::Impl::apply_block_copies(kv::KvCache& cache, const device::Stream& s) {
  const std::vector<kv::BlockCopy> copies = cache.take_block_copies();
  if (copies.empty()) return false;
  const uint64_t block = static_cast<uint64_t>(kv.block_size) * cfg.kv_dim() * esz;
  const uint64_t slot = static_cast<uint64_t>(cfg.kv_dim()) * esz;
  for (const kv::BlockCopy& bc : copies) {
    for (int l = 0; l < cfg.n_layers; ++l) {
      for (const auto* pool : {&k_pool, &v_pool}) {
        char* base = static_cast<char*>((*pool)[static_cast<size_t>(l)].data());
        CB_CUDA_CHECK(cudaMemcpyAsync(base + bc.to * block, base + bc.from * block,
                                      static_cast<uint64_t>(bc.n) * slot, cudaMemcpyDeviceToDevice,
                                      s.get()));
      }
    }
  }
  return true;
}

}  // namespace cb::model
