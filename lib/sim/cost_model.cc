#include "lib/sim/cost_model.h"

#include <algorithm>

#include "lib/core/dtype.h"

namespace cb::sim {

ModelShape ModelShape::from_config(const model::ModelConfig& c) {
  ModelShape s;
  s.layers = c.n_layers;
  s.hidden = c.hidden;
  s.q_dim = c.q_dim();
  s.kv_dim = c.kv_dim();
  s.vocab = c.vocab_size;
  s.sliding_window = c.sliding_window;
  s.allreduces_per_layer = c.parallel_attention ? 1 : 2;
  const double h = c.hidden, f = c.ffn_hidden;
  const double attn = h * c.q_dim() + 2.0 * h * c.kv_dim() + static_cast<double>(c.q_dim()) * h;
  // LLaMA/Mistral: gated SwiGLU (gate, up, down); Falcon: a plain two-matrix MLP.
  const double mlp = c.arch == model::Arch::Falcon ? 2.0 * h * f : 3.0 * h * f;
  s.params_per_layer = attn + mlp;
  s.weight_bytes = static_cast<double>(dtype_block_bytes(c.weight_dtype)) /
                   static_cast<double>(dtype_block_elems(c.weight_dtype));
  return s;
}

CostModel::CostModel(const ModelShape& shape, const HardwareProfile& profile)
    : shape_(shape), prof_(profile) {}

StepFlops CostModel::flops(const std::vector<StepLoad>& items) const {
  StepFlops f;
  double tokens = 0, emit = 0;
  for (const StepLoad& it : items) {
    tokens += static_cast<double>(it.new_tokens);
    double ctx = static_cast<double>(it.context) + (static_cast<double>(it.new_tokens) + 1) / 2;
    if (shape_.sliding_window > 0) ctx = std::min(ctx, static_cast<double>(shape_.sliding_window));
    f.attn += 4.0 * shape_.q_dim * static_cast<double>(it.new_tokens) * ctx;
    if (it.emits) emit += 1;
  }
  f.attn *= shape_.layers;
  f.gemm = 2.0 * shape_.params_per_layer * tokens * shape_.layers +
           2.0 * shape_.hidden * static_cast<double>(shape_.vocab) * emit;
  return f;
}

double CostModel::layer_time(const std::vector<StepLoad>& items) const {
  const double g = prof_.gpus;
  double tokens = 0, attn = 0, dattn = 0, kv_bytes = 0;
  const double kvb = shape_.kv_bytes_per_token_layer(prof_.kv_bytes_per_element);
  for (const StepLoad& it : items) {
    tokens += static_cast<double>(it.new_tokens);
    double ctx = static_cast<double>(it.context) + (static_cast<double>(it.new_tokens) + 1) / 2;
    double span = static_cast<double>(it.context + it.new_tokens);
    if (shape_.sliding_window > 0) {
      ctx = std::min(ctx, static_cast<double>(shape_.sliding_window));
      span = std::min(span, static_cast<double>(shape_.sliding_window));
    }
    (it.new_tokens > 1 ? attn : dattn) +=
        4.0 * shape_.q_dim * static_cast<double>(it.new_tokens) * ctx;
    kv_bytes += span * kvb;
  }
  const double hbm = prof_.hbm_gbps * 1e9 * g;
  double gemm_t = 2.0 * shape_.params_per_layer * tokens / (prof_.gemm_tflops * 1e12 * g);
  double attn_t =
      attn / (prof_.attn_tflops * 1e12 * g) + dattn / (prof_.decode_attn_tflops * 1e12 * g);
  if (prof_.hbm_gbps > 0) {
    gemm_t = std::max(gemm_t, shape_.params_per_layer * shape_.weight_bytes / hbm);
    attn_t = std::max(attn_t, kv_bytes / hbm);
  }
  double comm = 0;
  if (prof_.gpus > 1 && prof_.nvlink_gbps > 0) {
    // Ring all-reduces of T x hidden activations (fp16): after attention and after the MLP,
    // or one after both where they run in parallel.
    const double bytes = tokens * shape_.hidden * 2.0;
    comm = shape_.allreduces_per_layer * 2.0 * (g - 1) / g * bytes / (prof_.nvlink_gbps * 1e9);
  }
  return gemm_t + attn_t + comm + prof_.layer_overhead_s;
}

double CostModel::head_time(const std::vector<StepLoad>& items) const {
  double emit = 0;
  for (const StepLoad& it : items) emit += it.emits ? 1 : 0;
  if (emit == 0) return 0;
  const double g = prof_.gpus;
  const double p = static_cast<double>(shape_.hidden) * shape_.vocab;
  double t = 2.0 * p * emit / (prof_.gemm_tflops * 1e12 * g);
  if (prof_.hbm_gbps > 0) t = std::max(t, p * shape_.weight_bytes / (prof_.hbm_gbps * 1e9 * g));
  return t;
}

double CostModel::step_time(const std::vector<StepLoad>& items) const {
  if (items.empty()) return 0;
  return shape_.layers * layer_time(items) + head_time(items) + prof_.step_overhead_s +
         prof_.seq_overhead_s * static_cast<double>(items.size());
}

}  // namespace cb::sim
