#pragma once
/// Test-only writer of safetensors files and tiny Hugging Face checkpoint directories,
/// written from the format description (8-byte LE header length, JSON header, data).

#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/core/dtype.h"

namespace cb::test {

struct StTensor {
  std::string name;
  std::string dtype;  ///< "F32", "F16" or "BF16"
  std::vector<int64_t> shape;
  std::vector<float> values;  ///< numel values (converted to dtype)
};

inline std::string safetensors_bytes(const std::vector<StTensor>& ts) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& t : ts) {
    const size_t begin = data.size();
    for (float v : t.values) {
      if (t.dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t b = t.dtype == "F16" ? cb::fp32_to_fp16(v) : cb::fp32_to_bf16(v);
        data.append(reinterpret_cast<const char*>(&b), 2);
      }
    }
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string header = h.dump();
  while (header.size() % 8 != 0) header += ' ';
  const uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string make_dir(const std::string& path) {
  ::mkdir(path.c_str(), 0755);
  return path;
}

}  // namespace cb::test
