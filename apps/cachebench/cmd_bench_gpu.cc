// cachebench bench gpu [--models preset:llama-2-7b,...] [--prompts 512,2048,4096] [--prefix 2048]
//   [--batches 1,16,64] [--reps 5] [--gpu-storage f16] [--no-opt-ins] [--out F.json]
//   (CUDA builds); cachebench bench gpu --report F.json (any build: a saved result's tables and
//   its targets)
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/cachebench/format.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "eval/bench_gpu_targets.h"
#include "lib/core/error.h"
#include "lib/metrics/gate.h"

#ifdef CB_HAVE_CUDA
#include "eval/bench_gpu.h"
#endif

namespace cb::app {

namespace {

// printf into a string.
void appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out->append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  out->append(big.data(), static_cast<size_t>(n));
}

// An integer field: a JSON integer, never a float (converting one beyond long long's range is
// undefined), else nlohmann's type error as for any other field of the wrong type.
long long integer(const nlohmann::json& row, const char* key) {
  const nlohmann::json& v = row.at(key);
  if (!v.is_number_integer()) {
    throw nlohmann::json::type_error::create(
        302, std::string("field '") + key + "' must be an integer", &v);
  }
  return v.get<long long>();
}

// A number field that only a positive value can have been measured as (a rate, a count of
// repetitions): anything else is not a result bench gpu wrote.
double positive(const nlohmann::json& row, const char* key) {
  const nlohmann::json& v = row.at(key);
  const double x = v.get<double>();
  if (!(x > 0)) {
    throw nlohmann::json::out_of_range::create(
        406, std::string("field '") + key + "' must be above 0", &v);
  }
  return x;
}

// A `bench gpu` result's tables (nlohmann's exceptions where it lacks a field).
void render_tables(const nlohmann::json& j, std::string* out_ptr) {
  const auto& d = j.at("device");
  const auto& c = j.at("ceilings");
  positive(j, "reps");  // a count of repetitions, read as the integer it is below
  appendf(out_ptr, "device          %s (cc %s, %.1f GiB), storage %s, median of %lld\n",
          d.at("name").get<std::string>().c_str(),
          d.at("compute_capability").get<std::string>().c_str(),
          d.at("memory_bytes").get<double>() / (1 << 30),
          j.at("storage").get<std::string>().c_str(), integer(j, "reps"));
  appendf(out_ptr,
          "copy ceilings   D2D %.0f GB/s (read + write), H2D %.1f GB/s, D2H %.1f GB/s "
          "(pinned)\n",
          positive(c, "d2d_gbs_read_plus_write"), positive(c, "h2d_pinned_gbs"),
          positive(c, "d2h_pinned_gbs"));
  // The alternatives present in any row of `phase`, in bench_gpu_alternatives' order.
  const auto present = [&](const char* phase) {
    std::vector<eval::BenchGpuAlternative> alts;
    for (const auto& a : eval::bench_gpu_alternatives()) {
      bool any = false;
      for (const auto& m : j.at("models")) {
        for (const auto& p : m.at(phase)) any = any || p.contains(std::string(a.prefix) + "_tok_s");
      }
      if (any) alts.push_back(a);
    }
    return alts;
  };
  // `row`'s number under `key` in `fmt`, or "-" when it has none.
  const auto num = [](const nlohmann::json& row, const std::string& key, const char* fmt) {
    if (!row.contains(key)) return std::string("-");
    std::string out;
    appendf(&out, fmt, row.at(key).get<double>());
    return out;
  };
  // An alternative's speed relative to the default's ("1.08x"), or "-" when the row has none.
  const auto speed = [](const nlohmann::json& row, const std::string& prefix) {
    const double r = eval::relative_speed(row, prefix);
    if (r <= 0) return std::string("-");
    std::string out;
    appendf(&out, "%.2fx", r);
    return out;
  };
  const std::vector<eval::BenchGpuAlternative> pre = present("prefill");
  // A table's head: the fixed columns (`head`, `rule`), then one per alternative in `alts`.
  const auto table_head = [&](const char* head, const char* rule,
                              const std::vector<eval::BenchGpuAlternative>& alts) {
    appendf(out_ptr, "\n%s", head);
    for (const auto& a : alts) appendf(out_ptr, " %s |", a.name);
    appendf(out_ptr, "\n%s", rule);
    for (size_t i = 0; i < alts.size(); ++i) appendf(out_ptr, "---:|");
    appendf(out_ptr, "\n");
  };
  // The rest of `row`'s line: for each alternative, `cell`(its key prefix) or "-" where the
  // row has none.
  const auto alternative_cells = [&](const nlohmann::json& row,
                                     const std::vector<eval::BenchGpuAlternative>& alts,
                                     const auto& cell) {
    for (const auto& a : alts) {
      const std::string k = a.prefix;
      appendf(out_ptr, " %s |", row.contains(k + "_tok_s") ? cell(k).c_str() : "-");
    }
    appendf(out_ptr, "\n");
  };
  table_head(
      "| model | prompt | prefix | tokens/s | TFLOP/s | GEMM ceiling | ratio (at the fused "
      "gate|up shapes) |",
      "|---|---:|---:|---:|---:|---:|---:|", pre);
  for (const auto& m : j.at("models")) {
    for (const auto& p : m.at("prefill")) {
      if (p.contains("skipped")) continue;
      const std::string fused = p.contains("ratio_to_fused_gemm_ceiling")
                                    ? num(p, "ratio_to_fused_gemm_ceiling", " (%.2f)")
                                    : "";
      appendf(out_ptr, "| %s | %lld | %lld | %.0f | %.1f | %.1f | %.2f%s |",
              m.at("model").get<std::string>().c_str(), integer(p, "prompt"), integer(p, "prefix"),
              p.at("tok_s").get<double>(), p.at("tflops").get<double>(),
              p.at("gemm_ceiling_tflops").get<double>(),
              p.at("ratio_to_gemm_ceiling").get<double>(), fused.c_str());
      alternative_cells(p, pre, [&](const std::string& k) {
        std::string cell = num(p, k + "_ratio_to_gemm_ceiling", "%.2f");
        if (p.contains(k + "_ratio_to_fused_gemm_ceiling")) {
          cell += num(p, k + "_ratio_to_fused_gemm_ceiling", " (%.2f)");
        }
        cell += ", " + speed(p, k);
        if (p.contains(k + "_logits_max_diff_over_max")) {
          cell += num(p, k + "_logits_max_diff_over_max", "; %.2g");
        }
        return cell;
      });
    }
  }
  appendf(out_ptr,
          "(alternatives, same run: ratio to the GEMM ceiling, their speed relative to the "
          "default's; the largest difference of their last logits from the default's over "
          "its largest magnitude)\n");
  const std::vector<eval::BenchGpuAlternative> dec = present("decode");
  table_head("| model | batch | context | tokens/s | HBM GB/s | / copy ceiling |",
             "|---|---:|---:|---:|---:|---:|", dec);
  for (const auto& m : j.at("models")) {
    for (const auto& p : m.at("decode")) {
      appendf(out_ptr, "| %s | %lld | %lld | %.1f | %.0f | %.2f |",
              m.at("model").get<std::string>().c_str(), integer(p, "batch"), integer(p, "context"),
              p.at("tok_s").get<double>(), p.at("hbm_gbs").get<double>(),
              p.at("ratio_to_copy_ceiling").get<double>());
      alternative_cells(p, dec, [&](const std::string& k) {
        std::string cell = num(p, k + "_tok_s", "%.1f") + " (" + speed(p, k);
        if (p.contains(k + "_ratio_to_copy_ceiling")) {
          cell += num(p, k + "_ratio_to_copy_ceiling", "; %.2f");
        }
        return cell + ")";
      });
    }
  }
  appendf(out_ptr,
          "(alternatives, same run: tokens/s (their speed relative to the default's; their share "
          "of the copy ceiling))\n");
  appendf(out_ptr,
          "\n| model | tokens | KV restore GB/s, one stream (/ H2D) | pipelined (/ H2D) | one copy "
          "of the same bytes GB/s | pipelined / it | KV capture to host GB/s |\n"
          "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& k : j.at("kv")) {
    // The pipelined restore and its same-bytes copy came later (results before 2026-11-27).
    char pipe[64] = "-", same[32] = "-", per[32] = "-";
    if (k.contains("restore_pipelined_gbs")) {
      std::snprintf(pipe, sizeof pipe, "%.1f (%.2f)", k.at("restore_pipelined_gbs").get<double>(),
                    k.at("restore_pipelined_ratio_to_h2d").get<double>());
      std::snprintf(same, sizeof same, "%.1f", k.at("h2d_same_bytes_gbs").get<double>());
      std::snprintf(per, sizeof per, "%.2f",
                    k.at("restore_pipelined_ratio_to_same_bytes_h2d").get<double>());
    }
    appendf(out_ptr, "| %s | %lld | %.1f (%.2f) | %s | %s | %s | %.1f |\n",
            k.at("model").get<std::string>().c_str(), integer(k, "tokens"),
            k.at("restore_gbs").get<double>(), k.at("restore_ratio_to_h2d").get<double>(), pipe,
            same, per, k.at("capture_to_host_gbs").get<double>());
  }
}

// The tables of a `bench gpu` result, then its targets (eval::bench_gpu_targets of it); whole,
// or a cb::Error naming `origin` when `j` is not such a result.
std::string render(const nlohmann::json& j, const nlohmann::json& targets,
                   const std::string& origin) {
  std::string out;
  try {
    render_tables(j, &out);
  } catch (const nlohmann::json::exception& e) {
    throw make_error(origin,
                     "is not a complete `bench gpu` result (" + metrics::json_reason(e) + ")",
                     "pass the JSON that `bench gpu --out` wrote");
  }
  appendf(
      &out,
      "\n| target | model | configuration | ratio | goal | met |\n|---|---|---|---:|---:|---|\n");
  for (const auto& t : targets) {
    appendf(&out, "| %s | %s | %s | %.3f | %.2f | %s |\n", t["target"].get<std::string>().c_str(),
            t["model"].get<std::string>().c_str(), t["config"].get<std::string>().c_str(),
            t["ratio"].get<double>(), t["goal"].get<double>(), t["met"].get<bool>() ? "yes" : "no");
  }
  if (targets.empty())
    appendf(&out, "| (no point this result measured has a target) | | | | | |\n");
  return out;
}

// `bench gpu --report F.json`: a saved result's tables and targets, no GPU needed.
int print_report(const std::string& path) {
  if (path.empty()) throw make_error("--report", "an empty path", "pass a result saved with --out");
  const nlohmann::json j = load_json_document(path);
  std::fputs(render(j, eval::bench_gpu_targets(j, path), path).c_str(), stdout);
  return 0;
}

CLI::Option* add_report_option(CLI::App* sub, std::string* path) {
  return sub->add_option(
      "--report", *path,
      "print the tables and the targets (prefill 7B at 2K >= 0.70 of the GEMM "
      "ceiling, decode at batch 1 >= 0.80 of the copy ceiling, KV restore >= 0.90 "
      "of host-to-device) of a result saved with --out; measures nothing, needs no "
      "GPU");
}

}  // namespace

