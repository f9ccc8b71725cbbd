// Loads: layer by layer into caller buffers, every chunk verified before it counts.
#include <cstring>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/store_internal.h"
#include "lib/store/thread_pool.h"
#include "lib/store/tier.h"

namespace cb::store {

// Layers never started are settled without I/O: their futures yield false, and the last
// one to settle releases the entry's pin.
void LoadHandle::cancel_unstarted() {
  const std::shared_ptr<LoadState>& st = st_;
  int from, to;
  {
    std::lock_guard<std::mutex> g(st->start_mu);
    from = st->started;
    to = static_cast<int>(st->promises.size());
    st->started = to;
  }
  for (int l = from; l < to; ++l) st->store->settle_layer(st, l, false, false);
}

LoadHandle::~LoadHandle() {
  if (st_) {
    cancel_unstarted();
    wait_all();
    st_->store->unpin_load(*st_);
  }
}

LoadHandle& LoadHandle::operator=(LoadHandle&& o) noexcept {
  if (this != &o) {
    if (st_) {
      cancel_unstarted();
      wait_all();
      st_->store->unpin_load(*st_);
    }
    st_ = std::move(o.st_);
    result_ = o.result_;
    tokens_ = o.tokens_;
  }
  return *this;
}

void AttentionStore::unpin_load(const LoadState& st) {
  std::lock_guard<std::mutex> g(mu_);
  unpin_locked(st.entry);
  // Until the commit lands (or when it failed) the base's pin is this load's to drop, and
  // the save must stop counting it: a commit landing later drops only the pins of the loads
  // still running (dropping this one twice drove the base's count below zero, so the slots
  // later lent to it were never freed).
  if (st.base && !st.save->base_loads_released) {
    --st.save->base_load_pins;
    unpin_locked(st.base);
  }
}

bool LoadHandle::wait_layer(int layer) {
  if (!st_ || layer < 0 || static_cast<size_t>(layer) >= st_->done.size()) return false;
  start_layers(layer + 1);
  return st_->done[static_cast<size_t>(layer)].get();
}

void LoadHandle::start_layers(int n) {
  if (!st_) return;
  st_->store->start_layers(st_, n);
}

int LoadHandle::started_layers() const {
  if (!st_) return 0;
  std::lock_guard<std::mutex> g(st_->start_mu);
  return st_->started;
}

bool LoadHandle::wait_all() {
  if (!st_) return false;
  start_layers(static_cast<int>(st_->done.size()));
  bool ok = true;
  for (auto& f : st_->done) ok = f.get() && ok;
  return ok;
}

void AttentionStore::start_layers(const std::shared_ptr<LoadState>& st, int n) {
  int from, to;
  {
    std::lock_guard<std::mutex> g(st->start_mu);
    from = st->started;
    to = std::min(n, static_cast<int>(st->promises.size()));
    if (to <= from) return;
    st->started = to;
  }
  for (int l = from; l < to; ++l) {
    load_pool_->post([st, l] { st->store->load_layer(st, l); });
  }
}

LoadHandle AttentionStore::load(const LookupKey& key, const std::vector<LayerTarget>& targets,
                                int64_t max_tokens, int start_layers) {
  LoadHandle h;
  std::shared_ptr<LoadState> st;
  {
    std::lock_guard<std::mutex> g(mu_);
    stats_.add(Counter::Lookups);
    std::shared_ptr<SaveState> save;
    EntryPtr e = visible_locked(key.session, &save);
    LookupResult& r = h.result_;
    if (!e) {
      stats_.add(Counter::Misses);
      stats_.add(Counter::MissNotFound);
      return h;
    }
    r.status = classify(*e, key, &r.matched_tokens);
    r.tier = e->tier;
    r.entry_tokens = e->meta.n_tokens();
    r.shape = e->meta.shape;
    if (r.status != LookupStatus::Hit) {
      stats_.add(Counter::Misses);
      stats_.add(r.status == LookupStatus::FingerprintMismatch ? Counter::MissFingerprint
                 : r.status == LookupStatus::Expired           ? Counter::MissExpired
                                                               : Counter::MissHistory);
      if (r.status == LookupStatus::Expired) {
        stats_.add(Counter::Expirations);
        unlink_locked(e);
      }
      return h;
    }
    if (targets.size() != static_cast<size_t>(e->meta.shape.n_layers)) {
      throw make_error("AttentionStore::load",
                       "got " + std::to_string(targets.size()) + " layer targets for an entry of " +
                           std::to_string(e->meta.shape.n_layers) + " layers");
    }
    int64_t tokens = r.matched_tokens;
    if (max_tokens >= 0 && max_tokens < tokens) tokens = max_tokens;
    ++e->pins;
    ++e->accesses;
    e->meta.last_access = now();
    stats_.add(e->tier, TierCounter::Hits);
    stats_.add(Counter::Loads);
    st = std::make_shared<LoadState>();
    st->store = this;
    st->entry = e;
    st->meta = e->meta;
    st->tier = e->tier;
    st->tokens = tokens;
    if (save) {
      st->save = save;
      st->writes = save->layers;
      if (save->base) {  // the save's shared chunks are the base's until the commit lands
        st->base = save->base;
        ++st->base->pins;
        ++save->base_load_pins;
      }
    }
    st->targets = targets;
    st->promises.resize(targets.size());
    for (auto& p : st->promises) st->done.push_back(p.get_future().share());
    st->remaining = static_cast<int>(targets.size());
    h.tokens_ = tokens;
  }
  h.st_ = st;
  this->start_layers(st, start_layers < 0 ? st->meta.shape.n_layers : start_layers);
  return h;
}

void AttentionStore::load_layer(const std::shared_ptr<LoadState>& st, int layer) {
  const EntryMeta& m = st->meta;
  const uint64_t tb = m.shape.token_bytes, tpc = m.tokens_per_chunk;
  const uint64_t tokens = static_cast<uint64_t>(st->tokens);
  const uint64_t nc = m.chunks_for(st->tokens), seed = chunk_seed(m.session);
  std::vector<char> temp[2];
  std::vector<ChunkIo> ops;
  std::vector<uint64_t> idx;
  bool ok = !st->failed.load();
  std::string why;  // what failed, when this layer did
  // A save in flight: this layer's bytes and checksums are there once its write is done.
  if (ok && st->save) {
    ok = st->writes[static_cast<size_t>(layer)].get();
    if (!ok) why = "layer " + std::to_string(layer) + " of the save in flight was not written";
  }
  const std::vector<uint64_t>& sums = st->save ? st->save->meta.checksums : m.checksums;
  for (int kv = 0; kv < 2 && ok; ++kv) {
    char* base = static_cast<char*>(kv == 0 ? st->targets[layer].k : st->targets[layer].v);
    for (uint64_t c = 0; c < nc; ++c) {
      const uint32_t len = m.chunk_len(c);
      const uint64_t need = std::min<uint64_t>(tpc, tokens - c * tpc) * tb;
      ChunkIo op{m.slots[m.chunk_index(layer, kv, c)], base + c * tpc * tb, len, 0};
      if (need < len) {  // the last chunk of a shorter prefix: read it whole, copy part
        temp[kv].resize(len);
        op.buf = temp[kv].data();
      }
      ops.push_back(op);
      idx.push_back(m.chunk_index(layer, kv, c));
    }
  }
  std::vector<uint64_t> got(ops.size());  // each chunk's checksum, taken as it is read
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].sum = &got[i];
    ops[i].sum_seed = seed;
  }
  if (ok && !ops.empty()) {
    ok = timed_io(st->tier, false, ops.data(), ops.size());
    if (!ok) {
      why =
          failed_op_problem(m, st->tier, ops.data(), ops.size(), [&](size_t i) { return idx[i]; });
    }
  }
  for (size_t i = 0; ok && i < ops.size(); ++i) {
    if (got[i] != sums[idx[i]]) {
      stats_.add(Counter::ChecksumFailures);
      why = chunk_problem(m, st->tier, idx[i], "checksum mismatch");
      ok = false;
    }
  }
  if (!why.empty()) {
    std::lock_guard<std::mutex> g(st->start_mu);
    if (st->why.empty()) st->why = why;
  }
  if (ok) {
    for (int kv = 0; kv < 2; ++kv) {
      if (temp[kv].empty()) continue;
      const uint64_t c = nc - 1;
      char* base = static_cast<char*>(kv == 0 ? st->targets[layer].k : st->targets[layer].v);
      std::memcpy(base + c * tpc * tb, temp[kv].data(), (tokens - c * tpc) * tb);
    }
  }
  settle_layer(st, layer, ok, true);
}

