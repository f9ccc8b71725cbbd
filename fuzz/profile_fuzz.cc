// Fuzz target: sim hardware profiles from JSON (load_profile: a file written by `cachebench
// calibrate` or by hand; every field's type and range).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"
#include "lib/sim/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("profile.json");
  const std::string& path = file.write(data, size);
  try {
    const cb::sim::HardwareProfile p = cb::sim::load_profile(path);
    (void)p.name.size();
  } catch (const cb::Error&) {
  }
  return 0;
}
