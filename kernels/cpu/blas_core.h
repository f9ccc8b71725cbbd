// Which of OpenBLAS's kernel sets this process runs, and a better one where the library
// mistook the CPU.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's is) picks its kernels when it loads, from the CPU's
// family and model numbers. Debian's 0.3.21 does not know this project's VM (Intel family 6,
// model 207: Emerald Rapids, AVX-512) and picks its Prescott kernels (SSE3), whose sgemm runs at
// a quarter of its SkylakeX (AVX-512) kernels' rate there (docs/perf.md). The library reads the
// environment variable OPENBLAS_CORETYPE when it loads, and only then, so `cachebench` starts
// itself again with it set (apps/cachebench/main.cc) when blas_core_to_request() names a core;
// a user's own OPENBLAS_CORETYPE is always kept.
#pragma once

#include <string>

namespace cb::kernels::cpu {

/// The environment variable that tells the restarted process the core OpenBLAS took before
/// cachebench asked for another (so reports can say both). adopt_blas_restart_marker() takes
/// it out of the environment, so programs this one starts do not inherit it.
inline constexpr const char* kBlasCoreFromEnv = "CACHEBENCH_OPENBLAS_DETECTED";
/// Keeps kBlasCoreFromEnv's value for blas_info() and removes it from the environment; call
/// once, first thing in main, after the restart (which sets it) was decided.
void adopt_blas_restart_marker();

/// What the BLAS in this process runs.
struct BlasInfo {
  std::string config;         // openblas_get_config(): version and build options
  std::string core;           // openblas_get_corename(): the kernel set in use
  std::string requested;      // OPENBLAS_CORETYPE as this process found it ("" when unset)
  std::string detected_core;  // the core OpenBLAS took itself, when cachebench asked for
                              // `requested` instead (adopt_blas_restart_marker); "" otherwise
};
BlasInfo blas_info();

/// One line for reports: "OpenBLAS 0.3.21 ..., core SkylakeX" plus how the core was chosen.
std::string blas_summary(const BlasInfo& info);

/// The OpenBLAS core to ask for on a CPU with these (usable) instruction sets, when the
/// library took `core`; "" to keep it. Only a core without AVX2 on a CPU with AVX2 and FMA is
/// replaced (the library then did not know the CPU): by "SkylakeX" where AVX-512 F, CD, BW, DQ
/// and VL are usable, else by "Haswell". A core with AVX2 or more is the library's own choice
/// for a CPU it knows, and is kept.
std::string better_blas_core(const std::string& core, bool avx2_fma, bool avx512);

/// better_blas_core for this process's library and CPU; "" when OPENBLAS_CORETYPE is set
/// (the user's choice, or the restarted process's), when the library was built for one CPU
/// (no DYNAMIC_ARCH in its configuration: it would not read the variable) or off x86-64.
std::string blas_core_to_request();

}  // namespace cb::kernels::cpu
