// Saves (layer-streamed, visible at commit) and truncation.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/checksum.h"
#include "lib/store/journal.h"
#include "lib/store/store_internal.h"
#include "lib/store/thread_pool.h"
#include "lib/store/tier.h"

namespace cb::store {

namespace {
std::shared_future<bool> ready(bool v) {
  std::promise<bool> p;
  p.set_value(v);
  return p.get_future().share();
}
}  // namespace

SaveHandle::~SaveHandle() {
  abort();
}

SaveHandle::SaveHandle(SaveHandle&& o) noexcept
    : st_(std::move(o.st_)), commit_(std::move(o.commit_)) {}

SaveHandle& SaveHandle::operator=(SaveHandle&& o) noexcept {
  if (this != &o) {
    abort();
    st_ = std::move(o.st_);
    commit_ = std::move(o.commit_);
  }
  return *this;
}

bool SaveHandle::ok() const {
  return st_ && st_->admitted && !st_->failed.load();
}

TierKind SaveHandle::tier() const {
  return st_ ? st_->tier : TierKind::Dram;
}

int64_t SaveHandle::shared_tokens() const {
  return st_ ? st_->shared_tokens() : 0;
}

std::shared_future<bool> SaveHandle::write_layer(int layer, LayerSource src) {
  if (!st_ || !st_->admitted || commit_.valid() || layer < 0 || layer >= st_->meta.shape.n_layers ||
      st_->layers[layer].valid()) {
    return ready(false);
  }
  auto p = std::make_shared<std::promise<bool>>();
  st_->layers[layer] = p->get_future().share();
  std::shared_ptr<SaveState> st = st_;
  st->store->pool_->post([st, layer, src, p] {
    const bool ok = !st->failed.load() && st->store->write_layer_now(*st, layer, src);
    if (!ok) st->failed = true;
    p->set_value(ok);
  });
  return st_->layers[layer];
}

std::shared_future<bool> SaveHandle::commit() {
  if (commit_.valid()) return commit_;
  if (!st_ || !st_->admitted) {
    commit_ = ready(false);
    return commit_;
  }
  auto p = std::make_shared<std::promise<bool>>();
  commit_ = p->get_future().share();
  std::shared_ptr<SaveState> st = st_;
  st->store->publish_in_flight(st);
  st->store->pool_->post([st, p] {
    bool ok = true;
    for (auto& f : st->layers) ok = f.valid() && f.get() && ok;  // every layer must be written
    if (!ok) st->failed = true;
    p->set_value(st->store->finish_save(st));
  });
  return commit_;
}

void SaveHandle::abort() {
  if (!st_) return;
  if (!commit_.valid()) {
    for (auto& f : st_->layers) {
      if (f.valid()) f.wait();  // slots are written until then
    }
    st_->store->abort_save(*st_);
  }
  st_.reset();
  commit_ = std::shared_future<bool>();
}

SaveHandle AttentionStore::begin_save(const SaveRequest& req) {
  if (req.shape.n_layers <= 0 || req.shape.token_bytes == 0) {
    throw make_error("AttentionStore::begin_save",
                     "entry shape needs n_layers > 0 and token_bytes > 0");
  }
  if (req.shape.token_bytes > cfg_.chunk_bytes) {
    throw make_error("AttentionStore::begin_save",
                     "one token's K of one layer (" + std::to_string(req.shape.token_bytes) +
                         " bytes) exceeds the chunk size " + std::to_string(cfg_.chunk_bytes),
                     "use a larger --chunk");
  }
  if (req.tokens.empty()) throw make_error("AttentionStore::begin_save", "entry has no tokens");
  auto st = std::make_shared<SaveState>();
  st->store = this;
  EntryMeta& m = st->meta;
  m.session = req.session;
  m.fingerprint = req.fingerprint;
  m.encoding = req.encoding;
  m.shape = req.shape;
  m.tokens_per_chunk = static_cast<uint32_t>(cfg_.chunk_bytes / req.shape.token_bytes);
  m.tokens = req.tokens;
  m.hash_tokens();
  m.last_access = now();
  m.created = req.created;
  if (std::isnan(m.created)) {  // a re-save replacing the session's entry keeps its first one
    std::lock_guard<std::mutex> g(mu_);
    auto old = index_.find(req.session);
    m.created = old != index_.end() ? old->second->meta.created : m.last_access;
  }
  m.ttl = req.ttl < 0 ? cfg_.default_ttl : req.ttl;
  m.checksums.assign(m.n_chunks(), 0);
  st->layers.resize(static_cast<size_t>(m.shape.n_layers));
  st->admitted = req.append && (save_below(st.get()) || try_append(st.get()));
  if (!st->admitted) {  // a full save: whatever the append attempt set up does not apply
    st->first_chunk = 0;
    st->tail_offset = 0;
    st->base_slots.clear();
  }
  if (!st->admitted && req.replace_now) erase(req.session);
  for (int t = 0; t < kNumTiers && !st->admitted; ++t) {
    if (!tiers_[t]) continue;
    std::vector<uint64_t> slots;
    // Settled: an entry whose save is in flight is a candidate victim once it lands, so
    // which entry goes does not depend on how far the writes have got.
    if (reserve(static_cast<TierKind>(t), m.n_chunks(), false, &slots, true)) {
      m.slots = slots;
      st->own = std::move(slots);
      st->tier = static_cast<TierKind>(t);
      st->admitted = true;
    }
  }
  if (st->admitted) {
    st->entry = std::make_shared<StoreEntry>();
    st->entry->meta = m;
    st->entry->tier = st->tier;
    st->entry->in_flight = true;
    st->entry->lender = st->copy_owner;
  } else {
    stats_.add(Counter::SaveFailures);
  }
  SaveHandle h;
  h.st_ = st;
  return h;
}

AttentionStore::EntryPtr AttentionStore::append_base_locked(const EntryMeta& m) const {
  if (in_flight_.count(m.session)) return nullptr;  // the committed entry is on its way out
  auto it = index_.find(m.session);
  if (it == index_.end()) return nullptr;
  const EntryPtr& base = it->second;
  const EntryMeta& b = base->meta;
  int fastest = 0;
  while (!tiers_[fastest]) ++fastest;
  if (base->moving || base->doomed || static_cast<int>(base->tier) != fastest) return nullptr;
  if (b.fingerprint != m.fingerprint || b.encoding != m.encoding || !(b.shape == m.shape) ||
      b.tokens_per_chunk != m.tokens_per_chunk || b.n_tokens() > m.n_tokens() ||
      !std::equal(b.tokens.begin(), b.tokens.end(), m.tokens.begin())) {
    return nullptr;
  }
  if (b.ttl > 0 && now() - b.last_access > b.ttl) return nullptr;  // expired: a miss anyway
  return base;
}

bool AttentionStore::try_append(SaveState* st) {
  EntryMeta& m = st->meta;
  EntryPtr base;
  TierKind t = TierKind::Dram;
  uint64_t base_nt = 0, c0 = 0, shared = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    base = append_base_locked(m);
    if (!base) return false;
    const EntryMeta& b = base->meta;
    const uint64_t tpc = m.tokens_per_chunk, nb = static_cast<uint64_t>(b.n_tokens());
    c0 = nb / tpc;
    t = base->tier;
    // In memory, the base's last partial chunk grows in place: the bytes the base covers are
    // never written, so its readers are undisturbed. On SSD (whole aligned chunks) it is
    // written anew, and so is it while another append extends it.
    const bool in_place = nb % tpc != 0 && t != TierKind::Ssd && !base->appending;
    shared = c0 + (in_place ? 1 : 0);
    if (shared == 0) return false;  // nothing to share
    ++base->pins;                   // neither evicted nor moved while the save shares its chunks
    base->appending = base->appending || in_place;
    st->base = base;
    st->base_slots = b.slots;
    st->tail_offset = in_place ? static_cast<uint32_t>((nb % tpc) * m.shape.token_bytes) : 0;
    base_nt = b.n_token_chunks();
    for (uint64_t i = 0; i < m.checksums.size(); ++i) {  // an in-place chunk's: once written
      const uint64_t c = i % m.n_token_chunks();
      if (c < c0) m.checksums[i] = b.checksums[i / m.n_token_chunks() * base_nt + c];
    }
  }
  const uint64_t nt = m.n_token_chunks();
  std::vector<uint64_t> own;
  const bool room = reserve(t, m.n_chunks() - 2ull * m.shape.n_layers * shared, false, &own, true);
  std::lock_guard<std::mutex> g(mu_);
  const bool changed = base->doomed || base->meta.slots != st->base_slots;  // meanwhile
  if (!room || changed) {
    if (room) tier(t)->allocator().release(own);
    release_base_locked(st);
    return false;
  }
  m.slots.resize(m.n_chunks());
  size_t next = 0;
  for (uint64_t i = 0; i < m.slots.size(); ++i) {
    const uint64_t c = i % nt;
    m.slots[i] = c < shared ? st->base_slots[i / nt * base_nt + c] : own[next++];
  }
  st->own = std::move(own);
  st->tier = t;
  st->first_chunk = c0;  // only now: a full save writes every chunk
  return true;
}

