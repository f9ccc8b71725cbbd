// Fuzz target: SafetensorsFile::open (header length, JSON header, dtypes, shapes,
// data_offsets bounds and overlaps), then reading and converting each small tensor.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"
#include "lib/formats/safetensors.h"
#include "lib/formats/tensor_ref.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("safetensors");
  const std::string& path = file.write(data, size);
  const auto f = cb::fuzz::or_null([&] { return cb::formats::SafetensorsFile::open(path); });
  if (!f) return 0;
  for (const auto& [k, v] : f->metadata()) (void)(k.size() + v.size());
  for (const cb::formats::TensorRef& t : f->tensors()) {
    if (f->find_tensor(t.name) != &t) std::abort();
    cb::fuzz::touch(t.data, t.nbytes);
    (void)cb::formats::shape_str(t.shape);
    const int64_t n = t.numel();
    if (n > 0 && n <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(n));
      cb::fuzz::quietly([&] { cb::formats::to_f32(t, out.data()); });
    }
  }
  return 0;
}
