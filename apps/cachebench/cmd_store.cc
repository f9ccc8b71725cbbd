// cachebench store stat|verify|clear --store-dir D [--json]
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/cachebench/format.h"
#include "apps/cachebench/subcommands.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/store/attention_store.h"
#include "lib/store/journal.h"
#include "lib/store/size_parse.h"
#include "lib/store/store_dir.h"

namespace cb::app {
namespace {

struct StoreArgs {
  std::string dir;
  bool json = false;
  std::string io = "auto";
};

void row(const char* k, const std::string& v) {
  std::printf("%-22s %s\n", k, v.c_str());
}

// Reads the marker and replays the journal without modifying anything.
int run_stat(const StoreArgs& a) {
  // Not writable: a snapshot or read-only media is fine.
  store::check_store_dir(a.dir, /*writable=*/false, /*existing=*/true);
  const store::StoreDirInfo info = store::read_store_marker(a.dir);
  store::check_store_files(a.dir, info);  // a missing or short data file is damage
  store::ReplayResult r = store::Journal::replay(store::journal_path(a.dir));
  const bool lost = store::journal_lost(r, info.version);
  const bool cut = store::journal_cut(r, info.version);
  // The entries as opening the store would find them (a marker that shrank, or slots two
  // entries name, drop some), not the journal's records as they stand.
  store::ChunkAllocator slots(info.n_slots());
  uint64_t dropped = 0;
  const std::map<store::SessionId, store::EntryMeta> entries =
      store::recoverable_entries(&r, info.chunk_bytes, &slots, &dropped);
  uint64_t chunks = 0, data = 0, tokens = 0;
  struct PerModel {
    uint64_t entries = 0, tokens = 0;
    std::string encodings;
  };
  std::map<std::string, PerModel> models;
  for (const auto& [id, m] : entries) {
    chunks += m.slots.size();
    data += m.data_bytes();
    tokens += static_cast<uint64_t>(m.n_tokens());
    PerModel& pm = models[m.fingerprint.description];
    ++pm.entries;
    pm.tokens += static_cast<uint64_t>(m.n_tokens());
    const std::string enc = store::key_encoding_name(m.encoding);
    if (pm.encodings.find(enc) == std::string::npos) {
      pm.encodings += (pm.encodings.empty() ? "" : ",") + enc;
    }
  }
  const uint64_t used = chunks * info.chunk_bytes;
  if (a.json) {
    nlohmann::json j;
    j["store_dir"] = a.dir;
    j["capacity_bytes"] = info.ssd_bytes;
    j["chunk_bytes"] = info.chunk_bytes;
    j["data_files"] = info.n_files;
    j["entries"] = entries.size();
    j["entries_dropped_on_open"] = dropped;
    j["chunks"] = chunks;
    j["used_bytes"] = used;
    j["kv_bytes"] = data;
    j["tokens"] = tokens;
    j["journal_records"] = r.records;
    j["journal_discarded_records"] = r.discarded_records;
    j["journal_corrupt_bytes"] = r.corrupt_bytes;
    j["journal_lost"] = lost;
    j["journal_cut"] = cut;
    nlohmann::json jm = nlohmann::json::array();
    for (const auto& [name, pm] : models) {
      jm.push_back({{"model", name},
                    {"entries", pm.entries},
                    {"tokens", pm.tokens},
                    {"key_encoding", pm.encodings}});
    }
    j["models"] = jm;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  row("store", a.dir);
  row("capacity", human_bytes(info.ssd_bytes) + " in " + std::to_string(info.n_slots()) +
                      " chunks of " + human_bytes(info.chunk_bytes) + " (" +
                      std::to_string(info.n_files) + " data files)");
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%",
                info.ssd_bytes == 0 ? 0.0 : 100.0 * static_cast<double>(used) / info.ssd_bytes);
  row("used", human_bytes(used) + " (" + pct + "), " + std::to_string(chunks) + " chunks");
  row("entries", std::to_string(entries.size()) + " (" + human_count(tokens) + " tokens, " +
                     human_bytes(data) + " of K/V)" +
                     (dropped > 0 ? "; " + std::to_string(dropped) +
                                        " more in the journal that opening the store drops (a "
                                        "chunk beyond the marker's capacity or named by a newer "
                                        "entry, or an invalid record)"
                                  : ""));
  row("journal", std::to_string(r.records) + " records, " + std::to_string(r.discarded_records) +
                     " discarded (torn or corrupt)" +
                     (r.corrupt_bytes > 0 ? ", " + std::to_string(r.corrupt_bytes) +
                                                " corrupt bytes skipped (records lost)"
                                          : "") +
                     (lost ? "; LOST: it does not begin with its start record (missing, emptied "
                             "or cut short), so the entries it indexed, if any, are gone"
                           : "") +
                     (cut ? "; CUT SHORT: it ends before the end record of the records its last "
                            "rewrite wrote, so committed entries were lost"
                          : ""));
  for (const auto& [name, pm] : models) {
    row("  model", (name.empty() ? "(unnamed)" : name) + ": " + std::to_string(pm.entries) +
                       " entries, " + human_count(pm.tokens) + " tokens, " + pm.encodings);
  }
  return 0;
}

int run_verify(const StoreArgs& a) {
  store::check_store_dir(a.dir, /*writable=*/true, /*existing=*/true);
  // A directory that is not a store: said as stat says it (exit 2). A data file missing or
  // cut short is damage verify found (exit 1), as a bad chunk or a lost journal is.
  try {
    store::check_store_files(a.dir, store::read_store_marker(a.dir));
  } catch (const store::StoreDamage& e) {
    return report_error(e, 1);
  }
  // Opening a store writes its journal, so one without a journal lost it (and with it the
  // index of whatever its data files hold); opening it now writes an empty one.
  const bool journal_missing = ::access(store::journal_path(a.dir).c_str(), F_OK) != 0;
  store::StoreConfig c;
  c.store_dir = a.dir;  // adopt the store's geometry
  c.io_mode = store::parse_io_mode(a.io);
  store::AttentionStore st(c);
  const uint64_t entries = st.sessions().size();
  uint64_t chunks = 0;
  std::vector<std::string> unreadable;  // read errors: kept, and verify cannot vouch for them
  const uint64_t bad = st.verify_all(&chunks, &unreadable);
  for (const std::string& u : unreadable) {
    std::fprintf(stderr,
                 "cachebench store: cannot read %s; kept (check the disk, then verify again)\n",
                 u.c_str());
  }
  const store::StatsSnapshot s = st.stats();
  const uint64_t corrupt = s.get(store::Counter::CorruptJournalBytes);
  // Entries recovery could not place in this store (slots past its end, chunks too small for
  // their rows, slots claimed twice) were dropped from the journal: lost, not ok.
  const uint64_t dropped = s.get(store::Counter::DiscardedEntries);
  // A store of marker version 2 whose journal lacks its start record (missing, emptied or
  // cut short): what it indexed is lost.
  const bool journal_lost = s.get(store::Counter::JournalLost) > 0;
  // One whose start record is there but which ends before the end record of the records the
  // rewrite that began it wrote (marker version 3): cut short, committed entries lost. (A torn
  // record after that end record is an append a crash interrupted: discarded, nothing lost.)
  const bool journal_cut = s.get(store::Counter::JournalCut) > 0;
  const bool ok =
      bad == 0 && corrupt == 0 && !journal_missing && !journal_lost && !journal_cut && dropped == 0;
  if (a.json) {
    nlohmann::json j;
    j["store_dir"] = a.dir;
    j["entries_checked"] = entries;
    j["chunks_checked"] = chunks;
    j["bad_entries"] = bad;
    j["dropped_entries"] = dropped;
    j["journal_corrupt_bytes"] = corrupt;
    j["journal_missing"] = journal_missing;
    j["journal_lost"] = journal_lost || journal_missing;
    j["journal_cut"] = journal_cut;
    j["unreadable_entries"] = unreadable;  // kept, not verified
    j["ok"] = ok && unreadable.empty();
    j["stats"] = nlohmann::json::parse(s.to_json());
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const auto& d : st.describe()) row("tier", d);
    row("entries checked", std::to_string(entries));
    row("chunks checked", std::to_string(chunks));
    row("bytes read", human_bytes(s.get(store::TierKind::Ssd, store::TierCounter::BytesRead)));
    char gbps[32];
    std::snprintf(gbps, sizeof gbps, "%.2f GB/s", s.gbps(store::TierKind::Ssd, false));
    row("read rate", gbps);
    row("checksum failures", std::to_string(s.get(store::Counter::ChecksumFailures)));
    row("bad entries", std::to_string(bad) + (bad > 0 ? " (dropped from the store)" : ""));
    if (!unreadable.empty()) {
      row("unreadable entries",
          std::to_string(unreadable.size()) + " (I/O errors: kept, not verified)");
    }
    const auto count = [&](store::Counter which, const char* noun) {
      return count_of(static_cast<long long>(s.get(which)), noun);
    };
    row("recovery", count(store::Counter::RecoveredEntries, "entry") + ", " +
                        count(store::Counter::DiscardedRecords, "journal record") + " and " +
                        count(store::Counter::DiscardedEntries, "entry") + " discarded");
    if (corrupt > 0) {
      row("journal", std::to_string(corrupt) +
                         " corrupt bytes skipped: the records in them are lost; the journal as "
                         "found is kept as journal.cbj.corrupt-N in the store directory");
    }
    if (dropped > 0) {
      row("journal", std::to_string(dropped) +
                         " entries did not fit this store's geometry (slots past its end, "
                         "chunks smaller than their rows, slots claimed twice) and were dropped");
    }
    if (journal_missing) {
      row("journal",
          "missing: the entries it indexed, if any, are lost (an empty journal was "
          "written); `store clear` starts over");
    } else if (journal_lost) {
      row("journal",
          "does not begin with its start record (emptied or cut short): the entries it "
          "indexed, if any, are lost (it was rewritten); `store clear` starts over");
    } else if (journal_cut) {
      row("journal",
          "cut short: it ends inside the records its last rewrite wrote (no crash tears those), "
          "so committed entries were lost; the " +
              std::to_string(s.get(store::Counter::RecoveredEntries)) +
              " before the cut were kept (it was rewritten)");
    }
    row("result", !ok                  ? "CORRUPTION FOUND"
                  : unreadable.empty() ? "ok"
                                       : "NOT VERIFIED: entries could not be read");
  }
  if (!ok) return 1;
  return unreadable.empty() ? 0 : 2;  // could not verify (the README's exit 2)
}

int run_clear(const StoreArgs& a) {
  store::check_store_dir(a.dir, /*writable=*/true, /*existing=*/true);
  const store::StoreDirLock lock(a.dir);
  const auto removed = store::clear_store_dir(a.dir);
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"store_dir", a.dir}, {"removed", removed}}.dump(2).c_str());
  } else {
    row("store", a.dir);
    row("removed", count_of(static_cast<long long>(removed.size()), "file") +
                       " (marker, journal, data files)");
  }
  return 0;
}

}  // namespace

