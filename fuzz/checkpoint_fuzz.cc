// Fuzz target: a whole Hugging Face checkpoint directory through ModelSource::open (config.json,
// model.safetensors or an index with two shards, every tensor the config implies checked for
// presence, shape and dtype). The input holds the files one after another, split at kSep:
// config.json, model.safetensors.index.json (not written when empty), then the weights: one
// part is model.safetensors, two are the index's usual shard names.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"
#include "lib/formats/tensor_ref.h"
#include "lib/model/model_source.h"

namespace {

constexpr std::string_view kSep = "\n#cb-file#\n";

void put(const std::string& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = cb::fuzz::scratch_dir("checkpoint");
  static const char* const kFiles[] = {"config.json", "model.safetensors.index.json",
                                       "model.safetensors", "model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors"};
  for (const char* f : kFiles) ::unlink((dir + "/" + f).c_str());
  std::vector<std::string_view> parts;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (parts.size() < 4) {
    const auto [head, tail] = cb::fuzz::split_input(rest, kSep);
    parts.push_back(head);
    if (tail.data() == nullptr) break;
    rest = tail;
  }
  put(dir + "/config.json", parts[0]);
  if (parts.size() > 1 && !parts[1].empty()) put(dir + "/model.safetensors.index.json", parts[1]);
  if (parts.size() == 3) put(dir + "/model.safetensors", parts[2]);
  if (parts.size() == 4) {
    put(dir + "/model-00001-of-00002.safetensors", parts[2]);
    put(dir + "/model-00002-of-00002.safetensors", parts[3]);
  }
  const auto src = cb::fuzz::or_null([&] { return cb::model::ModelSource::open(dir); });
  if (!src) return 0;
  const cb::model::ModelConfig& c = src->config();
  if (c.n_layers <= 0 || c.vocab_size <= 0 || src->tensors().empty()) std::abort();
  for (const auto& named : src->tensors()) {
    const cb::formats::TensorRef& t = named.second;
    if (src->tensor(named.first) == nullptr) std::abort();
    cb::fuzz::touch(t.data, t.nbytes);
    const int64_t n = t.numel();
    if (n > 0 && n <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(n));
      cb::fuzz::quietly([&] { cb::formats::to_f32(t, out.data()); });
    }
  }
  return 0;
}