#ifdef CB_HAVE_CUDA
namespace {

struct BenchGpuArgs {
  eval::BenchGpuOptions o;
  std::string out, report;
};

}  // namespace

void register_bench_gpu(CLI::App* bench) {
  auto a = std::make_shared<BenchGpuArgs>();
  CLI::App* sub = bench->add_subcommand(
      "gpu",
      "CUDA backend: GEMM and copy ceilings of this GPU, prefill/decode throughput of preset "
      "models against them, KV restore/capture bandwidth (docs/perf.md)");
  sub->add_option("--models", a->o.models, "models (presets are generated on the device)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--prompts", a->o.prompts, "prompt lengths")
      ->delimiter(',')
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--prefix", a->o.prefix, "paged prefix before each prompt (0: none)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  sub->add_option("--batches", a->o.batches, "decode batch sizes")
      ->delimiter(',')
      ->capture_default_str()
      ->check(in_range(1, 4096));
  sub->add_option("--decode-context", a->o.decode_context, "history of every decoding sequence")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--decode-steps", a->o.decode_steps, "timed decode steps per repetition")
      ->capture_default_str()
      ->check(in_range(1, 10000));
  sub->add_option("--reps", a->o.reps, "timed repetitions (after one warm-up)")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  sub->add_option("--gpu-storage", a->o.storage, "storage of weights, activations and KV")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  sub->add_option("--gpu", a->o.device, "device index")->capture_default_str();
  sub->add_option("--profile-phase", a->o.profile_phase,
                  "what a profiler run with --profile-from-start off sees: the default's timed "
                  "decode steps, or its last timed prefill")
      ->check(CLI::IsMember({"decode", "prefill"}))
      ->capture_default_str();
  sub->add_flag("!--no-opt-ins", a->o.opt_ins,
                "time only the default and its baselines (the previous default, the wmma prefill "
                "attention, cuBLAS GEMVs), not each fused path turned off alone or PDL");
  sub->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  // --report measures nothing: every other option is refused beside it.
  std::vector<CLI::Option*> measuring;
  for (CLI::Option* opt : sub->get_options()) {
    if (opt->get_name() != "--help") measuring.push_back(opt);
  }
  CLI::Option* report = add_report_option(sub, &a->report);
  for (CLI::Option* opt : measuring) report->excludes(opt);
  set_action(sub, [a, report] {
    if (report->count() > 0) return print_report(a->report);
    nlohmann::json j = eval::bench_gpu(a->o);
    j["bench"] = "gpu";
    j["git"] = git_revision();
    j["mode"] = "real";
    j["targets"] = eval::bench_gpu_targets(j, "bench gpu");
    if (!a->out.empty()) write_json(a->out, j);  // first: a long run's result is kept whatever
    std::fputs(render(j, j["targets"], "bench gpu").c_str(), stdout);
    return 0;
  });
}
#else
// No CUDA backend in this build: `bench gpu` says so (and how to get one) instead of being
// an unknown subcommand.
void register_bench_gpu(CLI::App* bench) {
  CLI::App* sub = bench->add_subcommand(
      "gpu",
      "CUDA builds only: GEMM/copy ceilings and model throughput on this GPU (--report F.json, a "
      "saved result's tables and targets, in any build)");
  sub->allow_extras();
  auto report = std::make_shared<std::string>();
  CLI::Option* given = add_report_option(sub, report.get());
  set_action(sub, [sub, report, given]() -> int {
    if (given->count() > 0) {
      if (!sub->remaining().empty()) {
        throw make_error("bench gpu",
                         "--report reads a saved result and takes no other argument; got '" +
                             sub->remaining()[0] + "'",
                         "drop it (measuring needs a build with the CUDA backend)");
      }
      return print_report(*report);
    }
    throw make_error("bench gpu",
                     "this build has no CUDA backend (built with CACHEBENCH_CUDA=OFF or without "
                     "nvcc)",
                     "rebuild on a machine with the CUDA toolkit (make setup && make build)");
  });
}
#endif

}  // namespace cb::app
