// The step loop of Engine::run: admission, batched forward with the layer hooks, token
// emission, turn completion and asynchronous saving.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "lib/core/error.h"
#include "lib/engine/engine.h"
#include "lib/engine/engine_internal.h"

namespace cb::engine {

void Engine::recompute_instead(Job& j, RunResult* res) {
  ++res->load_failures;
  j.load = store::LoadHandle();
  j.restore_pending = false;
  j.load_failed = false;
  j.reused = 0;
  j.fed = 0;
  j.outputs.clear();
  j.rec.token_times_s.clear();
  j.rec.tier = "miss";
  j.rec.reused_tokens = 0;
  j.rec.recomputed_tokens = static_cast<int64_t>(j.context.size());
  j.rec.bytes_loaded = 0;
  j.prefill_ids = j.context;
  j.prefill_ids.insert(j.prefill_ids.end(), j.new_ids.begin(), j.new_ids.end());
  cache_->set_length(j.req.id, 0);
}

void Engine::run_step(const std::vector<sched::StepItem>& items, RunResult* res,
                      const TokenFn& on_token) {
  std::vector<model::SeqInput> batch;
  std::vector<Job*> jobs;
  bool prefill = false;
  int64_t prefill_tokens = 0, fed = 0;  // fed: every token of the step (a decode feeds one)
  int64_t measured_fed = 0;             // the tokens of measured (not warm-up) turns
  for (const sched::StepItem& it : items) {
    Job& j = *jobs_.at(it.request);
    jobs.push_back(&j);
    model::SeqInput in;
    in.seq = it.request;
    if (it.prefill) {
      in.tokens.assign(j.prefill_ids.begin() + j.fed, j.prefill_ids.begin() + j.fed + it.tokens);
      prefill = true;
      prefill_tokens += it.tokens;
    } else {
      in.tokens = {j.outputs.back()};
    }
    fed += static_cast<int64_t>(in.tokens.size());
    if (!j.rec.warmup) measured_fed += static_cast<int64_t>(in.tokens.size());
    batch.push_back(std::move(in));
  }
  model::LayerHooks hooks;
  double restore_s = 0;  // in the step's time, but not computing: waits for loads, KV copies
  hooks.wait_ready = [&](int layer) {
    const double t0 = steady_s();
    for (Job* j : jobs) {
      if (j->restore_pending && !j->load_failed) restore_layer(*j, layer);
    }
    restore_s += steady_s() - t0;
  };
  // Where rows from pos0 on of `seq`'s layer go in its write buffer (null when it saves none).
  const auto rows_at = [&](int layer, kv::SeqId seq, int64_t pos0) -> std::pair<void*, void*> {
    Job& j = *jobs_.at(seq);
    if (j.k.empty()) return {nullptr, nullptr};
    const size_t off = static_cast<size_t>(pos0) * row_bytes_;
    return {layer_rows(j.k, layer, j.cap) + off, layer_rows(j.v, layer, j.cap) + off};
  };
  const auto capture = [&](int layer, kv::SeqId seq, int64_t pos0, int64_t n, const void* k,
                           const void* v) {
    const auto [dk, dv] = rows_at(layer, seq, pos0);
    if (dk == nullptr) return;
    const size_t bytes = static_cast<size_t>(n) * row_bytes_;
    if (k != dk) std::memcpy(dk, k, bytes);  // else the backend wrote them there
    if (v != dv) std::memcpy(dv, v, bytes);
  };
  if (entry_type_ == DType::F32) {
    hooks.on_new_kv = capture;
  } else {
    hooks.on_new_kv_native = capture;
    // The rows' place in the write buffer: the GPU copies a prefill chunk's rows there itself
    // when the buffer is page-locked.
    hooks.native_kv_target = [&](int layer, kv::SeqId seq, int64_t pos0, int64_t) {
      return rows_at(layer, seq, pos0);
    };
  }
  const double t = steady_s();
  const std::vector<float> logits = model_.forward(batch, *cache_, hooks);
  const double dt = steady_s() - t;
  ++res->steps;
  // A step shared by warm-up and measured turns counts in proportion to the measured turns'
  // tokens, as their prefill throughput counts their tokens alone (metrics::step_share).
  const double counted = dt * metrics::step_share(measured_fed, fed);
  res->totals.gpu_time_s += counted;
  if (prefill) res->totals.prefill_time_s += counted;
  // The rate estimates are of computing alone: a recompute, or a prefill beside a preload,
  // waits for no load.
  const double compute_s = std::max(0.0, dt - restore_s);
  if (prefill && batch.size() == 1 && prefill_tokens > 0) {
    const double r = compute_s / (static_cast<double>(prefill_tokens) * model_.config().n_layers);
    prefill_s_per_token_layer_ =
        prefill_s_per_token_layer_ > 0 ? 0.8 * prefill_s_per_token_layer_ + 0.2 * r : r;
  }
  if (prefill_tokens > 0) {
    // The store's recompute estimate: any step with prefill, its computing time over all the
    // tokens it fed, as a recompute would share a batch.
    const double r = compute_s / static_cast<double>(fed);
    const double old = prefill_s_per_token_->load();
    prefill_s_per_token_->store(old > 0 ? 0.8 * old + 0.2 * r : r);
  }
  const double when = now();
  const int vocab = model_.config().vocab_size;
  std::vector<sched::StepItem> ran;  // the items whose work counts (not restarted ones)
  for (size_t i = 0; i < items.size(); ++i) {
    Job& j = *jobs[i];
    const sched::StepItem& it = items[i];
    if (j.load_failed) {
      recompute_instead(j, res);
      sched_->restart_prefill(j.req.id, static_cast<int64_t>(j.prefill_ids.size()));
      continue;
    }
    ran.push_back(it);
    if (it.prefill) j.fed += it.tokens;
    if (!it.emits) continue;
    const float* row = logits.data() + i * static_cast<size_t>(vocab);
    const int32_t tok = next_token(j, row, vocab);
    if (j.outputs.empty()) j.rec.first_token_s = when;
    j.outputs.push_back(tok);
    j.rec.token_times_s.push_back(when);
    if (on_token) on_token(j.session, tok);
    if (tok == stop_token_) sched_->limit_output(j.req.id, static_cast<int64_t>(j.outputs.size()));
  }
  for (const sched::Request& r : sched_->complete_step(ran, when)) {
    finish(*jobs_.at(r.id), res);
    jobs_.erase(r.id);
  }
}

int32_t Engine::next_token(const Job& j, const float* row, int vocab) {
  if (vocab_limit_ > 0) vocab = std::min(vocab, vocab_limit_);
  if (!sampler_) return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
  if (!sampler_->config().penalizes()) return sampler_->sample(row, vocab);
  // The sequence's last repeat_last_n tokens (-1: all): the tails of context, new, outputs.
  const int64_t last_n = sampler_->config().repeat_last_n;
  size_t want = j.context.size() + j.new_ids.size() + j.outputs.size();
  if (last_n > 0) want = std::min(want, static_cast<size_t>(last_n));
  std::vector<int32_t> seen(want);
  size_t at = want;
  for (const std::vector<int32_t>* part : {&j.outputs, &j.new_ids, &j.context}) {
    const size_t take = std::min(at, part->size());
    std::copy(part->end() - static_cast<std::ptrdiff_t>(take), part->end(),
              seen.begin() + static_cast<std::ptrdiff_t>(at - take));
    at -= take;
  }
  return sampler_->sample(row, vocab, seen.data(), seen.size());
}

void Engine::finish(Job& j, RunResult* res) {
  j.rec.finish_s = j.rec.token_times_s.empty() ? now() : j.rec.token_times_s.back();
  j.rec.output_tokens = static_cast<int64_t>(j.outputs.size());
  const kv::SeqId seq = j.req.id;
  Session& s = sessions_[j.session];
  std::vector<int32_t> fed = j.context;
  fed.insert(fed.end(), j.new_ids.begin(), j.new_ids.end());
  fed.insert(fed.end(), j.outputs.begin(), j.outputs.end() - 1);
  if (static_cast<int64_t>(fed.size()) != cache_->length(seq)) {
    throw make_error("Engine", "KV length does not match the tokens fed (internal error)");
  }
  cache_->free_sequence(seq);
  s.context = fed;
  s.pending = j.outputs.back();
  if (cfg_.mode != Mode::RE) {
    // The previous turn's save has had this whole turn to land; a newer save must not race
    // it (the store would drop the older one anyway).
    wait_save(j.session, &j.rec.save_stall_s);
    const int layers = model_.config().n_layers;
    store::SaveRequest req;
    req.session = j.session;
    req.fingerprint = fp_;
    req.encoding = store::KeyEncoding::PreRope;
    req.shape = {layers, static_cast<uint32_t>(row_bytes_)};
    req.tokens = fed;
    auto sv = std::make_unique<Saving>();
    sv->session = j.session;
    sv->k = std::move(j.k);
    sv->v = std::move(j.v);
    j.load = store::LoadHandle();  // unpins the entry this turn loaded
    // The new entry appends to the session's entry (its history is a prefix of `fed`) when
    // that is in the fastest tier; otherwise the old entry is dropped now, not when the
    // commit lands, so space accounting (and so every eviction decision) is the same
    // whatever the I/O timing. The entry keeps its first insertion time (FIFO's order).
    req.replace_now = true;
    req.append = cfg_.append_saves;
    const double t_begin = steady_s();  // evictions and settling run on this thread
    sv->handle = store_->begin_save(req);
    j.rec.save_stall_s += steady_s() - t_begin;
    if (!sv->handle.ok()) {
      ++res->save_failures;
      retire(*sv);
    } else {
      for (int l = 0; l < layers; ++l) {
        sv->handle.write_layer(l, {layer_rows(sv->k, l, j.cap), layer_rows(sv->v, l, j.cap)});
      }
      sv->commit = sv->handle.commit();
      const auto written =
          static_cast<uint64_t>(static_cast<int64_t>(fed.size()) - sv->handle.shared_tokens());
      j.rec.bytes_saved = written * 2u * req.shape.token_bytes * static_cast<uint64_t>(layers);
      if (cfg_.async_save) {
        saving_.push_back(std::move(sv));
      } else {
        const double t = steady_s();
        if (!sv->commit.get()) ++res->save_failures;
        j.rec.save_stall_s += steady_s() - t;
        retire(*sv);
      }
    }
  }
  j.rec.done_s = now();  // after a synchronous save, or the store's waits on this thread
  res->records.push_back(std::move(j.rec));
}

RunResult Engine::run(const std::vector<SessionInput>& sessions, const ProgressFn& progress,
                      const TokenFn& on_token) {
  // A run that ended in an exception leaves its jobs (loads pinning entries) and their KV
  // sequences behind; request ids start again at 0, so they would be taken for this run's.
  for (const auto& [id, job] : jobs_) {
    if (cache_->has_sequence(id)) cache_->free_sequence(id);
  }
  jobs_.clear();
  RunResult res;
  std::vector<int> turns;
  for (const SessionInput& s : sessions) turns.push_back(static_cast<int>(s.turns.size()));
  check_warmup(cfg_, turns);
  sched::Scheduler sched(cfg_.sched, turns);
  sched.mark_warmup(cfg_.warmup_turns);
  sched_ = &sched;
  make_spares(sessions);  // before the clock: a server makes its buffers at startup
  t0_ = steady_s();
  skipped_ = 0;
  async_save_failures_ = 0;
  buffer_allocations_ = 0;
  seen_ = -1;
  cuts_due_.clear();
  const store::StatsSnapshot before = store_ ? store_->stats() : store::StatsSnapshot{};
  std::vector<sched::SessionId> last_lookahead;
  uint64_t lookahead_version = ~0ull;
  const auto input_of = [&](const sched::Request& r) -> const TurnInput& {
    return sessions[r.session].turns[static_cast<size_t>(r.turn)];
  };
  const auto store_id = [&](sched::Request r) {
    r.session = sessions[r.session].id;
    return r;
  };
  while (!sched.finished()) {
    sched.advance(now());
    poll_saves();
    cut_on_arrival(sessions);  // before the prefetches, which then read only what is kept
    // Write-backs ahead of eviction for the entries saved or demoted since the last plan
    // (the store returns at once when there are none).
    if (store_ != nullptr && cfg_.mode != Mode::RE) store_->write_back();
    // Prepare the requests that may start soon: overflow handling, lookup, and preloading
    // into their read buffers while the running batch computes.
    // Beyond preload_jobs, those a step could admit now (the batch's free slots, in order while
    // the KV pool could reserve them), so every request admitted below was prepared before the
    // look-ahead went to the store; no more, since a prepared job holds its write buffers and
    // pins its entry until it is admitted.
    const int preload = std::max(cfg_.preload_jobs, 1);
    int64_t room = cache_->free_blocks();
    int ahead = 0;
    for (const sched::Request& r : sched.waiting()) {
      if (ahead >= preload && (ahead >= sched.free_slots() || room <= 0)) break;
      ++ahead;
      auto it = jobs_.find(r.id);
      if (it == jobs_.end()) {
        // A session whose last turn is still being saved is prepared like any other: the
        // store serves a save in flight (its load waits, layer by layer, for the writes), so
        // neither the schedule nor this loop depends on when the save finishes.
        it = jobs_.emplace(r.id, prepare(store_id(r), input_of(r), &res)).first;
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
        store_->prefetch(la);
        last_lookahead = std::move(la);
      }
    }
    // A plan whose fetch found no room (a save still in flight held the room, say) is made
    // again once room may have come, with the same look-ahead (SimEngine does the same).
    if (store_ != nullptr && cfg_.mode != Mode::RE && store_->prefetch_retry_due()) {
      store_->retry_prefetch();
    }
    std::vector<Job*> admitted;  // whose loads start together, layer by layer
    while (sched.can_admit() && !sched.waiting().empty()) {
      auto it = jobs_.find(sched.waiting().front().id);
      double stall = 0;
      if (it == jobs_.end() || !admit(*it->second, &stall)) break;
      Job& j = *it->second;
      if (j.restore_pending) admitted.push_back(&j);
      if (!j.rec.warmup) {  // a synchronous load holds the accelerator like a stalled step
        res.totals.gpu_time_s += stall;
        res.totals.prefill_time_s += stall;
      }
      j.rec.start_s = now();
      if (j.load_failed) recompute_instead(j, &res);
      sched.admit_head(static_cast<int64_t>(j.prefill_ids.size()), j.output_target);
    }
    start_batch_loads(admitted);
    start_read_buffers();
    const std::vector<sched::StepItem> items = sched.plan_step();
    if (items.empty()) {
      if (!sched.waiting().empty() && jobs_.count(sched.waiting().front().id)) {
        throw make_error("Engine", "a request does not fit the KV pool even when it is empty",
                         "raise --kv-blocks or lower --ctx");
      }
      idle_until(sched.next_arrival());
      continue;
    }
    run_step(items, &res, on_token);
    if (progress) progress(sched.done(), sched.total());
  }
  drain_saves();
  res.save_failures += async_save_failures_;
  res.buffer_allocations = buffer_allocations_;
  sched_ = nullptr;
  res.totals.duration_s = metrics::measured_duration(res.records);
  if (store_ != nullptr) {
    const store::StatsSnapshot after = store_->stats();
    for (int t = 0; t < store::kNumTiers; ++t) {
      const auto tk = static_cast<store::TierKind>(t);
      metrics::TierTotals tt;
      tt.name = store::tier_name(tk);
      tt.present = after.tier_present[t];
      tt.capacity_bytes = after.capacity_bytes[t];
      const auto d = [&](store::TierCounter c) { return after.get(tk, c) - before.get(tk, c); };
      tt.hits = d(store::TierCounter::Hits);
      tt.bytes_read = d(store::TierCounter::BytesRead);
      tt.bytes_written = d(store::TierCounter::BytesWritten);
      tt.read_s = 1e-9 * static_cast<double>(d(store::TierCounter::ReadNs));
      tt.write_s = 1e-9 * static_cast<double>(d(store::TierCounter::WriteNs));
      res.totals.tiers.push_back(tt);
    }
  }
  return res;
}

}  // namespace cb::engine
