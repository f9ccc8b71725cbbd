// The serving loop: prepare (overflow, lookup, read-buffer preload) -> admit (KV blocks) ->
// steps of continuous batching (layer-wise restore in the forward pass's wait_ready hook,
// pre-RoPE capture in on_new_kv) -> finish (asynchronous save through a write buffer).
#include "lib/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>

#include "lib/core/error.h"
#include "lib/engine/engine_internal.h"

namespace cb::engine {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::CA: return "ca";
    case Mode::RE: return "re";
    case Mode::OF: return "of";
  }
  return "?";
}

int64_t overflow_drop(int64_t hist, int64_t over, double ratio, int64_t align) {
  const int64_t drop = std::min(
      hist, std::max(over, static_cast<int64_t>(std::floor(ratio * static_cast<double>(hist)))));
  if (align <= 1 || drop % align == 0) return drop;
  const int64_t up = (drop / align + 1) * align;
  return up < hist ? up : drop;
}

TurnFit fit_turn(int64_t new_tokens, int64_t output_tokens, int64_t ctx) {
  TurnFit f;
  f.new_tokens = new_tokens;
  f.output_target = std::max<int64_t>(output_tokens, 1);
  if (f.new_tokens + f.output_target > ctx) {
    f.output_target = std::min(f.output_target, std::max<int64_t>(ctx / 2, 1));
    f.new_tokens = std::min(f.new_tokens, ctx - f.output_target);
    f.clipped = true;
  }
  return f;
}

bool cuts_on_arrival(Mode mode, int64_t drop, int64_t hist, int64_t align) {
  if (drop <= 0) return false;
  if (mode != Mode::CA || drop == hist) return true;
  return align > 1 && drop % align == 0;
}

std::vector<sched::Request> arrivals_since(const sched::Scheduler& sched, int64_t* seen) {
  const std::deque<sched::Request>& w = sched.waiting();
  size_t first = w.size();
  while (first > 0 && static_cast<int64_t>(w[first - 1].id) > *seen) --first;
  std::vector<sched::Request> out(w.begin() + static_cast<std::ptrdiff_t>(first), w.end());
  if (!out.empty()) *seen = static_cast<int64_t>(out.back().id);
  return out;
}

int64_t turn_drop(int64_t hist, int64_t new_tokens, int64_t output_tokens, int64_t ctx,
                  const EngineConfig& cfg) {
  const TurnFit f = fit_turn(new_tokens, output_tokens, ctx);
  const int64_t over = hist + f.new_tokens + f.output_target - ctx;
  return over > 0 ? overflow_drop(hist, over, cfg.truncate_ratio, cfg.truncate_align) : 0;
}

int64_t checked_window(const EngineConfig& cfg, int64_t max_context) {
  const int64_t ctx = cfg.ctx > 0 ? cfg.ctx : max_context;
  if (ctx < 2) throw make_error("--ctx", "the context window must be at least 2 tokens");
  if (max_context > 0 && ctx > max_context) {
    throw make_error("--ctx",
                     std::to_string(ctx) + " exceeds the model's context window of " +
                         std::to_string(max_context) + " tokens",
                     "use at most " + std::to_string(max_context) + " (0: the model's)");
  }
  if (!(cfg.truncate_ratio > 0 && cfg.truncate_ratio <= 1)) {
    throw make_error("--truncate-ratio", "must be in (0, 1]");
  }
  return ctx;
}

int64_t pool_blocks(const EngineConfig& cfg, int64_t ctx) {
  if (cfg.block_size < 1) throw make_error("--block-size", "must be at least 1 token");
  const int64_t per_seq = (ctx + cfg.block_size - 1) / cfg.block_size + 1;
  const int64_t blocks =
      cfg.num_blocks > 0 ? cfg.num_blocks : per_seq * std::max(cfg.sched.max_batch, 1);
  if (blocks < per_seq) {
    throw make_error("--kv-blocks",
                     std::to_string(blocks) + " blocks cannot hold one full window of " +
                         std::to_string(ctx) + " tokens",
                     "use at least " + std::to_string(per_seq));
  }
  return blocks;
}

void check_warmup(const EngineConfig& cfg, const std::vector<int>& turns) {
  int64_t total = 0;
  for (const int n : turns) total += n;
  if (total > 0 && cfg.warmup_turns >= total) {
    throw make_error("--warmup-turns",
                     std::to_string(cfg.warmup_turns) + " warm every one of the trace's " +
                         std::to_string(total) + " turns: nothing would be measured",
                     "use fewer than " + std::to_string(total));
  }
}

