// Calibration: timed forward calls -> least-squares fit; timed store transfers -> links.
#include "eval/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/kv/kv_cache.h"
#include "lib/metrics/stats.h"
#include "lib/sim/cost_model.h"
#include "lib/store/attention_store.h"
#include "lib/store/store_dir.h"

namespace cb::eval {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Solves the n x n system a x = b (Gaussian elimination, partial pivoting); false when
// singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    }
    if (std::fabs(a[p][c]) < 1e-300) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x->assign(n, 0);
  for (size_t r = n; r-- > 0;) {
    double s = b[r];
    for (size_t k = r + 1; k < n; ++k) s -= a[r][k] * (*x)[k];
    (*x)[r] = s / a[r][r];
  }
  return true;
}

// Weighted least squares t = x0 + sum_k x_k * cols[k] (relative errors: every shape counts,
// not just the slowest) over the columns in `active`; the others are held at 0. Columns are
// scaled to O(1) for conditioning.
std::vector<double> fit_active(const std::vector<double>& t,
                               const std::vector<std::vector<double>>& cols,
                               const std::vector<bool>& active) {
  const size_t n = cols.size() + 1;
  std::vector<size_t> idx;  // active unknowns: 0 (the intercept) and the active columns
  for (size_t k = 0; k < n; ++k) {
    if (active[k]) idx.push_back(k);
  }
  std::vector<double> scale(n, 1.0);
  for (size_t k = 1; k < n; ++k) {
    double m = 0;
    for (double v : cols[k - 1]) m = std::max(m, v);
    scale[k] = m > 0 ? m : 1;
  }
  const size_t a_n = idx.size();
  std::vector<std::vector<double>> m(a_n, std::vector<double>(a_n, 0));
  std::vector<double> v(a_n, 0), y;
  for (size_t i = 0; i < t.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    std::vector<double> r(a_n);
    for (size_t a = 0; a < a_n; ++a) r[a] = idx[a] == 0 ? 1.0 : cols[idx[a] - 1][i] / scale[idx[a]];
    for (size_t a = 0; a < a_n; ++a) {
      for (size_t b = 0; b < a_n; ++b) m[a][b] += w * r[a] * r[b];
      v[a] += w * r[a] * t[i];
    }
  }
  if (!solve(m, v, &y)) throw make_error("calibrate", "the timing fit is singular");
  std::vector<double> x(n, 0.0);
  for (size_t a = 0; a < a_n; ++a) x[idx[a]] = y[a] / scale[idx[a]];
  return x;
}

// Non-negative fit: a rate or overhead that comes out negative is dropped (held at 0) and
// the rest refitted, until every coefficient is >= 0. Clamping after the fact would keep
// the other coefficients compensating for a term that is no longer there.
std::vector<double> fit(const std::vector<double>& t,
                        const std::vector<std::vector<double>>& cols) {
  std::vector<bool> active(cols.size() + 1, true);
  for (;;) {
    std::vector<double> x = fit_active(t, cols, active);
    size_t worst = x.size();
    for (size_t k = 0; k < x.size(); ++k) {
      if (active[k] && x[k] < 0 && (worst == x.size() || x[k] < x[worst])) worst = k;
    }
    if (worst == x.size()) return x;
    active[worst] = false;
  }
}

struct Shape {
  int batch;
  int64_t new_tokens, context;
};

}  // namespace

