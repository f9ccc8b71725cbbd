// Sim replays (eval::run_sim_replay) end to end: overflow truncation against the prefetch, the
// KV pool beside the weights and the store's HBM tier, and what CA and RE compare.
#include "eval/sim_replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/model/presets.h"
#include "lib/sched/arrivals.h"
#include "lib/sim/profile.h"

namespace cb::sim {
namespace {

// Every indexed eviction decision checked against the advisor's ranking of all candidates
// (eval/sim_replay.cc reads it).
[[maybe_unused]] const int kVerifySimEnv = setenv("CACHEBENCH_SIM_VERIFY", "1", 1);

struct Turn {
  size_t message_tokens;
  int64_t output_tokens;
};

/// `n` conversations numbered from `first_id`, each of `turns`.
std::vector<engine::SessionInput> conversations(size_t n, uint64_t first_id,
                                                const std::vector<Turn>& turns) {
  std::vector<engine::SessionInput> sessions(n);
  for (size_t i = 0; i < n; ++i) {
    sessions[i].id = first_id + i;
    for (const Turn& t : turns) {
      sessions[i].turns.emplace_back();
      sessions[i].turns.back().ids.resize(t.message_tokens);
      sessions[i].turns.back().output_tokens = t.output_tokens;
    }
  }
  return sessions;
}

/// The paper's LLaMA-13B setup: the built-in A100 profile, two GPUs.
eval::SimOptions two_a100s() {
  eval::SimOptions so;
  so.profile = builtin_profile("a100-80gb");
  so.profile.gpus = 2;
  return so;
}

// Overflows cut on arrival: eight LLaMA-13B conversations of two turns, one at a time, through
// a DRAM tier of three entries. Each second turn overflows the 2K window and drops half its
// history; it waits behind the other first turns while its entry goes to the SSD, and comes back
// by prefetch. Cut by whole chunks when it arrives (the default), the entry is truncated on the
// SSD and the prefetch reads only the kept tokens; cut exactly (`truncate_align` 1) when the turn
// is prepared, the prefetch reads the whole entry first.
TEST(SimReplay, AWholeChunkOverflowIsCutOnArrivalBeforeThePrefetchReadsIt) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(8, 10, {{1500, 100}, {600, 100}});
  const eval::SimOptions so = two_a100s();
  eval::ReplayOptions o;
  o.store.dram_bytes = 4'000'000'000;  // three 1,600-token entries (1.3 GB each)
  o.store.ssd_bytes = 100'000'000'000;
  o.engine.ctx = 2048;
  o.engine.sched.rate = 0;
  o.engine.sched.max_batch = 1;
  o.engine.preload_jobs = 1;
  double read[2], loaded[2];
  for (int exact = 0; exact < 2; ++exact) {
    o.engine.truncate_align = exact ? 1 : -1;
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, so);
    const nlohmann::json& s = r.summary;
    EXPECT_EQ(s["hit_rate"]["overall"].get<double>(), 1.0);
    EXPECT_EQ(s["truncate_align_tokens"].get<int64_t>(), exact ? 1 : 102);
    for (const auto& t : r.result.records) {
      if (t.turn == 1) {
        EXPECT_GE(t.truncated_tokens, 799);  // half the 1,599-token history at least
      }
    }
    read[exact] = s["tiers"]["ssd"]["bytes_read"].get<double>();
    loaded[exact] = s["bytes_loaded"].get<double>();
  }
  EXPECT_GT(read[0], 0);
  EXPECT_LE(read[0], loaded[0]);        // never a dropped token
  EXPECT_GT(read[1], 1.5 * loaded[1]);  // the dropped half too
}

