#include "lib/device/gpu_info.h"

#ifdef CB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cb::device {

#ifdef CB_HAVE_CUDA

bool cuda_compiled() {
  return true;
}

std::string cuda_runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  std::vector<GpuInfo> out;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why_none) *why_none = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error state
    return out;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      (void)cudaGetLastError();  // not left for the next launch to report as its own
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.total_bytes = p.totalGlobalMem;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    out.push_back(g);
  }
  if (out.empty() && why_none) *why_none = "no CUDA device visible";
  return out;
}

#else

bool cuda_compiled() {
  return false;
}
std::string cuda_runtime_version() {
  return "";
}
std::vector<GpuInfo> list_gpus(std::string* why_none) {
  if (why_none) *why_none = "built without CUDA (CACHEBENCH_CUDA=OFF or nvcc not found)";
  return {};
}

#endif

}  // namespace cb::device