Calibration calibrate(const model::ForwardModel& model, const CalibrateOptions& opts,
                      const std::function<void(const std::string&)>& log) {
  const model::ModelConfig& mc = model.config();
  Calibration cal;
  sim::HardwareProfile& p = cal.profile;
  const bool gpu = opts.links.has_value();
  std::string tag = opts.backend;
  for (char& ch : tag) ch = ch == ' ' ? '-' : ch;
  p.name = tag + "-" + mc.name;
  p.description = "calibrated on this machine (" + opts.backend + " backend" +
                  (gpu ? ", " + opts.links->device : std::string()) + ") with " + mc.name;
  // Sim entries of this profile are as the engine's: fp32 on either backend (the GPU converts
  // at capture and restore), or the backend's own type with --kv-entries native.
  const size_t entry_bytes =
      dtype_bytes(opts.native_kv_entries ? model.native_kv_type() : DType::F32, 1);
  p.kv_bytes_per_element = static_cast<int>(entry_bytes);
  p.gpus = 1;
  if (opts.ctx > mc.max_context) {  // as replay's --ctx
    throw make_error("--ctx",
                     std::to_string(opts.ctx) + " exceeds the model's context window of " +
                         std::to_string(mc.max_context) + " tokens",
                     "use at most " + std::to_string(mc.max_context) + " (0: the model's)");
  }
  // The grid's shapes (prefill chunks of up to 64 tokens after a context) need 64 tokens.
  if (opts.ctx > 0 && opts.ctx < 64) {
    throw make_error("--ctx",
                     std::to_string(opts.ctx) + " is below the grid's least window, 64 tokens",
                     "use 64 or more (0: the model's window)");
  }
  int64_t win = std::max<int64_t>(opts.ctx > 0 ? opts.ctx : mc.max_context, 64);
  const uint64_t kv_token_bytes = 2ull * static_cast<uint64_t>(mc.n_layers) * mc.kv_dim() *
                                  (model.kv_precision() == "f32" ? 4 : 2);
  const auto pool_bytes = [&](int64_t w) {
    return 16ull * static_cast<uint64_t>(w / 16 + 2) * 16 * kv_token_bytes;
  };
  while (opts.kv_budget_bytes > 0 && win > 64 && pool_bytes(win) > opts.kv_budget_bytes) win /= 2;
  if (opts.kv_budget_bytes > 0 && pool_bytes(win) > opts.kv_budget_bytes) {
    throw make_error("calibrate", "the KV pool of the grid does not fit the device's free memory",
                     "calibrate a smaller model");
  }
  // The grid: prefill chunks after several contexts, decode batches over several contexts.
  std::vector<Shape> grid;
  for (int64_t n : {int64_t{16}, int64_t{64}, int64_t{128}, win / 2}) {
    for (int64_t c : {int64_t{0}, win / 4, win / 2}) {
      if (n + c <= win) grid.push_back({1, n, c});
    }
  }
  for (int b : {1, 4, 8, 16}) {
    for (int64_t c : {int64_t{8}, win / 4, win - 8}) grid.push_back({b, 1, c});
  }
  for (int b : {4, 16}) {  // batches of prefill chunks, as continuous batching makes them
    grid.push_back({b, 32, win / 4});
    if (96 + 16 <= win) grid.push_back({b, 96, 16});  // each sequence within the window
  }
  const int bs = 16;
  const int blocks = static_cast<int>(16 * ((win + bs - 1) / bs + 1));
  kv::KvCache cache(model.kv_config(blocks, bs));
  model.bind_cache(cache);  // the GPU's blocks exist before any context length is set
  const sim::CostModel flops_model(sim::ModelShape::from_config(mc), p);
  std::vector<double> ts, gs, as, ds, ns;  // time, GEMM, attention (prefill, decode), sequences
  std::mt19937 rng(1);
  const auto time_shape = [&](const Shape& s) {
    std::vector<model::SeqInput> batch;
    for (int i = 0; i < s.batch; ++i) {
      const kv::SeqId seq = i;
      cache.add_sequence(seq);
      if (!cache.reserve(seq, s.context + s.new_tokens)) {
        throw make_error("calibrate",
                         "KV pool too small for the calibration grid (internal error)");
      }
      cache.set_length(seq, s.context);  // context slots hold whatever: timing only
      model::SeqInput in;
      in.seq = seq;
      for (int64_t k = 0; k < s.new_tokens; ++k) {
        in.tokens.push_back(3 + static_cast<int32_t>(rng() % (mc.vocab_size - 3)));
      }
      batch.push_back(std::move(in));
    }
    const auto t0 = std::chrono::steady_clock::now();
    model.forward(batch, cache, {});
    const double dt = seconds_since(t0);
    for (int i = 0; i < s.batch; ++i) cache.free_sequence(i);
    return dt;
  };
  // Passes over the whole grid rather than repetitions of one shape at a time: a slow
  // moment of the machine (another process, frequency scaling) then lands in one sample of
  // every shape, which the median drops, instead of in every sample of a few shapes, which
  // would bend the fit. The first pass warms caches and is not counted.
  std::vector<std::vector<double>> reps(grid.size());
  for (int pass = 0; pass < std::max(opts.reps, 1) + 1; ++pass) {
    if (opts.poll) opts.poll();
    for (size_t g = 0; g < grid.size(); ++g) {
      const double dt = time_shape(grid[g]);
      if (pass > 0) reps[g].push_back(dt);
    }
  }
  for (size_t g = 0; g < grid.size(); ++g) {
    const Shape& s = grid[g];
    std::vector<sim::StepLoad> loads(static_cast<size_t>(s.batch),
                                     sim::StepLoad{s.new_tokens, s.context, true});
    const sim::StepFlops f = flops_model.flops(loads);
    ts.push_back(metrics::median(reps[g]));
    gs.push_back(f.gemm);
    as.push_back(s.new_tokens > 1 ? f.attn : 0.0);
    ds.push_back(s.new_tokens > 1 ? 0.0 : f.attn);
    ns.push_back(s.batch);
    cal.points.push_back({s.batch, s.new_tokens, s.context, ts.back(), 0});
  }
  std::vector<double> x = fit(ts, {gs, as, ds, ns});
  if (!(x[1] > 0)) {
    throw make_error("calibrate",
                     "the step times do not grow with the work: either the machine was busy, or "
                     "the model is so small that fixed per-step costs (kernel launches, "
                     "synchronization) hide its compute",
                     "rerun on an idle machine, or calibrate a larger model (e.g. "
                     "preset:llama-2-7b on a GPU)");
  }
  p.step_overhead_s = x[0];
  p.gemm_tflops = 1e-12 / x[1];
  // No measurable attention term (a fitted cost of zero, or so small that its rate is past any
  // a profile may hold): attention then costs as much per FLOP as the GEMMs.
  const auto rate = [](double coef, double otherwise) {
    const double r = coef > 0 ? 1e-12 / coef : 0;
    return r > 0 && r <= sim::kMaxProfileTflops ? r : otherwise;
  };
  p.attn_tflops = rate(x[2], p.gemm_tflops);
  p.decode_attn_tflops = rate(x[3], p.attn_tflops);
  p.seq_overhead_s = x[4];
  p.hbm_gbps = 0;  // the fit already holds the memory traffic of the kernels
  std::vector<double> errs;
  const sim::CostModel fitted(sim::ModelShape::from_config(mc), p);
  for (CalibrationPoint& pt : cal.points) {
    std::vector<sim::StepLoad> loads(static_cast<size_t>(pt.batch),
                                     sim::StepLoad{pt.new_tokens, pt.context, true});
    pt.predicted_s = fitted.step_time(loads);
    errs.push_back(std::fabs(pt.predicted_s / pt.measured_s - 1));
  }
  cal.median_abs_error = metrics::median(errs);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "non-negative least-squares fit of %zu timed forward calls of %s (window %lld, "
                "median of %s), median |error| %.1f%%",
                grid.size(), mc.name.c_str(), static_cast<long long>(win),
                count_of(opts.reps, "pass").c_str(), 100 * cal.median_abs_error);
  for (const char* f :
       {"gemm_tflops", "attn_tflops", "decode_attn_tflops", "step_overhead_s", "seq_overhead_s"}) {
    p.sources[f] = buf;
  }
  p.sources["hbm_gbps"] = "0: no separate memory term (the fitted rates include it)";
  p.sources["layer_overhead_s"] = "0: folded into the fitted rates and step overhead";
  if (log) log(buf);

  // Store links: save and load a model-shaped entry through the real store.
  const int64_t ntok = opts.entry_tokens > 0 ? opts.entry_tokens : win;
  const auto token_bytes = static_cast<uint32_t>(static_cast<size_t>(mc.kv_dim()) * entry_bytes);
  // Room for the probe entry with slack; a tier is allocated and locked up front, so a
  // larger one only costs time.
  const uint64_t tier_bytes = std::max<uint64_t>(
      64ull << 20, 4ull * static_cast<uint64_t>(ntok) * token_bytes * 2 * mc.n_layers);
  const auto probe = [&](bool ssd, double* read_gbps, double* write_gbps) {
    store::StoreConfig sc;
    // The probe's own directory (a fresh one: never one that exists), removed however the
    // probe ends (an interrupt included): its store's files, then itself once empty.
    struct Scratch {
      std::string dir;
      ~Scratch() {
        if (!dir.empty()) store::remove_scratch_dir(dir, "calibrate's SSD probe directory");
      }
    } scratch;
    if (ssd) {
      const std::string dir = store::make_scratch_dir(opts.ssd_dir, "cachebench-calibrate-",
                                                      "pass a writable --ssd-dir");
      scratch.dir = dir;
      sc.store_dir = dir;
      sc.ssd_bytes = tier_bytes;
    } else {
      sc.dram_bytes = tier_bytes;
    }
    sc.chunk_bytes = 1 << 20;
    std::vector<double> rs, wsv;
    {
      store::AttentionStore st(sc);
      const size_t per_layer = static_cast<size_t>(ntok) * mc.kv_dim();
      std::vector<float> k(per_layer * mc.n_layers, 0.5f), v(k.size(), 0.25f);
      std::vector<int32_t> toks(static_cast<size_t>(ntok), 7);
      const store::ModelFingerprint fp = store::ModelFingerprint::from_description("calibrate");
      // What the store moves: K and V rows of token_bytes (the entry type's: 2 bytes an
      // element with native entries, though the probe's buffers are floats).
      const double bytes = 2.0 * static_cast<double>(ntok) * token_bytes * mc.n_layers;
      for (int r = 0; r < std::max(opts.reps, 1); ++r) {
        if (opts.poll) opts.poll();
        store::SaveRequest req;
        req.session = 1;
        req.fingerprint = fp;
        req.shape = {mc.n_layers, token_bytes};
        req.tokens = toks;
        req.append = false;  // a full save's bandwidth (the entry is erased first anyway)
        st.erase(1);
        const auto t0 = std::chrono::steady_clock::now();
        store::SaveHandle h = st.begin_save(req);
        for (int l = 0; l < mc.n_layers; ++l) {
          h.write_layer(l, {k.data() + l * per_layer, v.data() + l * per_layer});
        }
        if (!h.commit().get()) throw make_error("calibrate", "the store probe's save failed");
        wsv.push_back(bytes / seconds_since(t0) / 1e9);
        std::vector<store::LayerTarget> targets;
        for (int l = 0; l < mc.n_layers; ++l) {
          targets.push_back({k.data() + l * per_layer, v.data() + l * per_layer});
        }
        store::LookupKey key{1, fp, store::KeyEncoding::PreRope, toks, req.shape};
        const auto t1 = std::chrono::steady_clock::now();
        store::LoadHandle lh = st.load(key, targets);
        if (!lh.ok() || !lh.wait_all())
          throw make_error("calibrate", "the store probe's load failed");
        rs.push_back(bytes / seconds_since(t1) / 1e9);
      }
    }
    *read_gbps = metrics::median(rs);
    *write_gbps = metrics::median(wsv);
  };
  const std::string what = "measured: the real store saving/loading a " + std::to_string(ntok) +
                           "-token entry of " + mc.name + " (median of " +
                           std::to_string(opts.reps) + ")";
  if (gpu) {
    const DeviceLinks& l = *opts.links;
    p.h2d_gbps = l.h2d_gbps;
    p.d2h_gbps = l.d2h_gbps;
    p.d2d_gbps = l.d2d_gbps;
    for (const char* f : {"h2d_gbps", "d2h_gbps", "d2d_gbps"}) p.sources[f] = l.how;
    // As in the real engine, whose pool is --kv-blocks (or max-batch full windows), not the
    // device's free memory.
    p.hbm_bytes = 0;
    p.sources["hbm_bytes"] = "0: the KV pool is sized by the engine, as in a real replay";
  } else {
    probe(false, &p.h2d_gbps, &p.d2h_gbps);
    p.d2d_gbps = p.h2d_gbps;
    p.sources["h2d_gbps"] = "DRAM tier load, " + what;
    p.sources["d2h_gbps"] = "DRAM tier save, " + what;
    p.sources["d2d_gbps"] = "the HBM tier of the CPU backend is host memory: as h2d_gbps";
  }
  if (!opts.ssd_dir.empty()) {
    probe(true, &p.ssd_read_gbps, &p.ssd_write_gbps);
    p.sources["ssd_read_gbps"] = "SSD tier load in " + opts.ssd_dir + ", " + what;
    p.sources["ssd_write_gbps"] =
        "SSD tier save (fsync + journal) in " + opts.ssd_dir + ", " + what;
  } else {
    // No SSD measured (--ssd-dir ""): stand-in rates, since a profile needs positive ones,
    // marked "not measured"; sim refuses an SSD tier on them (HardwareProfile::unmeasured,
    // eval::run_sim_replay).
    p.ssd_read_gbps = p.ssd_write_gbps = 1;
    p.sources["ssd_read_gbps"] = p.sources["ssd_write_gbps"] =
        std::string(sim::kNotMeasured) + " (--ssd-dir \"\")";
  }
  p.sources["kv_bytes_per_element"] =
      opts.native_kv_entries
          ? "replay --kv-entries native: the backend's own KV type (this run's KV blocks: " +
                model.kv_precision() + ")"
          : "the engine stores KV entries in fp32 on either backend by default (this run's KV "
            "blocks: " +
                model.kv_precision() + "; replay --kv-entries native stores those)";
  p.validate(p.name);
  return cal;
}

}  // namespace cb::eval
