#pragma once
/// The on-disk layout of a store directory: a marker file naming it a cachebench store
/// (with its geometry), preallocated data files, and the journal. Only these files are
/// ever created or deleted; nothing else in the directory is touched.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/error.h"

namespace cb::store {

/// The marker's version. 2: the journal begins with a start record (Journal::rewrite), so
/// one that does not was lost. 3: the records a rewrite writes end with an end record, so a
/// journal cut short inside them is told apart from a torn last append (journal_cut). A store
/// of an older version is read, and marked with this one once its journal has been rewritten
/// (a build that reads only up to version 2 refuses it then, rather than count each end
/// record as a discarded one).
inline constexpr int kStoreVersion = 3;

/// Geometry recorded in the marker file.
struct StoreDirInfo {
  int version = kStoreVersion;
  uint64_t chunk_bytes = 0;     ///< slot size (a multiple of 4096)
  uint64_t ssd_bytes = 0;       ///< budget: n_slots * chunk_bytes
  uint64_t slots_per_file = 0;  ///< slots in each data file
  uint64_t n_files = 0;         ///< data files

  /// Total slots over all data files.
  uint64_t n_slots() const { return ssd_bytes / (chunk_bytes == 0 ? 1 : chunk_bytes); }
};

/// Most slots a store may have: the SSD tier's allocator keeps a bit per slot (and up to 8
/// bytes per freed slot), sized when the store opens, so a marker claiming more is refused
/// (2^32 slots of the default 1 MiB chunk are 4 PiB).
inline constexpr uint64_t kMaxStoreSlots = uint64_t{1} << 32;
/// Room a new store needs on its file system beside its data files, for its journal.
inline constexpr uint64_t kMinJournalRoom = uint64_t{1} << 20;

/// An advisory lock (flock) on a store directory, held while a process uses the store:
/// opening a store rewrites its journal and allocates its slots, so a second process on the
/// same store would lose the first one's journal records and overwrite its slots. Taken by an
/// open store (replay, `store verify`) and `store clear`; `store stat` only reads and takes
/// none, so that a monitor running it never keeps a writer out. Where the file system cannot
/// lock a directory (NFS), a warning, and no lock.
class StoreDirLock {
 public:
  StoreDirLock() = default;
  /// Throws cb::Error naming `dir` when another process (or another open store of this
  /// process) holds the lock, or the directory cannot be opened.
  explicit StoreDirLock(const std::string& dir);
  ~StoreDirLock();
  StoreDirLock(StoreDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  StoreDirLock& operator=(StoreDirLock&& o) noexcept;
  StoreDirLock(const StoreDirLock&) = delete;
  StoreDirLock& operator=(const StoreDirLock&) = delete;

 private:
  int fd_ = -1;
};

/// Largest chunk: the I/O path's lengths are 32-bit (ChunkIo, EntryMeta::chunk_len).
inline constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;

/// open_regular's result when the path names something other than a regular file.
inline constexpr int kNotRegularFile = -2;
/// Opens one of the store's files by name (open(2)'s `flags` and `mode`, O_CLOEXEC added) only
/// when it is a regular file (or a link to one), or O_CREAT makes one: with O_NONBLOCK, so that
/// a FIFO put in its place never blocks the open (one for reading waits for a writer, one for
/// writing for a reader), then fstat. Returns the descriptor (O_NONBLOCK cleared again), -1
/// with errno set when the open failed, or kNotRegularFile (nothing left open).
int open_regular(const std::string& path, int flags, unsigned mode = 0644);
/// Reads `path` through open_regular into `*out`, at most `max_bytes` of it: 0, an errno, or
/// kNotRegularFile.
int read_regular(const std::string& path, std::string* out, uint64_t max_bytes = UINT64_MAX);
/// What `path` is when it is not a regular file, for messages: "a FIFO", "a directory", ...
std::string file_kind(const std::string& path);
/// What to do about a store file in `dir` that is not a regular file (`store clear` refuses it
/// too): move it away by hand, then clear the store.
std::string not_regular_fix(const std::string& dir);

/// Path of the marker file ("cachebench_store.json").
std::string marker_path(const std::string& dir);
/// Path of the journal ("journal.cbj").
std::string journal_path(const std::string& dir);
/// Where recovery keeps a journal it found corrupt before compacting it: the first of
/// journal.cbj.corrupt-1, -2, ... that does not exist (`store clear` removes them all).
std::string free_corrupt_journal_path(const std::string& dir);
/// Path of data file `i` ("data-0000.bin").
std::string data_file_path(const std::string& dir, uint64_t i);

/// Whether `dir` holds a cachebench store marker.
bool is_store_dir(const std::string& dir);
/// Reads the marker; throws cb::Error when missing or malformed (a field that is not an
/// integer >= 0, or a geometry plan_store would not write: partial slots, more than
/// kMaxStoreSlots slots or 64 data files, a file count that does not fit the slots).
StoreDirInfo read_store_marker(const std::string& dir);
/// The store's files are damaged: a data file missing, cut short or not a regular file.
/// `store verify` reports it as a finding (exit 1), not as a store it could not check.
class StoreDamage : public Error {
 public:
  using Error::Error;
};

/// Throws StoreDamage naming the file unless every data file the marker of an existing store
/// names exists and holds its slots (store creation preallocates them before writing the
/// marker, so a missing or short file is damage). Checked before the SSD tier sizes its slot
/// map from the marker, so a marker claiming more than its files hold allocates nothing.
void check_store_files(const std::string& dir, const StoreDirInfo& info);
/// Writes the marker atomically (temp file, fsync, rename); throws cb::Error on failure.
void write_store_marker(const std::string& dir, const StoreDirInfo& info);
/// Throws cb::Error (naming --chunk-size) unless `chunk_bytes` is a positive multiple of 4096
/// (O_DIRECT alignment) of at most kMaxChunkBytes.
void check_chunk_bytes(uint64_t chunk_bytes);
/// Geometry for a new store of `ssd_bytes` with `chunk_bytes` slots (check_chunk_bytes first).
StoreDirInfo plan_store(uint64_t ssd_bytes, uint64_t chunk_bytes);
/// Throws cb::UsageError (the command line named it) unless `dir` exists, is a directory and
/// (when `writable`) is writable;
/// `existing`: the directory of a store to open (not one to make a store in).
void check_store_dir(const std::string& dir, bool writable = true, bool existing = false);
/// The journal compaction threshold of a new store in `dir` whose file system has `room`
/// bytes left beside its data files (`data_bytes`): `configured`, or a quarter of `room` when
/// that is less (the journal grows until compacted, and a compaction writes the new journal
/// before the old one goes); throws cb::Error naming `dir` when `room` < kMinJournalRoom.
uint64_t fit_journal_compaction(const std::string& dir, uint64_t room, uint64_t data_bytes,
                                uint64_t configured);
/// Throws cb::Error when `extra_bytes` more would not fit on the filesystem of `dir`;
/// returns the bytes available there (before `extra_bytes` are taken).
uint64_t check_free_space(const std::string& dir, uint64_t extra_bytes);
/// Whether `dir` holds what clear_store_dir takes for a store: a marker (readable or not, well
/// formed or not), or a journal that begins with the store's start record (a store that lost
/// its marker, or one whose making stopped before its marker was written: a new store writes
/// its journal first). Files only named like a store's are not one. Throws cb::Error when the
/// journal cannot be judged (not a regular file).
bool holds_store(const std::string& dir);
/// Deletes the store's own files (marker, data files, journal and the corrupt journals
/// recovery kept, the temporary files of the marker and journal) and returns their names;
/// throws cb::Error when holds_store(dir) is false (a malformed or missing marker beside the
/// store's journal is cleared too, its data files found by name). Every file is checked
/// before any is deleted: one that is not a regular file (a FIFO, a directory; a symbolic link
/// counts as what it names) is an error naming it, and nothing is deleted, so a clear that
/// fails leaves the store as whole as it found it.
std::vector<std::string> clear_store_dir(const std::string& dir);

/// Makes a fresh scratch directory `parent`/`prefix`XXXXXX (mkdtemp: never one that exists)
/// and returns its path; throws cb::Error naming `parent` with `fix` when it cannot.
std::string make_scratch_dir(const std::string& parent, const std::string& prefix,
                             const std::string& fix);
/// Removes scratch directory `path` (`whose`: what it is, for the notes, e.g. "this run's
/// store directory"): a store's files there, by clear_store_dir's rules, the regular files
/// named in `own` (the caller's, e.g. a keep marker), then the directory once empty. Whatever
/// else it holds stays, with the directory, and a note on stderr names it. True when the
/// directory is gone.
bool remove_scratch_dir(const std::string& path, const std::string& whose,
                        const std::vector<std::string>& own = {});

}  // namespace cb::store
