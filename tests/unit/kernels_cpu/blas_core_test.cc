#include "kernels/cpu/blas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

namespace kc = cb::kernels::cpu;

TEST(BlasCore, AFallbackCoreOnAnAvx512CpuBecomesSkylakeX) {
  // Debian's OpenBLAS 0.3.21 on family 6 model 207 (Emerald Rapids) took Prescott.
  EXPECT_EQ(kc::better_blas_core("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(kc::better_blas_core("Core2", true, true), "SkylakeX");
  EXPECT_EQ(kc::better_blas_core("Sandybridge", true, true), "SkylakeX");
  EXPECT_EQ(kc::better_blas_core("Unknown", true, true), "SkylakeX");
}

TEST(BlasCore, AFallbackCoreOnAnAvx2CpuBecomesHaswell) {
  EXPECT_EQ(kc::better_blas_core("Prescott", true, false), "Haswell");
  EXPECT_EQ(kc::better_blas_core("Nehalem", true, false), "Haswell");
}

TEST(BlasCore, TheLibrarysAvx2AndAvx512ChoicesAreKept) {
  for (const char* core :
       {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "Excavator", "HASWELL"}) {
    EXPECT_EQ(kc::better_blas_core(core, true, true), "") << core;
  }
}

TEST(BlasCore, ACpuWithoutAvx2AndFmaKeepsWhatTheLibraryTook) {
  EXPECT_EQ(kc::better_blas_core("Prescott", false, false), "");
  EXPECT_EQ(kc::better_blas_core("Sandybridge", false, false), "");
}

TEST(BlasCore, AUsersOpenblasCoretypeIsNeverReplaced) {
  const char* saved = std::getenv("OPENBLAS_CORETYPE");
  const std::string before = saved == nullptr ? "" : saved;
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  EXPECT_EQ(kc::blas_core_to_request(), "");
  if (saved == nullptr) {
    unsetenv("OPENBLAS_CORETYPE");
  } else {
    setenv("OPENBLAS_CORETYPE", before.c_str(), 1);
  }
}

TEST(BlasCore, TheSummaryNamesTheCoreAndWhoChoseIt) {
  kc::BlasInfo info{"OpenBLAS 0.3.21 DYNAMIC_ARCH", "SkylakeX", "", ""};
  EXPECT_EQ(kc::blas_summary(info), "OpenBLAS 0.3.21 DYNAMIC_ARCH, core SkylakeX");
  info.requested = "SkylakeX";
  EXPECT_EQ(kc::blas_summary(info),
            "OpenBLAS 0.3.21 DYNAMIC_ARCH, core SkylakeX (OPENBLAS_CORETYPE=SkylakeX)");
  info.detected_core = "Prescott";
  EXPECT_EQ(kc::blas_summary(info),
            "OpenBLAS 0.3.21 DYNAMIC_ARCH, core SkylakeX (cachebench set "
            "OPENBLAS_CORETYPE=SkylakeX: the library took this CPU for Prescott)");
  info.core = "Prescott";  // a library that does not read OPENBLAS_CORETYPE
  EXPECT_EQ(kc::blas_summary(info),
            "OpenBLAS 0.3.21 DYNAMIC_ARCH, core Prescott (cachebench set "
            "OPENBLAS_CORETYPE=SkylakeX: the library took this CPU for Prescott, and kept it)");
  // The library in this process reports a core.
  EXPECT_FALSE(kc::blas_info().core.empty());
}

}  // namespace
