#pragma once
/// What GPUs this process can use: for --version, backend selection and test skips.

#include <cstdint>
#include <string>
#include <vector>

namespace cb::device {

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t total_bytes = 0;
  int cc_major = 0, cc_minor = 0;
};

/// True when this build includes the CUDA backend.
bool cuda_compiled();
/// The CUDA runtime version as "major.minor", or "" when built without CUDA.
std::string cuda_runtime_version();
/// Visible GPUs; empty with `why_none` set ("built without CUDA", or the CUDA error
/// such as "no CUDA-capable device is detected") when there are none.
std::vector<GpuInfo> list_gpus(std::string* why_none);

}  // namespace cb::device
