#include "lib/model/model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cpu/ops.h"
#include "lib/core/error.h"
#include "lib/model/weights_id.h"

namespace cb::model {
namespace {

namespace k = cb::kernels::cpu;

k::Rope rope_of(RopeStyle s) {
  return s == RopeStyle::Interleaved ? k::Rope::Interleaved : k::Rope::RotateHalf;
}

std::string layer_name(int l, const char* suffix) {
  return "blk." + std::to_string(l) + "." + suffix;
}

// Splits Falcon's fused QKV rows [n, q + 2 kv] into q [n, q], k [n, kv], v [n, kv].
void split_qkv(const ModelConfig& c, const float* qkv, int64_t n, float* q, float* kk, float* v) {
  const int64_t hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), row = qd + 2 * kvd;
  for (int64_t t = 0; t < n; ++t) {
    const float* r = qkv + t * row;
    if (c.qkv_layout == QkvLayout::Grouped) {
      // Per KV group: its n_heads / n_kv_heads query heads, then its K head, then its V head.
      const int64_t per = c.n_heads / c.n_kv_heads;
      for (int64_t g = 0; g < c.n_kv_heads; ++g) {
        const float* gr = r + g * (per + 2) * hd;
        std::memcpy(q + t * qd + g * per * hd, gr, static_cast<size_t>(per * hd) * sizeof(float));
        std::memcpy(kk + t * kvd + g * hd, gr + per * hd, static_cast<size_t>(hd) * sizeof(float));
        std::memcpy(v + t * kvd + g * hd, gr + (per + 1) * hd,
                    static_cast<size_t>(hd) * sizeof(float));
      }
    } else {
      std::memcpy(q + t * qd, r, static_cast<size_t>(qd) * sizeof(float));
      std::memcpy(kk + t * kvd, r + qd, static_cast<size_t>(kvd) * sizeof(float));
      std::memcpy(v + t * kvd, r + qd + kvd, static_cast<size_t>(kvd) * sizeof(float));
    }
  }
}

void norm(const ModelConfig& c, const Weights& w, const std::string& base, const float* x, float* y,
          int64_t n) {
  if (c.norm == NormType::RmsNorm) {
    k::rmsnorm(x, w.get(base + ".weight"), y, n, c.hidden, c.norm_eps);
  } else {
    k::layernorm(x, w.get(base + ".weight"), w.get(base + ".bias"), y, n, c.hidden, c.norm_eps);
  }
}

// y[n, out] = x[n, in] . W^T for the 2-D weight `name`, in whichever storage it has.
void linear(const Weights& w, const std::string& name, const float* x, float* y, int64_t n,
            int64_t in, int64_t out) {
  const WeightMatrix m = w.matrix(name);
  if (m.bf16 != nullptr) {
    k::matmul_wt_bf16(x, m.bf16, y, n, in, out);
  } else {
    k::matmul_wt_f32(x, m.f32, y, n, in, out);
  }
}

}  // namespace

