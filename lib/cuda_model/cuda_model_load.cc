// CudaModel's weights on the device: files uploaded tensor by tensor, host weights uploaded,
// presets generated on the device.
#include "lib/cuda_model/cuda_model_impl.h"

namespace cb::model {

using cuda_detail::fused_away;
using cuda_detail::has_gate_up;
using cuda_detail::layer_name;
using device::Arena;

template <typename Plain, typename Fused>
void CudaModel::Impl::make_tensors(Plain&& fill_plain, Fused&& fill_fused) {
  const int64_t H = cfg.hidden, qd = cfg.q_dim(), kvd = cfg.kv_dim(), F = cfg.ffn_hidden;
  std::map<std::string, TensorSpec> fused;  // gate and up specs, by name
  for (const TensorSpec& t : expected_tensors(cfg)) {
    if (fused_away(cfg, t.name)) {
      fused.emplace(t.name, t);
      continue;
    }
    Arena::Block b = weights_arena.allocate(static_cast<uint64_t>(t.numel()) * esz, t.name);
    fill_plain(t, b.data());
    w.emplace(t.name, std::move(b));
  }
  for (int l = 0; l < cfg.n_layers; ++l) {
    const std::string name = layer_name(l, "qkv_fused");
    Arena::Block b = weights_arena.allocate(static_cast<uint64_t>((qd + 2 * kvd) * H) * esz, name);
    char* base = static_cast<char*>(b.data());
    fill_fused(l, base, base + static_cast<size_t>(qd * H) * esz,
               base + static_cast<size_t>((qd + kvd) * H) * esz);
    w.emplace(name, std::move(b));
    if (!has_gate_up(cfg)) continue;
    const std::string gu = layer_name(l, "gate_up_fused");
    Arena::Block g = weights_arena.allocate(static_cast<uint64_t>(2 * F * H) * esz, gu);
    char* gate = static_cast<char*>(g.data());
    fill_plain(fused.at(layer_name(l, "ffn_gate.weight")), gate);
    fill_plain(fused.at(layer_name(l, "ffn_up.weight")), gate + static_cast<size_t>(F * H) * esz);
    w.emplace(gu, std::move(g));
  }
}

void CudaModel::Impl::upload_ref(const formats::TensorRef& t, const std::vector<int64_t>* order,
                                 void* dst) {
  const int64_t rows = t.shape.size() <= 1 ? 1 : t.shape.front();
  const int64_t cols = t.numel() / rows;
  const int64_t out_rows = order ? static_cast<int64_t>(order->size()) : rows;
  const bool raw = (t.dtype == DType::F32 && st == kc::Storage::F32) ||
                   (t.dtype == DType::F16 && st == kc::Storage::F16) ||
                   (t.dtype == DType::BF16 && st == kc::Storage::BF16);
  const size_t row_bytes = static_cast<size_t>(cols) * (raw ? esz : 4);
  const uint64_t bytes = static_cast<uint64_t>(out_rows) * row_bytes;
  grow(&upload_host, &upload_dev, bytes + 256, stream, "upload staging");
  const uint8_t* src = t.data;  // raw, or already fp32
  std::vector<float> f32;
  if (!raw && t.dtype != DType::F32) {
    f32.resize(static_cast<size_t>(t.numel()));
    formats::to_f32(t, f32.data());
    src = reinterpret_cast<const uint8_t*>(f32.data());
  }
  auto* h = static_cast<uint8_t*>(upload_host.data());
  for (int64_t r = 0; r < out_rows; ++r) {
    const int64_t from = order ? (*order)[static_cast<size_t>(r)] : r;
    std::memcpy(h + r * row_bytes, src + from * row_bytes, row_bytes);
  }
  if (raw || st == kc::Storage::F32) {  // already the storage type
    CB_CUDA_CHECK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, stream.get()));
  } else {  // fp32 rows, converted on the device
    Arena::Block f = upload_dev.allocate(bytes, "upload staging");
    CB_CUDA_CHECK(cudaMemcpyAsync(f.data(), h, bytes, cudaMemcpyHostToDevice, stream.get()));
    half_from_f32(static_cast<const float*>(f.data()), dst, static_cast<size_t>(out_rows * cols),
                  stream);
  }
  stream.synchronize();  // the staging is reused by the next tensor
}

template <typename Ref>
void CudaModel::Impl::upload_tensors(Ref&& ref) {
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
}

void CudaModel::Impl::upload_all(const Weights& src) {
  if (src.storage() != WeightStorage::F32) {
    throw make_error("cuda model",
                     "weights held in " + std::string(weight_storage_name(src.storage())) +
                         " for the CPU backend cannot be uploaded",
                     "load fp32 weights (WeightStorage::F32) for the GPU (internal error)");
  }
  std::map<std::string, formats::TensorRef> refs;  // the fp32 weights as F32 tensors
  for (const TensorSpec& t : expected_tensors(cfg)) {
    const float* p = src.find(t.name);
    if (p == nullptr) {
      throw make_error("cuda model", "tensor " + t.name + " is missing from the weights");
    }
    formats::TensorRef r;
    r.name = t.name;
    r.dtype = DType::F32;
    r.shape = t.shape;
    r.data = reinterpret_cast<const uint8_t*>(p);
    r.nbytes = static_cast<size_t>(t.numel()) * sizeof(float);
    refs.emplace(t.name, std::move(r));
  }
  upload_tensors(
      [&](const std::string& name) -> const formats::TensorRef& { return refs.at(name); });
}

void CudaModel::Impl::upload_file(const ModelSource& src) {
  upload_tensors([&](const std::string& name) -> const formats::TensorRef& {
    const formats::TensorRef* t = src.tensor(name);
    if (t == nullptr) throw make_error(src.location(), "missing tensor '" + name + "'");
    return *t;
  });
}

void CudaModel::Impl::fill(void* out, const TensorSpec& spec, int64_t rows, uint64_t seed,
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

void CudaModel::Impl::generate_all(uint64_t seed) {
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

}  // namespace cb::model