// The requests the engine prepares load their entries themselves, from whichever tier holds
// them; the prefetcher fetches only the look-ahead's other sessions. It used to plan before the
// engine prepared the queue's new head, so the head's SSD entry was read twice (its load and a
// fetch) and the fetch evicted a DRAM entry for a copy the turn's save then replaced. With a
// prefetch window of one session (DRAM for one entry) every fetch would be such a waste;
// with a larger one the scheduler-aware policy serves more turns from DRAM than LRU.
TEST(SimReplay, PrefetchLeavesTheRequestsBeingPreparedToTheirOwnLoads) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(6, 1, {{1000, 50}, {100, 50}, {100, 50}, {100, 50}});
  const eval::SimOptions so = two_a100s();
  eval::ReplayOptions o;
  o.store.ssd_bytes = 100'000'000'000;
  o.store.drop_slow_demotions = false;
  o.engine.ctx = 2048;
  o.engine.sched.rate = 0;
  o.engine.sched.max_batch = 1;
  o.engine.preload_jobs = 1;
  const auto run = [&](const std::string& policy, uint64_t dram) {
    o.store.policy = policy;
    o.store.dram_bytes = dram;  // entries of 0.9-1.2 GB
    return eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, so).summary;
  };
  const nlohmann::json one = run("sched", 1'500'000'000);
  EXPECT_GT(one["hit_rate"]["ssd"].get<double>(), 0);
  EXPECT_EQ(one["store"]["prefetches"].get<uint64_t>(), 0u);
  const nlohmann::json sched = run("sched", 3'000'000'000), lru = run("lru", 3'000'000'000);
  EXPECT_GT(sched["store"]["prefetches"].get<uint64_t>(), 0u);
  EXPECT_EQ(lru["store"]["prefetches"].get<uint64_t>(), 0u);
  EXPECT_GT(sched["hit_rate"]["dram"].get<double>(), lru["hit_rate"]["dram"].get<double>());
}

// A fetch that finds no room is planned again once room may have come. A's entry goes to
// the SSD when B's save needs DRAM (one LLaMA-13B entry fits); A's next turn, 10 s later,
// is in the look-ahead while B's save is still in flight, so its fetch finds no victim. The
// fetch is retried when B's save lands, and A's turn reads DRAM, whether the saves are
// asynchronous or not (asynchronous saving used to leave it on the SSD).
TEST(SimReplay, AFetchThatFoundNoRoomIsRetriedOnceASaveLands) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  std::vector<engine::SessionInput> sessions = conversations(2, 0, {{1000, 1}});
  sessions[0].turns.emplace_back();
  sessions[0].turns.back().ids.resize(100);
  sessions[0].turns.back().output_tokens = 1;
  eval::ReplayOptions o;
  o.store.dram_bytes = 1'000'000'000;
  o.store.ssd_bytes = 10'000'000'000;
  o.store.drop_slow_demotions = false;
  o.engine.sched.rate = 0;
  o.engine.sched.max_batch = 1;
  o.engine.sched.think = sched::ThinkTime::parse("const:10");
  for (const bool async : {true, false}) {
    o.engine.async_save = async;
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, two_a100s());
    bool seen = false;
    for (const auto& t : r.result.records) {
      if (t.turn != 1) continue;
      seen = true;
      EXPECT_EQ(t.tier, "dram") << "async " << async;
    }
    EXPECT_TRUE(seen);
    EXPECT_EQ(r.summary["store"]["prefetches"].get<uint64_t>(), 1u) << "async " << async;
  }
}

// As lib/store: a turn that returns while its last save is being written loads each layer once
// that layer is written, not once the whole save has landed. A LLaMA-13B conversation returns
// at once (no think time) after a first turn of 1,000 tokens. Saved asynchronously, its second
// turn waits for the save's first layer and its loads follow the save layer by layer: it gets
// its first token less than half the save's time later than when it returns after the save
// landed (10 s of think time); it used to wait for the whole save, as a synchronous save makes
// it wait.
TEST(SimReplay, AReturningTurnLoadsEachLayerOnceItsSaveWroteIt) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(1, 0, {{1000, 1}, {100, 1}});
  const eval::SimOptions so = two_a100s();
  eval::ReplayOptions o;
  o.store.dram_bytes = 100'000'000'000;
  o.engine.sched.rate = 0;
  const auto ttft = [&](bool async, const char* think) {
    o.engine.async_save = async;
    o.engine.sched.think = sched::ThinkTime::parse(think);
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, so);
    EXPECT_EQ(r.result.records.size(), 2u);
    const metrics::TurnRecord& t = r.result.records.back();
    EXPECT_EQ(t.tier, "dram") << think;
    return t.first_token_s - t.arrival_s;
  };
  const double landed = ttft(true, "const:10"), in_flight = ttft(true, "const:0"),
               sync = ttft(false, "const:0");
  // The save: 1,001 tokens (the first turn's message and answer) of K and V, over the GPUs.
  const double save_s = 1001.0 * static_cast<double>(mc.kv_bytes_per_token()) /
                        (so.profile.gpus * so.profile.d2h_gbps * 1e9);
  EXPECT_GT(in_flight, landed);
  EXPECT_LT(in_flight - landed, save_s / 2);
  EXPECT_GT(sync - landed, save_s / 2);
}