void AttentionStore::release_base_locked(SaveState* st) {
  if (!st->base) return;
  // An append that extended the base's last chunk in place and has loads still to read that
  // chunk past the base's bytes (its commit failed, or it is doomed; a committed one's base
  // is gone) leaves the base marked: no later append extends the chunk in place under them.
  if (st->tail_offset > 0 && !(st->entry && st->entry->pins > 0)) st->base->appending = false;
  unpin_locked(st->base);
  st->base.reset();
}

bool AttentionStore::write_layer_now(SaveState& st, int layer, LayerSource src) {
  const EntryMeta& m = st.meta;
  const uint64_t nt = m.n_token_chunks();
  const uint64_t seed = chunk_seed(m.session);
  std::vector<ChunkIo> ops;
  ops.reserve(2 * nt);
  for (int kv = 0; kv < 2; ++kv) {
    const char* base = static_cast<const char*>(kv == 0 ? src.k : src.v);
    for (uint64_t c = st.first_chunk; c < nt; ++c) {  // an append's first chunks are the base's
      const uint64_t idx = m.chunk_index(layer, kv, c);
      const uint32_t off = c == st.first_chunk ? st.tail_offset : 0;  // extended in place
      if (m.chunk_len(c) == off) continue;                            // nothing new in it
      ops.emplace_back();
      ChunkIo& op = ops.back();
      op.slot = m.slots[idx];
      op.buf = const_cast<char*>(base + c * m.tokens_per_chunk * m.shape.token_bytes + off);
      op.len = m.chunk_len(c) - off;
      op.offset = off;
      if (off == 0 && st.tier == TierKind::Ssd) {
        // Hashed here, outside timed_io: the SSD's write meter (the demotion budget's rate)
        // times the device's writes, as it does for demotions, which hash nothing.
        st.meta.checksums[idx] = checksum(op.buf, op.len, seed);
      } else if (off == 0) {  // taken as the chunk is copied
        op.sum = &st.meta.checksums[idx];
        op.sum_seed = seed;
      }
    }
  }
  uint64_t bytes = 0;
  for (const ChunkIo& op : ops) bytes += op.len;
  {
    PendingWrite pending(st.tier == TierKind::Ssd ? &ssd_writes_ : nullptr, bytes);
    if (!timed_io(st.tier, true, ops.data(), ops.size())) return false;
  }
  if (st.tail_offset == 0) return true;
  // The chunk extended in place: its checksum covers the base's bytes there too, as stored.
  const uint64_t c = st.first_chunk;
  std::vector<char> whole(m.chunk_len(c));
  for (int kv = 0; kv < 2; ++kv) {
    ChunkIo op{m.slots[m.chunk_index(layer, kv, c)], whole.data(), m.chunk_len(c), 0};
    op.sum = &st.meta.checksums[m.chunk_index(layer, kv, c)];
    op.sum_seed = seed;
    if (!tier(st.tier)->read(&op, 1)) return false;
  }
  return true;
}