BatchRows batch_rows(const ModelConfig& c, const std::vector<SeqInput>& batch,
                     const kv::KvCache& cache) {
  BatchRows br;
  br.row0.resize(batch.size());
  br.len0.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqInput& in = batch[i];
    if (in.tokens.empty())
      throw Error("forward: sequence " + std::to_string(in.seq) + " has no new tokens");
    // Two items of one sequence would both append at its current length (and the CUDA decode
    // kernel's fused append relies on one row a sequence).
    for (size_t j = 0; j < i; ++j) {
      if (batch[j].seq == in.seq)
        throw Error("forward: sequence " + std::to_string(in.seq) +
                    " appears twice in one batch (items " + std::to_string(j) + " and " +
                    std::to_string(i) + "); give its tokens as one item");
    }
    br.row0[i] = br.rows();
    br.len0[i] = cache.length(in.seq);
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    const int64_t cap =
        static_cast<int64_t>(cache.block_table(in.seq).size()) * cache.config().block_size;
    if (br.len0[i] + n > cap) {
      throw Error("forward: sequence " + std::to_string(in.seq) + " needs " +
                  std::to_string(br.len0[i] + n) + " KV slots but only " + std::to_string(cap) +
                  " are reserved (call KvCache::reserve)");
    }
    for (int64_t t = 0; t < n; ++t) {
      const int32_t id = in.tokens[static_cast<size_t>(t)];
      if (id < 0 || id >= c.vocab_size) {
        throw make_error("forward", "token id " + std::to_string(id) +
                                        " is outside the vocabulary [0, " +
                                        std::to_string(c.vocab_size) + ")");
      }
      br.ids.push_back(id);
      br.pos.push_back(static_cast<int32_t>(br.len0[i] + t));
      br.rope_pos.push_back(static_cast<int32_t>(br.len0[i] + t + in.rope_offset));
    }
    if (in.all_logits) {
      for (int64_t t = 0; t < n; ++t) br.logit_rows.push_back(br.row0[i] + t);
    } else {
      br.logit_rows.push_back(br.row0[i] + n - 1);
    }
  }
  return br;
}

Model::Model(ModelConfig cfg, std::unique_ptr<Weights> weights)
    : cfg_(std::move(cfg)), w_(std::move(weights)) {}

std::unique_ptr<Model> Model::load(const ModelSource& src, uint64_t seed, WeightStorage storage) {
  ModelConfig cfg = src.config();
  // bf16 matrices compute other KV than the fp32 ones (the GPU's storage is in kv_precision).
  cfg.weights_id =
      weights_identity(src, seed) + (storage == WeightStorage::BF16 ? " bf16-matrices" : "");
  return std::make_unique<Model>(std::move(cfg), Weights::load(src, seed, storage));
}

void ForwardModel::restore_kv_native(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0,
                                     int64_t n, const void* k_pre_rope, const void* v,
                                     int64_t rope_offset) const {
  if (native_kv_type() != DType::F32) {
    throw make_error("restore_kv_native", "this backend keeps its KV in " +
                                              std::string(dtype_name(native_kv_type())) +
                                              " but does not restore it natively (internal error)");
  }
  restore_kv(cache, seq, layer, pos0, n, static_cast<const float*>(k_pre_rope),
             static_cast<const float*>(v), rope_offset);
}

kv::KvConfig ForwardModel::kv_config(int64_t num_blocks, int block_size) const {
  if (num_blocks > std::numeric_limits<int32_t>::max()) {
    throw make_error("--ctx",
                     "a KV pool of " + std::to_string(num_blocks) + " blocks of " +
                         std::to_string(block_size) + " tokens is more than one cache can index",
                     "lower --ctx (the default is the model's context length)");
  }
  kv::KvConfig kc;
  kc.n_layers = config().n_layers;
  kc.n_kv_heads = config().n_kv_heads;
  kc.head_dim = config().head_dim;
  kc.block_size = block_size;
  kc.num_blocks = static_cast<int>(num_blocks);
  kc.host_pools = host_kv();
  return kc;
}

void Model::rotate_keys(float* kk, int64_t pos0, int64_t n) const {
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(pos0 + t);
  k::rope(kk, pos.data(), n, cfg_.n_kv_heads, cfg_.head_dim, cfg_.rope_dims, cfg_.rope_theta,
          rope_of(cfg_.rope_style));
}

void Model::restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                           const float* kk, const float* v) const {
  const int64_t kvd = cfg_.kv_dim();
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(cache.k_slot(layer, seq, pos0 + t), kk + t * kvd,
                static_cast<size_t>(kvd) * sizeof(float));
    std::memcpy(cache.v_slot(layer, seq, pos0 + t), v + t * kvd,
                static_cast<size_t>(kvd) * sizeof(float));
  }
}

