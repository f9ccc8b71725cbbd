// Slot audit: every slot a tier has allocated belongs to exactly one thing the store tracks.
#include <sstream>
#include <unordered_set>

#include "lib/store/attention_store.h"
#include "lib/store/store_internal.h"
#include "lib/store/tier.h"

namespace cb::store {

std::string AttentionStore::audit_slots() const {
  std::lock_guard<std::mutex> g(mu_);
  std::ostringstream out;
  std::vector<std::vector<uint8_t>> refs(kNumTiers);
  for (int t = 0; t < kNumTiers; ++t) {
    if (tiers_[t]) refs[t].assign(tiers_[t]->allocator().capacity(), 0);
  }
  const auto mark = [&](TierKind t, const std::vector<uint64_t>& slots, SessionId s,
                        const char* what) {
    auto& r = refs[static_cast<int>(t)];
    const ChunkAllocator* a = tier(t) ? &tier(t)->allocator() : nullptr;
    uint64_t bad = 0, twice = 0;
    for (uint64_t slot : slots) {
      if (a == nullptr || !a->is_used(slot)) {
        ++bad;
      } else if (r[slot] > 0) {
        ++twice;
      } else {
        r[slot] = 1;
      }
    }
    if (bad > 0) {
      out << "session " << s << ": " << bad << " " << what << " slot(s) in " << tier_name(t)
          << " not allocated\n";
    }
    if (twice > 0) {
      out << "session " << s << ": " << twice << " " << what << " slot(s) in " << tier_name(t)
          << " also held by another\n";
    }
  };
  std::unordered_set<const StoreEntry*> seen;
  const auto visit = [&](const StoreEntry* e, SessionId s) {
    for (; e != nullptr && seen.insert(e).second; e = e->lender.get()) {
      // A save in flight's slots are its own (marked below) and its base's shared ones.
      if (!e->in_flight) mark(e->tier, e->meta.slots, s, "entry");
      if (!e->ssd_copy.empty()) mark(TierKind::Ssd, e->ssd_copy, s, "SSD copy");
      for (const auto& [t, slots] : e->retired) {
        mark(t, slots, s, "retired");
        out << "session " << s << ": " << slots.size() << " slot(s) in " << tier_name(t)
            << " wait for " << e->pins << " pin(s)" << (e->doomed ? " of a dropped entry" : "")
            << "\n";
      }
      if (e->pins != 0 || e->moving) {
        out << "session " << s << ": " << e->pins << " pin(s)" << (e->moving ? ", moving" : "")
            << (e->doomed ? ", dropped" : "") << "\n";
      }
    }
  };
  for (const auto& [id, e] : index_) visit(e.get(), id);
  if (!quarantined_ssd_.empty()) {
    mark(TierKind::Ssd, quarantined_ssd_, 0, "held back");
    out << quarantined_ssd_.size()
        << " SSD slot(s) held back until the journal, which may still name them as an erased "
           "entry's, can be rewritten\n";
  }
  for (const auto& [id, st] : in_flight_) {
    mark(st->tier, st->own, id, "save");
    visit(st->entry.get(), id);
  }
  for (int t = 0; t < kNumTiers; ++t) {
    if (!tiers_[t]) continue;
    std::vector<uint64_t> lost;
    uint64_t held = 0;
    for (uint64_t slot = 0; slot < refs[t].size(); ++slot) {
      if (refs[t][slot] > 0) ++held;
      if (refs[t][slot] == 0 && tiers_[t]->allocator().is_used(slot)) lost.push_back(slot);
    }
    if (!lost.empty()) {
      out << tier_name(static_cast<TierKind>(t)) << ": " << lost.size() << " of "
          << tiers_[t]->allocator().used() << " allocated slot(s) held by nothing (" << held
          << " accounted for):";
      for (size_t i = 0; i < lost.size() && i < 16; ++i) out << " " << lost[i];
      out << (lost.size() > 16 ? " ...\n" : "\n");
    }
  }
  return out.str();
}

}  // namespace cb::store