void register_store(CLI::App& app) {
  CLI::App* store =
      app.add_subcommand("store", "Inspect, verify or clear an AttentionStore directory");
  store->require_subcommand(1);
  struct Sub {
    const char* name;
    const char* help;
    int (*run)(const StoreArgs&);
  };
  static const Sub subs[] = {
      {"stat", "Show capacity, use, entries and models of a store (reads only the journal)",
       run_stat},
      {"verify",
       "Read every chunk of every entry and check its checksum; corrupt entries are dropped; "
       "exits 1 when any were found, 2 when the store could not be verified (not a store, in "
       "use, unreadable)",
       run_verify},
      {"clear",
       "Delete the store's own files (marker, journal, data files); refuses a directory that is "
       "not a cachebench store, and a store with a file that is not a regular file (deleting "
       "nothing), and never touches other files",
       run_clear},
  };
  for (const Sub& s : subs) {
    auto args = std::make_shared<StoreArgs>();
    CLI::App* sub = store->add_subcommand(s.name, s.help);
    sub->add_option("--store-dir", args->dir, "the store directory")->required();
    sub->add_flag("--json", args->json, "print machine-readable JSON instead of a table");
    if (std::string(s.name) == "verify") {
      sub->add_option("--io", args->io, "I/O backend: auto, uring or pread")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "uring", "pread"}));
    }
    auto run = s.run;
    // verify's 1 means corruption found (a CI step tells it from a store it could not read),
    // as gate's 1 means a regression.
    const int error_exit = std::string(s.name) == "verify" ? 2 : 1;
    set_action(
        sub, [args, run] { return run(*args); }, error_exit);
  }
}

}  // namespace cb::app