Mode parse_mode(const std::string& s) {
  if (s == "ca") return Mode::CA;
  if (s == "re") return Mode::RE;
  if (s == "of") return Mode::OF;
  throw make_error("--mode", "unknown mode '" + s + "'",
                   "use ca (CachedAttention), re (recompute) or of (overflow invalidation)");
}

bool parse_kv_entries(const std::string& s) {
  if (s == "native") return true;
  if (s == "f32") return false;
  throw make_error("--kv-entries", "unknown entry type '" + s + "'",
                   "use f32, or native for the backend's own KV type (fp16/bf16 on the GPU)");
}

size_t entry_row_bytes(const model::ForwardModel& model, const EngineConfig& cfg) {
  return dtype_bytes(cfg.native_kv_entries ? model.native_kv_type() : DType::F32,
                     static_cast<size_t>(model.config().kv_dim()));
}

Engine::Engine(const model::ForwardModel& model, store::AttentionStore* store, EngineConfig cfg)
    : model_(model), store_(store), cfg_(std::move(cfg)) {
  const model::ModelConfig& mc = model_.config();
  ctx_ = checked_window(cfg_, mc.max_context);
  if (cfg_.mode != Mode::RE && store_ == nullptr) {
    throw make_error("Engine", "CA and OF modes need an AttentionStore");
  }
  if (store_ != nullptr) {
    // The demotion budget's recompute time: this engine's measured prefill rate (linear in
    // tokens; none until a step with prefill has run).
    store_->set_recompute_estimate([rate = prefill_s_per_token_](int64_t tokens) {
      const double r = rate->load();
      return r > 0 ? r * static_cast<double>(tokens) : std::numeric_limits<double>::infinity();
    });
  }
  kv_dim_ = mc.kv_dim();
  entry_type_ = cfg_.native_kv_entries ? model_.native_kv_type() : DType::F32;
  row_bytes_ = entry_row_bytes(model_, cfg_);
  pinned_buffers_ = !model_.host_kv();
  // Entries made at one precision are not reused at another, nor read as another element type,
  // nor by other weights of the same name and shape (a fine-tune, another quantization).
  fp_ = store::ModelFingerprint::from_description(
      mc.name + "/" + model::arch_name(mc.arch) + "/" + std::to_string(mc.n_layers) + "x" +
      std::to_string(mc.n_kv_heads) + "x" + std::to_string(mc.head_dim) + "/" +
      model_.kv_precision() +
      (entry_type_ == DType::F32 ? "" : std::string("/entries-") + dtype_name(entry_type_)) +
      (mc.weights_id.empty() ? "" : "/" + mc.weights_id));
  cache_ =
      std::make_unique<kv::KvCache>(model_.kv_config(pool_blocks(cfg_, ctx_), cfg_.block_size));
  model_.bind_cache(*cache_);
}

Engine::~Engine() {
  try {
    drain_saves();
  } catch (...) {
  }
}

double Engine::now() const {
  return steady_s() - t0_ + skipped_;
}

void Engine::idle_until(double t) {
  const double n = now();
  if (!std::isfinite(t) || t <= n) return;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(t - n));
  for (const auto& s : saving_) {
    if (s->commit.wait_until(deadline) != std::future_status::ready) break;
  }
  poll_saves();
  // Committed saves make write-backs due, and a blocked prefetch plan again, as the loop
  // would plan them while idle.
  if (store_ != nullptr && cfg_.mode != Mode::RE) {
    while (store_->wait_idle_until(deadline) &&
           (store_->write_back() > 0 ||
            (store_->prefetch_retry_due() && store_->retry_prefetch() > 0))) {
    }
  }
  const double m = now();
  if (t > m) {
    skipped_ += t - m;
    // The store's clock (TTLs, access times) skips the gap too, as SimStore's does.
    if (store_ != nullptr) store_->skip_time(t - m);
  }
}

int64_t Engine::context_tokens(uint64_t session) const {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return 0;
  return static_cast<int64_t>(it->second.context.size()) + (it->second.pending >= 0 ? 1 : 0);
}

void Engine::reset_session(uint64_t session) {
  wait_save(session, nullptr);
  sessions_.erase(session);
  if (store_ != nullptr) store_->erase(session);
}

void Engine::wait_save(uint64_t session, double* stall) {
  for (auto it = saving_.begin(); it != saving_.end();) {
    if ((*it)->session != session) {
      ++it;
      continue;
    }
    const double t = steady_s();
    if (!(*it)->commit.get()) ++async_save_failures_;
    if (stall) *stall += steady_s() - t;
    retire(**it);
    it = saving_.erase(it);
  }
}

