#include "lib/sim/profile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_depth.h"

namespace cb::sim {
namespace {

struct Field {
  const char* name;
  double HardwareProfile::*member;
  bool positive;  // must be > 0 (else >= 0)
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"gemm_tflops", &HardwareProfile::gemm_tflops, true},
      {"attn_tflops", &HardwareProfile::attn_tflops, true},
      {"decode_attn_tflops", &HardwareProfile::decode_attn_tflops, true},
      {"hbm_gbps", &HardwareProfile::hbm_gbps, false},
      {"hbm_bytes", &HardwareProfile::hbm_bytes, false},
      {"step_overhead_s", &HardwareProfile::step_overhead_s, false},
      {"layer_overhead_s", &HardwareProfile::layer_overhead_s, false},
      {"seq_overhead_s", &HardwareProfile::seq_overhead_s, false},
      {"nvlink_gbps", &HardwareProfile::nvlink_gbps, false},
      {"d2d_gbps", &HardwareProfile::d2d_gbps, true},
      {"h2d_gbps", &HardwareProfile::h2d_gbps, true},
      {"d2h_gbps", &HardwareProfile::d2h_gbps, true},
      {"pcie_latency_s", &HardwareProfile::pcie_latency_s, false},
      {"ssd_read_gbps", &HardwareProfile::ssd_read_gbps, true},
      {"ssd_write_gbps", &HardwareProfile::ssd_write_gbps, true},
      {"ssd_latency_s", &HardwareProfile::ssd_latency_s, false},
      {"dram_bytes", &HardwareProfile::dram_bytes, false},
      {"ssd_bytes", &HardwareProfile::ssd_bytes, false},
      {"gpu_usd_per_hour", &HardwareProfile::gpu_usd_per_hour, false},
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
    // A rate or cost near zero turns into infinite times (and NaN counts) downstream.
    if (!std::isfinite(v) || (f.positive ? !(v >= 1e-6) : v < 0)) {
      throw make_error(origin, std::string("field '") + f.name + "' is " + std::to_string(v),
                       f.positive ? "it must be a number >= 1e-6" : "it must be a number >= 0");
    }
    // Capacities become byte counts (uint64_t): a value past 2^62 would not convert.
    const std::string field = f.name;
    if (field.size() > 6 && field.compare(field.size() - 6, 6, "_bytes") == 0 && v > 0x1p62) {
      throw make_error(origin, "field '" + field + "' is " + std::to_string(v),
                       "a capacity must be at most 2^62 bytes (4.6e18)");
    }
  }
  if (gpus < 1) throw make_error(origin, "field 'gpus' must be >= 1");
  if (kv_bytes_per_element != 1 && kv_bytes_per_element != 2 && kv_bytes_per_element != 4) {
    throw make_error(origin, "field 'kv_bytes_per_element' must be 1, 2 or 4");
  }
}

HardwareProfile HardwareProfile::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw make_error(origin, "a hardware profile must be a JSON object");
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
  const auto integer = [&](const char* k, int* out) {
    if (!j.contains(k)) return;
    if (!j[k].is_number_integer()) {
      throw make_error(origin, std::string("field '") + k + "' must be an integer");
    }
    // Read wide and range-check: get<int>() would wrap 4294967298 to 2.
    const int64_t v = j[k].is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(j[k].get<uint64_t>(), 1u << 31))
                          : j[k].get<int64_t>();
    if (v < 0 || v > 65536) {
      throw make_error(origin, std::string("field '") + k + "' is " + std::to_string(v),
                       "it must be an integer from 0 to 65536");
    }
    *out = static_cast<int>(v);
  };
  integer("gpus", &p.gpus);
  integer("kv_bytes_per_element", &p.kv_bytes_per_element);
  if (j.contains("sources")) {
    if (!j["sources"].is_object()) throw make_error(origin, "field 'sources' must be an object");
    for (const auto& [k, v] : j["sources"].items()) {
      if (!v.is_string()) throw make_error(origin, "sources['" + k + "'] must be text");
      p.sources[k] = v.get<std::string>();
    }
  }
  if (p.name.empty()) p.name = origin;
  p.validate(origin);
  return p;
}

std::vector<std::string> builtin_profile_names() {
  return {"a100-80gb", "h100-80gb", "h200"};
}

HardwareProfile builtin_profile(const std::string& name, const std::string& option) {
  if (name == "a100-80gb" || name == "a100") return a100();
  if (name == "h100-80gb" || name == "h100") return h100();
  if (name == "h200") return h200();
  std::string names;
  for (const auto& n : builtin_profile_names()) names += (names.empty() ? "" : ", ") + n;
  throw make_error(option, "unknown hardware profile '" + name + "'",
                   "use one of " + names + " or a JSON file from `cachebench calibrate`");
}

HardwareProfile load_profile(const std::string& name_or_path, const std::string& option) {
  for (const auto& n : builtin_profile_names()) {
    if (name_or_path == n || n.rfind(name_or_path + "-", 0) == 0) return builtin_profile(n);
  }
  std::ifstream in(name_or_path);
  if (!in) {
    // A path (a slash or a .json name) is a file that could not be read, not a misspelt name.
    const bool path =
        name_or_path.find('/') != std::string::npos ||
        (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
    if (path) {
      throw make_error(option + " " + name_or_path,
                       std::string("cannot read the hardware profile: ") + std::strerror(errno),
                       "check the path (`cachebench calibrate --out` writes one)");
    }
    builtin_profile(name_or_path, option);  // throws the list of names
  }
  std::stringstream ss;
  ss << in.rdbuf();
  // A profile is a flat object and its sources.
  check_json_depth(ss.str(), 8, name_or_path, "a hardware profile is a flat JSON object");
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) {
    throw make_error(name_or_path, "not valid JSON", "a hardware profile is a JSON object");
  }
  return HardwareProfile::from_json(j, name_or_path);
}

void save_profile(const HardwareProfile& p, const std::string& path) {
  write_file_atomically(path, p.to_json().dump(2) + "\n", "the hardware profile");
}

}  // namespace cb::sim
