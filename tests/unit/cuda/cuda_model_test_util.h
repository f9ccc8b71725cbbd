#pragma once
/// Shared by the whole-model CUDA test files (cuda_model_test.cc, cuda_model_paths_test.cc):
/// the logits' relative error, the tolerance per storage type, and which of CudaModel's kernel
/// paths a parity run takes.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/storage.h"
#include "lib/cuda_model/cuda_model.h"

namespace cb::cuda_test {

namespace kc = cb::kernels::cuda;
using cb::model::CudaModel;

inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// Which of CudaModel's kernel paths a parity run takes: CudaKernelPaths' defaults, or the
// separate launches (no fusion, the CUDA-core decode attention) with the named ones on.
enum class Variant {
  kDefault,             // CudaKernelPaths' defaults
  kSeparate,            // every fusion, the decode kernel and PDL off
  kNormFusion,          // decode_fusion: RMSNorm and SwiGLU folded into the decode GEMVs
  kDecodeKernel,        // decode_attention
  kLaunchFusions,       // mlp_fusion and rope_append_fusion
  kAllOptIns,           // the launch fusions, decode_attention and decode_pdl
  kEverything,          // those and kNormFusion: the defaults with PDL, bench gpu's `pdl`
  kMoreSplits,          // the defaults with decode_more_splits
  kRopeInAttention,     // the defaults with decode_rope_fusion
  kRopeInAttentionPdl,  // those with decode_pdl: PDL GEMVs after the kernel that appends
};

inline void configure(const CudaModel& gpu, Variant v) {
  cb::model::CudaKernelPaths p;
  p.decode_more_splits = v == Variant::kMoreSplits;
  p.decode_rope_fusion = v == Variant::kRopeInAttention || v == Variant::kRopeInAttentionPdl;
  p.decode_pdl = v == Variant::kRopeInAttentionPdl;
  if (v != Variant::kDefault && v != Variant::kMoreSplits && !p.decode_rope_fusion) {
    const bool all = v == Variant::kAllOptIns || v == Variant::kEverything;
    p.decode_fusion = v == Variant::kNormFusion || v == Variant::kEverything;
    p.mlp_fusion = v == Variant::kLaunchFusions || all;
    p.rope_append_fusion = v == Variant::kLaunchFusions || all;
    p.decode_attention = v == Variant::kDecodeKernel || all;
    p.decode_pdl = all;
  }
  gpu.set_kernel_paths(p);
}

inline const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kSeparate: return " separate launches";
    case Variant::kNormFusion: return " fused decode";
    case Variant::kDecodeKernel: return " decode kernel";
    case Variant::kLaunchFusions: return " launch fusions";
    case Variant::kAllOptIns: return " launch fusions + decode kernel + PDL";
    case Variant::kEverything: return " defaults + PDL";
    case Variant::kMoreSplits: return " finer attention splits";
    case Variant::kRopeInAttention: return " RoPE and append in decode attention";
    case Variant::kRopeInAttentionPdl: return " RoPE and append in decode attention + PDL";
    default: return "";
  }
}

inline constexpr kc::Storage kStorages[] = {kc::Storage::F32, kc::Storage::F16, kc::Storage::BF16};
inline double tolerance(kc::Storage st) {
  return st == kc::Storage::F32 ? 1e-4 : st == kc::Storage::F16 ? 1e-2 : 2e-2;
}

}  // namespace cb::cuda_test
