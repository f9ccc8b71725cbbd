// Replay in sim mode: trace lengths -> SimEngine over a SimStore -> the same summary.
#include "eval/sim_replay.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/engine/policy_advisor.h"
#include "lib/metrics/summary.h"
#include "lib/sim/cost_model.h"
#include "lib/sim/sim_engine.h"

namespace cb::eval {

std::vector<engine::SessionInput> sim_sessions(const datasets::Trace& trace,
                                               int64_t max_output_tokens) {
  std::vector<engine::SessionInput> out;
  out.reserve(trace.sessions.size());
  for (const datasets::TraceSession& s : trace.sessions) {
    engine::SessionInput in;
    in.id = s.id;
    for (const datasets::TraceTurn& tt : s.turns) {
      engine::TurnInput ti;
      ti.output_tokens = std::max<int64_t>(tt.output_tokens, 1);
      if (max_output_tokens > 0) ti.output_tokens = std::min(ti.output_tokens, max_output_tokens);
      const int64_t n =
          tt.input_ids.empty() ? tt.input_tokens : static_cast<int64_t>(tt.input_ids.size());
      ti.ids.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
      in.turns.push_back(std::move(ti));
    }
    out.push_back(std::move(in));
  }
  return out;
}

int64_t sim_kv_blocks(const model::ModelConfig& mc, const sim::HardwareProfile& p, int block_size,
                      uint64_t store_hbm_bytes) {
  if (block_size < 1) throw make_error("--block-size", "must be at least 1 token");
  // 0 is the profile's "no HBM size": the engine sizes the pool (--max-batch full windows),
  // as calibrate writes it (profile.h, docs/sim.md).
  if (p.hbm_bytes <= 0) return 0;
  const sim::ModelShape s = sim::ModelShape::from_config(mc);
  // The embedding table, and the LM head unless it is the same matrix (tied).
  const double tables = mc.tied_embeddings ? 1.0 : 2.0;
  const double weights =
      (s.params_per_layer * s.layers + tables * s.hidden * static_cast<double>(s.vocab)) *
      s.weight_bytes;
  const double avail = 0.9 * p.hbm_bytes * p.gpus - weights - static_cast<double>(store_hbm_bytes);
  const double block = static_cast<double>(block_size) * s.layers *
                       s.kv_bytes_per_token_layer(p.kv_bytes_per_element);
  if (avail < block && store_hbm_bytes > 0 &&
      avail + static_cast<double>(store_hbm_bytes) >= block) {
    throw make_error("--hbm",
                     "the store's HBM tier leaves no HBM for " + mc.name + "'s KV pool on " +
                         std::to_string(p.gpus) + " accelerator(s) of the profile " + p.label(),
                     "lower --hbm");
  }
  if (avail < block) {
    throw make_error("--profile " + p.label(),
                     mc.name + " does not fit: 90% of its hbm_bytes " + format_g(p.hbm_bytes, 4) +
                         " x " + std::to_string(p.gpus) + " GPU(s), less " + format_g(weights, 4) +
                         " bytes of weights, holds no KV block of " + std::to_string(block_size) +
                         " tokens",
                     "use a profile with more HBM or GPUs (\"gpus\", --gpus), or a smaller model");
  }
  return static_cast<int64_t>(avail / block);
}

ReplayRun run_sim_replay(const model::ModelConfig& mc,
                         const std::vector<engine::SessionInput>& sessions, engine::Mode mode,
                         const ReplayOptions& opts, const SimOptions& so,
                         const engine::ProgressFn& progress) {
  const sim::HardwareProfile& p = so.profile;
  // Tensor parallelism gives each GPU whole attention heads, and whole KV heads: the sim moves
  // and keeps 1/gpus of them per GPU and does not model KV heads replicated over GPUs (more
  // GPUs than KV heads, as for an MQA model on two).
  const auto split = [&](int heads, const char* kind, const char* why) {
    if (p.gpus <= heads && heads % p.gpus == 0) return;
    throw make_error("--gpus " + std::to_string(p.gpus),
                     mc.name + "'s " + std::to_string(heads) + " " + kind +
                         " do not split evenly over " + std::to_string(p.gpus) + " GPUs (" + why +
                         ")",
                     "use a number of GPUs that divides " + std::to_string(heads) +
                         " (the profile's \"gpus\" when --gpus is not given)");
  };
  split(mc.n_heads, "attention heads", "tensor parallelism gives each GPU whole heads");
  split(mc.n_kv_heads, "KV heads", "the sim does not model KV heads replicated over GPUs");
  // calibrate --ssd-dir "" writes stand-ins for the SSD's rates: an SSD tier's loads,
  // prefetches and evictions timed on them would be made up, not predicted.
  if (mode != engine::Mode::RE && opts.store.ssd_bytes > 0 &&
      (p.unmeasured("ssd_read_gbps") || p.unmeasured("ssd_write_gbps"))) {
    const char* f = p.unmeasured("ssd_read_gbps") ? "ssd_read_gbps" : "ssd_write_gbps";
    throw make_error("--profile " + p.label(),
                     "its SSD rates were not measured (" + std::string(f) + ": \"" +
                         p.sources.at(f) + "\"): ssd_read_gbps " + format_g(p.ssd_read_gbps, 4) +
                         " and ssd_write_gbps " + format_g(p.ssd_write_gbps, 4) +
                         " GB/s are placeholders, so an SSD tier (--ssd) " +
                         "would be timed on made-up rates",
                     "calibrate again with --ssd-dir on the SSD to model, or write measured "
                     "rates and their \"sources\" into the profile, or run without an SSD tier");
  }
  const sim::CostModel cost(sim::ModelShape::from_config(mc), p);
  ReplayRun run;
  run.mode = mode;
  std::unique_ptr<sim::SimStore> st;
  if (mode != engine::Mode::RE) {
    sim::SimStoreConfig sc;
    sc.hbm_bytes = opts.store.hbm_bytes;
    sc.dram_bytes = opts.store.dram_bytes;
    sc.ssd_bytes = opts.store.ssd_bytes;
    sc.chunk_bytes = opts.store.chunk_bytes;
    sc.ttl = opts.store.ttl;
    sc.clean_ahead_bytes = clean_ahead_bytes(opts.store);
    sc.demote_ahead_bytes = demote_ahead_bytes(opts.store);
    sc.save_admission = opts.store.save_admission;
    sc.drop_slow_demotions = opts.store.drop_slow_demotions;
    const auto bw = [](double profile_gbps, double slowed) {
      return slowed > 0 ? std::min(profile_gbps, slowed) : profile_gbps;
    };
    // With tensor parallelism each GPU holds 1/gpus of every layer's KV heads and moves its
    // share over its own PCIe link and HBM: the per-GPU links add up. The SSD is shared.
    const double g = std::max(p.gpus, 1);
    sc.d2d = sim::Link(bw(g * p.d2d_gbps, opts.store.read_gbps[0]), 0);
    sc.h2d = sim::Link(bw(g * p.h2d_gbps, opts.store.read_gbps[1]), p.pcie_latency_s);
    sc.d2h = sim::Link(bw(g * p.d2h_gbps, opts.store.write_gbps[1]), p.pcie_latency_s);
    sc.ssd_read = sim::Link(bw(p.ssd_read_gbps, opts.store.read_gbps[2]), p.ssd_latency_s);
    sc.ssd_write = sim::Link(bw(p.ssd_write_gbps, opts.store.write_gbps[2]), p.ssd_latency_s);
    policy::Capacity cap;
    cap.dram = sc.dram_bytes;
    cap.ssd = sc.ssd_bytes;
    sc.advisor = std::make_shared<engine::PolicyAdvisor>(policy_name(opts.store.policy), cap);
    // Tests check every indexed eviction decision against the advisor's ranking of all candidates.
    const char* verify = std::getenv("CACHEBENCH_SIM_VERIFY");
    sc.verify_decisions = verify != nullptr && std::string(verify) == "1";
    const uint64_t token_bytes =
        static_cast<uint64_t>(mc.kv_dim()) * static_cast<uint64_t>(p.kv_bytes_per_element);
    st = std::make_unique<sim::SimStore>(sc, mc.n_layers, token_bytes);
  }
  engine::EngineConfig ec = opts.engine;
  ec.mode = mode;
  ec.truncate_align = truncate_align(
      opts, static_cast<uint64_t>(mc.kv_dim()) * static_cast<uint64_t>(p.kv_bytes_per_element));
  if (ec.num_blocks <= 0) {
    // Only a run with a store gives up HBM to its HBM tier: RE has none.
    const uint64_t store_hbm = st ? opts.store.hbm_bytes : 0;
    const int64_t blocks = sim_kv_blocks(mc, p, ec.block_size, store_hbm);
    // The pool comes from the profile's HBM, not from --kv-blocks: a pool too small for one
    // window is the profile's (or --hbm's) doing, and the message says so (engine::pool_blocks
    // would blame --kv-blocks, which was not given).
    engine::EngineConfig one = ec;
    one.num_blocks = 0;
    one.sched.max_batch = 1;
    const int64_t ctx = engine::checked_window(ec, mc.max_context);
    const int64_t window = engine::pool_blocks(one, ctx);  // the blocks of one full window
    if (blocks > 0 && blocks < window) {
      throw make_error(
          "--profile " + p.label(),
          "its hbm_bytes " + format_g(p.hbm_bytes, 4) + " x " + std::to_string(p.gpus) + " GPU(s)" +
              " holds " + std::to_string(blocks) + " KV blocks of " +
              std::to_string(ec.block_size) + " tokens beside " + mc.name + "'s weights" +
              (store_hbm > 0 ? " and the store's HBM tier (--hbm)" : "") + ", fewer than the " +
              std::to_string(window) + " one full window of " + std::to_string(ctx) +
              " tokens needs",
          "use a profile with more HBM or GPUs (--gpus), a smaller --ctx" +
              std::string(store_hbm > 0 ? " or --hbm" : "") +
              ", or size the pool with --kv-blocks " + std::to_string(window) + " or more");
    }
    ec.num_blocks = static_cast<int>(std::min<int64_t>(blocks, 1 << 30));
  }
  sim::SimEngine eng(cost, st.get(), ec, mc.max_context);
  run.result = eng.run(sessions, progress);
  // The GPUs the cost model split the work over are the ones charged (not opts.gpus: a
  // --gpus of the CLI is the profile's by now, and charging others would price another run).
  run.result.totals.gpus = p.gpus;
  metrics::Prices prices = opts.prices;
  run.summary = metrics::summarize(run.result.records, run.result.totals, prices);
  run.summary["mode"] = engine::mode_name(mode);
  run.summary["execution"] = "sim";
  run.summary["profile"] = p.label();  // the file, and its "name" where that differs
  run.summary["kv_blocks"] = eng.kv_blocks();
  run.summary["clipped_turns"] = run.result.clipped_turns;
  run.summary["save_failures"] = run.result.save_failures;
  run.summary["steps"] = run.result.steps;
  run.summary["truncate_align_tokens"] = ec.truncate_align;
  if (st) {
    run.summary["store_entries"] = st->entries();
    // lib/store's counters of the same names (its stats JSON, under "store" in real mode).
    run.summary["store"] = {{"ssd_chunks_cleaned", st->cleaned_chunks()},
                            {"ssd_copy_chunks_reused", st->copy_reused_chunks()},
                            {"saves_admitted_below", st->admitted_below()},
                            {"slow_demotions_dropped", st->slow_dropped()},
                            {"demotions_ahead", st->demoted_ahead()},
                            {"prefetches", st->prefetches()},
                            {"prefetch_failures", st->prefetch_failures()}};
  }
  return run;
}

}  // namespace cb::eval