// As lib/engine: the batch fills in one step whatever the preload window (one request
// prepared ahead, sixteen admitted at t = 0 together), in CA and RE alike.
TEST(SimReplay, TheBatchFillsInOneStepWhateverThePreloadWindow) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(16, 1, {{500, 20}});
  eval::ReplayOptions o;
  o.store.dram_bytes = 100'000'000'000;
  o.engine.ctx = 2048;
  o.engine.sched.rate = 0;
  o.engine.sched.max_batch = 16;
  o.engine.sched.max_batch_tokens = 16 * 500;  // every prefill in one step
  o.engine.preload_jobs = 1;
  for (engine::Mode mode : {engine::Mode::CA, engine::Mode::RE}) {
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, mode, o, two_a100s());
    ASSERT_EQ(r.result.records.size(), 16u);
    for (const auto& t : r.result.records) {
      EXPECT_EQ(t.start_s, 0.0) << "session " << t.session;
      EXPECT_EQ(t.first_token_s, r.result.records.front().first_token_s);
    }
    EXPECT_EQ(r.result.steps, 20);
  }
}

// As lib/engine: a read buffer fills behind the loads of the batch admitted before its job, so
// it never delays them, and the jobs that wait start with their buffers loaded. Eight
// Mistral-7B second turns arrive at once, four admitted: with every layer buffered the first
// four stall no longer than with none (the buffers used to start as each job was prepared,
// so the fourth's first layer queued behind three whole entries), and the second four less.
TEST(SimReplay, AReadBufferNeverDelaysTheBatchAdmittedBeforeIt) {
  const model::ModelConfig mc = model::preset_config("mistral-7b");
  const auto sessions = conversations(8, 1, {{1000, 1}, {99, 1}});
  eval::SimOptions so;
  so.profile = builtin_profile("a100-80gb");
  eval::ReplayOptions o;
  o.store.dram_bytes = 100'000'000'000;
  o.engine.ctx = 2048;
  o.engine.sched.rate = 0;
  o.engine.sched.think = sched::ThinkTime::parse("until:100");
  o.engine.sched.max_batch = 4;
  o.engine.sched.max_batch_tokens = 4000;
  o.engine.preload_jobs = 8;
  std::map<int, std::pair<double, double>> stall;  // buffer -> (first four, second four)
  for (int buffer : {0, 32}) {
    o.engine.read_buffer_layers = buffer;
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, so);
    double first = 1e300;
    for (const auto& t : r.result.records) {
      if (t.turn == 1) first = std::min(first, t.start_s);
    }
    for (const auto& t : r.result.records) {
      if (t.turn != 1) continue;
      EXPECT_EQ(t.tier, "dram");
      (t.start_s == first ? stall[buffer].first : stall[buffer].second) += t.preload_stall_s;
    }
  }
  EXPECT_GT(stall[0].first, 0.0);
  EXPECT_LE(stall[32].first, stall[0].first);
  EXPECT_LT(stall[32].second, stall[0].second);
}