void Model::read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                    float* kk, float* v) const {
  const int64_t kvd = cfg_.kv_dim(), bs = cache.config().block_size;
  if (pos0 < 0 || n < 0 || pos0 + n > cache.length(seq)) {
    throw make_error("read_kv", "slots [" + std::to_string(pos0) + ", " + std::to_string(pos0 + n) +
                                    ") are not all below the sequence's length");
  }
  const std::vector<int32_t>& table = cache.block_table(seq);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t s = pos0 + t;
    const int64_t off =
        (static_cast<int64_t>(table[static_cast<size_t>(s / bs)]) * bs + s % bs) * kvd;
    std::memcpy(kk + t * kvd, cache.k_pool(layer) + off, static_cast<size_t>(kvd) * sizeof(float));
    std::memcpy(v + t * kvd, cache.v_pool(layer) + off, static_cast<size_t>(kvd) * sizeof(float));
  }
}

void Model::restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                       const float* k_pre_rope, const float* v, int64_t rope_offset) const {
  std::vector<float> rotated(k_pre_rope, k_pre_rope + n * cfg_.kv_dim());
  rotate_keys(rotated.data(), pos0 + rope_offset, n);
  restore_kv_raw(cache, seq, layer, pos0, n, rotated.data(), v);
}

std::vector<float> Model::forward(const std::vector<SeqInput>& batch, kv::KvCache& cache,
                                  const LayerHooks& hooks) const {
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden, qd = c.q_dim(), kvd = c.kv_dim(), F = c.ffn_hidden;
  const BatchRows br = batch_rows(c, batch, cache);
  const std::vector<int64_t>& row0 = br.row0;
  const std::vector<int64_t>& len0 = br.len0;
  const std::vector<int32_t>& ids = br.ids;
  const std::vector<int32_t>& pos = br.pos;
  const std::vector<int32_t>& rope_pos = br.rope_pos;
  const int64_t N = static_cast<int64_t>(ids.size());
  const auto sz = [](int64_t a) { return static_cast<size_t>(a); };

  std::vector<float> x(sz(N * H)), h(sz(N * H)), h2, q(sz(N * qd)), kk(sz(N * kvd)), v(sz(N * kvd));
  std::vector<float> attn(sz(N * qd)), o(sz(N * H)), up(sz(N * F)), gate, qkv;
  if (c.arch == Arch::Falcon) {
    qkv.resize(sz(N * (qd + 2 * kvd)));
    if (c.separate_mlp_norm) h2.resize(sz(N * H));
  } else {
    gate.resize(sz(N * F));
  }
  const WeightMatrix embd = w_->matrix("token_embd.weight");
  if (embd.bf16 != nullptr) {
    k::embedding_bf16(embd.bf16, ids.data(), x.data(), N, H);
  } else {
    k::embedding(embd.f32, ids.data(), x.data(), N, H);
  }
  const k::Rope rope = rope_of(c.rope_style);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  for (int l = 0; l < c.n_layers; ++l) {
    norm(c, *w_, layer_name(l, "attn_norm"), x.data(), h.data(), N);
    if (c.arch == Arch::Falcon) {
      linear(*w_, layer_name(l, "attn_qkv.weight"), h.data(), qkv.data(), N, H, qd + 2 * kvd);
      split_qkv(c, qkv.data(), N, q.data(), kk.data(), v.data());
    } else {
      linear(*w_, layer_name(l, "attn_q.weight"), h.data(), q.data(), N, H, qd);
      linear(*w_, layer_name(l, "attn_k.weight"), h.data(), kk.data(), N, H, kvd);
      linear(*w_, layer_name(l, "attn_v.weight"), h.data(), v.data(), N, H, kvd);
    }
    if (hooks.on_new_kv_native || hooks.on_new_kv) {
      for (size_t i = 0; i < batch.size(); ++i) {
        const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
        const float* ki = kk.data() + row0[i] * kvd;
        const float* vi = v.data() + row0[i] * kvd;
        if (hooks.on_new_kv_native) {
          hooks.on_new_kv_native(l, batch[i].seq, len0[i], n, ki, vi);
        } else {
          hooks.on_new_kv(l, batch[i].seq, len0[i], n, ki, vi);
        }
      }
    }
    k::rope(q.data(), rope_pos.data(), N, c.n_heads, c.head_dim, c.rope_dims, c.rope_theta, rope);
    k::rope(kk.data(), rope_pos.data(), N, c.n_kv_heads, c.head_dim, c.rope_dims, c.rope_theta,
            rope);
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
      for (int64_t t = 0; t < n; ++t) {
        const int64_t r = row0[i] + t;
        std::memcpy(cache.k_slot(l, batch[i].seq, len0[i] + t), kk.data() + r * kvd,
                    sz(kvd) * sizeof(float));
        std::memcpy(cache.v_slot(l, batch[i].seq, len0[i] + t), v.data() + r * kvd,
                    sz(kvd) * sizeof(float));
      }
    }
    if (hooks.wait_ready) hooks.wait_ready(l);
    for (size_t i = 0; i < batch.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch[i].tokens.size());
      k::PagedAttention p;
      p.q = q.data() + row0[i] * qd;
      p.out = attn.data() + row0[i] * qd;
      p.q_pos = pos.data() + row0[i];
      p.n_q = n;
      p.n_heads = c.n_heads;
      p.n_kv_heads = c.n_kv_heads;
      p.head_dim = c.head_dim;
      p.k_pool = cache.k_pool(l);
      p.v_pool = cache.v_pool(l);
      p.block_table = cache.block_table(batch[i].seq).data();
      p.block_size = cache.config().block_size;
      p.n_ctx = len0[i] + n;
      p.window = c.sliding_window;
      p.scale = scale;
      k::paged_attention_fast(p);
    }
    linear(*w_, layer_name(l, "attn_output.weight"), attn.data(), o.data(), N, qd, H);
    if (c.arch == Arch::Falcon) {
      // Parallel block: attention and MLP both read the block input; x += attn + mlp.
      const float* mlp_in = h.data();
      if (c.separate_mlp_norm) {
        norm(c, *w_, layer_name(l, "attn_norm_2"), x.data(), h2.data(), N);
        mlp_in = h2.data();
      }
      linear(*w_, layer_name(l, "ffn_up.weight"), mlp_in, up.data(), N, H, F);
      k::gelu(up.data(), N * F);
      k::add_inplace(x.data(), o.data(), N * H);
      linear(*w_, layer_name(l, "ffn_down.weight"), up.data(), o.data(), N, F, H);
      k::add_inplace(x.data(), o.data(), N * H);
    } else {
      k::add_inplace(x.data(), o.data(), N * H);
      norm(c, *w_, layer_name(l, "ffn_norm"), x.data(), h.data(), N);
      linear(*w_, layer_name(l, "ffn_gate.weight"), h.data(), gate.data(), N, H, F);
      linear(*w_, layer_name(l, "ffn_up.weight"), h.data(), up.data(), N, H, F);
      k::swiglu(gate.data(), up.data(), gate.data(), N * F);
      linear(*w_, layer_name(l, "ffn_down.weight"), gate.data(), o.data(), N, F, H);
      k::add_inplace(x.data(), o.data(), N * H);
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    cache.set_length(batch[i].seq, len0[i] + static_cast<int64_t>(batch[i].tokens.size()));
  }

  // Final norm and LM head only on the rows whose logits are wanted.
  const std::vector<int64_t>& rows = br.logit_rows;
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<float> sel(sz(R * H)), normed(sz(R * H)), logits(sz(R * c.vocab_size));
  for (int64_t r = 0; r < R; ++r) {
    std::memcpy(sel.data() + r * H, x.data() + rows[sz(r)] * H, sz(H) * sizeof(float));
  }
  norm(c, *w_, "output_norm", sel.data(), normed.data(), R);
  linear(*w_, c.tied_embeddings ? "token_embd.weight" : "output.weight", normed.data(),
         logits.data(), R, H, c.vocab_size);
  return logits;
}

}  // namespace cb::model
