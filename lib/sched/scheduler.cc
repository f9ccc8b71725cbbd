// Job queue, admission and iteration-level batching.
#include "lib/sched/scheduler.h"

#include <algorithm>
#include <string>

#include "lib/core/error.h"

namespace cb::sched {

Scheduler::Scheduler(SchedConfig cfg, std::vector<int> turns)
    : cfg_(cfg), turns_(std::move(turns)) {
  if (cfg_.max_batch < 1) {
    throw make_error("--max-batch", "must be at least 1, got " + std::to_string(cfg_.max_batch));
  }
  if (cfg_.max_batch_tokens < 1) {
    throw make_error("--max-batch-tokens",
                     "must be at least 1, got " + std::to_string(cfg_.max_batch_tokens));
  }
  if (cfg_.max_batch_tokens < cfg_.max_batch) {
    // Every running sequence that decodes takes one token of a step: with fewer, the last
    // ones admitted would wait for the first to finish, and prefills behind all of them.
    throw make_error("--max-batch-tokens",
                     std::to_string(cfg_.max_batch_tokens) + " is less than --max-batch " +
                         std::to_string(cfg_.max_batch) +
                         ": every running sequence decodes one token a step",
                     "raise --max-batch-tokens to at least --max-batch, or lower --max-batch");
  }
  const auto at = poisson_arrivals(turns_.size(), cfg_.rate, cfg_.seed);
  session_arrival_ = at;
  turn_offset_.resize(turns_.size());
  for (size_t s = 0, off = 0; s < turns_.size(); ++s) {
    turn_offset_[s] = off;
    off += static_cast<size_t>(std::max(turns_[s], 0));
  }
  for (size_t s = 0; s < turns_.size(); ++s) {
    total_ += std::max(turns_[s], 0);
    if (turns_[s] > 0) pending_.push_back({at[s], static_cast<SessionId>(s), 0});
  }
  // Latest first, sorted once (inserting one by one would move the whole vector each time).
  std::sort(pending_.begin(), pending_.end(), Later());
}

void Scheduler::push_pending(Pending p) {
  ++version_;
  // Latest first: insert before the first element that is earlier than p.
  const auto at = std::upper_bound(pending_.begin(), pending_.end(), p, Later());
  pending_.insert(at, p);
}

double Scheduler::next_arrival() const {
  return pending_.empty() ? std::numeric_limits<double>::infinity() : pending_.back().at;
}

void Scheduler::advance(double now) {
  while (!pending_.empty() && pending_.back().at <= now) {
    const Pending p = pending_.back();
    pending_.pop_back();
    Request r;
    r.id = next_id_++;
    r.session = p.session;
    r.turn = p.turn;
    r.arrival = p.at;
    r.warmup = is_warmup(p.session, p.turn);
    waiting_.push_back(r);
    ++version_;
  }
}

const Request* Scheduler::find_running(RequestId id) const {
  for (const Request& r : running_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

Request* Scheduler::running_ref(RequestId id) {
  for (Request& r : running_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

Request Scheduler::admit_head(int64_t prefill_tokens, int64_t output_tokens) {
  if (waiting_.empty() || !can_admit() || prefill_tokens < 1 || output_tokens < 1) {
    throw make_error("Scheduler::admit_head", "nothing admissible (internal error)");
  }
  Request r = waiting_.front();
  waiting_.pop_front();
  ++version_;
  r.prefill_tokens = prefill_tokens;
  r.output_tokens = output_tokens;
  running_.push_back(r);
  return r;
}

void Scheduler::limit_output(RequestId id, int64_t n) {
  Request* r = running_ref(id);
  if (r == nullptr) throw make_error("Scheduler::limit_output", "unknown request");
  r->output_tokens = std::min(r->output_tokens, std::max<int64_t>(n, 1));
}

void Scheduler::restart_prefill(RequestId id, int64_t prefill_tokens) {
  Request* r = running_ref(id);
  if (r == nullptr || prefill_tokens < 1) {
    throw make_error("Scheduler::restart_prefill", "unknown request or empty prefill");
  }
  r->prefill_tokens = prefill_tokens;
  r->prefilled = 0;
  r->decoded = 0;
}

std::vector<SessionId> Scheduler::lookahead() const {
  std::vector<SessionId> out;
  out.reserve(std::min(cfg_.lookahead, waiting_.size() + pending_.size()));
  for (const Request& r : waiting_) {
    if (out.size() >= cfg_.lookahead) return out;
    out.push_back(r.session);
  }
  for (auto it = pending_.rbegin(); it != pending_.rend() && out.size() < cfg_.lookahead; ++it) {
    out.push_back(it->session);
  }
  return out;
}

std::vector<StepItem> Scheduler::plan_step() const {
  std::vector<StepItem> items;
  int64_t budget = cfg_.max_batch_tokens;
  for (const Request& r : running_) {
    if (r.prefilled < r.prefill_tokens || budget < 1) continue;
    items.push_back({r.id, 1, false, true});
    --budget;
  }
  for (const Request& r : running_) {
    if (r.prefilled >= r.prefill_tokens) continue;
    if (budget < 1) {
      if (!items.empty()) break;
      budget = 1;
    }
    const int64_t n = std::min(budget, r.prefill_tokens - r.prefilled);
    items.push_back({r.id, n, true, r.prefilled + n == r.prefill_tokens});
    budget -= n;
  }
  return items;
}

std::vector<Request> Scheduler::complete_step(const std::vector<StepItem>& items, double now) {
  for (const StepItem& it : items) {
    Request* r = running_ref(it.request);
    if (r == nullptr) throw make_error("Scheduler::complete_step", "unknown request");
    if (it.prefill) r->prefilled += it.tokens;
    if (it.emits) ++r->decoded;
  }
  std::vector<Request> finished;
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->decoded >= it->output_tokens) {
      finished.push_back(*it);
      ++done_;
      if (it->turn + 1 < turns_[it->session]) {
        push_pending({turn_arrival(now, it->session, it->turn + 1), it->session, it->turn + 1});
      }
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return finished;
}

double Scheduler::turn_arrival(double finish, SessionId session, int turn) const {
  if (cfg_.think.kind == ThinkTime::Kind::Zero) return finish;
  // splitmix64 of (seed, session, turn): independent streams per turn.
  uint64_t x = cfg_.seed ^ 0x9e3779b97f4a7c15ull;
  for (const uint64_t v : {static_cast<uint64_t>(session), static_cast<uint64_t>(turn)}) {
    x += v * 0xbf58476d1ce4e5b9ull + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  std::mt19937_64 rng(x);
  return cfg_.think.next_arrival(finish, rng);
}

void Scheduler::mark_warmup(int64_t n) {
  warmup_.clear();
  if (n <= 0) return;
  struct Nominal {
    double at;
    int turn;
    SessionId session;
  };
  std::vector<Nominal> all;
  for (size_t s = 0; s < turns_.size(); ++s) {
    double at = session_arrival_[s];
    for (int t = 0; t < turns_[s]; ++t) {
      if (t > 0) at = turn_arrival(at, static_cast<SessionId>(s), t);
      all.push_back({at, t, static_cast<SessionId>(s)});
    }
  }
  const size_t k = std::min(all.size(), static_cast<size_t>(n));
  const auto earlier = [](const Nominal& a, const Nominal& b) {
    if (a.at != b.at) return a.at < b.at;
    return a.turn != b.turn ? a.turn < b.turn : a.session < b.session;
  };
  std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), earlier);
  warmup_.assign(all.size(), false);
  for (size_t i = 0; i < k; ++i) {
    warmup_[turn_offset_[all[i].session] + static_cast<size_t>(all[i].turn)] = true;
  }
}

bool Scheduler::is_warmup(SessionId session, int turn) const {
  if (warmup_.empty() || session >= turns_.size() || turn < 0 || turn >= turns_[session]) {
    return false;
  }
  return warmup_[turn_offset_[session] + static_cast<size_t>(turn)];
}

}  // namespace cb::sched