TEST(SimReplay, KvPoolIsWhatFitsBesideTheWeights) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  HardwareProfile p = two_a100s().profile;
  const int64_t blocks = eval::sim_kv_blocks(mc, p, 16, 0);
  const double kv = blocks * 16.0 * mc.kv_bytes_per_token();
  EXPECT_GT(kv, 0.9 * 2 * 80 * 1073741824.0 - 27e9 - 1e9);
  EXPECT_LT(kv, 0.9 * 2 * 80 * 1073741824.0 - 25e9);
  p.gpus = 1;
  p.hbm_bytes = 16e9;
  EXPECT_THROW(eval::sim_kv_blocks(model::preset_config("llama-65b"), p, 16, 0), Error);
  // Falcon-40B's LM head is its embedding table (tied): the weights count it once. By hand
  // from the published shape: 60 layers of hidden 8192, 128 query and 8 KV heads of 64, MLP
  // 32768 wide (two matrices), vocabulary 65024, bf16.
  const double h = 8192, kv_dim = 8 * 64, f = 32768;
  const double falcon_weights = (60 * (2 * h * h + 2 * h * kv_dim + 2 * h * f) + h * 65024) * 2;
  p = two_a100s().profile;
  const double block = 16.0 * 60 * 2 * kv_dim * 2;
  EXPECT_EQ(eval::sim_kv_blocks(model::preset_config("falcon-40b"), p, 16, 0),
            static_cast<int64_t>((0.9 * p.hbm_bytes * 2 - falcon_weights) / block));
}

// The GPUs the cost model splits the work over are the GPUs charged: a summary recorded (and
// priced) opts.gpus when it was above 1, though the profile's ran (replay --gpus sets those).
TEST(SimReplay, TheProfilesGpusAreTheOnesCharged) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(2, 0, {{200, 4}});
  eval::ReplayOptions o;
  o.store.dram_bytes = 10'000'000'000;
  for (const int charged : {1, 4}) {
    o.gpus = charged;
    const eval::ReplayRun r = eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, two_a100s());
    EXPECT_EQ(r.result.totals.gpus, 2) << charged;
    EXPECT_EQ(r.summary["gpus"], 2) << charged;
    EXPECT_EQ(r.summary["profile"], "a100-80gb") << charged;
  }
}

// --warmup-turns leaves out the same turns in every mode (CA finishes turns sooner than RE, so
// the first N requests released would be different turns), and each turn's think time is its
// own: the measured turns arrive with the same think times in CA and RE.
TEST(SimReplay, CaAndReWarmTheSameTurns) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  // A long first message, then short ones.
  const auto sessions = conversations(10, 1, {{1500, 40}, {100, 40}, {100, 40}, {100, 40}});
  const eval::SimOptions so = two_a100s();
  eval::ReplayOptions o;
  o.store.dram_bytes = 100'000'000'000;
  // Arrivals and think times close to the service times, so the modes release turns in
  // different orders.
  o.engine.sched.rate = 20;
  o.engine.sched.think = sched::ThinkTime::parse("exp:0.05");
  o.engine.sched.max_batch = 2;
  o.engine.warmup_turns = 21;  // the boundary falls where CA and RE release turns apart
  std::map<std::pair<uint64_t, int>, bool> warm[2];
  std::map<std::pair<uint64_t, int>, double> think[2];
  for (int m = 0; m < 2; ++m) {
    const eval::ReplayRun r =
        eval::run_sim_replay(mc, sessions, m ? engine::Mode::RE : engine::Mode::CA, o, so);
    std::map<std::pair<uint64_t, int>, double> finish;
    for (const auto& t : r.result.records) {
      warm[m][{t.session, t.turn}] = t.warmup;
      finish[{t.session, t.turn}] = t.finish_s;
    }
    for (const auto& t : r.result.records) {
      if (t.turn > 0) think[m][{t.session, t.turn}] = t.arrival_s - finish[{t.session, t.turn - 1}];
    }
  }
  EXPECT_EQ(warm[0], warm[1]);
  int n = 0;
  for (const auto& [k, w] : warm[0]) n += w ? 1 : 0;
  EXPECT_EQ(n, 21);
  ASSERT_EQ(think[0].size(), think[1].size());
  for (const auto& [k, t] : think[0]) EXPECT_NEAR(t, think[1][k], 1e-9);
}