void AttentionStore::abort_save(SaveState& st) {
  std::lock_guard<std::mutex> g(mu_);
  if (st.finished || !st.admitted) return;
  st.finished = true;
  // Through the entry's lender: slots taken from another entry's SSD copy (admitted below)
  // wait for that entry's loads.
  EntryPtr lender = st.entry ? st.entry->lender : nullptr;
  free_slots_locked(&lender, st.tier, st.own);
  release_base_locked(&st);
}

void AttentionStore::publish_in_flight(const std::shared_ptr<SaveState>& st) {
  for (const auto& f : st->layers) {
    if (!f.valid()) return;  // a layer was never queued: the commit will fail
  }
  std::lock_guard<std::mutex> g(mu_);
  if (st->finished) return;
  auto it = in_flight_.find(st->meta.session);
  if (it != in_flight_.end()) unlink_locked(EntryPtr(it->second->entry));  // superseded
  in_flight_[st->meta.session] = st;
}

bool AttentionStore::finish_save(const std::shared_ptr<SaveState>& st) {
  bool ok = !st->failed.load();
  if (ok && st->tier == TierKind::Ssd && !sync_ssd(st->own)) ok = false;
  std::lock_guard<std::mutex> g(mu_);
  if (st->finished) return false;
  st->finished = true;
  auto fl = in_flight_.find(st->meta.session);
  if (fl != in_flight_.end() && fl->second == st) in_flight_.erase(fl);
  const EntryPtr e = st->entry;
  ok = ok && !e->doomed;  // erased, superseded or dropped by a failed load while in flight
  const EntryPtr base = st->base;
  if (ok && base) {  // the appended-to entry must be as it was: erased, truncated = lost
    auto b = index_.find(st->meta.session);
    ok = !base->doomed && b != index_.end() && b->second == base && base->tier == st->tier &&
         base->meta.slots == st->base_slots;
  }
  bool owns_all = !base;       // once the base is unlinked, its shared chunks are this save's
  if (base) e->lender = base;  // loads of the base may still read the shared chunks
  auto old = index_.find(st->meta.session);
  if (ok && old != index_.end()) {
    if (base) {  // keep the shared chunks out of the base's release
      const uint64_t bnt = base->meta.n_token_chunks();
      std::vector<uint64_t> rest;
      for (uint64_t i = 0; i < base->meta.slots.size(); ++i) {
        if (i % bnt >= st->shared_chunks()) rest.push_back(base->meta.slots[i]);
      }
      base->meta.slots = std::move(rest);
      owns_all = true;
      // The base's SSD copy still holds the whole chunks shared unchanged (a chunk extended
      // in place is not): it goes to the new entry.
      if (!base->ssd_copy.empty()) {
        e->ssd_copy = std::move(base->ssd_copy);
        e->copy_nt = base->copy_nt;
        e->copy_valid = std::min(base->copy_valid, st->first_chunk);
        base->ssd_copy.clear();
        base->copy_nt = base->copy_valid = 0;
        if (e->copy_valid == 0) drop_copy_locked(e);
      }
    }
    unlink_locked(EntryPtr(old->second));  // erase record first
  }
  if (ok && st->tier == TierKind::Ssd && !journal_commit(&st->meta)) ok = false;
  e->in_flight = false;
  if (ok && base) {  // the loads of the save in flight pin the new entry, which owns the chunks
    for (; st->base_load_pins > 0; --st->base_load_pins) unpin_locked(base);
    st->base_loads_released = true;
  }
  release_base_locked(st.get());
  // Now, not only when the entry frees slots: in-memory appends share every chunk and so
  // free nothing through the chain, which would keep every earlier entry of the session alive.
  skip_idle_lenders(&e->lender);
  move_cv_.notify_all();  // reserve() may be waiting for the saves in flight to land
  if (!ok) {
    drop_copy_locked(e);
    e->doomed = true;
    e->meta.slots.clear();
    // After the last load of it, if pinned.
    release_locked(e, st->tier, owns_all ? st->meta.slots : st->own);
    stats_.add(Counter::SaveFailures);
    return false;
  }
  if (base) stats_.add(Counter::AppendSaves);
  const double last_access = e->meta.last_access;  // loads while in flight touched it
  e->meta = st->meta;
  e->meta.last_access = std::max(last_access, e->meta.last_access);
  e->tier = st->tier;
  index_[e->meta.session] = e;
  write_back_due_ = true;  // a new entry may be among the first to evict
  ++changes_;
  stats_.add(Counter::Saves);
  return true;
}

