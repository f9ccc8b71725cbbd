#pragma once
/// Sim mode of the serving engine: engine::Engine's loop (prepare -> admit -> steps ->
/// finish, the same Scheduler, the same overflow rules, read buffer, preloading, write
/// buffer and head-of-queue rule for sessions with a save in flight) on a virtual clock. A
/// step lasts what the CostModel says; loads and saves are reservations on the SimStore's
/// links; no model runs and no bytes move. Results are engine::RunResult, summarized by the
/// same metrics code as real runs. Mirrors lib/engine/engine.cc and engine_run.cc: a change
/// to the engine's policy belongs in both (tests/unit/sim checks they agree).

#include <map>
#include <memory>
#include <vector>

#include "lib/engine/engine.h"
#include "lib/sim/cost_model.h"
#include "lib/sim/sim_store.h"

namespace cb::sim {

/// The latest virtual time (s) a run may reach. A double in seconds resolves 0.48 us at 4e9 s
/// (127 years), so SimStore's access stamps, 1 us apart, stay distinct up to it; past ~9e9 s
/// they and the policies' microsecond ticks collapse. Arrivals span at most
/// sched::kMaxVirtualSpanS (1e9 s): this leaves room for think times and a saturated queue.
inline constexpr double kMaxVirtualClockS = 4e9;

class SimEngine {
 public:
  /// `store` may be null in RE mode; `max_context` is the model's window (cfg.ctx 0).
  SimEngine(const CostModel& cost, SimStore* store, engine::EngineConfig cfg, int64_t max_context);
  ~SimEngine();
  SimEngine(const SimEngine&) = delete;
  SimEngine& operator=(const SimEngine&) = delete;

  /// Serves every turn; only the message lengths of `sessions` matter. `progress` is called
  /// after every step and whenever the clock skips ahead to the next arrival or commit (the
  /// replay command's interrupt check lives there). Throws cb::Error when the virtual clock
  /// reaches kMaxVirtualClockS (or is not a number: a profile's costs out of range), or stops
  /// advancing with nothing to run.
  engine::RunResult run(const std::vector<engine::SessionInput>& sessions,
                        const engine::ProgressFn& progress = {});
  /// KV blocks in the pool.
  int64_t kv_blocks() const { return blocks_; }

 private:
  struct Job;
  struct Session {
    int64_t context = 0;
    bool pending = false;
    int64_t cut_tokens = 0;  ///< tokens its waiting turn's overflow dropped when it arrived
    double cut_stall = 0;    ///< and the store call's wait then
  };
  struct Saving {
    uint64_t session = 0;
    double commit_at = 0;
  };

  std::unique_ptr<Job> prepare(const sched::Request& r, int64_t message_tokens,
                               int64_t output_tokens, engine::RunResult* res);
  bool admit(Job& j, double* stall);
  void run_step(const std::vector<sched::StepItem>& items, engine::RunResult* res);
  void finish(Job& j, engine::RunResult* res);
  void wait_save(uint64_t session, double* stall);
  /// Drops the oldest `drop` tokens of a session's context and handles its stored entry as
  /// the mode does (CA truncates, OF invalidates), adding the waits to `stall`.
  void cut(uint64_t session, int64_t drop, double* stall);
  /// lib/engine's cut_on_arrival: the overflows of the turns that arrived since the last call,
  /// made now where engine::cuts_on_arrival says so (or once the session's save commits).
  void cut_on_arrival(const std::vector<engine::SessionInput>& sessions);
  /// Advances the clock to when the store call just made gives the thread back (evictions
  /// and settling in lib/store run on the caller's thread), adding the wait to `stall`.
  void block_on_store(double* stall);
  void poll_saves();
  /// Throws cb::Error unless the clock is below kMaxVirtualClockS (NaN included).
  void check_clock() const;
  void start_layers(Job& j, int n);
  void start_batch_loads(const std::vector<Job*>& jobs);
  void start_read_buffers();
  int read_buffer_for(const Job& j) const;

  const CostModel& cost_;
  SimStore* store_;
  engine::EngineConfig cfg_;
  int64_t ctx_ = 0, blocks_ = 0, free_blocks_ = 0;
  int layers_ = 0;
  double now_ = 0;
  std::map<uint64_t, Session> sessions_;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;
  std::vector<Saving> saving_;
  int64_t seen_ = -1;                     ///< the last waiting request cut_on_arrival looked at
  std::map<uint64_t, int64_t> cuts_due_;  ///< session -> tokens, cut once its save commits
  sched::Scheduler* sched_ = nullptr;
};

}  // namespace cb::sim