// A step that a warm-up turn shares with a measured one counts in proportion to the measured
// turn's tokens: a 1000-token warm-up prefill beside a 10-token measured one in a step of all
// sequences at once must not charge the measured turn the whole step (its prefill throughput
// fell 100-fold, and the GPU time stayed that of both turns).
TEST(SimReplay, AStepSharedWithWarmUpCountsByTheMeasuredTokens) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  std::vector<engine::SessionInput> sessions = conversations(1, 1, {{1000, 1}});
  const auto second = conversations(1, 2, {{10, 1}});
  sessions.push_back(second[0]);
  eval::ReplayOptions o;
  o.engine.sched.rate = 0;  // both in the first step
  const eval::SimOptions so = two_a100s();
  const eval::ReplayRun all = eval::run_sim_replay(mc, sessions, engine::Mode::RE, o, so);
  o.engine.warmup_turns = 1;  // the 1000-token turn
  const eval::ReplayRun warm = eval::run_sim_replay(mc, sessions, engine::Mode::RE, o, so);
  ASSERT_EQ(all.result.steps, 1);
  const double share = 10.0 / 1010.0;
  EXPECT_NEAR(warm.result.totals.gpu_time_s, share * all.result.totals.gpu_time_s, 1e-12);
  EXPECT_NEAR(warm.result.totals.prefill_time_s, share * all.result.totals.prefill_time_s, 1e-12);
  // The measured tokens at the step's own rate.
  EXPECT_NEAR(warm.summary["prefill_throughput"].get<double>(),
              all.summary["prefill_throughput"].get<double>(),
              1e-9 * all.summary["prefill_throughput"].get<double>());
}

// The store's HBM tier comes out of the KV pool of the runs that have a store; RE has none, so
// `--hbm` must not shrink its pool (a handicap that would overstate CA's gains).
TEST(SimReplay, OnlyARunWithAStoreGivesUpHbmToItsHbmTier) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  const auto sessions = conversations(2, 1, {{100, 4}});
  eval::SimOptions so = two_a100s();
  eval::ReplayOptions o;
  o.store.dram_bytes = 4'000'000'000;
  o.engine.sched.rate = 0;
  const auto blocks = [&](engine::Mode m, uint64_t hbm) {
    o.store.hbm_bytes = hbm;
    return eval::run_sim_replay(mc, sessions, m, o, so).summary["kv_blocks"].get<int64_t>();
  };
  const int64_t whole = eval::sim_kv_blocks(mc, so.profile, o.engine.block_size, 0);
  const uint64_t tier = 40'000'000'000;
  EXPECT_EQ(blocks(engine::Mode::RE, 0), whole);
  EXPECT_EQ(blocks(engine::Mode::RE, tier), whole);
  EXPECT_LT(blocks(engine::Mode::CA, tier), whole);
  EXPECT_EQ(blocks(engine::Mode::CA, tier),
            eval::sim_kv_blocks(mc, so.profile, o.engine.block_size, tier));
  // Tensor parallelism over GPUs that do not split LLaMA-13B's 40 heads evenly is refused.
  for (const int g : {3, 80, 4096}) {
    so.profile.gpus = g;
    try {
      eval::run_sim_replay(mc, sessions, engine::Mode::CA, o, so);
      ADD_FAILURE() << g << " GPUs accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("do not split evenly"), std::string::npos) << e.what();
    }
  }
  // LLaMA-2-70B's 64 query heads split over 16 GPUs, its 8 KV heads do not: the sim would
  // count 1/16 of the KV per GPU where each GPU holds a whole replicated head.
  so.profile.gpus = 16;
  const auto big = conversations(1, 1, {{100, 4}});
  try {
    eval::run_sim_replay(model::preset_config("llama-2-70b"), big, engine::Mode::CA, o, so);
    ADD_FAILURE() << "16 GPUs accepted for 8 KV heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 KV heads do not split evenly over 16 GPUs"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--gpus 16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cb::sim
