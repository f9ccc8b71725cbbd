#include "lib/store/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "lib/core/error.h"
#include "lib/store/checksum.h"
#include "lib/store/store_dir.h"

namespace cb::store {

namespace {

constexpr uint32_t kMagic = 0x314A4243;  // "CBJ1"
constexpr uint8_t kCommit = 1, kErase = 2, kStart = 3, kEnd = 4;
constexpr std::string_view kStartPayload = "cachebench store journal";
// The end record a rewrite closes its records with: 8 bytes, the number of commits it wrote.
constexpr size_t kEndPayload = 8;
constexpr size_t kHeader = 4 + 4 + 4 + 8;  // magic, type, len, checksum
constexpr uint32_t kMaxPayload = 1u << 30;

std::string frame(uint8_t type, const std::string& payload) {
  std::string rec(kHeader, '\0');
  const uint32_t t = type, len = static_cast<uint32_t>(payload.size());
  const uint64_t sum = checksum(payload.data(), payload.size(), t);
  std::memcpy(&rec[0], &kMagic, 4);
  std::memcpy(&rec[4], &t, 4);
  std::memcpy(&rec[8], &len, 4);
  std::memcpy(&rec[12], &sum, 8);
  return rec + payload;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t r = ::write(fd, s.data() + done, s.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

void fsync_dir(const std::string& file) {
  const std::string dir = file.substr(0, file.find_last_of('/'));
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Whether a whole, intact record starts at `pos`; its type and payload length if so. Each
/// payload checked costs its length from `*hash_budget`; one longer than what is left is not
/// checked (not a record).
bool record_at(const std::string& data, size_t pos, uint32_t* type, uint32_t* len,
               uint64_t* hash_budget) {
  if (data.size() - pos < kHeader) return false;
  uint32_t magic = 0;
  uint64_t sum = 0;
  std::memcpy(&magic, &data[pos], 4);
  std::memcpy(type, &data[pos + 4], 4);
  std::memcpy(len, &data[pos + 8], 4);
  std::memcpy(&sum, &data[pos + 12], 8);
  if (magic != kMagic || *len > kMaxPayload || data.size() - pos - kHeader < *len) return false;
  if (*len > *hash_budget) return false;
  *hash_budget -= *len;
  return checksum(data.data() + pos + kHeader, *len, *type) == sum;
}

// Whether the bytes after the last valid record are what a crash during one append leaves:
// the start of a record whose length runs past what was written (appends write the magic
// first), then perhaps zeros (a size that grew before its data was written). Anything else
// there is damage, counted as corrupt: random bytes over a whole journal are not a torn tail.
bool torn_tail(std::string_view tail) {
  const size_t last = tail.find_last_not_of('\0');
  if (last == std::string_view::npos) return true;
  tail = tail.substr(0, last + 1);
  const std::string_view magic(reinterpret_cast<const char*>(&kMagic), 4);
  if (tail.size() < magic.size()) return magic.substr(0, tail.size()) == tail;
  if (tail.substr(0, magic.size()) != magic) return false;
  if (tail.size() < kHeader) return true;
  uint32_t len = 0;
  std::memcpy(&len, tail.data() + 8, 4);
  return len > tail.size() - kHeader;
}

/// Refuses a journal that is not a regular file: reading a FIFO would block, and a link to
/// /dev/zero would be read into memory without end.
[[noreturn]] void not_regular(const std::string& path) {
  throw make_error(path, "the store's journal is not a regular file (" + file_kind(path) + ")",
                   "move it out of the way by hand; the store's index is then lost");
}

/// An errno of the functions below, or kNotRegularFile, in words.
std::string error_text(int err) {
  return err == kNotRegularFile ? "it is not a regular file" : std::strerror(err);
}

}  // namespace

bool Journal::begins_journal(const std::string& path) {
  std::string head;
  const size_t want = kHeader + kStartPayload.size();
  if (read_regular(path, &head, want) == kNotRegularFile) not_regular(path);
  if (head.size() < want) return false;  // missing, unreadable or shorter than a start record
  uint32_t type = 0, len = 0;
  uint64_t budget = head.size();
  return record_at(head, 0, &type, &len, &budget) && type == kStart &&
         std::string_view(head).substr(kHeader, len) == kStartPayload;
}

ReplayResult Journal::replay(const std::string& path) {
  std::string data;
  const int err = read_regular(path, &data);
  if (err == kNotRegularFile) not_regular(path);
  if (err == ENOENT) return ReplayResult{};  // none: an empty journal
  if (err != 0) {
    // Not taken for an empty journal: the store that opened it would rewrite it empty, and its
    // index (every entry on the SSD) would be lost.
    throw make_error(path, std::string("cannot read the store's journal: ") + std::strerror(err),
                     err == EACCES ? "run as a user who can read and write the store directory"
                                   : "check the store directory; nothing was changed");
  }
  return replay_bytes(data);
}

ReplayResult Journal::replay_bytes(const std::string& data) {
  ReplayResult res;
  const std::string magic(reinterpret_cast<const char*>(&kMagic), 4);
  size_t pos = 0;
  // Resyncing after damage checks every magic found, each against the length its header
  // claims: crafted damage (headers that each claim the rest of the file) would make that
  // quadratic. The candidates checked while resyncing may hash twice the file's size in all;
  // after that further ones are not checked and the rest counts as damage. Records read in
  // sequence cost nothing from it (the file's size at most, once).
  uint64_t hash_budget = 2 * static_cast<uint64_t>(data.size()) + (1u << 20);
  // Commit records read since the start record, while the end record of the rewrite that
  // wrote them is still to come (from marker version 3 on, every rewrite ends with one).
  bool in_rewrite = false;
  uint64_t rewrite_commits = 0;
  while (pos < data.size()) {
    uint32_t type = 0, len = 0;
    uint64_t in_sequence = ~uint64_t{0};
    if (!record_at(data, pos, &type, &len, &in_sequence)) {
      // Corrupt bytes: the next intact record (each starts with the magic) resumes the replay;
      // with none, this is the torn tail a crash leaves.
      size_t next = pos;
      while ((next = data.find(magic, next + 1)) != std::string::npos &&
             !record_at(data, next, &type, &len, &hash_budget)) {
      }
      if (next == std::string::npos) break;
      res.corrupt_bytes += next - pos;
      ++res.discarded_records;
      pos = next;
    }
    const std::string payload = data.substr(pos + kHeader, len);
    if (type == kStart && payload == kStartPayload) {
      if (pos == 0) {
        res.started = true;
        in_rewrite = true;
      }
      pos += kHeader + len;
      continue;
    }
    if (type == kEnd && payload.size() == kEndPayload) {
      // Whole only when every commit the rewrite wrote was read (a record spliced out, or
      // skipped as corrupt, leaves it short).
      uint64_t written = 0;
      std::memcpy(&written, payload.data(), 8);
      if (in_rewrite) res.sealed = written == rewrite_commits;
      in_rewrite = false;
      pos += kHeader + len;
      continue;
    }
    pos += kHeader + len;
    ++res.records;
    if (type == kCommit && in_rewrite) ++rewrite_commits;
    if (type == kCommit) {
      EntryMeta m;
      if (!decode_entry(payload, &m)) {
        ++res.discarded_records;
        continue;
      }
      res.max_generation = std::max(res.max_generation, m.generation);
      auto it = res.entries.find(m.session);
      if (it == res.entries.end() || it->second.generation <= m.generation) {
        res.entries[m.session] = std::move(m);
      }
    } else if (type == kErase && payload.size() == 16) {
      SessionId s = 0;
      uint64_t gen = 0;
      std::memcpy(&s, payload.data(), 8);
      std::memcpy(&gen, payload.data() + 8, 8);
      res.max_generation = std::max(res.max_generation, gen);
      auto it = res.entries.find(s);
      if (it != res.entries.end() && it->second.generation <= gen) res.entries.erase(it);
    } else {
      ++res.discarded_records;
    }
  }
  res.valid_bytes = pos;
  if (pos < data.size()) {
    ++res.discarded_records;
    if (!torn_tail(std::string_view(data).substr(pos))) res.corrupt_bytes += data.size() - pos;
  }
  return res;
}

void Journal::rewrite(const std::string& path, const std::map<SessionId, EntryMeta>& entries,
                      const SyncFn& sync) {
  const std::string tmp = path + ".tmp";
  int err = write_new(tmp, entries, sync);
  if (err == 0) err = replace_with(tmp, path);
  if (err != 0) {
    throw make_error(path, "cannot rewrite journal: " + error_text(err),
                     "check free space and permissions of the store directory");
  }
}

int Journal::write_new(const std::string& tmp, const std::map<SessionId, EntryMeta>& entries,
                       const SyncFn& sync) {
  int fd = open_regular(tmp, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd == kNotRegularFile) return kNotRegularFile;  // not removed: it is not the store's
  if (fd < 0) return errno;
  // Written back every 8 MiB as it goes: on a file system that orders data before its journal
  // commits (ext4's default), another file's fdatasync (the journal's appends, meanwhile)
  // would otherwise wait for all of this file's dirty pages at once.
  constexpr uint64_t kWriteBack = 8ull << 20;
  uint64_t off = 0, started = 0, waited = 0;
  // A writeback error is reported here, not again at the fsync (the kernel marks it seen), so
  // it fails the write; a file system without sync_file_range is left to the fsync.
  const auto range = [&](uint64_t from, uint64_t len, unsigned flags) {
    if (::sync_file_range(fd, static_cast<off_t>(from), static_cast<off_t>(len), flags) == 0) {
      return true;
    }
    return errno == ENOSYS || errno == EINVAL || errno == ESPIPE || errno == EOPNOTSUPP;
  };
  const auto put = [&](const std::string& rec) {
    if (!write_all(fd, rec)) return false;
    off += rec.size();
    if (off - started < kWriteBack) return true;
    // This piece's writeback starts and the previous piece's ends, so at most two pieces are
    // dirty or under writeback at a time. (A length of 0 would mean the whole file.)
    if (!range(started, off - started, SYNC_FILE_RANGE_WRITE)) return false;
    if (started > waited &&
        !range(waited, started - waited,
               SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)) {
      return false;
    }
    waited = started;
    started = off;
    return true;
  };
  bool ok = put(frame(kStart, std::string(kStartPayload)));
  for (const auto& [id, m] : entries) ok = ok && put(frame(kCommit, encode_entry(m)));
  const uint64_t n = entries.size();
  std::string end(kEndPayload, '\0');
  std::memcpy(&end[0], &n, 8);
  ok = ok && put(frame(kEnd, end));
  int err = ok ? 0 : (errno != 0 ? errno : EIO);
  if (ok) err = -(sync ? sync(fd) : (::fsync(fd) == 0 ? 0 : -errno));
  ::close(fd);
  if (err != 0) ::unlink(tmp.c_str());
  return err;
}

int Journal::replace_with(const std::string& tmp, const std::string& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return err;
  }
  fsync_dir(path);
  return 0;
}

Journal::Journal(const std::string& path, SyncFn sync) : path_(path), sync_(std::move(sync)) {
  fd_ = open_regular(path, O_WRONLY | O_CREAT | O_APPEND);
  if (fd_ == kNotRegularFile) not_regular(path);
  if (fd_ < 0) {
    throw make_error(path, std::string("cannot open journal: ") + std::strerror(errno),
                     "make the store directory writable");
  }
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

bool Journal::append(uint8_t type, const std::string& payload, bool durable) {
  const std::string rec = frame(type, payload);
  std::lock_guard<std::mutex> g(mu_);
  if (broken_) return false;
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const auto fail = [&](const char* what, int err) {
    last_error_ = path_ + ": " + what + ": " + std::strerror(err);
    // Cut the record off, whole or torn: its caller treats it as never written (a failed
    // commit frees the entry's slots), so it must not come back at the next open. If that
    // fails, later records would follow a torn one, and replay would lose them.
    if (before < 0 || ::ftruncate(fd_, before) != 0) broken_ = true;
    return false;
  };
  if (!write_all(fd_, rec)) return fail("cannot append a record", errno);
  if (durable) {
    const int rc = sync_ ? sync_(fd_) : (::fdatasync(fd_) == 0 ? 0 : -errno);
    if (rc != 0) {
      // After a failed fdatasync the kernel may have dropped the dirty pages of this record
      // and of the unsynced ones before it, and a later sync need not say so again: nothing
      // short of a rewrite (compact) is known to be on the disk.
      broken_ = true;
      return fail("cannot sync a record", -rc);
    }
  }
  unsynced_ = !durable;
  appended_ += rec.size();
  return true;
}

bool Journal::sync_appended() {
  std::lock_guard<std::mutex> g(mu_);
  if (broken_) return false;
  if (!unsynced_) return true;
  const int rc = sync_ ? sync_(fd_) : (::fdatasync(fd_) == 0 ? 0 : -errno);
  if (rc != 0) {
    broken_ = true;  // as after a durable append's failed sync
    last_error_ = path_ + ": cannot sync a record: " + std::strerror(-rc);
    return false;
  }
  unsynced_ = false;
  return true;
}

uint64_t Journal::appended_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  return appended_;
}

bool Journal::broken() const {
  std::lock_guard<std::mutex> g(mu_);
  return broken_;
}

std::string Journal::last_error() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_error_;
}

bool Journal::compact(const std::map<SessionId, EntryMeta>& live) {
  std::lock_guard<std::mutex> g(mu_);
  try {
    rewrite(path_, live, sync_);
  } catch (const Error& e) {
    last_error_ = e.what();
    return false;
  }
  const int old = adopt_replaced_locked(0);
  if (old < 0) return false;
  ::close(old);
  return true;
}

int Journal::adopt_replaced_locked(uint64_t appended) {
  ++epoch_;  // the file was replaced: a compact_from() under way is superseded
  const int fd = open_regular(path_, O_WRONLY | O_CREAT | O_APPEND);
  if (fd < 0) {
    last_error_ = path_ + ": cannot reopen the compacted journal: " +
                  error_text(fd == kNotRegularFile ? kNotRegularFile : errno);
    broken_ = true;  // the old fd points at the unlinked file
    return -1;
  }
  const int old = fd_;
  fd_ = fd;
  appended_ = appended;
  broken_ = false;
  return old;
}

Journal::Mark Journal::mark() const {
  std::lock_guard<std::mutex> g(mu_);
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  return {end < 0 ? 0 : static_cast<uint64_t>(end), epoch_};
}

namespace {
// Bytes [from, to) of `path` into `out`; an errno, or 0.
int read_range(const std::string& path, uint64_t from, uint64_t to, std::string* out) {
  const int fd = open_regular(path, O_RDONLY);
  if (fd == kNotRegularFile) return kNotRegularFile;
  if (fd < 0) return errno;
  out->assign(to - from, '\0');
  uint64_t done = 0;
  int err = 0;
  while (done < out->size()) {
    const ssize_t r =
        ::pread(fd, &(*out)[done], out->size() - done, static_cast<off_t>(from + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      err = r < 0 ? errno : EIO;  // EIO: the file is shorter than it was
      break;
    }
    done += static_cast<uint64_t>(r);
  }
  ::close(fd);
  return err;
}
}  // namespace

Journal::Compaction Journal::compact_from(Mark at, const Adjust& adjust, std::string* why) {
  const std::string tmp = path_ + ".compact";
  // The records before the mark, read and replayed without the lock: appends go on after it.
  ReplayResult r;
  {
    std::string data;
    const int err = read_range(path_, 0, at.offset, &data);
    if (err == 0) r = replay_bytes(data);
    // Unreadable or damaged bytes, or records read from a journal compact() replaced meanwhile
    // (then not the mark's).
    if (err != 0 || !r.started || r.corrupt_bytes != 0 || r.discarded_records != 0 ||
        (adjust && !adjust(&r.entries))) {
      std::lock_guard<std::mutex> g(mu_);
      return epoch_ != at.epoch ? Compaction::Superseded : Compaction::Unclean;
    }
  }
  const auto failed = [&](const std::string& what, int err) {  // caller holds mu_
    ::unlink(tmp.c_str());
    *why = last_error_ = path_ + ": " + what + ": " + error_text(err);
    return Compaction::Failed;
  };
  const int written = write_new(tmp, r.entries, sync_);
  r.entries.clear();
  // Under the lock: the records appended since the mark follow the new file's end record (as
  // appends follow a rewrite's), then it replaces the journal.
  std::unique_lock<std::mutex> g(mu_);
  if (broken_ || epoch_ != at.epoch) {
    ::unlink(tmp.c_str());
    return Compaction::Superseded;
  }
  if (written != 0) return failed("cannot write the compacted journal " + tmp, written);
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) return failed("cannot find the journal's end", errno);
  if (static_cast<uint64_t>(end) < at.offset) return failed("the journal shrank", EIO);
  std::string tail;
  if (const int err = read_range(path_, at.offset, static_cast<uint64_t>(end), &tail)) {
    return failed("cannot read the records appended while compacting", err);
  }
  const int fd = open_regular(tmp, O_WRONLY | O_APPEND);
  if (fd < 0) return failed("cannot reopen " + tmp, fd == kNotRegularFile ? fd : errno);
  int err = write_all(fd, tail) ? 0 : (errno != 0 ? errno : EIO);
  if (err == 0) err = -(sync_ ? sync_(fd) : (::fdatasync(fd) == 0 ? 0 : -errno));
  ::close(fd);
  if (err != 0) return failed("cannot append to " + tmp, err);
  if (const int e = replace_with(tmp, path_)) return failed("cannot replace it with " + tmp, e);
  const int old = adopt_replaced_locked(tail.size());
  if (old < 0) {
    *why = last_error_;
    return Compaction::Failed;
  }
  g.unlock();
  ::close(old);  // frees the old journal's blocks: tens of ms for a large one, off the lock
  return Compaction::Done;
}

bool Journal::commit(const EntryMeta& m, bool durable) {
  return append(kCommit, encode_entry(m), durable);
}

bool Journal::erase(SessionId session, uint64_t generation, bool durable) {
  std::string p(16, '\0');
  std::memcpy(&p[0], &session, 8);
  std::memcpy(&p[8], &generation, 8);
  return append(kErase, p, durable);
}

std::map<SessionId, EntryMeta> recoverable_entries(ReplayResult* r, uint64_t chunk_bytes,
                                                   ChunkAllocator* slots, uint64_t* dropped) {
  std::map<SessionId, EntryMeta> live;
  // Newest generations claim their slots first; an older entry overlapping them is stale.
  std::vector<EntryMeta*> order;
  for (auto& [id, m] : r->entries) order.push_back(&m);
  std::sort(order.begin(), order.end(),
            [](const EntryMeta* a, const EntryMeta* b) { return a->generation > b->generation; });
  for (EntryMeta* m : order) {
    bool ok = m->valid(nullptr) &&
              static_cast<uint64_t>(m->tokens_per_chunk) * m->shape.token_bytes <= chunk_bytes;
    std::vector<uint64_t> claimed;
    for (uint64_t s : m->slots) {
      if (!ok) break;
      ok = slots->claim(s);  // false when out of range or already claimed
      if (ok) claimed.push_back(s);
    }
    if (!ok) {
      slots->release(claimed);
      ++*dropped;
      continue;
    }
    live[m->session] = std::move(*m);
  }
  return live;
}

}  // namespace cb::store
