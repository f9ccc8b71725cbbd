#pragma once
// calibrate() for tests about something other than its fit: the fit refuses step times that do
// not grow with the work, which a machine busy with other tests (or other guests) can give one
// calibration; such a refusal is tried again, up to three calibrations in all.

#include <string>

#include "eval/calibrate.h"
#include "lib/core/error.h"

namespace cb::eval::test_util {

inline Calibration calibrate_retried(const model::ForwardModel& m, const CalibrateOptions& co) {
  for (int attempt = 1;; ++attempt) {
    try {
      return calibrate(m, co);
    } catch (const Error& e) {
      if (attempt == 3 || std::string(e.what()).find("do not grow") == std::string::npos) throw;
    }
  }
}

}  // namespace cb::eval::test_util
