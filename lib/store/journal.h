#pragma once
/// The SSD index's write-ahead journal: append-only records, each with its own checksum.
/// A commit record is appended (and fsync'ed) only after an entry's chunks are durable,
/// so replay after a crash yields exactly the completed entries; a torn tail (the start of
/// one record, or zeros) ends the replay and is cut off. Corrupt bytes elsewhere, a damaged
/// tail included, are skipped and counted. Every journal `rewrite` writes (a new store's, and
/// every compaction's) begins with a start record, so a journal that was deleted, emptied or
/// cut short is told apart from a store that holds nothing (`started`), and ends its records
/// with an end record counting its commits (`sealed`). A rewrite is atomic (a temporary file,
/// fsync'ed, renamed), so no crash tears it: a journal that ends, torn or not, before the end
/// record of the rewrite it begins with was cut short, and committed entries were lost
/// (`journal_cut`). Only the records appended after the end record may be torn by a crash;
/// there a torn last record is what an interrupted append leaves (nothing committed is lost:
/// a commit counts once its append returned), and a journal cut among the appended records
/// cannot be told from one (the records after the cut leave no trace).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "lib/store/chunk_allocator.h"
#include "lib/store/entry.h"

namespace cb::store {

/// What replay found.
struct ReplayResult {
  std::map<SessionId, EntryMeta> entries;  ///< live entries after all records
  uint64_t records = 0;                    ///< valid commit and erase records read
  bool started = false;                    ///< the file begins with an intact start record
  /// The start record's rewrite is whole: its end record follows it, with every commit it
  /// counts read in between.
  bool sealed = false;
  uint64_t discarded_records = 0;  ///< undecodable records, corrupt ranges, the torn tail
  uint64_t valid_bytes = 0;        ///< up to the end of the last valid record
  /// Bytes of corrupt records (skipped: the records in them are lost), and of a damaged tail
  /// that is not the start of one record a crash interrupted (a torn tail is not counted).
  uint64_t corrupt_bytes = 0;
  uint64_t max_generation = 0;
};

/// Whether a store whose marker has `marker_version` lost the journal `r` was read from: from
/// version 2 on a journal begins with its start record, so one without it, and with no
/// damaged bytes in its place (that is corruption, and the records after it are read), was
/// deleted, emptied or cut short, and the entries it indexed are gone.
inline bool journal_lost(const ReplayResult& r, int marker_version) {
  return marker_version >= 2 && !r.started && r.corrupt_bytes == 0;
}

/// Whether a store whose marker has `marker_version` has a journal `r` cut short inside the
/// records its last rewrite wrote: from version 3 on a rewrite ends with its end record, so a
/// journal that begins with its start record but lacks that end record (and has no damaged
/// bytes in its place: that is corruption) lost committed entries, which a crash cannot do.
/// A torn last record after the end record is an interrupted append, not a cut.
inline bool journal_cut(const ReplayResult& r, int marker_version) {
  return marker_version >= 3 && r.started && !r.sealed && r.corrupt_bytes == 0;
}

/// The entries of `r` that opening the store keeps (recovery, and what `store stat` reports):
/// newest generation first, an entry is kept when it is valid, its chunks hold at most
/// `chunk_bytes`, and `slots` (the SSD tier's allocator, or a fresh one of the marker's
/// capacity) lets it claim every slot it names; one with a slot out of range (a marker that
/// shrank) or claimed by a newer entry is dropped and counted in `*dropped`. Moves the kept
/// entries out of `r`.
std::map<SessionId, EntryMeta> recoverable_entries(ReplayResult* r, uint64_t chunk_bytes,
                                                   ChunkAllocator* slots, uint64_t* dropped);

/// An open journal file (thread-safe appends).
class Journal {
 public:
  /// Reads every valid record of `path` (a missing file is an empty journal; one that cannot be
  /// read is a cb::Error, never taken for an empty one).
  static ReplayResult replay(const std::string& path);
  /// Reads every valid record of a journal's bytes.
  static ReplayResult replay_bytes(const std::string& data);
  /// Whether the file at `path` begins with an intact start record, as every journal a store
  /// wrote does (`store clear` of a directory whose marker is gone).
  static bool begins_journal(const std::string& path);
  /// Stands in for fdatasync(fd) / fsync(fd) (fault-injection tests): 0, or -errno.
  using SyncFn = std::function<int(int fd)>;
  /// Rewrites `path` to hold a start record, one commit per entry and an end record
  /// (compaction), atomically; throws cb::Error. `sync` replaces its fsync (empty: fsync).
  static void rewrite(const std::string& path, const std::map<SessionId, EntryMeta>& entries,
                      const SyncFn& sync = {});