void AttentionStore::settle_layer(const std::shared_ptr<LoadState>& st, int layer, bool ok,
                                  bool attempted) {
  if (!ok && attempted) st->failed = true;
  if (--st->remaining == 0 && st->failed.load()) {
    stats_.add(Counter::LoadFailures);
    std::string why;
    {
      std::lock_guard<std::mutex> g(st->start_mu);
      why = st->why;
    }
    drop_corrupt(st->entry, why);
  }
  st->promises[static_cast<size_t>(layer)].set_value(ok);
}

bool AttentionStore::verify_entry(const EntryMeta& m, TierKind t, std::string* why,
                                  bool* io_failed) {
  // Chunks go in batches of up to 64 MiB (one chunk at least) per I/O call, so the SSD sees a
  // queue of reads, through one buffer whose size does not grow with the entry.
  constexpr uint64_t kBatchBytes = uint64_t{64} << 20;
  const uint64_t nt = m.n_token_chunks(), seed = chunk_seed(m.session);
  struct Piece {
    uint64_t index;  // into m.slots and m.checksums
    uint32_t len;
  };
  std::vector<Piece> all;
  for (int l = 0; l < m.shape.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      for (uint64_t c = 0; c < nt; ++c) all.push_back({m.chunk_index(l, kv, c), m.chunk_len(c)});
    }
  }
  std::vector<char> buf;
  std::vector<ChunkIo> ops;
  std::vector<uint64_t> got;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    uint64_t bytes = 0;
    while (j < all.size() && (j == i || bytes + all[j].len <= kBatchBytes)) bytes += all[j++].len;
    if (buf.size() < bytes) buf.resize(bytes);
    ops.assign(j - i, ChunkIo{});
    got.assign(j - i, 0);
    uint64_t off = 0;
    for (size_t k = i; k < j; ++k) {
      ChunkIo& op = ops[k - i];
      op = ChunkIo{m.slots[all[k].index], buf.data() + off, all[k].len, 0};
      op.sum = &got[k - i];
      op.sum_seed = seed;
      off += all[k].len;
    }
    if (!timed_io(t, false, ops.data(), ops.size())) {
      *why = failed_op_problem(m, t, ops.data(), ops.size(),
                               [&](size_t k) { return all[i + k].index; });
      if (io_failed) *io_failed = true;
      return false;
    }
    for (size_t k = i; k < j; ++k) {
      if (got[k - i] != m.checksums[all[k].index]) {
        stats_.add(Counter::ChecksumFailures);
        *why = chunk_problem(m, t, all[k].index, "checksum mismatch");
        return false;
      }
    }
    i = j;
  }
  return true;
}

uint64_t AttentionStore::verify_all(uint64_t* chunks_checked,
                                    std::vector<std::string>* unreadable) {
  std::vector<EntryPtr> all;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [id, e] : index_) {
      ++e->pins;
      all.push_back(e);
    }
  }
  uint64_t bad = 0, chunks = 0;
  for (const EntryPtr& e : all) {
    EntryMeta m;
    TierKind t;
    {
      std::lock_guard<std::mutex> g(mu_);
      m = e->meta;
      t = e->tier;
    }
    std::string why;
    bool io_failed = false;
    const bool ok = m.slots.empty() || verify_entry(m, t, &why, &io_failed);
    if (!io_failed) chunks += m.slots.size();  // an entry not read is not counted
    unpin(e);
    if (ok) continue;
    if (io_failed && unreadable != nullptr) {  // not known to be bad: kept
      unreadable->push_back("session " + std::to_string(m.session) + " in " + tier_name(t) + ": " +
                            why);
      continue;
    }
    ++bad;
    drop_corrupt(e, why);
  }
  if (chunks_checked) *chunks_checked = chunks;
  return bad;
}

}  // namespace cb::store
