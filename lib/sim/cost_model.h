#pragma once
/// The simulator's cost model: the time of one forward call (a step of continuous batching)
/// from the model's shape and a hardware profile. Per layer, a roofline of two terms each:
///   GEMM:      max(2 * P_layer * T / gemm_rate, P_layer * weight_bytes / hbm)
///   attention: max(sum_i 4 * q_dim * n_i * (c_i + (n_i + 1) / 2) / attn_rate_i,
///                  sum_i (c_i + n_i) * kv_bytes_per_token_layer / hbm)
/// (attn_rate_i: decode_attn_tflops for one-token queries, attn_tflops for prefill chunks)
/// plus layer_overhead, where T = sum_i n_i tokens of the step and sequence i feeds n_i new
/// tokens after c_i tokens of context (a sliding window caps c_i). Then the LM head for the
/// step's sequences (every one, as the engine computes logits for each), tensor-parallel
/// all-reduces of the step's activations (two per layer; one where attention and MLP run in
/// parallel, Falcon, whose partial sums add before one reduction), step_overhead and
/// seq_overhead per sequence. Rates, bandwidths and overheads come from the profile; with
/// tensor parallelism over `gpus`, FLOPs and bytes divide evenly among them.

#include <cstdint>
#include <vector>

#include "lib/model/config.h"
#include "lib/sim/profile.h"

namespace cb::sim {

/// The parts of a model's shape the cost model needs.
struct ModelShape {
  int layers = 0;
  int hidden = 0;
  int q_dim = 0;
  int kv_dim = 0;
  int vocab = 0;
  int sliding_window = 0;
  int allreduces_per_layer = 2;  ///< with tensor parallelism: 1 for parallel attention (Falcon)
  double params_per_layer = 0;   ///< matrix parameters of one layer
  double weight_bytes = 2;       ///< bytes per weight

  static ModelShape from_config(const model::ModelConfig& c);
  /// KV bytes of one token in one layer (K and V) at `bytes_per_element`.
  double kv_bytes_per_token_layer(int bytes_per_element) const {
    return 2.0 * kv_dim * bytes_per_element;
  }
};

/// One sequence's share of a step.
struct StepLoad {
  int64_t new_tokens = 0;  ///< tokens fed this step
  int64_t context = 0;     ///< tokens already in its KV cache before them
  bool emits = false;      ///< produces a token (LM head)
};

/// FLOP counts of a step, for calibration fits and reports.
struct StepFlops {
  double gemm = 0;  ///< all layers + LM head
  double attn = 0;  ///< all layers
};

class CostModel {
 public:
  CostModel(const ModelShape& shape, const HardwareProfile& profile);
  /// Seconds for one forward call over `items`.
  double step_time(const std::vector<StepLoad>& items) const;
  /// Seconds for one layer of that call (the unit of layer-wise preloading).
  double layer_time(const std::vector<StepLoad>& items) const;
  /// FLOPs of a call (whole model).
  StepFlops flops(const std::vector<StepLoad>& items) const;
  const ModelShape& shape() const { return shape_; }
  const HardwareProfile& profile() const { return prof_; }

 private:
  double head_time(const std::vector<StepLoad>& items) const;
  ModelShape shape_;
  HardwareProfile prof_;
};

}  // namespace cb::sim
