// cachebench calibrate --model M --out profile.json [--backend cpu|cuda] [--ssd-dir DIR] [--reps N]
// cachebench calibrate --print-profile NAME: a built-in profile as JSON.
#include <algorithm>
#include <cstdio>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "eval/calibrate.h"
#include "lib/core/error.h"
#include "lib/engine/engine.h"

#ifdef CB_HAVE_CUDA
#include "eval/bench_gpu.h"
#endif

namespace cb::app {
namespace {

struct CalibrateArgs {
  ModelArgs m;
  std::string out, print, kv_entries = "f32";
  eval::CalibrateOptions o;
};

int run_calibrate(CalibrateArgs& a) {
  if (!a.print.empty()) {
    std::printf("%s\n", sim::load_profile(a.print, "--print-profile").to_json().dump(2).c_str());
    return 0;
  }
  if (a.m.model.empty())
    throw make_error("--model", "calibrate needs --model (or --print-profile)");
  if (a.out.empty()) throw make_error("--out", "name the profile file to write");
  a.o.native_kv_entries = engine::parse_kv_entries(a.kv_entries);
  // SIGINT/SIGTERM/SIGHUP: stop at the next pass, the scratch store (--ssd-dir) removed.
  install_interrupt_handlers(a.o.ssd_dir.empty()
                                 ? "no result was written"
                                 : "no result was written; its scratch store was removed");
  a.o.poll = check_interrupted;
  LoadedModel lm = load_model(a.m, false);
  a.o.backend = backend_label(a.m);
  if (a.m.backend == "cuda") {
#ifdef CB_HAVE_CUDA
    const eval::GpuCopyRates r = eval::measure_copy_rates(a.m.gpu, 256, std::max(a.o.reps, 3));
    eval::DeviceLinks l;
    l.device = r.device;
    l.h2d_gbps = r.h2d_gbps;
    l.d2h_gbps = r.d2h_gbps;
    l.d2d_gbps = r.d2d_gbps / 2;  // payload: the copy reads and writes every byte
    l.how = "measured: pinned cudaMemcpyAsync of 256 MiB on " + r.device + " (median)";
    a.o.links = l;
    // The grid's KV pool is allocated whole next to the weights: at most 60% of what is free.
    a.o.kv_budget_bytes = static_cast<uint64_t>(0.6 * r.free_bytes);
#endif  // without CUDA, load_model has already refused --backend cuda
  }
  const eval::Calibration c = eval::calibrate(lm.runner(), a.o, [](const std::string& s) {
    std::fprintf(stderr, "calibrate: %s\n", s.c_str());
  });
  std::printf(
      "## calibrate %s (%s)\n\n| batch | new tokens | context | measured (ms) | model (ms) |\n"
      "|---:|---:|---:|---:|---:|\n",
      lm.config().name.c_str(), a.o.backend.c_str());
  for (const auto& p : c.points) {
    std::printf("| %d | %lld | %lld | %.3f | %.3f |\n", p.batch,
                static_cast<long long>(p.new_tokens), static_cast<long long>(p.context),
                1e3 * p.measured_s, 1e3 * p.predicted_s);
  }
  const sim::HardwareProfile& p = c.profile;
  char ssd[160];
  if (p.unmeasured("ssd_read_gbps") || p.unmeasured("ssd_write_gbps")) {
    std::snprintf(ssd, sizeof ssd,
                  "SSD not measured (--ssd-dir \"\"; the profile holds placeholders of %.2f GB/s, "
                  "and sim refuses an SSD tier on them)",
                  p.ssd_read_gbps);
  } else {
    std::snprintf(ssd, sizeof ssd, "SSD load %.2f GB/s, save %.2f GB/s", p.ssd_read_gbps,
                  p.ssd_write_gbps);
  }
  std::printf(
      "\nGEMM %.2f GFLOP/s, attention %.2f GFLOP/s, step overhead %.3f ms; median |error| "
      "%.1f%%\nhost to device %.2f GB/s, device to host %.2f GB/s; %s\n",
      p.gemm_tflops * 1e3, p.attn_tflops * 1e3, p.step_overhead_s * 1e3, 100 * c.median_abs_error,
      p.h2d_gbps, p.d2h_gbps, ssd);
  nlohmann::json j = p.to_json();
  j["git"] = git_revision();
  j["fit"] = {{"median_abs_error", c.median_abs_error}, {"points", c.points.size()}};
  write_json(a.out, j);
  std::fprintf(stderr, "calibrate: wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  CLI::App* sub = app.add_subcommand(
      "calibrate", "Measure a hardware profile for sim mode (the real kernels and store)");
  sub->add_option("--model,-m", a->m.model, "a .gguf file, a checkpoint directory, or preset:NAME");
  sub->add_option("--weights-seed", a->m.seed, "seed of preset weights")->capture_default_str();
  a->m.model_sub = sub;  // load_model refuses --weights-seed for a model file
  add_backend_options(sub, &a->m);
  add_cpu_weights_option(sub, &a->m);
  sub->add_option("--out,-o", a->out, "profile JSON to write")->check(output_file());
  sub->add_option(
         "--ssd-dir", a->o.ssd_dir,
         "scratch directory for the SSD measurement (an existing, writable directory; \"\" "
         "skips it)")
      ->capture_default_str()
      ->check(writable_dir());
  sub->add_option("--ctx", a->o.ctx,
                  "the grid's window in tokens, at least 64 (0: the model's; on a GPU, halved "
                  "until the KV pool fits)")
      ->check(at_least(0));
  sub->add_option("--kv-entries", a->kv_entries,
                  "the entries of the replays to predict: f32, or native (replay --kv-entries "
                  "native); sets kv_bytes_per_element")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_option("--reps", a->o.reps, "repetitions per timed shape (median)")
      ->capture_default_str()
      ->check(above(0));
  sub->add_option("--print-profile", a->print,
                  "print a built-in profile (a100-80gb, h100-80gb, h200) or a profile file");
  set_action(sub, [a, sub] {
    if (sub->get_option("--print-profile")->count() > 0) {
      if (a->print.empty()) {
        throw make_error("--print-profile", "an empty name",
                         "name a built-in profile (a100-80gb, h100-80gb, h200) or a file");
      }
      // Every other option is about measuring: given beside it, it would be ignored.
      for (const CLI::Option* opt : sub->get_options()) {
        if (opt->count() == 0 || opt->get_name() == "--print-profile") continue;
        throw make_error(opt->get_name(), "--print-profile prints a profile and measures nothing",
                         "drop " + opt->get_name() + ", or drop --print-profile to calibrate");
      }
    }
    resolve_backend(&a->m);
    return run_calibrate(*a);
  });
}

}  // namespace cb::app
