#pragma once
/// Internal state shared by the AttentionStore's source files (not a public API).

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "lib/store/attention_store.h"
#include "lib/store/entry.h"

namespace cb::store {

/// An entry in the index. Fields are guarded by the store mutex.
struct StoreEntry {
  EntryMeta meta;
  TierKind tier = TierKind::Dram;
  int pins = 0;            ///< loads and moves in flight (slots must not be freed)
  bool moving = false;     ///< a demotion or promotion is copying it
  bool doomed = false;     ///< erased while pinned: gone from the index
  bool in_flight = false;  ///< a save's entry, visible to loads before its commit lands
  /// An append save is extending its last partial chunk in place (or one that failed did,
  /// and loads of it were still to read the chunk: then for as long as this entry lives).
  bool appending = false;
  bool clean_queued = false;  ///< a write-back ahead of eviction is queued for it
  bool cleaning = false;      ///< ... and running: it holds one pin, which eviction ignores
  int copy_lent = 0;          ///< saves below taking its SSD copy (neither dropped nor replaced)
  uint64_t accesses = 0;
  /// Slots no longer referenced by `meta`, freed when the last pin goes.
  std::vector<std::pair<TierKind, std::vector<uint64_t>>> retired;
  /// An append save's base, whose shared chunks this entry took over (it is doomed): loads
  /// of it may still read them, so slots this entry lets go wait for those loads too (the
  /// chain is followed to the nearest pinned lender, see AttentionStore::free_slots_locked).
  std::shared_ptr<StoreEntry> lender;
  /// Inclusive tiers: a prefetched entry keeps the SSD slots it had before promotion, laid
  /// out as its slots were then (`copy_nt` token chunks per layer and K/V). Token chunks
  /// [0, copy_valid) of them still hold exactly this entry's bytes (same checksums), so
  /// demoting the entry again writes only the others. Not journaled: a restart forgets it.
  /// Dropped when the entry changes those chunks or leaves the index, or when the SSD needs
  /// room and the advisor ranks it (as this entry, sized as the copy) before the SSD's entries
  /// (AttentionStore::reserve, drop_copy_locked). A DRAM entry gets one from
  /// the write-back ahead of eviction (StoreConfig::clean_ahead_bytes).
  std::vector<uint64_t> ssd_copy;
  uint64_t copy_nt = 0, copy_valid = 0;
};

/// Skips the lenders at the head of `*lender`'s chain that no load pins: they read nothing,
/// so slots need not wait for them (AttentionStore::free_slots_locked, finish_save).
inline void skip_idle_lenders(std::shared_ptr<StoreEntry>* lender) {
  while (*lender && (*lender)->pins == 0) *lender = (*lender)->lender;
}

/// What the advisor sees of `e` (session `id`), sized as `chunks` slots of `slot_bytes`.
inline EntryInfo entry_info(SessionId id, const StoreEntry& e, uint64_t chunks,
                            uint64_t slot_bytes) {
  return EntryInfo{
      id,        e.tier, chunks * slot_bytes, e.meta.n_tokens(), e.meta.created, e.meta.last_access,
      e.accesses};
}

/// A save in progress.
struct SaveState {
  AttentionStore* store = nullptr;
  EntryMeta meta;
  TierKind tier = TierKind::Dram;
  bool admitted = false;
  bool finished = false;  ///< committed or aborted (guarded by the store mutex)
  std::atomic<bool> failed{false};
  std::vector<std::shared_future<bool>> layers;  ///< one per layer once posted
  /// The index entry this save becomes, made at begin_save (before any write, so its meta
  /// has no checksums yet): loads of the save in flight pin it, and the pins carry over.
  std::shared_ptr<StoreEntry> entry;
  /// An append save: the session's committed entry it extends, pinned until the save ends.
  /// Token chunks [0, first_chunk) of every layer are the base's chunks (slots and
  /// checksums shared, never written); the rest are `own`, reserved for this save.
  std::shared_ptr<StoreEntry> base;
  /// Admitted below (store_admit.cc): the DRAM entry whose SSD copy's chunks this save took
  /// (gone from the index). Loads of it that began while those chunks were its own may still
  /// read them, so the save's entry lends through it (StoreEntry::lender).
  std::shared_ptr<StoreEntry> copy_owner;
  uint64_t first_chunk = 0;  ///< the first token chunk written (per layer, K and V)
  /// In a memory tier the base's last partial chunk is extended in place (one append at a
  /// time per base, StoreEntry::appending): chunk first_chunk is written from this byte on.
  uint32_t tail_offset = 0;
  std::vector<uint64_t> base_slots;  ///< the base's slots at begin_save (changed = lost)
  std::vector<uint64_t> own;         ///< the slots this save reserved (freed if it fails)
  /// Pins that loads of the save in flight hold on the base (guarded by the store mutex).
  /// A successful commit drops them at once, since the shared chunks are then the new
  /// entry's, which those loads pin: so when the base's leftover slots are freed does not
  /// depend on whether a load started before or after the commit landed.
  int base_load_pins = 0;
  bool base_loads_released = false;

  /// Token chunks [0, shared_chunks()) of every layer are the base's slots.
  uint64_t shared_chunks() const { return first_chunk + (tail_offset > 0 ? 1 : 0); }
  /// Leading tokens not written (SaveHandle::shared_tokens).
  int64_t shared_tokens() const {
    return static_cast<int64_t>(first_chunk * meta.tokens_per_chunk +
                                tail_offset / meta.shape.token_bytes);
  }
};

/// A load in progress.
struct LoadState {
  AttentionStore* store = nullptr;
  std::shared_ptr<StoreEntry> entry;
  EntryMeta meta;  ///< snapshot taken at pin time
  /// Loading a save in flight: the save (its checksums, filled in as layers are written)
  /// and its per-layer write futures (copies: each thread waits on its own).
  std::shared_ptr<SaveState> save;
  std::vector<std::shared_future<bool>> writes;
  /// The save's append base, pinned too: until the commit lands the shared chunks are its.
  std::shared_ptr<StoreEntry> base;
  TierKind tier = TierKind::Dram;
  int64_t tokens = 0;
  std::vector<LayerTarget> targets;
  std::vector<std::promise<bool>> promises;
  std::vector<std::shared_future<bool>> done;
  std::atomic<int> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex start_mu;  ///< guards `started` and `why`
  int started = 0;      ///< layers [0, started) have been posted to the I/O pool
  std::string why;      ///< the first failed layer's problem (AttentionStore::chunk_problem)
};

/// Slots of an entry with `nt` token chunks per layer and K/V that lives on its SSD copy
/// (`copy`, `copy_nt` per layer and K/V) for token chunks [0, reuse) and on `fresh` for the
/// rest; `stale` receives the copy's other slots.
void splice_copy(uint64_t nt, uint64_t reuse, const std::vector<uint64_t>& copy, uint64_t copy_nt,
                 const std::vector<uint64_t>& fresh, std::vector<uint64_t>* slots,
                 std::vector<uint64_t>* stale);

}  // namespace cb::store