bool AttentionStore::read_entry(const EntryMeta& m, TierKind t, std::vector<char>* k,
                                std::vector<char>* v, std::string* why) {
  const uint64_t tb = m.shape.token_bytes, n = static_cast<uint64_t>(m.n_tokens());
  const uint64_t nt = m.n_token_chunks(), seed = chunk_seed(m.session);
  k->assign(static_cast<size_t>(m.shape.n_layers) * n * tb, 0);
  v->assign(k->size(), 0);
  std::vector<ChunkIo> ops(2 * nt);
  std::vector<uint64_t> got(2 * nt);  // checksums taken as the chunks are read
  for (int l = 0; l < m.shape.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      char* base = (kv == 0 ? k : v)->data() + static_cast<uint64_t>(l) * n * tb;
      for (uint64_t c = 0; c < nt; ++c) {
        ChunkIo& op = ops[static_cast<size_t>(kv) * nt + c];
        op = ChunkIo{m.slots[m.chunk_index(l, kv, c)], base + c * m.tokens_per_chunk * tb,
                     m.chunk_len(c), 0};
        op.sum = &got[static_cast<size_t>(kv) * nt + c];
        op.sum_seed = seed;
      }
    }
    if (!timed_io(t, false, ops.data(), ops.size())) {
      *why = failed_op_problem(m, t, ops.data(), ops.size(), [&](size_t i) {
        return m.chunk_index(l, static_cast<int>(i / nt), i % nt);
      });
      return false;
    }
    for (int kv = 0; kv < 2; ++kv) {
      for (uint64_t c = 0; c < nt; ++c) {
        if (got[static_cast<size_t>(kv) * nt + c] != m.checksums[m.chunk_index(l, kv, c)]) {
          stats_.add(Counter::ChecksumFailures);
          *why = chunk_problem(m, t, m.chunk_index(l, kv, c), "checksum mismatch");
          return false;
        }
      }
    }
  }
  return true;
}

