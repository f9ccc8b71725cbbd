#include "lib/cuda_model/cuda_model_impl.h"
#include "lib/model/weights_id.h"

namespace cb::model {
namespace cuda_detail {

std::string layer_name(int l, const char* suffix) {
  return "blk." + std::to_string(l) + "." + suffix;
}

bool has_gate_up(const ModelConfig& c) {
  return c.arch != Arch::Falcon;
}

bool fused_away(const ModelConfig& c, const std::string& name) {
  const auto ends_with = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
  };
  for (const char* s : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_qkv.weight"}) {
    if (ends_with(s)) return true;
  }
  return has_gate_up(c) && (ends_with(".ffn_gate.weight") || ends_with(".ffn_up.weight"));
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw make_error("cuda forward", std::string(what) + " failed: " + cublasGetStatusName(s));
  }
}

}  // namespace cuda_detail

namespace {

using cuda_detail::layer_name;
using cuda_detail::page_locked;
using device::Arena;

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

void CudaModel::Impl::gate_up_swiglu(int l, const char* gate_w, const char* up_w, const void* x,
                                     void* y, void* up_out, int64_t n) {
  const int64_t H = cfg.hidden, F = cfg.ffn_hidden;
  kc::SwigluParams sp;
  sp.out = y;
  sp.n = n * F;
  sp.storage = st;
  if (!paths.mlp_fusion) {  // two GEMMs (GEMVs), then SwiGLU
    gemm(x, gate_w, layer_name(l, "ffn_gate"), y, n, H, F);
    gemm(x, up_w, layer_name(l, "ffn_up"), up_out, n, H, F);
    sp.gate = y;
    sp.up = up_out;
    CB_CUDA_CHECK(kc::launch_swiglu(sp, stream.get()));
    return;
  }
  kc::GemmWtParams p;
  p.x = x;
  p.w = gate_w;
  p.y = y;
  p.n = n;
  p.in = H;
  p.out = F;
  p.storage = st;
  p.pdl = paths.decode_pdl;
  if (paths.decode_gemv && kc::gemv_swiglu_applies(p, up_w)) {  // 1-4 rows: one launch
    CB_CUDA_CHECK(kc::launch_gemv_swiglu(p, up_w, stream.get()));
    return;
  }
  // One GEMM over the fused matrix: row r of up_out is [gate . x_r | up . x_r].
  gemm(x, gate_w, layer_name(l, "gate_up_fused"), up_out, n, H, 2 * F);
  const char* gu = static_cast<const char*>(up_out);
  sp.gate = gu;
  sp.up = gu + static_cast<size_t>(F) * esz;
  sp.cols = F;
  sp.in_stride = 2 * F;
  CB_CUDA_CHECK(kc::launch_swiglu(sp, stream.get()));
}

void CudaModel::Impl::rope_and_append(void* qkv, const int32_t* rope_pos, const int32_t* row_seq,
                                      const int32_t* row_slot, const int32_t* tables,
                                      int64_t table_stride, int64_t n, int l) {
  const int64_t qd = cfg.q_dim(), kvd = cfg.kv_dim(), QKV = qd + 2 * kvd;
  if (paths.rope_append_fusion) {  // Q rotated in place, K rotated into the blocks, V copied
    kc::RopeKvAppendParams rp;
    rp.qkv = qkv;
    rp.positions = rope_pos;
    rp.n = n;
    rp.q_heads = cfg.n_heads;
    rp.kv_heads = cfg.n_kv_heads;
    rp.head_dim = cfg.head_dim;
    rp.rope_dims = cfg.rope_dims;
    rp.token_stride = QKV;
    rp.theta = cfg.rope_theta;
    rp.style = rope_style();
    rp.storage = st;
    rp.k_pool = k_pool[static_cast<size_t>(l)].data();
    rp.v_pool = v_pool[static_cast<size_t>(l)].data();
    rp.view = {tables, kv.block_size, kvd};
    rp.row_seq = row_seq;
    rp.row_slot = row_slot;
    rp.table_stride = table_stride;
    CB_CUDA_CHECK(kc::launch_rope_kv_append(rp, stream.get()));
    return;
  }
  {  // Q's heads and then K's follow each other in a fused row: one launch rotates both
    kc::RopeParams rp;
    rp.x = qkv;
    rp.positions = rope_pos;
    rp.n = n;
    rp.heads = cfg.n_heads + cfg.n_kv_heads;
    rp.head_dim = cfg.head_dim;
    rp.rope_dims = cfg.rope_dims;
    rp.token_stride = QKV;
    rp.theta = cfg.rope_theta;
    rp.style = rope_style();
    rp.storage = st;
    CB_CUDA_CHECK(kc::launch_rope(rp, stream.get()));
  }
  // Every item's new K (rotated) and V into its blocks: one launch for the batch.
  char* const bytes = static_cast<char*>(qkv);
  kc::KvAppendParams ap;
  ap.k_src = bytes + static_cast<size_t>(qd) * esz;
  ap.v_src = bytes + static_cast<size_t>(qd + kvd) * esz;
  ap.src_stride = QKV;
  ap.k_pool = k_pool[static_cast<size_t>(l)].data();
  ap.v_pool = v_pool[static_cast<size_t>(l)].data();
  ap.view = {tables, kv.block_size, kvd};
  ap.n = n;
  ap.row_seq = row_seq;
  ap.row_slot = row_slot;
  ap.table_stride = table_stride;
  ap.storage = st;
  CB_CUDA_CHECK(kc::launch_kv_append(ap, stream.get()));
}

std::vector<float> CudaModel::Impl::forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                                            const LayerHooks& hooks) {
  const ModelConfig& c = cfg;
  const int64_t H = c.hidden, qd = c.q_dim(), kvd = c.kv_dim(), F = c.ffn_hidden;
  const int64_t QKV = qd + 2 * kvd, V = c.vocab_size;
  CB_CUDA_CHECK(cudaSetDevice(gpu));
  const BatchRows br = batch_rows(c, batch, cache);
  ensure_pools(cache);
  if (apply_block_copies(cache, stream)) {  // restores on the read stream come after them
    copies_done.record(stream);
    copies_done.wait_on(read_stream);
  }
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
  // splitting); decode and fp32 the CUDA-core one, or the decode kernel (paths.decode_attention)
  // where its single-row tiles and head size allow.
  const bool mma = kc::attention_uses_mma(st, c.head_dim, N, items);
  const int64_t tile_rows = mma ? kc::kAttentionMmaTileRows : kc::kAttentionTileRows;
  const std::vector<int32_t> tiles = kc::plan_attention_tiles(q_seq, tile_rows);
  std::vector<int32_t> sel(br.logit_rows.begin(), br.logit_rows.end());
  int64_t max_ctx = 1;
  for (int32_t n : n_ctx) max_ctx = std::max<int64_t>(max_ctx, n);
  const int64_t n_tiles = static_cast<int64_t>(tiles.size() / 2);
  // CudaKernelPaths::decode_more_splits: finer splits where every tile is one row (decode).
  const bool finer = paths.decode_more_splits && n_tiles == N;
  const int64_t splits = mma ? 1
                         : finer
                             ? kc::plan_attention_splits(n_tiles, c.n_heads, max_ctx, sms, 32, 4)
                             : kc::plan_attention_splits(n_tiles, c.n_heads, max_ctx, sms);
  const int64_t ws = kc::attention_workspace_floats(N, c.n_heads, c.head_dim, splits);
  // The decode kernel's split counters (kernels/cuda attention.h), zeroed once per forward.
  const int64_t counters = paths.decode_attention && splits > 1 ? N * c.n_heads : 0;

  const auto e = [&](int64_t n) { return static_cast<uint64_t>(n) * esz; };
  const auto i32 = [](size_t n) { return static_cast<uint64_t>(n) * 4; };
  std::vector<Arena::Block> b = scratch_blocks(
      {e(N * H), e(N * H), e(N * H), e(N * QKV), e(N * qd), e(N * F),
       // up's output, or a fused gate|up GEMM's (CudaKernelPaths::mlp_fusion)
       e(N * F * (cuda_detail::has_gate_up(c) && paths.mlp_fusion ? 2 : 1)), e(R * H), e(R * H),
       e(R * V), static_cast<uint64_t>(std::max<int64_t>(R * V, N * kvd)) * 4, e(N * kvd),
       e(N * kvd), static_cast<uint64_t>(ws) * 4, i32(br.ids.size()), i32(br.pos.size()),
       i32(br.rope_pos.size()), i32(q_seq.size()), i32(n_ctx.size()), i32(tables.size()),
       i32(tiles.size()), i32(sel.size()), 4,
       static_cast<uint64_t>(std::max<int64_t>(counters, 1)) * 4});
  void *x = b[0].data(), *h = b[1].data(), *h2 = b[2].data(), *qkv = b[3].data(),
       *attn = b[4].data(), *gate = b[5].data(), *up = b[6].data(), *xs = b[7].data(),
       *xn = b[8].data(), *logits = b[9].data(), *f32 = b[10].data(), *kcap = b[11].data(),
       *vcap = b[12].data();
  float* workspace = ws > 0 ? static_cast<float*>(b[13].data()) : nullptr;
  auto* d_ids = static_cast<int32_t*>(b[14].data());
  auto* d_pos = static_cast<int32_t*>(b[15].data());
  auto* d_rope = static_cast<int32_t*>(b[16].data());
  auto* d_seq = static_cast<int32_t*>(b[17].data());
  auto* d_ctx = static_cast<int32_t*>(b[18].data());
  auto* d_tables = static_cast<int32_t*>(b[19].data());
  auto* d_tiles = static_cast<int32_t*>(b[20].data());
  auto* d_sel = static_cast<int32_t*>(b[21].data());
  auto* d_bad = static_cast<int32_t*>(b[22].data());
  auto* d_counters = counters > 0 ? static_cast<int32_t*>(b[23].data()) : nullptr;
  if (d_counters != nullptr) {
    CB_CUDA_CHECK(cudaMemsetAsync(d_counters, 0, static_cast<size_t>(counters) * 4, stream.get()));
  }
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
  // New pre-RoPE K and V for hooks.on_new_kv (fp32) or on_new_kv_native (the storage type,
  // not converted): per layer, captured on the compute stream into a ring slot and copied to
  // pinned host memory on the write stream; a layer's hooks run when its slot comes round
  // again (its copy long finished) or after the last layer, so the loop rarely waits.
  const bool native_capture = static_cast<bool>(hooks.on_new_kv_native);
  const bool capture = native_capture || static_cast<bool>(hooks.on_new_kv);
  const bool widen = !native_capture && st != kc::Storage::F32;  // converted to fp32
  const uint64_t cap_row = static_cast<uint64_t>(kvd) * (native_capture ? esz : 4);
  const uint64_t cap_layer = 2 * static_cast<uint64_t>(N) * cap_row;  // k | v
  char* cap_dev = nullptr;
  Arena::Block cap_block;
  if (capture) {
    grow(&capture_host, &capture_dev, cap_layer * kCaptureSlots + 256, write_stream,
         "capture staging");
    cap_block = capture_dev.allocate(cap_layer * kCaptureSlots, "capture staging");
    cap_dev = static_cast<char*>(cap_block.data());
  }
  // Native rows of large items copied by the device straight to the caller's page-locked
  // memory (hooks.native_kv_target), per [layer * items + item]; empty when none can be.
  std::vector<std::pair<void*, void*>> direct;
  if (native_capture && hooks.native_kv_target) {
    direct.assign(static_cast<size_t>(c.n_layers * items), {nullptr, nullptr});
  }
  // On an exception the write stream may still be copying into the caller's memory: it is
  // waited for before the caller can free or reuse that memory.
  const cuda_detail::StreamDrain write_wait{direct.empty() ? nullptr : write_stream.get()};
  const auto hand_over = [&](int layer) {  // its slot's copies have finished
    const char* hk = static_cast<const char*>(capture_host.data()) +
                     static_cast<size_t>(layer % kCaptureSlots) * cap_layer;
    const char* hv = hk + N * cap_row;
    for (int64_t i = 0; i < items; ++i) {
      const SeqInput& in = batch[static_cast<size_t>(i)];
      const int64_t pos0 = br.len0[static_cast<size_t>(i)];
      const auto n = static_cast<int64_t>(in.tokens.size());
      const char* ki = hk + br.row0[i] * cap_row;
      const char* vi = hv + br.row0[i] * cap_row;
      if (!direct.empty() && direct[static_cast<size_t>(layer * items + i)].first != nullptr) {
        const auto& [tk, tv] = direct[static_cast<size_t>(layer * items + i)];
        hooks.on_new_kv_native(layer, in.seq, pos0, n, tk, tv);
      } else if (native_capture) {
        hooks.on_new_kv_native(layer, in.seq, pos0, n, ki, vi);
      } else {
        hooks.on_new_kv(layer, in.seq, pos0, n, reinterpret_cast<const float*>(ki),
                        reinterpret_cast<const float*>(vi));
      }
    }
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  char* const qkv_bytes = static_cast<char*>(qkv);
  // CudaKernelPaths::decode_l2_prefetch: the weights of the linear layer after attention (the
  // output projection; Falcon's parallel block runs its MLP up projection first), a prefix of
  // each row up to half the L2, asked for on the prefetch stream once the QKV GEMV is done.
  const bool l2_prefetch = paths.decode_l2_prefetch && paths.decode_gemv && N <= kc::kGemvMaxRows &&
                           st != kc::Storage::F32 && l2_bytes > 0;
  const auto prefetch_after_qkv = [&](int l) {
    const bool falcon = c.arch == Arch::Falcon;
    const std::string name = layer_name(l, falcon ? "ffn_up.weight" : "attn_output.weight");
    const int64_t rows = falcon ? F : H, row_bytes = static_cast<int64_t>(e(falcon ? H : qd));
    const Arena::Block& block = w.at(name);
    if (block.size() < static_cast<uint64_t>(rows * row_bytes)) {
      throw make_error("cuda forward", name + " is smaller than the L2 prefetch's plan");
    }
    // The GEMV kernels keep five or six blocks of eight warps a multiprocessor at batch 1 (three
    // to four at 3-4 rows, where a plan of every row's prefix may then outrun the resident rows).
    const kc::L2PrefetchParams pp =
        kc::l2_prefetch_plan(block.data(), rows, row_bytes, l2_bytes / 2, 40 * int64_t{sms});
    if (!kc::l2_prefetch_applies(pp) || pp.prefix_bytes == 0) return;  // a hint: none then
    qkv_done.record(stream);
    qkv_done.wait_on(prefetch_stream);
    CB_CUDA_CHECK(kc::launch_l2_prefetch(pp, sms, prefetch_stream.get()));
  };

  for (int l = 0; l < c.n_layers; ++l) {
    if (!fused_norm_gemv(x, layer_name(l, "attn_norm"), wt(layer_name(l, "qkv_fused")), nullptr,
                         qkv, N, H, QKV)) {
      norm(layer_name(l, "attn_norm"), x, h, N);
      gemm(h, layer_name(l, "qkv_fused"), qkv, N, H, QKV);
    }
    if (l2_prefetch) prefetch_after_qkv(l);
    if (capture) {
      const int slot = l % kCaptureSlots;
      if (l >= kCaptureSlots) {  // the slot's previous layer: copied, then handed over
        copied[slot].synchronize();
        hand_over(l - kCaptureSlots);
      }
      char* dk = cap_dev + static_cast<size_t>(slot) * cap_layer;
      char* dv = dk + N * cap_row;
      kc::KvCaptureParams cp;
      cp.k_src = qkv_bytes + e(qd);
      cp.v_src = qkv_bytes + e(qd + kvd);
      cp.src_stride = QKV;
      cp.k_stage = widen ? kcap : static_cast<void*>(dk);
      cp.v_stage = widen ? vcap : static_cast<void*>(dv);
      cp.n = N;
      cp.kv_dim = kvd;
      cp.storage = st;
      CB_CUDA_CHECK(kc::launch_kv_capture(cp, stream.get()));
      if (widen) {
        for (const auto& [from, to] : {std::pair<void*, char*>{kcap, dk}, {vcap, dv}}) {
          f32_from_half(from, reinterpret_cast<float*>(to), static_cast<size_t>(N * kvd), stream);
        }
      }
      captured.record(stream);
      captured.wait_on(write_stream);
      char* const hs = static_cast<char*>(capture_host.data()) + slot * cap_layer;
      const auto d2h = [&](void* to, const void* from, uint64_t bytes) {
        CB_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, write_stream.get()));
      };
      if (direct.empty()) {
        d2h(hs, dk, cap_layer);  // the whole slot: K rows, then V rows
      } else {
        // Items with a target get their rows copied there; the others', in runs of consecutive
        // rows, go to the ring's host slot.
        int64_t run0 = 0, run1 = 0;  // rows [run0, run1) still to stage
        const auto stage = [&] {
          const uint64_t off = static_cast<uint64_t>(run0) * cap_row;
          const uint64_t bytes = static_cast<uint64_t>(run1 - run0) * cap_row;
          if (bytes > 0) {
            d2h(hs + off, dk + off, bytes);
            d2h(hs + N * cap_row + off, dv + off, bytes);
          }
        };
        for (int64_t i = 0; i < items; ++i) {
          const SeqInput& in = batch[static_cast<size_t>(i)];
          const auto n = static_cast<int64_t>(in.tokens.size());
          std::pair<void*, void*> t{nullptr, nullptr};
          if (n >= kDirectCaptureRows) {
            t = hooks.native_kv_target(l, in.seq, br.len0[static_cast<size_t>(i)], n);
          }
          if (t.first == nullptr || t.second == nullptr || !page_locked(t.first) ||
              !page_locked(t.second)) {
            if (run1 != br.row0[i]) {
              stage();
              run0 = br.row0[i];
            }
            run1 = br.row0[i] + n;
            continue;
          }
          const uint64_t off = static_cast<uint64_t>(br.row0[i]) * cap_row;
          d2h(t.first, dk + off, static_cast<uint64_t>(n) * cap_row);
          d2h(t.second, dv + off, static_cast<uint64_t>(n) * cap_row);
          direct[static_cast<size_t>(l * items + i)] = t;
        }
        stage();
      }
      copied[slot].record(write_stream);
    }
    kc::PagedAttentionParams ap;
    ap.q = qkv;  // Q's heads, read in place from the fused rows
    ap.q_stride = QKV;
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
    // Both tensor-core kernels (wmma and the FlashAttention-2-style one) load K and V as
    // 16-byte vectors; the pools come from 256-byte-aligned arenas, and the launchers refuse
    // (cudaErrorInvalidValue) pools that are not aligned.
    ap.fa2 = paths.prefill_fa2;
    ap.decode_kernel = paths.decode_attention;
    ap.counters = d_counters;
    // CudaKernelPaths::decode_rope_fusion: the decode kernel rotates Q and the new K itself and
    // appends K and V (each item one row of its own sequence), where it can.
    if (paths.decode_rope_fusion && items == N) {
      ap.rope_pos = d_rope;
      ap.k_new = qkv_bytes + e(qd);
      ap.v_new = qkv_bytes + e(qd + kvd);
      ap.rope_dims = c.rope_dims;
      ap.theta = c.rope_theta;
      ap.rope_style = rope_style();
      if (!kc::attention_uses_decode_rope(ap)) ap.rope_pos = nullptr;
    }
    if (ap.rope_pos == nullptr) rope_and_append(qkv, d_rope, d_seq, d_pos, d_tables, stride, N, l);
    // The layer's preloaded history: restore_kv runs on the read stream and returns when it
    // is in place, while this stream goes on with the work already enqueued.
    if (hooks.wait_ready) hooks.wait_ready(l);
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
      const auto [gate_w, up_w] = gate_up(l);
      if (!fused_norm_gemv(x, layer_name(l, "ffn_norm"), gate_w, up_w, gate, N, H, F)) {
        norm(layer_name(l, "ffn_norm"), x, h, N);
        gate_up_swiglu(l, gate_w, up_w, h, gate, up, N);
      }
      gemm(gate, layer_name(l, "ffn_down.weight"), x, N, F, H, /*accumulate=*/true);
    }
  }

  if (l2_prefetch) {  // nothing waits for a prefetch; the streams meet again here
    prefetched.record(prefetch_stream);
    prefetched.wait_on(stream);
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
  impl_->cfg.weights_id = weights_identity(src, seed);  // the storage is in kv_precision()
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
CudaKernelPaths CudaModel::kernel_paths() const {
  return impl_->paths;
}
CudaKernelPaths CudaModel::set_kernel_paths(const CudaKernelPaths& paths) const {
  CB_CUDA_CHECK(cudaSetDevice(impl_->gpu));
  impl_->paths = paths;
  impl_->paths.decode_pdl = paths.decode_pdl && kc::gemv_pdl_supported();  // griddepcontrol.wait
  return impl_->paths;
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

DType CudaModel::native_kv_type() const {
  return impl_->st == kc::Storage::F32   ? DType::F32
         : impl_->st == kc::Storage::F16 ? DType::F16
                                         : DType::BF16;
}

void CudaModel::restore_kv_native(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0,
                                  int64_t n, const void* k_pre_rope, const void* v,
                                  int64_t rope_offset) const {
  impl_->restore_kv(cache, seq, layer, pos0, n, k_pre_rope, v, rope_offset, /*rotate=*/true,
                    /*native=*/true);
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