  /// Opens `path` for appending; throws cb::Error when it cannot. `sync` replaces the
  /// fdatasync of durable appends and the fsync of compactions (empty: the real calls).
  explicit Journal(const std::string& path, SyncFn sync = {});
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  /// Appends a commit of `m` (fdatasync'ed when `durable`); false on I/O failure, which
  /// leaves the file as it was before the record (the record is cut off again). A failed
  /// fdatasync also leaves the journal broken: the page cache may have dropped the unsynced
  /// records before it too (erases appended without a sync), so only a compaction, which
  /// rewrites the journal from the caller's index, makes it whole again; until then every
  /// append is refused (false).
  bool commit(const EntryMeta& m, bool durable);
  /// Appends an erase of `session` up to `generation`; false on I/O failure.
  bool erase(SessionId session, uint64_t generation, bool durable);
  /// Replaces the journal with one commit per entry of `live` (online compaction); false
  /// (the old journal kept) when that fails.
  bool compact(const std::map<SessionId, EntryMeta>& live);
  /// Where the journal ends now, and which file it is (compactions replace it): the point a
  /// compact_from() starts from.
  struct Mark {
    uint64_t offset = 0;
    uint64_t epoch = 0;
  };
  Mark mark() const;
  enum class Compaction {
    Done,        ///< the journal was replaced by the compacted one
    Superseded,  ///< compact() replaced the journal since the mark, or it broke: nothing done
    /// The records before the mark could not be read, are damaged, or `adjust` refused them:
    /// nothing done (only a compaction from what the caller holds can help).
    Unclean,
    /// Writing the new journal failed (`why`, also last_error()): the journal is as it was,
    /// unless it was replaced and then could not be reopened, which leaves it broken().
    Failed,
  };
  /// Changes the live entries replayed from the records before a mark, or refuses them (false).
  using Adjust = std::function<bool(std::map<SessionId, EntryMeta>* live)>;
  /// Online compaction that holds the journal's lock only at its end, so appends go on while
  /// it runs: replays the records before `at` (which must be a healthy journal's: started,
  /// nothing damaged), lets `adjust` change the live entries, writes one commit per entry to a
  /// new file (`path.compact`) and syncs it; then, under the lock, appends the records
  /// appended since `at` after its end record, syncs again and renames it over the journal.
  /// A crash at any point leaves the old journal or the new one, each whole. One at a time.
  Compaction compact_from(Mark at, const Adjust& adjust, std::string* why);
  /// Syncs the records appended without a sync (erase records) since the last sync, if any:
  /// called before slots an erased entry's record names are reused. False when the sync
  /// fails, which leaves the journal broken, as a failed durable append does (last_error()).
  bool sync_appended();
  /// Bytes appended since opening or the last compaction.
  uint64_t appended_bytes() const;
  /// Whether appends are refused until a compaction succeeds (see commit()).
  bool broken() const;
  /// What the last failed append or compaction met, naming the file ("DIR/journal.cbj:
  /// cannot append a record: No space left on device"); "" when none failed yet.
  std::string last_error() const;

 private:
  bool append(uint8_t type, const std::string& payload, bool durable);
  /// Writes a start record, one commit per entry and an end record to a new file `tmp`, and
  /// syncs it; 0, or an errno (the file removed).
  static int write_new(const std::string& tmp, const std::map<SessionId, EntryMeta>& entries,
                       const SyncFn& sync);
  /// After the file at path_ was replaced: opens it for appending (`appended` bytes appended
  /// since its rewrite) and returns the old descriptor, for the caller to close; -1 when it
  /// cannot be opened, which leaves the journal broken (caller holds mu_).
  int adopt_replaced_locked(uint64_t appended);
  /// Renames `tmp` over `path` and syncs the directory; 0, or an errno (`tmp` removed).
  static int replace_with(const std::string& tmp, const std::string& path);

  std::string path_;
  int fd_ = -1;
  mutable std::mutex mu_;
  SyncFn sync_;
  uint64_t appended_ = 0;
  uint64_t epoch_ = 0;  // compactions that replaced the file (Mark)
  // A failed append left a torn record it could not cut off, or a failed fdatasync left the
  // unsynced records in doubt: appends are refused until compact() rewrites the journal.
  bool broken_ = false;
  bool unsynced_ = false;  // a record was appended without a sync since the last one
  std::string last_error_;
};

}  // namespace cb::store
