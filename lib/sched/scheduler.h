#pragma once
/// The job queue and iteration-level continuous batching (Orca/vLLM style): requests (one
/// per conversation turn) arrive, wait FCFS, are admitted when the engine could reserve
/// their KV blocks, and every step carries one decode token per running request that has
/// finished prefill plus prefill chunks of the others, bounded by max_batch sequences and
/// max_batch_tokens tokens. A session's next turn arrives when its previous answer is done
/// plus a think time. The waiting queue, followed by the known future arrivals, is the
/// look-ahead window handed to the store's placement policies. Pure: no clock, no I/O.

#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "lib/sched/arrivals.h"

namespace cb::sched {

using SessionId = uint64_t;
/// Identifies one request (session, turn) for its whole life.
using RequestId = int64_t;

/// Scheduler knobs (CLI defaults live here).
struct SchedConfig {
  int max_batch = 16;               ///< sequences per step
  int64_t max_batch_tokens = 2048;  ///< tokens per step (prefill chunks + decode tokens)
  double rate = 1.0;                ///< new sessions per second (<= 0 or inf: all at once)
  uint64_t seed = 0;                ///< arrivals and think times
  ThinkTime think;                  ///< between an answer and the next turn
  /// Sessions in the look-ahead window (`--lookahead`). The paper sizes scheduler-aware
  /// eviction's window as (DRAM + SSD) / mean entry size, about 1,900 LLaMA-13B conversations
  /// at 128 GB + 2 TB; the policies take what they need from the front.
  size_t lookahead = 4096;
};

/// A request as the scheduler tracks it.
struct Request {
  RequestId id = 0;
  SessionId session = 0;
  int turn = 0;
  double arrival = 0;
  bool warmup = false;         ///< one of the turns Scheduler::mark_warmup chose
  int64_t prefill_tokens = 0;  ///< set at admission: tokens the forward pass must process
  int64_t output_tokens = 0;   ///< set at admission: tokens to decode (>= 1)
  int64_t prefilled = 0;       ///< progress
  int64_t decoded = 0;         ///< output tokens produced so far
};

/// One sequence's share of a step.
struct StepItem {
  RequestId request = 0;
  int64_t tokens = 0;    ///< tokens fed this step (a prefill chunk, or 1 for decode)
  bool prefill = false;  ///< a prefill chunk (else a decode token)
  bool emits = false;    ///< the step produces an output token for this request
};

class Scheduler {
 public:
  /// `turns[s]` = number of turns of session s (sessions are 0..n-1). Arrival times of the
  /// sessions' first turns are drawn here (poisson_arrivals).
  Scheduler(SchedConfig cfg, std::vector<int> turns);

  const SchedConfig& config() const { return cfg_; }
  /// Earliest arrival not yet released (+inf when none is known).
  double next_arrival() const;
  /// Moves every request that has arrived by `now` into the waiting queue (arrival order).
  void advance(double now);
  /// All turns of all sessions are done.
  bool finished() const { return done_ == total_; }
  /// Turns finished so far, and in all.
  int64_t done() const { return done_; }
  int64_t total() const { return total_; }

  /// Waiting requests, head first.
  const std::deque<Request>& waiting() const { return waiting_; }
  /// Admitted requests, admission order.
  const std::vector<Request>& running() const { return running_; }
  /// A running request by id (nullptr if not running).
  const Request* find_running(RequestId id) const;
  /// Whether another request may be admitted (max_batch not reached).
  bool can_admit() const { return static_cast<int>(running_.size()) < cfg_.max_batch; }
  /// How many more requests max_batch admits now.
  int free_slots() const { return cfg_.max_batch - static_cast<int>(running_.size()); }
  /// Admits the head of the waiting queue with its workload (the engine decided it could
  /// reserve its KV blocks). prefill_tokens >= 1, output_tokens >= 1.
  Request admit_head(int64_t prefill_tokens, int64_t output_tokens);

  /// Ends request `id` after `n` (>= 1) output tokens at most (a stop token was produced).
  void limit_output(RequestId id, int64_t n);
  /// Restarts request `id`'s prefill with `prefill_tokens` tokens (its loaded history was
  /// unusable and is recomputed); nothing decoded so far counts.
  void restart_prefill(RequestId id, int64_t prefill_tokens);

  /// The sessions of the look-ahead window: waiting requests (head first), then sessions
  /// whose next turn is known to arrive later (by time), at most config().lookahead.
  std::vector<SessionId> lookahead() const;
  /// Changes whenever the waiting queue or the known future arrivals change (and so may the
  /// look-ahead window); the engines recompute the window only then.
  uint64_t version() const { return version_; }

  /// The next step: first a decode token for every running request past prefill, then
  /// prefill chunks of the others in admission order, within max_batch_tokens (at least
  /// one token of prefill per step when nothing decodes). Empty when nothing runs.
  std::vector<StepItem> plan_step() const;
  /// Records that `items` ran and finished at `now`. Returns the requests that completed;
  /// their sessions' next turns are scheduled at now + think time.
  std::vector<Request> complete_step(const std::vector<StepItem>& items, double now);

  /// When turn `turn` of `session` arrives after turn `turn - 1`'s answer at `finish`: its think
  /// time is drawn from its own seed (the config's, the session, the turn), so a turn gets the
  /// same think time in every mode, whatever order the turns finish in.
  double turn_arrival(double finish, SessionId session, int turn) const;
  /// Marks the first `n` turns in trace order as warm-up: turns ordered by when they would
  /// arrive with no service time (the session's arrival plus the think times before them),
  /// ties by turn index, then session. The same turns in every mode, unlike the first n
  /// requests released (a faster mode releases later turns sooner).
  void mark_warmup(int64_t n);
  /// Whether turn `turn` of `session` is one of those mark_warmup chose (Request::warmup).
  bool is_warmup(SessionId session, int turn) const;

 private:
  struct Pending {
    double at;
    SessionId session;
    int turn;
  };
  /// Order of pending_: the later arrival first (ties: the larger session id).
  struct Later {
    bool operator()(const Pending& a, const Pending& b) const {
      return a.at != b.at ? a.at > b.at : a.session > b.session;
    }
  };
  void push_pending(Pending p);
  Request* running_ref(RequestId id);

  SchedConfig cfg_;
  std::vector<int> turns_;
  // Known future arrivals sorted latest first (the earliest at the back, popped in O(1)); the
  // look-ahead window reads them from the back, contiguous and in order, without sorting.
  std::vector<Pending> pending_;
  std::deque<Request> waiting_;
  std::vector<Request> running_;
  std::vector<double> session_arrival_;
  std::vector<size_t> turn_offset_;  ///< session s's turns at [turn_offset_[s], +turns_[s])
  std::vector<bool> warmup_;         ///< by turn_offset_[session] + turn; empty: none
  RequestId next_id_ = 0;
  uint64_t version_ = 0;
  int64_t done_ = 0, total_ = 0;
};

}  // namespace cb::sched