void Engine::poll_saves() {
  for (auto it = saving_.begin(); it != saving_.end();) {
    if ((*it)->commit.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      if (!(*it)->commit.get()) ++async_save_failures_;
      retire(**it);
      it = saving_.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::drain_saves() {
  for (auto& s : saving_) {
    if (!s->commit.get()) ++async_save_failures_;
    retire(*s);
  }
  saving_.clear();
}

KvBuffer Engine::take_buffer(size_t n) {
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->capacity() >= n && (best == spare_.end() || it->capacity() < best->capacity())) {
      best = it;
    }
  }
  if (best == spare_.end()) {
    ++buffer_allocations_;
    KvBuffer b(KvBuffer::size_class(n), pinned_buffers_);
    b.resize(n);
    return b;
  }
  KvBuffer b = std::move(*best);
  spare_.erase(best);
  b.resize(n);  // within its capacity: no reallocation
  return b;
}

size_t write_buffer_bytes(const std::vector<SessionInput>& sessions, int layers, size_t row_bytes,
                          int64_t ctx) {
  int64_t longest = 1;
  for (const SessionInput& s : sessions) {
    int64_t tokens = 0;
    for (const TurnInput& t : s.turns) {
      tokens += static_cast<int64_t>(t.ids.size()) + std::max<int64_t>(t.output_tokens, 1);
    }
    longest = std::max(longest, ctx > 0 ? std::min(tokens, ctx) : tokens);
  }
  return KvBuffer::size_class(static_cast<size_t>(layers) * static_cast<size_t>(longest) *
                              row_bytes);
}

void Engine::make_spares(const std::vector<SessionInput>& sessions) {
  if (cfg_.mode == Mode::RE || cfg_.write_buffer_jobs <= 0) return;
  const size_t bytes = write_buffer_bytes(sessions, model_.config().n_layers, row_bytes_, ctx_);
  const size_t n = 2 * static_cast<size_t>(cfg_.write_buffer_jobs);
  spare_limit_ = std::max(kSpareBuffers, n);
  size_t have = 0;
  for (const KvBuffer& b : spare_) have += b.capacity() >= bytes;
  for (; have < n; ++have) spare_.emplace_back(bytes, pinned_buffers_);
}

void Engine::recycle(KvBuffer&& b) {
  if (b.capacity() == 0) return;
  spare_.push_back(std::move(b));
  if (spare_.size() > spare_limit_) {  // drop the smallest
    auto smallest =
        std::min_element(spare_.begin(), spare_.end(),
                         [](const auto& x, const auto& y) { return x.capacity() < y.capacity(); });
    spare_.erase(smallest);
  }
}

void Engine::retire(Saving& s) {
  recycle(std::move(s.k));
  recycle(std::move(s.v));
}

void Engine::cut(uint64_t session, int64_t drop, double* stall) {
  Session& s = sessions_[session];
  wait_save(session, stall);  // the store truncates committed entries only
  if (cfg_.mode == Mode::CA) {
    store::TruncateSpec spec;
    spec.drop_tokens = drop;
    if (drop == static_cast<int64_t>(s.context.size())) {
      store_->erase(session);
    } else {
      const double t = steady_s();  // an unaligned truncation rewrites the entry here
      store_->truncate(session, spec);
      *stall += steady_s() - t;
    }
  } else if (cfg_.mode == Mode::OF) {
    store_->erase(session);
  }
  s.context.erase(s.context.begin(), s.context.begin() + drop);
}

void Engine::cut_on_arrival(const std::vector<SessionInput>& sessions) {
  for (const sched::Request& r : arrivals_since(*sched_, &seen_)) {
    const uint64_t id = sessions[r.session].id;
    const Session& s = sessions_[id];
    const TurnInput& in = sessions[r.session].turns[static_cast<size_t>(r.turn)];
    const int64_t hist = static_cast<int64_t>(s.context.size());
    const int64_t drop =
        turn_drop(hist, static_cast<int64_t>(in.ids.size()) + (s.pending >= 0 ? 1 : 0),
                  in.output_tokens, ctx_, cfg_);
    if (cuts_on_arrival(cfg_.mode, drop, hist, cfg_.truncate_align)) {
      cuts_due_[id] = drop;
    }
  }
  for (auto it = cuts_due_.begin(); it != cuts_due_.end();) {
    const uint64_t id = it->first;
    if (std::any_of(saving_.begin(), saving_.end(),
                    [id](const auto& sv) { return sv->session == id; })) {
      ++it;  // its save has not committed (poll_saves): the store truncates committed entries only
      continue;
    }
    Session& s = sessions_[id];
    cut(id, it->second, &s.cut_stall);
    s.cut_tokens = it->second;
    it = cuts_due_.erase(it);
  }
}

int Engine::read_buffer_for(const Job& job) const {
  const int layers = model_.config().n_layers;
  if (!cfg_.preload) return 0;
  if (cfg_.read_buffer_layers >= 0) return std::min(cfg_.read_buffer_layers, layers);
  // Paper's rule: the buffer covers what loading the history takes beyond prefilling the
  // new tokens, S_buf = B * (T_load * L_hist - T_pref * L_new), here in layers.
  const store::StatsSnapshot st = store_->stats();
  uint64_t bytes = 0, ns = 0;
  for (int t = 0; t < store::kNumTiers; ++t) {
    bytes += st.get(static_cast<store::TierKind>(t), store::TierCounter::BytesRead);
    ns += st.get(static_cast<store::TierKind>(t), store::TierCounter::ReadNs);
  }
  if (bytes == 0 || prefill_s_per_token_layer_ <= 0) return layers;
  const double t_load = 1e-9 * static_cast<double>(ns) / static_cast<double>(bytes) * 2.0 *
                        static_cast<double>(row_bytes_) * static_cast<double>(job.context.size());
  const double t_pref = prefill_s_per_token_layer_ * static_cast<double>(job.new_ids.size());
  if (t_load <= t_pref) return 0;
  return static_cast<int>(std::ceil(layers * (t_load - t_pref) / t_load));
}

std::unique_ptr<Engine::Job> Engine::prepare(const sched::Request& r, const TurnInput& in,
                                             RunResult* res) {
  auto job = std::make_unique<Job>();
  Job& j = *job;
  j.req = r;
  j.session = r.session;
  Session& s = sessions_[j.session];
  if (s.pending >= 0) j.new_ids.push_back(s.pending);
  j.new_ids.insert(j.new_ids.end(), in.ids.begin(), in.ids.end());
  if (j.new_ids.empty()) throw make_error("Engine", "a turn has no input tokens");
  const TurnFit f = fit_turn(static_cast<int64_t>(j.new_ids.size()), in.output_tokens, ctx_);
  j.output_target = f.output_target;
  if (f.clipped) {
    j.new_ids.erase(j.new_ids.begin(), j.new_ids.end() - f.new_tokens);
    ++res->clipped_turns;
  }
  // A cut made when the turn arrived (cut_on_arrival), and one still due: made here.
  j.rec.truncated_tokens = s.cut_tokens;
  j.rec.save_stall_s = s.cut_stall;
  s.cut_tokens = 0;
  s.cut_stall = 0;
  cuts_due_.erase(j.session);
  const int64_t hist = static_cast<int64_t>(s.context.size());
  const int64_t over = hist + static_cast<int64_t>(j.new_ids.size()) + j.output_target - ctx_;
  if (over > 0) {
    const int64_t drop = overflow_drop(hist, over, cfg_.truncate_ratio, cfg_.truncate_align);
    cut(j.session, drop, &j.rec.save_stall_s);
    j.rec.truncated_tokens += drop;
  }
  j.context = s.context;
  const int layers = model_.config().n_layers;
  j.cap = static_cast<int64_t>(j.context.size() + j.new_ids.size()) + j.output_target;
  if (cfg_.mode != Mode::RE) {
    // Every row a save reads is written first: loaded, or captured as the tokens are fed.
    j.k = take_buffer(static_cast<size_t>(layers * j.cap) * row_bytes_);
    j.v = take_buffer(j.k.size());
  }
  j.rec.session = j.session;
  j.rec.turn = r.turn;
  j.rec.warmup = r.warmup;
  j.rec.arrival_s = r.arrival;
  j.rec.history_tokens = static_cast<int64_t>(j.context.size());
  j.rec.new_tokens = static_cast<int64_t>(j.new_ids.size());
  j.rec.tier = j.context.empty() ? "none" : "miss";
  if (cfg_.mode != Mode::RE && !j.context.empty()) {
    store::LookupKey key{j.session,
                         fp_,
                         store::KeyEncoding::PreRope,
                         j.context,
                         {layers, static_cast<uint32_t>(row_bytes_)}};
    std::vector<store::LayerTarget> targets;
    for (int l = 0; l < layers; ++l) {
      targets.push_back({layer_rows(j.k, l, j.cap), layer_rows(j.v, l, j.cap)});
    }
    j.load_start = steady_s();
    // Nothing starts yet: its read buffer starts after the step's admissions, behind the loads
    // of the jobs admitted (start_read_buffers).
    j.buffer_layers = read_buffer_for(j);
    j.load = store_->load(key, targets, -1, 0);
    if (j.load.ok()) {
      j.reused = j.load.tokens();
      j.rec.tier = store::tier_name(j.load.lookup().tier);
    }
  }
  j.rec.reused_tokens = j.reused;
  j.rec.recomputed_tokens = static_cast<int64_t>(j.context.size()) - j.reused;
  j.rec.bytes_loaded = static_cast<uint64_t>(j.reused) * 2u * static_cast<uint64_t>(layers) *
                       static_cast<uint64_t>(row_bytes_);
  j.prefill_ids.assign(j.context.begin() + j.reused, j.context.end());
  j.prefill_ids.insert(j.prefill_ids.end(), j.new_ids.begin(), j.new_ids.end());
  return job;
}

bool Engine::admit(Job& j, double* stall) {
  *stall = 0;
  const kv::SeqId seq = j.req.id;
  cache_->add_sequence(seq);
  if (!cache_->reserve(seq, j.cap)) {
    cache_->free_sequence(seq);
    return false;
  }
  if (j.reused == 0) return true;
  cache_->set_length(seq, j.reused);
  const int layers = model_.config().n_layers;
  if (j.load.started_layers() == 0) j.load_start = steady_s();  // nothing preloaded
  if (cfg_.preload) {  // the rest of its layers start with the batch's (start_batch_loads)
    j.restore_pending = true;
    return true;
  }
  // No preloading: the whole entry is loaded before any compute (the stall is the load).
  const double t = steady_s();
  const bool ok = j.load.wait_all();
  *stall = steady_s() - t;
  j.rec.preload_stall_s += *stall;
  j.rec.load_s = steady_s() - j.load_start;
  if (!ok) {
    j.load_failed = true;
    return true;  // recomputed by the caller
  }
  for (int l = 0; l < layers; ++l) {
    restore(j, l);
  }
  return true;
}

void Engine::start_batch_loads(const std::vector<Job*>& jobs) {
  // Layer-major across the jobs admitted together: every job's layer l is queued before any
  // job's layer l+1, so the step's layer-l compute (which waits for all of them) starts after
  // l+1 layers' worth of loads rather than after whole entries of the jobs ahead.
  const int layers = model_.config().n_layers;
  for (int l = 1; l <= layers; ++l) {
    for (Job* j : jobs) j->load.start_layers(l);
  }
}

void Engine::start_read_buffers() {
  // The read buffers of the prepared jobs still waiting, layer-major across them, so that a
  // buffer never delays the loads of a batch admitted before it: those were queued first.
  std::vector<Job*> waiting;
  int most = 0;
  for (const sched::Request& r : sched_->waiting()) {
    const auto it = jobs_.find(r.id);
    if (it == jobs_.end()) break;  // prepared in queue order: none after this one
    Job& j = *it->second;
    if (j.buffer_layers > j.load.started_layers()) {
      if (j.load.started_layers() == 0) j.load_start = steady_s();  // its load starts now
      waiting.push_back(&j);
      most = std::max(most, j.buffer_layers);
    }
  }
  for (int l = 1; l <= most; ++l) {
    for (Job* j : waiting) {
      if (l <= j->buffer_layers) j->load.start_layers(l);
    }
  }
}

void Engine::restore(Job& j, int layer) {
  const uint8_t* k = layer_rows(j.k, layer, j.cap);
  const uint8_t* v = layer_rows(j.v, layer, j.cap);
  if (entry_type_ == DType::F32) {
    model_.restore_kv(*cache_, j.req.id, layer, 0, j.reused, reinterpret_cast<const float*>(k),
                      reinterpret_cast<const float*>(v));
  } else {
    model_.restore_kv_native(*cache_, j.req.id, layer, 0, j.reused, k, v);
  }
}

void Engine::restore_layer(Job& j, int layer) {
  const double t = steady_s();
  const bool ok = j.load.wait_layer(layer);
  j.rec.preload_stall_s += steady_s() - t;
  if (!ok) {
    j.load_failed = true;
    return;
  }
  restore(j, layer);
  if (layer == model_.config().n_layers - 1) {
    j.restore_pending = false;
    j.rec.load_s = steady_s() - j.load_start;
  }
}

}  // namespace cb::engine
