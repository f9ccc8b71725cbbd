#include "lib/sim/sim_store.h"

#include <algorithm>
#include <cmath>

#include "lib/core/error.h"
#include "lib/engine/policy_advisor.h"
#include "lib/policy/placement.h"
#include "lib/store/size_parse.h"

namespace cb::sim {

using store::TierKind;

template <class Take>
double Link::fill(double at, double d, Take take) const {
  double t = std::max(at, floor_);
  // The first reservation that ends after t (the one before may still cover t).
  auto it = busy_.upper_bound(t);
  if (it != busy_.begin() && std::prev(it)->second > t) --it;
  while (true) {
    if (it != busy_.end() && it->first <= t) {
      t = std::max(t, it->second);
      ++it;
      continue;
    }
    // Done before the next reservation; within rounding of filling the gap exactly, done
    // at its start (the remainder would otherwise go after the whole reservation).
    if (it == busy_.end() || d <= it->first - t + 1e-12 * std::max(1.0, std::fabs(t))) {
      const double end = it == busy_.end() ? t + d : std::min(t + d, it->first);
      take(t, end);
      return end;
    }
    take(t, it->first);  // up to the next reservation, ends meeting exactly
    d -= it->first - t;
    t = it->first;
  }
}

double Link::completion(double at, double bytes) const {
  return fill(at, duration(bytes), [](double, double) {});
}

double Link::transfer(double at, double bytes) {
  const double d = duration(bytes);
  std::vector<std::pair<double, double>> pieces;
  const double done = fill(at, d, [&](double a, double b) { pieces.emplace_back(a, b); });
  last_start_ = pieces.front().first;
  for (auto [a, b] : pieces) {
    if (b <= a) continue;  // a zero-length transfer reserves nothing
    // Merge with the reservations it touches (pieces fill gaps exactly, so ends meet).
    auto next = busy_.lower_bound(a);
    if (next != busy_.begin() && std::prev(next)->second == a) {
      auto prev = std::prev(next);
      a = prev->first;
      busy_.erase(prev);
    }
    next = busy_.lower_bound(a);
    if (next != busy_.end() && next->first == b) {
      b = next->second;
      busy_.erase(next);
    }
    busy_.emplace(a, b);
  }
  busy_s_ += d;
  bytes_ += bytes;
  return done;
}

void Link::retire(double now) {
  floor_ = std::max(floor_, now);
  while (!busy_.empty() && busy_.begin()->second <= floor_) busy_.erase(busy_.begin());
}

SimStore::SimStore(SimStoreConfig cfg, int layers, uint64_t token_bytes)
    : cfg_(std::move(cfg)), layers_(layers), token_bytes_(token_bytes) {
  if (cfg_.chunk_bytes == 0 || token_bytes_ == 0 || token_bytes_ > cfg_.chunk_bytes) {
    throw make_error("--chunk-size",
                     "one token's K of one layer (" + std::to_string(token_bytes_) +
                         " bytes) must fit in a chunk",
                     "use a larger --chunk-size");
  }
  store::check_tier_budget("--hbm", cfg_.hbm_bytes, cfg_.chunk_bytes);
  store::check_tier_budget("--dram", cfg_.dram_bytes, cfg_.chunk_bytes);
  store::check_tier_budget("--ssd", cfg_.ssd_bytes, cfg_.chunk_bytes);
  tpc_ = cfg_.chunk_bytes / token_bytes_;
  cap_[0] = cfg_.hbm_bytes / cfg_.chunk_bytes;
  cap_[1] = cfg_.dram_bytes / cfg_.chunk_bytes;
  cap_[2] = cfg_.ssd_bytes / cfg_.chunk_bytes;
  for (int t = 0; t < 3; ++t) free_[t] = cap_[t];
  reserve_chunks_ = (cfg_.dram_reserve_bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes;
  if (!cfg_.advisor) cfg_.advisor = std::make_shared<store::LruAdvisor>();
  if (cfg_.indexed_decisions) {
    indexed_ = dynamic_cast<engine::PolicyAdvisor*>(cfg_.advisor.get());
    if (indexed_ != nullptr) base_ = indexed_->order_spec(0, 0, 0).base;
  }
}

uint64_t SimStore::chunks_for(int64_t tokens) const {
  return 2ull * static_cast<uint64_t>(layers_) *
         ((static_cast<uint64_t>(tokens) + tpc_ - 1) / tpc_);
}

double SimStore::payload_bytes(int64_t tokens) const {
  return static_cast<double>(tokens) * 2.0 * static_cast<double>(token_bytes_) *
         static_cast<double>(layers_);
}

double SimStore::payload_past(int64_t tokens, uint64_t chunks) const {
  return payload_bytes(tokens - std::min<int64_t>(tokens, static_cast<int64_t>(chunks * tpc_)));
}

store::EntryInfo SimStore::info(const Entry& e) const {
  return store::EntryInfo{e.session, e.tier,    e.chunks * cfg_.chunk_bytes,
                          e.tokens,  e.created, e.last_access,
                          e.accesses};
}

Link& SimStore::read_link(TierKind t) {
  return t == TierKind::Hbm ? cfg_.d2d : t == TierKind::Dram ? cfg_.h2d : cfg_.ssd_read;
}

double SimStore::stamp(double now) {
  last_stamp_ = std::max(now, last_stamp_ + 1e-6);  // policies compare microsecond ticks
  return last_stamp_;
}

SimStore::Hit SimStore::pin_hit(Entry& e, double now, double ready_at, TierKind tier,
                                double ready_from) {
  ++e.pins;
  ++e.accesses;
  e.last_access = stamp(now);
  sync(e);
  ++hits_[static_cast<int>(tier)];
  Hit h;
  h.hit = true;
  h.tier = tier;
  h.tokens = e.tokens;
  h.ready_at = std::max(now, ready_at);
  // Not clamped to `now`: a turn arriving mid-save finds its first layers already written (the
  // engine loads none before `now`).
  h.ready_from = ready_from < 0 ? h.ready_at : std::min(h.ready_at, ready_from);
  return h;
}

SimStore::Hit SimStore::lookup(store::SessionId session, int64_t history, double now) {
  auto p = pending_.find(session);
  if (p != pending_.end()) {  // in flight: lib/store's load waits for the writes
    const Entry& e = p->second;
    if (cfg_.ttl > 0 && now - e.last_access > cfg_.ttl && e.pins == 0) {
      erase(session);  // lib/store dooms an expired save in flight
      return Hit{};
    }
    if (e.tokens > history) return Hit{};
    return pin_hit(p->second, now, e.commit_at, e.tier, e.write_from);
  }
  auto it = index_.find(session);
  if (it == index_.end()) return Hit{};
  Entry& e = it->second;
  if (cfg_.ttl > 0 && now - e.last_access > cfg_.ttl && e.pins == 0) {
    erase_committed(session);
    return Hit{};
  }
  if (e.tokens > history) return Hit{};  // cannot happen for the engine's histories
  // A prefetch in flight: lib/store's entry stays on the SSD until its move lands, and a load
  // of it reads the SSD (never waiting for the move), so the hit is an SSD hit, now.
  // A demotion ahead of need in flight: the entry is still in HBM until the copy lands.
  if (e.moving_until > now) return pin_hit(e, now, now, e.demoting ? TierKind::Hbm : TierKind::Ssd);
  return pin_hit(e, now, e.moving_until, e.tier);
}

void SimStore::unpin(store::SessionId session) {
  auto p = pending_.find(session);
  if (p != pending_.end() && p->second.pins > 0) {
    --p->second.pins;
    return;
  }
  auto it = index_.find(session);
  if (it != index_.end() && it->second.pins > 0) {
    --it->second.pins;
    sync(it->second);
  }
}

double SimStore::load_layer(TierKind tier, int64_t tokens, double at) {
  const double bytes = static_cast<double>(tokens) * 2.0 * static_cast<double>(token_bytes_);
  Link& l = read_link(tier);
  const double before = l.busy_s();
  const double done = l.transfer(at, bytes);
  bytes_read_[static_cast<int>(tier)] += bytes;
  read_s_[static_cast<int>(tier)] += l.busy_s() - before;
  return done;
}

double SimStore::layer_seconds(TierKind tier, int64_t tokens) const {
  const Link& l = tier == TierKind::Hbm    ? cfg_.d2d
                  : tier == TierKind::Dram ? cfg_.h2d
                                           : cfg_.ssd_read;
  return l.duration(static_cast<double>(tokens) * 2.0 * static_cast<double>(token_bytes_));
}

void SimStore::erase(store::SessionId session) {
  drop_pending(session);  // lib/store drops a save in flight (its commit fails)
  erase_committed(session);
}

void SimStore::drop_pending(store::SessionId session) {
  auto p = pending_.find(session);
  if (p == pending_.end()) return;
  ++changes_;  // its space is freed
  // A save below owns the copy chunks it took (save_below); an append's shared chunks stay the
  // base's, and its pin on the base goes.
  const uint64_t shared = p->second.from_copy ? 0 : chunks_for(p->second.shared_tokens);
  free_[static_cast<int>(p->second.tier)] += p->second.chunks - shared;
  if (shared > 0) {
    auto b = index_.find(session);
    if (b != index_.end() && b->second.pins > 0) {
      --b->second.pins;
      sync(b->second);
    }
  }
  pending_.erase(p);
}

void SimStore::drop_copy(Entry& e) {
  if (e.copy_chunks == 0) return;
  free_[2] += e.copy_chunks;
  e.copy_chunks = e.copy_valid = 0;
  e.clean_until = e.clean_start = -1;  // nothing left to wait for
  with_copy_.erase(e.session);
  sync(e);
}

uint64_t SimStore::ssd_copy_chunks() const {
  uint64_t n = 0;
  for (store::SessionId id : with_copy_) n += index_.at(id).copy_chunks;
  return n;
}

void SimStore::erase_committed(store::SessionId session) {
  auto it = index_.find(session);
  if (it == index_.end()) return;
  ++changes_;
  drop_copy(it->second);
  unindex(it->second);
  free_[static_cast<int>(it->second.tier)] += it->second.chunks;
  in_tier_[static_cast<int>(it->second.tier)].erase(session);
  index_.erase(it);
}

void SimStore::truncate(store::SessionId session, int64_t drop, double now) {
  if (pending_.count(session)) return;  // lib/store: not before the commit lands
  auto it = index_.find(session);
  if (it == index_.end() || drop <= 0) return;
  blocked_until_ = now;
  Entry& e = it->second;
  if (cfg_.ttl > 0 && now - e.last_access > cfg_.ttl && e.pins == 0) {
    erase_committed(session);  // expired, as lookup() finds it (lib/store's truncate)
    return;
  }
  const int64_t n = e.tokens;
  if (drop >= n) {
    erase_committed(session);
    return;
  }
  const int64_t tpc = static_cast<int64_t>(tpc_);
  if (drop % tpc == 0) {  // whole chunks: a metadata edit in place
    const uint64_t c = chunks_for(n - drop);
    free_[static_cast<int>(e.tier)] += e.chunks - c;
    e.chunks = c;
    e.tokens = n - drop;
    // The SSD copy loses the same leading chunks and keeps the rest (lib/store's
    // cut_copy_locked): its chunks past the cut still hold the entry's bytes.
    if (e.copy_chunks > 0) {
      const uint64_t lanes = 2ull * static_cast<uint64_t>(layers_);
      const uint64_t k = static_cast<uint64_t>(drop / tpc), nt = e.copy_chunks / lanes;
      if (e.copy_valid <= k || nt <= k) {
        drop_copy(e);  // nothing valid past the cut
      } else {
        free_[2] += k * lanes;
        e.copy_chunks -= k * lanes;
        e.copy_valid -= k;
      }
    }
    sync(e);
    return;
  }
  drop_copy(e);  // unaligned: rewritten below, no chunk keeps its bytes
  // Unaligned: read, cut, rewrite as a new entry (from the fastest tier with room) that
  // keeps the first insertion time, as lib/store's rewrite does.
  const TierKind t = e.tier;
  const double created = e.created;
  const double read_done = load_layer(t, n * layers_, now);
  erase_committed(session);
  blocking_ = true;  // lib/store's rewrite reads, saves and waits for the commit in the call
  const double c = save(session, n - drop, read_done, created);
  blocking_ = false;
  blocked_until_ = std::max(blocked_until_, c);
  if (c >= 0) commit(session);
}

double SimStore::write(TierKind tk, double bytes, double now, double* started) {
  const int t = static_cast<int>(tk);
  Link& l = tk == TierKind::Hbm ? cfg_.d2d : cfg_.d2h;
  double before = l.busy_s();
  double done = l.transfer(now, bytes);
  *started = l.last_start();
  write_s_[t] += l.busy_s() - before;
  if (tk == TierKind::Ssd) {
    before = cfg_.ssd_write.busy_s();
    done = cfg_.ssd_write.transfer(done, bytes);
    *started = cfg_.ssd_write.last_start();
    write_s_[t] += cfg_.ssd_write.busy_s() - before;
  }
  bytes_written_[t] += bytes;
  return done;
}

double SimStore::try_append(store::SessionId session, int64_t tokens, double now, double t_access,
                            double created) {
  auto it = index_.find(session);
  if (it == index_.end()) return -1;
  {
    Entry& b = it->second;
    int fastest = 0;
    while (!present(static_cast<TierKind>(fastest))) ++fastest;
    if (b.moving_until >= 0 || static_cast<int>(b.tier) != fastest || b.tokens > tokens) return -1;
    if (cfg_.ttl > 0 && now - b.last_access > cfg_.ttl) return -1;  // expired: a miss anyway
    ++b.pins;  // neither evicted nor moved while the save shares its chunks
    sync(b);
  }
  // lib/store extends a memory tier's last partial chunk in place (the engines never run two
  // appends of one session at once, which lib/store would not do in place).
  const auto shared_from = [&](const Entry& b) {
    const bool in_place = b.tokens % static_cast<int64_t>(tpc_) != 0 && b.tier != TierKind::Ssd;
    return in_place ? b.tokens
                    : static_cast<int64_t>(static_cast<uint64_t>(b.tokens) / tpc_ * tpc_);
  };
  const uint64_t n = chunks_for(tokens);
  if (shared_from(it->second) == 0) {  // nothing to share
    --it->second.pins;
    sync(it->second);
    return -1;
  }
  if (cfg_.save_admission && admits_below(session, n - chunks_for(shared_from(it->second)), now)) {
    const double done = save_below(session, tokens, created, t_access);
    if (done >= 0) return done;
  }
  Entry& b = index_.at(session);
  const int64_t from = shared_from(b);
  const TierKind tk = b.tier;
  if (!reserve(tk, n - chunks_for(from), false, now, true)) {
    --index_.at(session).pins;
    sync(index_.at(session));
    return -1;
  }
  return start_pending(session, tk, tokens, from, created, t_access);
}

bool SimStore::admits_below(store::SessionId session, uint64_t new_chunks, double now) {
  const Entry& b = index_.at(session);
  const TierKind t = b.tier;
  const int ti = static_cast<int>(t);
  const uint64_t keep = t == TierKind::Dram ? reserve_chunks_ : 0;
  if (t != TierKind::Dram || !present(TierKind::Ssd) || free_[ti] >= new_chunks + keep) {
    return false;
  }
  settle(t);  // as reserve() does
  if (free_[ti] >= new_chunks + keep) return false;
  const uint64_t needed = (new_chunks + keep - free_[ti]) * cfg_.chunk_bytes;
  // The base, pinned by its append, competes.
  const std::vector<store::Victim> v = choose_victims(t, needed, now, &b);
  return !v.empty() && v.front().session == session && !v.front().drop;
}

double SimStore::save_below(store::SessionId session, int64_t tokens, double created,
                            double t_access) {
  const uint64_t lanes = 2ull * static_cast<uint64_t>(layers_);
  uint64_t share = 0;  // whole token chunks the base's SSD copy holds (a partial last one grows)
  {
    Entry& b = index_.at(session);
    // lib/store waits for a write-back of it that is running, as a demotion does.
    if (blocking_ && b.clean_until > blocked_until_) blocked_until_ = b.clean_until;
    if (b.copy_chunks > 0) share = std::min(b.copy_valid, static_cast<uint64_t>(b.tokens) / tpc_);
    b.copy_lent = true;  // not dropped to make the room below
    sync(b);
  }
  const bool room =
      reserve(TierKind::Ssd, chunks_for(tokens) - share * lanes, false, blocked_until_);
  Entry& b = index_.at(session);
  b.copy_lent = false;
  sync(b);
  if (!room) return -1;
  // The save takes the copy's shared chunks; the rest of the copy and the base go now.
  free_[2] += b.copy_chunks - share * lanes;
  b.copy_chunks = b.copy_valid = 0;
  with_copy_.erase(session);
  --b.pins;
  sync(b);
  erase_committed(session);
  ++admitted_below_;
  copy_reused_chunks_ += share * lanes;
  const double done = start_pending(session, TierKind::Ssd, tokens,
                                    static_cast<int64_t>(share * tpc_), created, t_access);
  pending_.at(session).from_copy = true;
  return done;
}

double SimStore::start_pending(store::SessionId session, TierKind tk, int64_t tokens,
                               int64_t shared_tokens, double created, double t_access) {
  Entry e;
  e.session = session;
  e.tier = tk;
  e.tokens = tokens;
  e.chunks = chunks_for(tokens);
  e.shared_tokens = shared_tokens;
  e.created = created;
  e.last_access = t_access;
  e.commit_at = write(tk, payload_bytes(tokens - shared_tokens), blocked_until_, &e.write_from);
  pending_[session] = e;
  return e.commit_at;
}

int64_t SimStore::shared_tokens(store::SessionId session) const {
  auto p = pending_.find(session);
  if (p == pending_.end()) return 0;
  return p->second.shared_tokens;
}

double SimStore::save(store::SessionId session, int64_t tokens, double now, double created,
                      bool replace_now, bool append) {
  if ((session & store::kCopyCandidate) != 0) {  // the decisions would read it as a copy's tag
    throw make_error(
        "sim store",
        "session id " + std::to_string(session) + " has bit 63 set, which tags an entry's SSD copy",
        "number sessions below 2^63 (traces number them from 0)");
  }
  // The caller's thread runs lib/store's begin_save: it is back when the settling and the
  // evictions are done, and the save's writes start then (blocked_until_).
  const bool outer = !blocking_;
  blocking_ = true;
  blocked_until_ = outer ? now : std::max(blocked_until_, now);
  const double done = save_blocking(session, tokens, created, replace_now, append);
  if (outer) blocking_ = false;
  return done;
}

double SimStore::save_blocking(store::SessionId session, int64_t tokens, double created,
                               bool replace_now, bool append) {
  const double now = blocked_until_;
  const double t_access = stamp(now);
  if (created < 0) {  // a re-save replacing the session's entry keeps its first insertion
    auto old = index_.find(session);
    created = old != index_.end() ? old->second.created : t_access;
  }
  // lib/store appends only to a committed entry (no save of the session in flight).
  if (append && !pending_.count(session)) {
    const double done = try_append(session, tokens, now, t_access, created);
    if (done >= 0) return done;
  }
  // As in lib/store, the replaced entry stays (a candidate for eviction) until the new one
  // commits (unless `replace_now`): both hold space meanwhile. A save still in flight is
  // superseded (dropped).
  if (replace_now) {
    erase(session);
  } else {
    drop_pending(session);
  }
  const uint64_t n = chunks_for(tokens);
  for (int t = 0; t < 3; ++t) {
    const auto tk = static_cast<TierKind>(t);
    if (!present(tk) || !reserve(tk, n, false, now, true)) continue;
    return start_pending(session, tk, tokens, 0, created, t_access);
  }
  return -1;
}

void SimStore::set_tier(Entry& e, TierKind t) {
  in_tier_[static_cast<int>(e.tier)].erase(e.session);
  e.tier = t;
  in_tier_[static_cast<int>(t)].insert(e.session);
  sync(e);
}

void SimStore::commit(store::SessionId session) {
  auto it = pending_.find(session);
  if (it == pending_.end()) return;
  ++changes_;
  auto b = index_.find(session);
  if (!it->second.from_copy && it->second.shared_tokens > 0 && b != index_.end()) {
    b->second.chunks -=
        chunks_for(it->second.shared_tokens);  // the shared chunks pass to the new entry
    Entry& base = b->second;
    if (base.copy_chunks > 0) {  // and the base's SSD copy of the whole ones unchanged
      const uint64_t whole = static_cast<uint64_t>(it->second.shared_tokens) / tpc_;
      it->second.copy_chunks = base.copy_chunks;
      it->second.copy_valid = std::min(base.copy_valid, whole);
      it->second.clean_until = base.clean_until;
      it->second.clean_start = base.clean_start;
      base.copy_chunks = base.copy_valid = 0;
      if (it->second.copy_valid == 0) drop_copy(it->second);
    }
  }
  erase_committed(session);  // the replaced entry, wherever it is now
  write_back_due_ = true;    // a new entry may be among the first to evict
  in_tier_[static_cast<int>(it->second.tier)].insert(session);
  Entry& e = index_[session] = it->second;
  pending_.erase(it);
  sync(e);
}

void SimStore::settle(TierKind t) {
  std::vector<store::SessionId> ids;
  for (const auto& [id, e] : pending_) {
    auto c = index_.find(id);
    if (e.tier == t || (c != index_.end() && c->second.tier == t)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());  // map order must not decide anything
  for (store::SessionId id : ids) {
    if (blocking_) blocked_until_ = std::max(blocked_until_, pending_.at(id).commit_at);
    commit(id);
  }
}

bool SimStore::reserve(TierKind t, uint64_t n, bool use_reserve, double now, bool settle) {
  const int ti = static_cast<int>(t);
  if (!present(t)) return false;
  const uint64_t keep = (t == TierKind::Dram && !use_reserve) ? reserve_chunks_ : 0;
  if (n + keep > cap_[ti]) return false;
  if (settle && free_[ti] < n + keep) this->settle(t);
  if (t == TierKind::Hbm && !demoting_.empty() && free_[ti] < n + keep) {
    // lib/store waits for the demotions ahead of need before it chooses victims.
    double last = now;
    for (const auto& d : demoting_) last = std::max(last, d.first);
    land_demotions(HUGE_VAL);
    for (store::SessionId s : moving_) {
      auto it = index_.find(s);
      if (it == index_.end() || !it->second.demoting) continue;
      it->second.moving_until = -1;  // landed: movable again, as in lib/store
      it->second.demoting = false;
      sync(it->second);
    }
    if (blocking_) blocked_until_ = std::max(blocked_until_, last);
    room_at_ = std::max(room_at_, last);
  }
  for (int round = 0; round < 8; ++round) {
    if (free_[ti] >= n + keep) {
      free_[ti] -= n;
      return true;
    }
    const uint64_t needed = (n + keep - free_[ti]) * cfg_.chunk_bytes;
    // On the SSD, copies compete (lib/store's reserve; store::kCopyCandidate).
    std::vector<std::pair<store::SessionId, bool>> victims;
    bool copies = false;
    for (const store::Victim& v : choose_victims(t, needed, now)) {
      auto it = index_.find(v.session);
      const bool copy = t == TierKind::Ssd && (v.session & store::kCopyCandidate) != 0 &&
                        (it == index_.end() || it->second.tier != t);
      if (copy) it = index_.find(v.session & ~store::kCopyCandidate);
      if (it == index_.end()) continue;
      if (copy) {
        if (it->second.tier != t && it->second.copy_chunks > 0) {
          drop_copy(it->second);
          copies = true;
        }
        continue;
      }
      if (it->second.tier != t || !movable(it->second)) continue;
      it->second.pins++;  // chosen: not chosen again while the cascade runs
      sync(it->second);
      victims.emplace_back(v.session, v.drop);
    }
    if (victims.empty() && !copies) return false;
    for (auto& [s, drop] : victims) evict(s, drop, now, settle);
  }
  return false;
}

void SimStore::evict(store::SessionId s, bool drop, double now, bool blocking) {
  Entry& e = index_.at(s);
  ++changes_;  // as lib/store counts an eviction or a drop (prefetch_retry_due)
  --e.pins;
  sync(e);
  const TierKind src = e.tier;
  TierKind lower = src;
  for (int i = static_cast<int>(src) + 1; i < 3; ++i) {
    if (present(static_cast<TierKind>(i))) {
      lower = static_cast<TierKind>(i);
      break;
    }
  }
  // A demotion to the SSD takes the entry's copy: its valid chunks are not written again.
  uint64_t copy_chunks = 0, reuse = 0;
  const uint64_t lanes = 2ull * static_cast<uint64_t>(layers_);
  if (lower == TierKind::Ssd && e.copy_chunks > 0) {
    copy_chunks = e.copy_chunks;
    reuse = std::min(e.copy_valid, e.chunks / lanes);
    e.copy_chunks = e.copy_valid = 0;
    with_copy_.erase(s);
    sync(e);
  }
  if (!drop && blocking && lower != src && lower == TierKind::Ssd && cfg_.drop_slow_demotions &&
      recompute_s_) {
    // The demotion budget: the caller would wait for the SSD's queue and this entry's own
    // chunks past its copy, or for a write-back of it still queued, from when it gets to this
    // victim. Never dropped: a victim with nothing to write (a whole copy that has landed), or
    // whose write-back is being written, which lib/store's demotion waits for (and then writes
    // nothing more) and whose pin there keeps a dropped entry's DRAM until it ends, so a drop
    // would free nothing sooner.
    const double bytes = payload_past(e.tokens, reuse);
    const double start = std::max(now, blocked_until_);
    const bool landed = e.clean_until <= start;
    const bool writing = !landed && e.clean_start <= start;
    const double written = bytes > 0 ? cfg_.ssd_write.completion(start, bytes) : start;
    if (!writing && (bytes > 0 || !landed) &&
        std::max(written, e.clean_until) - start > recompute_s_(e.tokens)) {
      drop = true;
      ++slow_dropped_;
    }
  }
  // A save's victim demoted to DRAM: its room there is made as the save's is, once the saves in
  // flight that DRAM depends on have landed (lib/store's evict; not on the SSD).
  if (!drop && lower != src &&
      reserve(lower, e.chunks - reuse * lanes, false, now, blocking && lower != TierKind::Ssd)) {
    Entry& m = index_.at(s);  // reserve may have rehashed nothing, but look it up again
    free_[2] += copy_chunks - reuse * lanes;  // the copy's stale chunks
    if (reuse > 0) copy_reused_chunks_ += reuse * lanes;
    const double bytes = payload_past(m.tokens, reuse);
    Link& l = lower == TierKind::Ssd ? cfg_.ssd_write : cfg_.d2h;
    const double before = l.busy_s();
    // lib/store copies a victim on the thread that needs the room: a save's caller waits.
    // With nothing to write (its copy is whole) the demotion is a journal record and queues
    // behind no transfer; but a copy written ahead of eviction that has not landed yet is
    // waited for, as lib/store's demotion waits for a running write-back.
    const double start = blocking_ ? std::max(now, blocked_until_) : now;
    const double done = std::max(bytes > 0 ? l.transfer(start, bytes) : start, m.clean_until);
    if (blocking_) blocked_until_ = done;
    room_at_ = std::max(room_at_, done);
    write_s_[static_cast<int>(lower)] += l.busy_s() - before;
    bytes_written_[static_cast<int>(lower)] += bytes;
    free_[static_cast<int>(src)] += m.chunks;
    set_tier(m, lower);
    write_back_due_ = true;  // the next entries in line may have no copy
    return;
  }
  free_[2] += copy_chunks;  // dropped with the entry
  erase_committed(s);
}

void SimStore::advance(double now) {
  for (Link* l : {&cfg_.d2d, &cfg_.h2d, &cfg_.d2h, &cfg_.ssd_read, &cfg_.ssd_write}) l->retire(now);
  land_demotions(now);
  for (auto it = moving_.begin(); it != moving_.end();) {
    auto e = index_.find(*it);
    if (e == index_.end() || e->second.moving_until < 0) {
      it = moving_.erase(it);
    } else if (e->second.moving_until <= now) {
      ++changes_;
      e->second.moving_until = -1;
      e->second.demoting = false;
      sync(e->second);
      it = moving_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<metrics::TierTotals> SimStore::tier_totals() const {
  std::vector<metrics::TierTotals> out;
  const char* names[3] = {"hbm", "dram", "ssd"};
  for (int t = 0; t < 3; ++t) {
    metrics::TierTotals tt;
    tt.name = names[t];
    tt.present = cap_[t] > 0;
    tt.capacity_bytes = cap_[t] * cfg_.chunk_bytes;
    tt.hits = hits_[t];
    tt.bytes_read = static_cast<uint64_t>(bytes_read_[t]);
    tt.bytes_written = static_cast<uint64_t>(bytes_written_[t]);
    tt.read_s = read_s_[t];
    tt.write_s = write_s_[t];
    out.push_back(tt);
  }
  return out;
}

}  // namespace cb::sim
