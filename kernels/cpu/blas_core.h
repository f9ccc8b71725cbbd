// Which of OpenBLAS's kernel sets this process runs, and a better one where the library
// mistook the CPU.
//
// OpenBLAS built with DYNAMIC_ARCH (Debian's is) picks its kernels when it loads, by the CPU's
// family and model number. A CPU it does not know gets its oldest x86-64 kernels (Prescott,
// SSE3): Debian's 0.3.21 takes an Emerald Rapids VM (family 6, model 207, AVX-512) for one,
// and its sgemm runs at a quarter of its SkylakeX (AVX-512) kernels' rate there (docs/perf.md).
// The library reads the environment variable OPENBLAS_CORETYPE when it loads, and only then,
// so `cachebench` starts itself again with it set (apps/cachebench/main.cc) when
// blas_core_to_request() names a core; a user's own OPENBLAS_CORETYPE is always kept.
#pragma once

#include <string>

namespace cb::kernels::cpu {

/// The environment variable that records, in the restarted process, the core OpenBLAS took
/// before cachebench asked for another (so reports can say both).
inline constexpr const char* kBlasCoreFromEnv = "CACHEBENCH_OPENBLAS_DETECTED";

/// What the BLAS in this process runs.
struct BlasInfo {
  std::string config;         // openblas_get_config(): version and build options
  std::string core;           // openblas_get_corename(): the kernel set in use
  std::string requested;      // OPENBLAS_CORETYPE as this process found it ("" when unset)
  std::string detected_core;  // the core OpenBLAS took itself, when cachebench asked for
                              // `requested` instead (kBlasCoreFromEnv); "" otherwise
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
/// (the user's choice, or the restarted process's) or off x86-64.
std::string blas_core_to_request();

}  // namespace cb::kernels::cpu
