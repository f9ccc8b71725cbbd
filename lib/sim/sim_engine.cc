// The engine loop on a virtual clock; see lib/engine/engine.cc and engine_run.cc for the
// real loop this mirrors step for step.
#include "lib/sim/sim_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "lib/core/error.h"

namespace cb::sim {

using engine::Mode;
using engine::overflow_drop;

struct SimEngine::Job {
  sched::Request req;
  uint64_t session = 0;
  metrics::TurnRecord rec;
  int64_t hist = 0, new_tokens = 0, output_target = 1, reused = 0, kv_len = 0, cap = 0;
  int64_t outputs = 0, blocks = 0;
  bool hit = false, restore_pending = false;
  store::TierKind tier = store::TierKind::Dram;
  SimStore::Hit entry;  // the lookup's hit: when each layer of the entry is in place
  double load_start = 0;
  int started = 0, buffer_layers = 0;
  std::vector<double> ready;  // per layer: when its KV is in the pool
};

SimEngine::SimEngine(const CostModel& cost, SimStore* store, engine::EngineConfig cfg,
                     int64_t max_context)
    : cost_(cost), store_(store), cfg_(std::move(cfg)) {
  ctx_ = engine::checked_window(cfg_, max_context);
  if (cfg_.mode != Mode::RE && store_ == nullptr) {
    throw make_error("SimEngine", "CA and OF modes need a store");
  }
  if (store_ != nullptr) {
    // The demotion budget's recompute time: the cost model's prefill of the tokens alone.
    store_->set_recompute_estimate([cost = cost_](int64_t tokens) {
      return cost.step_time({StepLoad{tokens, 0, true}});
    });
  }
  layers_ = cost_.shape().layers;
  blocks_ = engine::pool_blocks(cfg_, ctx_);
  free_blocks_ = blocks_;
}

SimEngine::~SimEngine() = default;

void SimEngine::block_on_store(double* stall) {
  const double back = store_->caller_blocked_until();
  if (back > now_) {
    *stall += back - now_;
    now_ = back;
  }
}

void SimEngine::check_clock() const {
  if (now_ < kMaxVirtualClockS) return;  // false for NaN too
  char b[64];
  std::snprintf(b, sizeof b, "%.6g s", now_);
  throw make_error("SimEngine",
                   std::string("the virtual clock reached ") + b + ", past the 4e9 s (127 years) " +
                       "up to which it resolves a microsecond",
                   "a step, load or save lasts implausibly long: check the hardware profile's "
                   "overheads, rates and latencies (and the trace's arrivals)");
}

void SimEngine::wait_save(uint64_t session, double* stall) {
  for (auto it = saving_.begin(); it != saving_.end();) {
    if (it->session != session) {
      ++it;
      continue;
    }
    if (it->commit_at > now_) {
      if (stall) *stall += it->commit_at - now_;
      now_ = it->commit_at;
    }
    store_->commit(it->session);
    it = saving_.erase(it);
  }
}

void SimEngine::poll_saves() {
  for (auto it = saving_.begin(); it != saving_.end();) {
    if (it->commit_at <= now_) {
      store_->commit(it->session);
      it = saving_.erase(it);
    } else {
      ++it;
    }
  }
  if (store_) store_->advance(now_);
}

void SimEngine::cut(uint64_t session, int64_t drop, double* stall) {
  Session& s = sessions_[session];
  if (store_) wait_save(session, stall);  // the store truncates committed entries only
  if (cfg_.mode == Mode::CA) {
    if (drop == s.context) {
      store_->erase(session);
    } else {
      store_->truncate(session, drop, now_);
      block_on_store(stall);  // an unaligned truncation rewrites the entry on this thread
    }
  } else if (cfg_.mode == Mode::OF) {
    store_->erase(session);
  }
  s.context -= drop;
}

void SimEngine::cut_on_arrival(const std::vector<engine::SessionInput>& sessions) {
  for (const sched::Request& r : engine::arrivals_since(*sched_, &seen_)) {
    const uint64_t id = sessions[r.session].id;
    const Session& s = sessions_[id];
    const engine::TurnInput& in = sessions[r.session].turns[static_cast<size_t>(r.turn)];
    const int64_t drop =
        engine::turn_drop(s.context, static_cast<int64_t>(in.ids.size()) + (s.pending ? 1 : 0),
                          in.output_tokens, ctx_, cfg_);
    if (engine::cuts_on_arrival(cfg_.mode, drop, s.context, cfg_.truncate_align)) {
      cuts_due_[id] = drop;
    }
  }
  for (auto it = cuts_due_.begin(); it != cuts_due_.end();) {
    const uint64_t id = it->first;
    if (std::any_of(saving_.begin(), saving_.end(),
                    [id](const Saving& sv) { return sv.session == id; })) {
      ++it;  // its save has not committed: the store truncates committed entries only
      continue;
    }
    Session& s = sessions_[id];
    cut(id, it->second, &s.cut_stall);
    s.cut_tokens = it->second;
    it = cuts_due_.erase(it);
  }
}

int SimEngine::read_buffer_for(const Job& j) const {
  if (!cfg_.preload) return 0;
  if (cfg_.read_buffer_layers >= 0) return std::min(cfg_.read_buffer_layers, layers_);
  // The paper's S_buf rule with the model's own rates: per-layer load of the history versus
  // per-layer prefill of the new tokens. The real engine sizes the load from the whole
  // history (it picks the buffer before the load says how many tokens hit): the two differ
  // on partial hits only.
  const double t_load = store_->layer_seconds(j.tier, j.reused);
  const double t_pref = cost_.layer_time({{j.new_tokens, j.reused, false}});
  if (t_load <= t_pref) return 0;
  return static_cast<int>(std::ceil(layers_ * (t_load - t_pref) / t_load));
}

void SimEngine::start_layers(Job& j, int n) {
  for (; j.started < n; ++j.started) {
    j.ready[static_cast<size_t>(j.started)] = store_->load_layer(
        j.tier, j.reused, std::max(now_, j.entry.layer_ready(j.started, layers_)));
  }
}

std::unique_ptr<SimEngine::Job> SimEngine::prepare(const sched::Request& r, int64_t message_tokens,
                                                   int64_t output_tokens, engine::RunResult* res) {
  auto job = std::make_unique<Job>();
  Job& j = *job;
  j.req = r;
  j.session = r.session;
  Session& s = sessions_[j.session];
  const int64_t n = message_tokens + (s.pending ? 1 : 0);
  if (n <= 0) throw make_error("SimEngine", "a turn has no input tokens");
  const engine::TurnFit f = engine::fit_turn(n, output_tokens, ctx_);
  j.new_tokens = f.new_tokens;
  j.output_target = f.output_target;
  if (f.clipped) ++res->clipped_turns;
  // A cut made when the turn arrived (cut_on_arrival), and one still due: made here.
  j.rec.truncated_tokens = s.cut_tokens;
  j.rec.save_stall_s = s.cut_stall;
  s.cut_tokens = 0;
  s.cut_stall = 0;
  cuts_due_.erase(j.session);
  const int64_t hist = s.context;
  const int64_t over = hist + j.new_tokens + j.output_target - ctx_;
  if (over > 0) {
    const int64_t drop = overflow_drop(hist, over, cfg_.truncate_ratio, cfg_.truncate_align);
    cut(j.session, drop, &j.rec.save_stall_s);
    j.rec.truncated_tokens += drop;
  }
  j.hist = s.context;
  j.cap = j.hist + j.new_tokens + j.output_target;
  j.rec.session = j.session;
  j.rec.turn = r.turn;
  j.rec.warmup = r.warmup;
  j.rec.arrival_s = r.arrival;
  j.rec.history_tokens = j.hist;
  j.rec.new_tokens = j.new_tokens;
  j.rec.tier = j.hist == 0 ? "none" : "miss";
  j.ready.assign(static_cast<size_t>(layers_), 0);
  if (cfg_.mode != Mode::RE && j.hist > 0) {
    const SimStore::Hit h = store_->lookup(j.session, j.hist, now_);
    if (h.hit) {
      j.hit = true;
      j.reused = h.tokens;
      j.tier = h.tier;
      j.entry = h;
      j.rec.tier = store::tier_name(h.tier);
      j.load_start = now_;
      j.buffer_layers = read_buffer_for(j);  // started after the step's admissions
    }
  }
  j.rec.reused_tokens = j.reused;
  j.rec.recomputed_tokens = j.hist - j.reused;
  j.rec.bytes_loaded = static_cast<uint64_t>(j.reused) * 2u *
                       static_cast<uint64_t>(layers_ * cost_.shape().kv_dim) *
                       static_cast<uint64_t>(cost_.profile().kv_bytes_per_element);
  return job;
}

bool SimEngine::admit(Job& j, double* stall) {
  *stall = 0;
  j.blocks = (j.cap + cfg_.block_size - 1) / cfg_.block_size;
  if (j.blocks > free_blocks_) return false;
  free_blocks_ -= j.blocks;
  j.kv_len = j.reused;
  if (j.reused == 0) return true;
  if (j.started == 0) j.load_start = now_;
  if (cfg_.preload) {  // the rest of its layers start with the batch's (start_batch_loads)
    j.restore_pending = true;
    return true;
  }
  start_layers(j, layers_);
  const double done = j.ready.back();
  if (done > now_) {
    *stall = done - now_;
    now_ = done;
  }
  j.rec.preload_stall_s += *stall;
  j.rec.load_s = now_ - j.load_start;
  return true;
}

void SimEngine::start_batch_loads(const std::vector<Job*>& jobs) {
  for (int l = 1; l <= layers_; ++l) {  // layer-major, as lib/engine's start_batch_loads
    for (Job* j : jobs) start_layers(*j, l);
  }
}

void SimEngine::start_read_buffers() {
  // As lib/engine's: the waiting jobs' read buffers, behind the admitted jobs' loads.
  std::vector<Job*> waiting;
  int most = 0;
  for (const sched::Request& r : sched_->waiting()) {
    const auto it = jobs_.find(r.id);
    if (it == jobs_.end()) break;
    Job& j = *it->second;
    if (j.buffer_layers > j.started) {
      if (j.started == 0) j.load_start = now_;  // as lib/engine: its load starts now
      waiting.push_back(&j);
      most = std::max(most, j.buffer_layers);
    }
  }
  for (int l = 1; l <= most; ++l) {
    for (Job* j : waiting) {
      if (l <= j->buffer_layers) start_layers(*j, l);
    }
  }
}

void SimEngine::run_step(const std::vector<sched::StepItem>& items, engine::RunResult* res) {
  std::vector<StepLoad> loads;
  std::vector<Job*> jobs;
  bool prefill = false, restoring = false;
  int64_t fed = 0, measured_fed = 0;  // the step's tokens, and those of measured turns
  for (const sched::StepItem& it : items) {
    Job& j = *jobs_.at(it.request);
    jobs.push_back(&j);
    loads.push_back({it.tokens, j.kv_len, true});  // the engine computes logits for every sequence
    prefill = prefill || it.prefill;
    fed += it.tokens;
    if (!j.rec.warmup) measured_fed += it.tokens;
    restoring = restoring || j.restore_pending;
  }
  const double step = cost_.step_time(loads);
  double dt = step;
  if (restoring) {  // layer by layer: compute of layer l waits for every job's layer l
    const double lt = cost_.layer_time(loads);
    double t = now_;
    for (int l = 0; l < layers_; ++l) {
      for (Job* j : jobs) {
        if (!j->restore_pending) continue;
        const double w = std::max(0.0, j->ready[static_cast<size_t>(l)] - t);
        j->rec.preload_stall_s += w;
        t += w;
        if (l == layers_ - 1) {
          j->restore_pending = false;
          j->rec.load_s = j->ready.back() - j->load_start;
        }
      }
      t += lt;
    }
    dt = (t - now_) + (step - layers_ * lt);
  }
  now_ += dt;
  ++res->steps;
  const double counted = dt * metrics::step_share(measured_fed, fed);  // as lib/engine
  res->totals.gpu_time_s += counted;
  if (prefill) res->totals.prefill_time_s += counted;
  for (size_t i = 0; i < items.size(); ++i) {
    Job& j = *jobs[i];
    j.kv_len += items[i].tokens;
    if (!items[i].emits) continue;
    if (j.outputs == 0) j.rec.first_token_s = now_;
    ++j.outputs;
    j.rec.token_times_s.push_back(now_);
  }
  for (const sched::Request& r : sched_->complete_step(items, now_)) {
    finish(*jobs_.at(r.id), res);
    jobs_.erase(r.id);
  }
}

void SimEngine::finish(Job& j, engine::RunResult* res) {
  j.rec.finish_s = j.rec.token_times_s.empty() ? now_ : j.rec.token_times_s.back();
  j.rec.output_tokens = j.outputs;
  free_blocks_ += j.blocks;
  Session& s = sessions_[j.session];
  s.context = j.hist + j.new_tokens + j.outputs - 1;
  s.pending = true;
  if (cfg_.mode != Mode::RE) {
    if (j.hit) store_->unpin(j.session);        // the load's pin lasts the turn, as in lib/store
    wait_save(j.session, &j.rec.save_stall_s);  // as lib/engine: the previous turn's save
    // As lib/engine: the new entry appends to the old one, or supersedes it now (erased
    // before the save reserves), keeping the session's first insertion time (FIFO's order).
    const double commit = store_->save(j.session, s.context, now_, -1, true, cfg_.append_saves);
    block_on_store(&j.rec.save_stall_s);
    if (commit < 0) {
      ++res->save_failures;
    } else {
      j.rec.bytes_saved = static_cast<uint64_t>(s.context - store_->shared_tokens(j.session)) * 2u *
                          static_cast<uint64_t>(layers_ * cost_.shape().kv_dim) *
                          static_cast<uint64_t>(cost_.profile().kv_bytes_per_element);
      if (cfg_.async_save) {
        saving_.push_back({j.session, commit});
      } else {
        if (commit > now_) {
          j.rec.save_stall_s += commit - now_;
          now_ = commit;
        }
        store_->commit(j.session);
      }
    }
  }
  j.rec.done_s = now_;  // as lib/engine: after a synchronous save or the store's waits
  res->records.push_back(std::move(j.rec));
}

engine::RunResult SimEngine::run(const std::vector<engine::SessionInput>& sessions,
                                 const engine::ProgressFn& progress) {
  engine::RunResult res;
  std::vector<int> turns;
  for (const auto& s : sessions) turns.push_back(static_cast<int>(s.turns.size()));
  engine::check_warmup(cfg_, turns);
  sched::Scheduler sched(cfg_.sched, turns);
  sched.mark_warmup(cfg_.warmup_turns);
  sched_ = &sched;
  now_ = 0;
  seen_ = -1;
  cuts_due_.clear();
  std::vector<sched::SessionId> last_lookahead;
  uint64_t lookahead_version = ~0ull;
  int idle_in_place = 0;  // idle rounds in a row that did not move the clock
  while (!sched.finished()) {
    check_clock();
    sched.advance(now_);
    if (store_) poll_saves();
    cut_on_arrival(sessions);  // before the prefetches, which then read only what is kept
    // As lib/engine: write-backs for the entries saved or demoted since the last plan.
    if (store_ != nullptr && cfg_.mode != Mode::RE) store_->write_back(now_);
    // As lib/engine: beyond preload_jobs, those a step could admit now (free slots, in order
    // while the KV pool could reserve them).
    const int preload = std::max(cfg_.preload_jobs, 1);
    int64_t room = free_blocks_;
    int ahead = 0;
    for (const sched::Request& r : sched.waiting()) {
      if (ahead >= preload && (ahead >= sched.free_slots() || room <= 0)) break;
      ++ahead;
      auto it = jobs_.find(r.id);
      if (it == jobs_.end()) {
        sched::Request sr = r;
        sr.session = sessions[r.session].id;
        const engine::TurnInput& in = sessions[r.session].turns[static_cast<size_t>(r.turn)];
        it = jobs_
                 .emplace(r.id,
                          prepare(sr, static_cast<int64_t>(in.ids.size()), in.output_tokens, &res))
                 .first;
      }
      room -= (it->second->cap + cfg_.block_size - 1) / cfg_.block_size;
    }
    // The look-ahead goes to the store after the prepares: their loads pin the entries they
    // read, so the store does not fetch those a second time (docs/design.md, the serving loop).
    if (store_ != nullptr && cfg_.mode != Mode::RE && sched.version() != lookahead_version) {
      lookahead_version = sched.version();
      std::vector<sched::SessionId> la = sched.lookahead();
      for (auto& s : la) s = sessions[s].id;
      if (la != last_lookahead) {
        store_->prefetch(la, now_);
        last_lookahead = std::move(la);
      }
    }
    // As lib/engine: a plan whose fetch found no room is made again once room may have come.
    if (store_ != nullptr && cfg_.mode != Mode::RE && store_->prefetch_retry_due()) {
      store_->retry_prefetch(now_);
    }
    std::vector<Job*> admitted;  // whose loads start together, layer by layer
    while (sched.can_admit() && !sched.waiting().empty()) {
      auto it = jobs_.find(sched.waiting().front().id);
      double stall = 0;
      if (it == jobs_.end() || !admit(*it->second, &stall)) break;
      Job& j = *it->second;
      if (j.restore_pending) admitted.push_back(&j);
      if (!j.rec.warmup) {
        res.totals.gpu_time_s += stall;
        res.totals.prefill_time_s += stall;
      }
      j.rec.start_s = now_;
      sched.admit_head(j.hist - j.reused + j.new_tokens, j.output_target);
    }
    start_batch_loads(admitted);
    start_read_buffers();
    const std::vector<sched::StepItem> items = sched.plan_step();
    if (items.empty()) {
      if (!sched.waiting().empty() && jobs_.count(sched.waiting().front().id)) {
        throw make_error("SimEngine", "a request does not fit the KV pool even when it is empty",
                         "raise --kv-blocks or lower --ctx");
      }
      const double next = sched.next_arrival();
      const double before = now_;
      // lib/engine's idle_until waits for the saves in flight and then plans a blocked
      // prefetch again, if they all land before the next arrival: the clock stops there too.
      double landing = HUGE_VAL;
      if (store_ != nullptr && store_->prefetch_blocked() && !saving_.empty()) {
        landing = now_;
        for (const Saving& sv : saving_) landing = std::max(landing, sv.commit_at);
        if (landing <= now_) landing = HUGE_VAL;
      }
      if (std::isfinite(next) && next > now_) {
        now_ = std::min(next, landing);
      } else if (!saving_.empty()) {
        now_ = std::max(now_, saving_.front().commit_at);
      } else if (!std::isfinite(next)) {
        throw make_error("SimEngine", "nothing to run and nothing arriving (internal error)");
      }
      // Every idle round should move the clock to an arrival or a commit (poll_saves then
      // commits it); one that cannot (a time that is NaN, or that adding to the clock does not
      // change) would spin here forever, with no step to report progress after.
      idle_in_place = now_ > before ? 0 : idle_in_place + 1;
      if (idle_in_place > 16) {
        char b[160];
        std::snprintf(b, sizeof b,
                      "the virtual clock stopped advancing at %.6g s with %zu requests waiting "
                      "and %zu saves in flight",
                      now_, sched.waiting().size(), saving_.size());
        throw make_error("SimEngine", b,
                         "check the hardware profile's overheads, rates and latencies");
      }
      if (progress) progress(sched.done(), sched.total());  // an interrupt stops an idle run too
      continue;
    }
    idle_in_place = 0;
    run_step(items, &res);
    if (progress) progress(sched.done(), sched.total());
  }
  check_clock();
  for (const Saving& s : saving_) store_->commit(s.session);
  saving_.clear();
  sched_ = nullptr;
  res.totals.duration_s = metrics::measured_duration(res.records);
  if (store_ != nullptr) res.totals.tiers = store_->tier_totals();
  return res;
}

}  // namespace cb::sim
