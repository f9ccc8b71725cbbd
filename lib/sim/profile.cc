#include "lib/sim/profile.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string_view>

#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/json_depth.h"
#include "lib/core/json_parse.h"
#include "lib/core/mapped_file.h"

namespace cb::sim {
namespace {

// A field's allowed values: [lo, hi], or also exactly 0 where 0 means something (profile.h).
// The bounds keep every time the cost model and the links compute finite and the virtual clock
// moving: a rate near 0 or an overhead of 1e306 s turns a step into an infinite or NaN time.
struct Field {
  const char* name;
  double HardwareProfile::*member;
  double lo, hi;
  const char* zero;  // what 0 means where it is allowed besides [lo, hi] (nullptr: not allowed)
  const char* unit;
};

constexpr double kMinRate = 1e-6;        // docs/sim.md: rates at least 1e-6
constexpr double kMaxCapacity = 0x1p62;  // capacities become uint64_t byte counts
constexpr double kMaxFlops = kMaxProfileTflops;
constexpr double kMaxMemory = 1e6;       // GB/s (1 PB/s): ~200x an H200's 4,800 GB/s of HBM
constexpr double kMaxLink = 1e5;         // GB/s: ~100x NVLink 4 (450 GB/s each way)
constexpr double kMaxSsd = 1e4;          // GB/s: ~700x one PCIe Gen5 NVMe SSD (14 GB/s)
constexpr double kMaxStepOverhead = 10;  // s per forward call (measured: microseconds to ms)
constexpr double kMaxSmallOverhead = 1;  // s per layer or sequence of a call, per transfer

// A profile is a few KB (calibrate's, with its sources, ~2.5 KB): a file of megabytes is some
// other file, refused before it is parsed.
constexpr size_t kMaxProfileBytes = 1 << 20;

const std::vector<Field>& fields() {
  using P = HardwareProfile;
  static const std::vector<Field> f = {
      {"gemm_tflops", &P::gemm_tflops, kMinRate, kMaxFlops, nullptr, "TFLOP/s"},
      {"attn_tflops", &P::attn_tflops, kMinRate, kMaxFlops, nullptr, "TFLOP/s"},
      {"decode_attn_tflops", &P::decode_attn_tflops, kMinRate, kMaxFlops, nullptr, "TFLOP/s"},
      {"hbm_gbps", &P::hbm_gbps, kMinRate, kMaxMemory, "no memory term", "GB/s"},
      {"hbm_bytes", &P::hbm_bytes, 1, kMaxCapacity, "the KV pool is sized by the engine", "bytes"},
      {"step_overhead_s", &P::step_overhead_s, 0, kMaxStepOverhead, nullptr, "seconds"},
      {"layer_overhead_s", &P::layer_overhead_s, 0, kMaxSmallOverhead, nullptr, "seconds"},
      {"seq_overhead_s", &P::seq_overhead_s, 0, kMaxSmallOverhead, nullptr, "seconds"},
      {"nvlink_gbps", &P::nvlink_gbps, kMinRate, kMaxLink, "no all-reduce cost", "GB/s"},
      {"d2d_gbps", &P::d2d_gbps, kMinRate, kMaxMemory, nullptr, "GB/s"},
      {"h2d_gbps", &P::h2d_gbps, kMinRate, kMaxLink, nullptr, "GB/s"},
      {"d2h_gbps", &P::d2h_gbps, kMinRate, kMaxLink, nullptr, "GB/s"},
      {"pcie_latency_s", &P::pcie_latency_s, 0, kMaxSmallOverhead, nullptr, "seconds"},
      {"ssd_read_gbps", &P::ssd_read_gbps, kMinRate, kMaxSsd, nullptr, "GB/s"},
      {"ssd_write_gbps", &P::ssd_write_gbps, kMinRate, kMaxSsd, nullptr, "GB/s"},
      {"ssd_latency_s", &P::ssd_latency_s, 0, kMaxSmallOverhead, nullptr, "seconds"},
      {"dram_bytes", &P::dram_bytes, 0, kMaxCapacity, nullptr, "bytes"},
      {"ssd_bytes", &P::ssd_bytes, 0, kMaxCapacity, nullptr, "bytes"},
      {"gpu_usd_per_hour", &P::gpu_usd_per_hour, 0, 1e6, nullptr, "USD"},  // as --price-gpu
  };
  return f;
}

constexpr double kGB = 1e9;
constexpr double kGiB = 1073741824.0;

// Shared by the three built-ins: host side of the CachedAttention evaluation's servers.
void host_side(HardwareProfile& p, double pcie_gbps, const std::string& pcie_src) {
  p.h2d_gbps = pcie_gbps;
  p.d2h_gbps = pcie_gbps;
  p.sources["h2d_gbps"] = pcie_src;
  p.sources["d2h_gbps"] = pcie_src;
  p.pcie_latency_s = 10e-6;
  p.sources["pcie_latency_s"] =
      "assumption: ~10 us per cudaMemcpyAsync of a layer (launch + DMA setup)";
  p.ssd_read_gbps = 6.8;
  p.ssd_write_gbps = 4.0;
  p.sources["ssd_read_gbps"] =
      "Samsung PM9A3 U.2 NVMe (PCIe Gen4) datasheet: 6,800 MB/s sequential read";
  p.sources["ssd_write_gbps"] =
      "Samsung PM9A3 datasheet: 4,000 MB/s sequential write (3.84/7.68 TB models)";
  p.ssd_latency_s = 100e-6;
  p.sources["ssd_latency_s"] = "assumption: ~100 us NVMe read latency under queue depth";
  p.dram_bytes = 128 * kGB;
  p.sources["dram_bytes"] = "CachedAttention (ATC'24) section 5.1: 128 GB DRAM for the store";
  p.ssd_bytes = 10e12;
  p.sources["ssd_bytes"] = "CachedAttention (ATC'24) section 5.1: 10 TB SSD for the store";
  p.gpu_usd_per_hour = 5.0;
  p.sources["gpu_usd_per_hour"] = "cachebench's default price (metrics::Prices), as in replay";
  p.gpus = 1;
  p.sources["gpus"] =
      "1: one accelerator per model replica; --gpus N (replay --sim, ablate) for tensor "
      "parallelism, as tools/paper_results.sh runs LLaMA-13B on two";
  p.kv_bytes_per_element = 2;
  p.sources["kv_bytes_per_element"] =
      "2: an fp16 KV cache, as serving engines (vLLM) keep it by default and the CUDA backend's "
      "own type (replay --kv-entries native)";
}

HardwareProfile a100() {
  HardwareProfile p;
  p.name = "a100-80gb";
  p.description =
      "NVIDIA A100-SXM4-80GB, PCIe Gen4 host link, 128 GB DRAM, 10 TB NVMe (the CachedAttention "
      "evaluation's servers)";
  p.gemm_tflops = 312 * 0.7;
  p.sources["gemm_tflops"] =
      "NVIDIA A100 datasheet: 312 TFLOP/s dense FP16/BF16 tensor core peak; x0.7 achieved by "
      "cuBLAS at serving GEMM shapes (assumption; calibrate to replace)";
  p.attn_tflops = 312 * 0.5;
  p.sources["attn_tflops"] =
      "312 TFLOP/s peak x0.5: FlashAttention-2 reports 50-73% of peak on A100 (Dao 2023)";
  p.decode_attn_tflops = p.attn_tflops;
  p.sources["decode_attn_tflops"] =
      "as attn_tflops; decode attention is bound by reading the KV (the hbm_gbps roofline term)";
  p.hbm_gbps = 2039 * 0.85;
  p.sources["hbm_gbps"] = "NVIDIA A100 80GB SXM datasheet: 2,039 GB/s HBM2e; x0.85 achievable";
  p.hbm_bytes = 80 * kGiB;
  p.sources["hbm_bytes"] = "NVIDIA A100 80GB datasheet";
  p.step_overhead_s = 2e-3;
  p.sources["step_overhead_s"] =
      "assumption: ~2 ms per iteration (scheduling, sampling, launches) as in vLLM profiles";
  p.layer_overhead_s = 20e-6;
  p.sources["layer_overhead_s"] = "assumption: ~20 us of small kernels per layer";
  p.seq_overhead_s = 0;
  p.sources["seq_overhead_s"] = "0: batched kernels (paged attention handles a batch per launch)";
  p.nvlink_gbps = 300;
  p.sources["nvlink_gbps"] =
      "NVIDIA A100 datasheet: 600 GB/s NVLink (bidirectional), 300 GB/s each way";
  p.d2d_gbps = 2039 * 0.85 / 2;
  p.sources["d2d_gbps"] = "device-to-device copy reads and writes HBM: half of hbm_gbps";
  host_side(p, 25,
            "PCIe Gen4 x16: 31.5 GB/s per direction; ~25 GB/s achieved with pinned memory "
            "(CachedAttention section 2.3 uses 26 GB/s)");
  return p;
}

HardwareProfile h100() {
  HardwareProfile p = a100();
  p.name = "h100-80gb";
  p.description = "NVIDIA H100-SXM5-80GB, PCIe Gen5 host link, 128 GB DRAM, 10 TB NVMe";
  p.gemm_tflops = 989 * 0.7;
  p.sources["gemm_tflops"] =
      "NVIDIA H100 SXM datasheet: 989 TFLOP/s dense FP16/BF16 tensor core peak; x0.7 achieved "
      "(assumption; calibrate to replace)";
  p.attn_tflops = 989 * 0.5;
  p.decode_attn_tflops = p.attn_tflops;
  p.sources["attn_tflops"] =
      "989 TFLOP/s peak x0.5: FlashAttention-2/3 reach 35-75% of peak on H100 (Shah 2024)";
  p.hbm_gbps = 3350 * 0.85;
  p.sources["hbm_gbps"] = "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3; x0.85 achievable";
  p.hbm_bytes = 80 * kGiB;
  p.sources["hbm_bytes"] = "NVIDIA H100 SXM datasheet";
  p.nvlink_gbps = 450;
  p.sources["nvlink_gbps"] = "NVIDIA H100 SXM datasheet: 900 GB/s NVLink, 450 GB/s each way";
  p.d2d_gbps = 3350 * 0.85 / 2;
  host_side(p, 50,
            "PCIe Gen5 x16: 63 GB/s per direction; ~50 GB/s achieved with pinned memory "
            "(assumption, 80%)");
  return p;
}

HardwareProfile h200() {
  HardwareProfile p = h100();
  p.name = "h200";
  p.description = "NVIDIA H200-SXM-141GB, PCIe Gen5 host link, 128 GB DRAM, 10 TB NVMe";
  p.hbm_gbps = 4800 * 0.85;
  p.sources["hbm_gbps"] = "NVIDIA H200 datasheet: 4.8 TB/s HBM3e; x0.85 achievable";
  p.hbm_bytes = 141 * kGB;
  p.sources["hbm_bytes"] = "NVIDIA H200 datasheet: 141 GB HBM3e";
  p.d2d_gbps = 4800 * 0.85 / 2;
  p.sources["gemm_tflops"] =
      "NVIDIA H200 datasheet: 989 TFLOP/s dense FP16/BF16 (same GH100 die as H100); x0.7 "
      "achieved (assumption)";
  return p;
}

}  // namespace

nlohmann::json HardwareProfile::to_json() const {
  nlohmann::json j;
  j["name"] = name;
  j["description"] = description;
  for (const Field& f : fields()) j[f.name] = this->*(f.member);
  j["gpus"] = gpus;
  j["kv_bytes_per_element"] = kv_bytes_per_element;
  j["sources"] = sources;
  return j;
}

void HardwareProfile::validate(const std::string& origin) const {
  for (const Field& f : fields()) {
    const double v = this->*(f.member);
    if ((v >= f.lo && v <= f.hi) || (f.zero != nullptr && v == 0)) continue;  // NaN fails both
    std::string range = "from " + format_g(f.lo) + " to " + format_g(f.hi) + " " + f.unit;
    if (f.zero != nullptr) range = "0 (" + std::string(f.zero) + ") or " + range;
    if (f.hi == kMaxCapacity) range += " (2^62)";
    throw make_error(origin, std::string("field '") + f.name + "' is " + format_g(v),
                     "it must be " + range);
  }
  if (gpus < 1 || gpus > kMaxGpus) {
    throw make_error(origin, "field 'gpus' is " + std::to_string(gpus),
                     "it must be an integer from 1 to " + std::to_string(kMaxGpus));
  }
  if (kv_bytes_per_element != 1 && kv_bytes_per_element != 2 && kv_bytes_per_element != 4) {
    throw make_error(origin, "field 'kv_bytes_per_element' must be 1, 2 or 4");
  }
}

bool HardwareProfile::unmeasured(const std::string& field) const {
  const auto it = sources.find(field);
  return it != sources.end() && it->second.rfind(kNotMeasured, 0) == 0;
}

std::string HardwareProfile::label() const {
  if (loaded_from.empty() || loaded_from == name) return name;
  if (name.empty()) return loaded_from;
  return loaded_from + " (profile '" + name + "')";
}

HardwareProfile HardwareProfile::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw make_error(origin, "a hardware profile must be a JSON object");
  // A misspelt field would otherwise leave its default in place without a word.
  for (const auto& [k, v] : j.items()) {
    bool known = k == "name" || k == "description" || k == "gpus" || k == "kv_bytes_per_element" ||
                 k == "sources" || k == "git" || k == "fit";  // calibrate's provenance
    for (const Field& f : fields()) known = known || k == f.name;
    if (!known) {
      throw make_error(origin, "unknown field '" + k + "'",
                       "check its spelling against `cachebench calibrate --print-profile "
                       "a100-80gb`, or remove it");
    }
  }
  HardwareProfile p;
  const auto str = [&](const char* k, std::string* out) {
    if (!j.contains(k)) return;
    if (!j[k].is_string()) throw make_error(origin, std::string("field '") + k + "' must be text");
    *out = j[k].get<std::string>();
  };
  str("name", &p.name);
  str("description", &p.description);
  for (const Field& f : fields()) {
    if (!j.contains(f.name)) {
      throw make_error(origin, std::string("missing field '") + f.name + "'",
                       "start from `cachebench calibrate --print-profile a100-80gb`");
    }
    if (!j[f.name].is_number()) {
      throw make_error(origin, std::string("field '") + f.name + "' must be a number");
    }
    p.*(f.member) = j[f.name].get<double>();
  }
  const auto integer = [&](const char* k, int* out, int64_t lo, int64_t hi) {
    if (!j.contains(k)) return;
    if (!j[k].is_number_integer()) {
      throw make_error(origin, std::string("field '") + k + "' must be an integer");
    }
    // Read wide and range-check: get<int>() would wrap 4294967298 to 2. A value beyond int64
    // is printed as given, not clamped.
    const bool huge =
        j[k].is_number_unsigned() &&
        j[k].get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    const int64_t v = huge ? std::numeric_limits<int64_t>::max() : j[k].get<int64_t>();
    if (v < lo || v > hi) {
      const std::string given = huge ? std::to_string(j[k].get<uint64_t>()) : std::to_string(v);
      throw make_error(
          origin, std::string("field '") + k + "' is " + given,
          "it must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    *out = static_cast<int>(v);
  };
  integer("gpus", &p.gpus, 1, kMaxGpus);
  integer("kv_bytes_per_element", &p.kv_bytes_per_element, 0, 65536);  // then: 1, 2 or 4
  if (j.contains("sources")) {
    if (!j["sources"].is_object()) throw make_error(origin, "field 'sources' must be an object");
    for (const auto& [k, v] : j["sources"].items()) {
      if (!v.is_string()) throw make_error(origin, "sources['" + k + "'] must be text");
      p.sources[k] = v.get<std::string>();
    }
  }
  if (p.name.empty()) p.name = origin;
  p.loaded_from = origin;
  p.validate(origin);
  return p;
}

std::vector<std::string> builtin_profile_names() {
  return {"a100-80gb", "h100-80gb", "h200"};
}

HardwareProfile builtin_profile(const std::string& name, const std::string& option) {
  HardwareProfile p;
  if (name == "a100-80gb" || name == "a100") p = a100();
  if (name == "h100-80gb" || name == "h100") p = h100();
  if (name == "h200") p = h200();
  if (!p.name.empty()) {
    p.loaded_from = p.name;
    return p;
  }
  std::string names;
  for (const auto& n : builtin_profile_names()) names += (names.empty() ? "" : ", ") + n;
  throw make_error(option, "unknown hardware profile '" + name + "'",
                   "use one of " + names + " or a JSON file from `cachebench calibrate`");
}

HardwareProfile load_profile(const std::string& name_or_path, const std::string& option) {
  for (const auto& n : builtin_profile_names()) {
    if (name_or_path == n || n.rfind(name_or_path + "-", 0) == 0) return builtin_profile(n);
  }
  // What is at the path, for a profile's own words (MappedFile, below, refuses a FIFO or a
  // device too, without waiting on it, but speaks of model and data files).
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(name_or_path, ec);
  if (std::filesystem::is_directory(st)) {
    throw make_error(name_or_path, "is a directory (" + option + ")",
                     "name a hardware profile file (`cachebench calibrate --out` writes one)");
  }
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    throw make_error(name_or_path,
                     "is not a regular file (a FIFO, device or socket) (" + option + ")",
                     "name a hardware profile file (`cachebench calibrate --out` writes one)");
  }
  // A path (a slash or a .json name) is a file that could not be read, not a misspelt name.
  const bool path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  if (!std::filesystem::exists(st) && !path) builtin_profile(name_or_path, option);  // the names
  if (st.type() == std::filesystem::file_type::not_found) {  // else MappedFile says why
    throw make_error(name_or_path + " (" + option + ")", "no such hardware profile file",
                     "check the path (`cachebench calibrate --out` writes one)");
  }
  const MappedFile file(name_or_path);  // names the file and why it cannot be read
  if (file.size() > kMaxProfileBytes) {
    throw make_error(name_or_path,
                     "is " + std::to_string(file.size()) + " bytes, too large for a hardware " +
                         "profile (" + option + "; at most 1 MiB, and a profile is a few KB)",
                     "name a hardware profile file (`cachebench calibrate --out` writes one)");
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  refuse_json_nul(text, name_or_path, "a hardware profile is a JSON text file");
  // A profile is a flat object and its sources.
  check_json_depth(text, 8, name_or_path, "a hardware profile is a flat JSON object");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw make_error(name_or_path, "not valid JSON (" + json_error_reason(e) + ")",
                     "a hardware profile is one JSON object (`cachebench calibrate "
                     "--print-profile a100-80gb` prints one)");
  }
  // nlohmann keeps the last of a key given twice: which value the file means is unclear.
  DuplicateJsonKey twice;
  if (find_duplicate_json_key(text, 8, &twice)) {
    throw make_error(name_or_path,
                     "gives the field '" + twice.key + "' twice" +
                         (twice.in.empty() ? "" : " in '" + twice.in + "'") +
                         " (which value is meant is unclear)",
                     "keep one of them");
  }
  return HardwareProfile::from_json(j, name_or_path);
}

void save_profile(const HardwareProfile& p, const std::string& path) {
  write_file_atomically(path, p.to_json().dump(2) + "\n", "the hardware profile");
}

}  // namespace cb::sim