void AttentionStore::cut_copy_locked(const EntryPtr& e, uint64_t c0, uint64_t c1) {
  if (e->ssd_copy.empty()) return;
  // The copy loses the same token chunks of every layer, K and V, as the entry; its chunks
  // on either side of the cut keep their bytes, which are the entry's chunks now at those
  // positions (checksums are seeded by session, not position).
  const uint64_t nt = e->copy_nt, a = std::min(c0, nt), b = std::min(c1, nt);
  const uint64_t valid = e->copy_valid >= c1 ? e->copy_valid - (c1 - c0)  // both sides
                                             : std::min(e->copy_valid, c0);
  std::vector<uint64_t> kept, removed;
  for (uint64_t idx = 0; idx < e->ssd_copy.size(); ++idx) {
    const uint64_t c = idx % nt;
    (c >= a && c < b ? removed : kept).push_back(e->ssd_copy[idx]);
  }
  e->ssd_copy = std::move(kept);
  e->copy_nt = nt - (b - a);
  e->copy_valid = valid;
  release_locked(e, TierKind::Ssd, std::move(removed));
  if (e->copy_valid == 0 || e->copy_nt == 0) drop_copy_locked(e);
}

bool AttentionStore::truncate(SessionId session, const TruncateSpec& spec) {
  std::unique_lock<std::mutex> g(mu_);
  EntryPtr e;
  for (;;) {
    if (in_flight_.count(session)) return false;  // its commit has not landed
    auto it = index_.find(session);
    if (it == index_.end()) return false;
    e = it->second;
    if (!e->moving) break;
    move_cv_.wait(g);
  }
  if (e->meta.ttl > 0 && now() - e->meta.last_access > e->meta.ttl) {
    unlink_locked(e);  // expired: gone, as a lookup would find it (a rewrite would revive it)
    stats_.add(Counter::Expirations);
    return false;
  }
  const int64_t n = e->meta.n_tokens();
  const int64_t drop =
      spec.drop_tokens > 0
          ? spec.drop_tokens
          : static_cast<int64_t>(std::floor(spec.drop_ratio * static_cast<double>(n)));
  const int64_t sink = spec.sink_tokens;
  if (drop < 0 || sink < 0 || sink + drop > n || spec.drop_ratio < 0) return false;
  if (drop == 0) return true;
  stats_.add(Counter::Truncations);
  if (sink + drop == n && sink == 0) {
    unlink_locked(e);
    return true;
  }
  const int64_t tpc = e->meta.tokens_per_chunk;
  std::vector<TokenId> kept(e->meta.tokens.begin(), e->meta.tokens.begin() + sink);
  kept.insert(kept.end(), e->meta.tokens.begin() + sink + drop, e->meta.tokens.end());
  if (sink % tpc == 0 && (drop % tpc == 0 || sink + drop == n)) {
    // Whole chunks go: a metadata edit (RoPE is applied at load, so positions are free).
    const uint64_t c0 = static_cast<uint64_t>(sink / tpc);
    const uint64_t c1 =
        sink + drop == n ? e->meta.n_token_chunks() : static_cast<uint64_t>((sink + drop) / tpc);
    EntryMeta m = e->meta;
    m.tokens = kept;
    m.hash_tokens();
    m.slots.clear();
    m.checksums.clear();
    std::vector<uint64_t> removed;
    for (int l = 0; l < m.shape.n_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        for (uint64_t c = 0; c < e->meta.n_token_chunks(); ++c) {
          const uint64_t idx = e->meta.chunk_index(l, kv, c);
          if (c >= c0 && c < c1) {
            removed.push_back(e->meta.slots[idx]);
          } else {
            m.slots.push_back(e->meta.slots[idx]);
            m.checksums.push_back(e->meta.checksums[idx]);
          }
        }
      }
    }
    if (e->tier == TierKind::Ssd && !journal_commit(&m)) return false;
    e->meta = std::move(m);
    release_locked(e, e->tier, std::move(removed));
    cut_copy_locked(e, c0, c1);
    return true;
  }
  // Unaligned: read, cut, rewrite as a new entry of the session.
  ++e->pins;
  const EntryMeta m = e->meta;
  const TierKind t = e->tier;
  g.unlock();
  std::vector<char> k, v;
  std::string why;
  const bool read_ok = read_entry(m, t, &k, &v, &why);
  unpin(e);
  if (!read_ok) {
    drop_corrupt(e, why);
    return false;
  }
  stats_.add(Counter::TruncationRewrites);
  const uint64_t tb = m.shape.token_bytes;
  const uint64_t nn = static_cast<uint64_t>(kept.size());
  std::vector<char> nk(static_cast<size_t>(m.shape.n_layers) * nn * tb), nv(nk.size());
  for (int l = 0; l < m.shape.n_layers; ++l) {
    const uint64_t src = static_cast<uint64_t>(l) * static_cast<uint64_t>(n) * tb;
    const uint64_t dst = static_cast<uint64_t>(l) * nn * tb;
    const uint64_t head = static_cast<uint64_t>(sink) * tb;
    const uint64_t tail = (static_cast<uint64_t>(n - sink - drop)) * tb;
    const uint64_t tail_src = src + static_cast<uint64_t>(sink + drop) * tb;
    std::memcpy(nk.data() + dst, k.data() + src, head);
    std::memcpy(nv.data() + dst, v.data() + src, head);
    std::memcpy(nk.data() + dst + head, k.data() + tail_src, tail);
    std::memcpy(nv.data() + dst + head, v.data() + tail_src, tail);
  }
  {
    // Free the old entry first so the rewrite has room even in a full store; but only the
    // entry read: a save of the session that landed or started meanwhile holds a newer
    // history, which stands (not truncated: false).
    std::lock_guard<std::mutex> g2(mu_);
    auto it = index_.find(session);
    if (it == index_.end() || it->second != e || in_flight_.count(session) ||
        e->meta.tokens != m.tokens) {
      return false;
    }
    unlink_locked(e);
    stats_.add(Counter::Erases);
    move_cv_.notify_all();
  }
  SaveRequest req{session, m.fingerprint, m.encoding, m.shape, kept, m.ttl, m.created};
  SaveHandle h = begin_save(req);
  if (!h.ok()) return false;
  for (int l = 0; l < m.shape.n_layers; ++l) {
    const uint64_t off = static_cast<uint64_t>(l) * nn * tb;
    h.write_layer(l, LayerSource{nk.data() + off, nv.data() + off});
  }
  return h.commit().get();
}

}  // namespace cb::store
