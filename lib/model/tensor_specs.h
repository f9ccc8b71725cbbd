#pragma once
/// The tensors a ModelConfig implies, under canonical (GGUF-style) names with
/// row-major shapes; the basis for validation, parameter counts and preset weights.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/config.h"

namespace cb::model {

enum class TensorRole : uint8_t { Embedding, Matrix, NormWeight, NormBias, Output };

struct TensorSpec {
  std::string name;            ///< canonical: "token_embd.weight", "blk.3.attn_q.weight"
  std::vector<int64_t> shape;  ///< row-major, [out, in] for linear weights
  TensorRole role = TensorRole::Matrix;
  int64_t fan_in = 1;  ///< input features (scales preset weights)

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

/// Every tensor the config requires, in a stable order (embedding, layers, output).
std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg);
/// Sum of numel over expected_tensors (tied embeddings counted once).
uint64_t parameter_count(const ModelConfig& cfg);

}  // namespace cb::model
