#include "kernels/cpu/blas_core.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

namespace cb::kernels::cpu {

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// OpenBLAS's x86-64 kernel sets (its dynamic.c names) that use AVX2 or AVX-512: the library's
// choice for CPUs it knows to have them.
bool core_has_avx2(const std::string& core) {
  static constexpr std::array<const char*, 6> kAvx2Cores = {
      "haswell", "excavator", "zen", "skylakex", "cooperlake", "sapphirerapids"};
  const std::string c = lower(core);
  return std::any_of(kAvx2Cores.begin(), kAvx2Cores.end(),
                     [&](const char* name) { return c == name; });
}

// kBlasCoreFromEnv's value as this process found it (adopt_blas_restart_marker).
std::string& restart_marker() {
  static std::string marker;
  return marker;
}

}  // namespace

void adopt_blas_restart_marker() {
  restart_marker() = env_or_empty(kBlasCoreFromEnv);
  unsetenv(kBlasCoreFromEnv);
}

BlasInfo blas_info() {
  BlasInfo info;
  info.config = openblas_get_config();
  info.core = openblas_get_corename();
  info.requested = env_or_empty("OPENBLAS_CORETYPE");
  if (!info.requested.empty()) info.detected_core = restart_marker();
  return info;
}

std::string blas_summary(const BlasInfo& info) {
  std::string s = info.config + ", core " + info.core;
  if (!info.detected_core.empty()) {
    s += " (cachebench set OPENBLAS_CORETYPE=" + info.requested +
         ": the library took this CPU for " + info.detected_core +
         (lower(info.core) == lower(info.detected_core) ? ", and kept it" : "") + ")";
  } else if (!info.requested.empty()) {
    s += " (OPENBLAS_CORETYPE=" + info.requested + ")";
  }
  return s;
}

std::string better_blas_core(const std::string& core, bool avx2_fma, bool avx512) {
  if (!avx2_fma || core_has_avx2(core)) return "";
  return avx512 ? "SkylakeX" : "Haswell";
}

std::string blas_core_to_request() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return "";
  if (std::string(openblas_get_config()).find("DYNAMIC_ARCH") == std::string::npos) return "";
  __builtin_cpu_init();
  // GCC's and Clang's checks count an instruction set only where the OS saves its registers.
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  return better_blas_core(openblas_get_corename(), avx2_fma, avx512);
#else
  return "";
#endif
}

}  // namespace cb::kernels::cpu
