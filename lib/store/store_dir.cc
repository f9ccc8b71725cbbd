#include "lib/store/store_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/core/regular_file.h"
#include "lib/store/journal.h"
#include "lib/store/size_parse.h"

namespace cb::store {

namespace {
constexpr const char* kFormat = "cachebench-store";
constexpr uint64_t kFileBytes = 1ull << 30;  // target size of one data file
constexpr uint64_t kMaxFiles = 64;
/// A geometry field of the marker: a JSON integer >= 0 (a float or a negative number is
/// malformed; converting one would be undefined behaviour).
uint64_t marker_count(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_unsigned()) {
    throw std::runtime_error(std::string("\"") + key + "\" is a JSON " + v.type_name() +
                             ", not a non-negative integer");
  }
  return v.get<uint64_t>();
}
}  // namespace

std::string not_regular_fix(const std::string& dir) {
  return "move it out of the way by hand (`store clear` removes only regular files), then run "
         "`cachebench store clear --store-dir " +
         dir + "`";
}

int open_regular(const std::string& path, int flags, unsigned mode) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, static_cast<mode_t>(mode));
  struct stat st {};
  if (fd < 0) {
    // A FIFO without a reader refuses a non-blocking open for writing (ENXIO), a directory
    // any open for writing (EISDIR): neither is a regular file.
    const int err = errno;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return kNotRegularFile;
    errno = err;
    return -1;
  }
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return kNotRegularFile;
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);  // blocking I/O from here on, as asked
  return fd;
}

int read_regular(const std::string& path, std::string* out, uint64_t max_bytes) {
  out->clear();
  const int fd = open_regular(path, O_RDONLY);
  if (fd == kNotRegularFile) return kNotRegularFile;
  if (fd < 0) return errno;
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    out->reserve(
        static_cast<size_t>(std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes)));
  }
  int err = 0;
  char buf[1 << 16];
  while (out->size() < max_bytes) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(sizeof buf, max_bytes - out->size()));
    const ssize_t r = ::read(fd, buf, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    out->append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return err;
}

std::string file_kind(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) != 0 ? "gone" : file_type_name(st.st_mode);
}

std::string marker_path(const std::string& dir) {
  return dir + "/cachebench_store.json";
}
std::string journal_path(const std::string& dir) {
  return dir + "/journal.cbj";
}
std::string free_corrupt_journal_path(const std::string& dir) {
  for (int i = 1;; ++i) {
    const std::string p = journal_path(dir) + ".corrupt-" + std::to_string(i);
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return p;
  }
}
std::string data_file_path(const std::string& dir, uint64_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "/data-%04llu.bin", static_cast<unsigned long long>(i));
  return dir + name;
}

bool is_store_dir(const std::string& dir) {
  struct stat st {};
  return ::stat(marker_path(dir).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

StoreDirInfo read_store_marker(const std::string& dir) {
  const std::string p = marker_path(dir);
  std::string body;
  const int rc = read_regular(p, &body);
  if (rc == kNotRegularFile) {  // a FIFO would block the read, a link to /dev/zero never end
    throw make_error(p, "the store's marker is not a regular file (" + file_kind(p) + ")",
                     not_regular_fix(dir));
  }
  if (rc != 0) {
    // A marker (or directory) there but unreadable is not "no store": say why.
    if (rc != ENOENT && rc != ENOTDIR) {
      throw make_error(p, std::string("cannot read the store's marker: ") + std::strerror(rc),
                       rc == EACCES ? "run as a user who can read the store directory"
                                    : "check the store directory");
    }
    // The --store-dir given to a replay holds its kept stores, one directory each: name them.
    std::string kept;
    size_t n_kept = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("cachebench-store-", 0) != 0 || !is_store_dir(it->path().string())) continue;
      if (++n_kept <= 3) kept += (kept.empty() ? "" : ", ") + it->path().string();
    }
    if (n_kept > 3) kept += " and " + std::to_string(n_kept - 3) + " more";
    throw make_error(dir, "not a cachebench store (no " + p + ")",
                     !kept.empty() ? "it holds stores a replay kept: " + kept + "; pass one of them"
                                   : "pass the directory a store was created in (replay --ssd SIZE "
                                     "--store-dir D makes one per run under D, removed when the "
                                     "run ends unless --keep-store keeps it as "
                                     "D/cachebench-store-MODE-PID)");
  }
  try {
    if (json_nesting_depth(body) > 8) {  // a marker is one flat object
      throw std::runtime_error("it nests JSON more than 8 levels deep");
    }
    const auto j = nlohmann::json::parse(body);
    const auto format = j.is_object() ? j.find("format") : j.end();
    if (!j.is_object() || format == j.end() || !format->is_string()) {
      throw std::runtime_error("no \"format\" field naming it a cachebench store marker");
    }
    if (format->get<std::string>() != kFormat) {
      throw std::runtime_error("\"format\" is " + format->dump() + ", not \"" +
                               std::string(kFormat) + "\"");
    }
    StoreDirInfo info;
    const uint64_t version = marker_count(j, "version");
    if (version < 1 || version > static_cast<uint64_t>(kStoreVersion)) {
      throw std::runtime_error("version " + std::to_string(version) +
                               " is not one this build reads (1.." + std::to_string(kStoreVersion) +
                               ")");
    }
    info.version = static_cast<int>(version);
    info.chunk_bytes = marker_count(j, "chunk_bytes");
    info.ssd_bytes = marker_count(j, "ssd_bytes");
    info.slots_per_file = marker_count(j, "slots_per_file");
    info.n_files = marker_count(j, "n_files");
    // Exactly what plan_store writes: whole slots, at most kMaxStoreSlots of them, in at most
    // kMaxFiles files, the last one partly used.
    if (info.chunk_bytes == 0 || info.chunk_bytes % 4096 != 0 ||
        info.chunk_bytes > kMaxChunkBytes || info.slots_per_file == 0 ||
        info.ssd_bytes % info.chunk_bytes != 0 || info.n_slots() == 0 ||
        info.n_slots() > kMaxStoreSlots || info.n_files > kMaxFiles ||
        info.n_files != info.n_slots() / info.slots_per_file +
                            (info.n_slots() % info.slots_per_file != 0 ? 1 : 0)) {
      throw std::runtime_error(
          "inconsistent geometry (chunk_bytes " + std::to_string(info.chunk_bytes) +
          ", ssd_bytes " + std::to_string(info.ssd_bytes) + ", slots_per_file " +
          std::to_string(info.slots_per_file) + ", n_files " + std::to_string(info.n_files) + ")");
    }
    return info;
  } catch (const std::exception& e) {
    throw make_error(p, std::string("malformed store marker: ") + e.what(),
                     "run `cachebench store clear --store-dir " + dir + "` to start over");
  }
}

void check_store_files(const std::string& dir, const StoreDirInfo& info) {
  for (uint64_t i = 0; i < info.n_files; ++i) {
    const std::string p = data_file_path(dir, i);
    const uint64_t first = i * info.slots_per_file;
    const uint64_t bytes = std::min(info.slots_per_file, info.n_slots() - first) * info.chunk_bytes;
    const std::string fix = "run `cachebench store clear --store-dir " + dir + "` to start over";
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        throw StoreDamage(
            error_message(p, "data file of the store is missing: the store is damaged", fix));
      }
      throw make_error(p, std::string("cannot stat data file: ") + std::strerror(errno),
                       "check the store directory");
    }
    if (!S_ISREG(st.st_mode)) {
      throw StoreDamage(
          error_message(p, "data file of the store is not a regular file (" + file_kind(p) + ")",
                        not_regular_fix(dir)));
    }
    if (static_cast<uint64_t>(st.st_size) < bytes) {
      throw StoreDamage(error_message(
          p,
          "data file of the store holds " + std::to_string(st.st_size) +
              " bytes where its marker gives it " + std::to_string(bytes) +
              ": the store is damaged (truncated) or its marker does not belong to it",
          fix));
    }
  }
}

void write_store_marker(const std::string& dir, const StoreDirInfo& info) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = info.version;
  j["chunk_bytes"] = info.chunk_bytes;
  j["ssd_bytes"] = info.ssd_bytes;
  j["slots_per_file"] = info.slots_per_file;
  j["n_files"] = info.n_files;
  // write_file_atomically writes into a FIFO or a device rather than replace it (a result
  // sent to /dev/stdout): a marker written so would block on a FIFO, or be lost.
  const std::string p = marker_path(dir);
  struct stat st {};
  if (::stat(p.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw make_error(p, "the store's marker is not a regular file (" + file_kind(p) + ")",
                     not_regular_fix(dir));
  }
  write_file_atomically(p, j.dump(2) + "\n", "the store marker");
}

void check_chunk_bytes(uint64_t chunk_bytes) {
  if (chunk_bytes == 0 || chunk_bytes % 4096 != 0 || chunk_bytes > kMaxChunkBytes) {
    throw make_error("--chunk-size",
                     "chunk size " + std::to_string(chunk_bytes) +
                         " is not a positive multiple of 4096 (O_DIRECT alignment) of at most "
                         "1 GiB",
                     "use e.g. 1MiB");
  }
}

StoreDirInfo plan_store(uint64_t ssd_bytes, uint64_t chunk_bytes) {
  check_chunk_bytes(chunk_bytes);
  StoreDirInfo info;
  info.chunk_bytes = chunk_bytes;
  const uint64_t slots = ssd_bytes / chunk_bytes;
  info.ssd_bytes = slots * chunk_bytes;
  // 1 GiB files, but never more than kMaxFiles of them (file descriptors stay few).
  info.slots_per_file =
      std::max<uint64_t>({1, kFileBytes / chunk_bytes, (slots + kMaxFiles - 1) / kMaxFiles});
  info.n_files = (slots + info.slots_per_file - 1) / info.slots_per_file;
  return info;
}

// A directory the command line named that cannot serve: the command line is wrong (exit 2).
void check_store_dir(const std::string& dir, bool writable, bool existing) {
  if (dir.empty()) throw make_usage_error("--store-dir", "is empty", "name the store's directory");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw make_usage_error(
        dir, std::string("store directory does not exist (") + std::strerror(errno) + ")",
        existing ? "pass the directory of a store (replay --keep-store keeps one)"
                 : "create it (mkdir -p " + dir + ") or pass another --store-dir");
  }
  if (!S_ISDIR(st.st_mode)) throw make_usage_error(dir, "--store-dir is not a directory");
  if (writable && ::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw make_usage_error(
        dir, std::string("store directory is not writable (") + std::strerror(errno) + ")",
        "fix its permissions or pass a writable --store-dir");
  }
}

uint64_t fit_journal_compaction(const std::string& dir, uint64_t room, uint64_t data_bytes,
                                uint64_t configured) {
  if (room < kMinJournalRoom) {
    throw make_error(
        dir,
        "the file system has " + format_size(room) + " left beside the " + format_size(data_bytes) +
            " of data files; the store's journal needs at least " + format_size(kMinJournalRoom),
        "lower --ssd or free space");
  }
  return std::min(configured, room / 4);
}

uint64_t check_free_space(const std::string& dir, uint64_t extra_bytes) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    throw make_error(dir, std::string("statvfs failed: ") + std::strerror(errno));
  }
  if (vfs.f_blocks == 0) {  // ramfs, and pseudo file systems: no size, so none free either
    throw make_error(dir,
                     "its file system reports no size (0 blocks: ramfs or a pseudo file "
                     "system), so the SSD budget cannot be checked against it",
                     "put the store on a disk, or on a tmpfs (which has a size); ramfs grows "
                     "without bound and cannot be swapped");
  }
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (extra_bytes > avail) {
    throw make_error(dir,
                     "SSD budget needs " + format_size(extra_bytes) +
                         " more but the filesystem has " + format_size(avail) + " available",
                     "lower --ssd or free space");
  }
  return avail;
}

StoreDirLock::StoreDirLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    throw make_error(dir, std::string("cannot open the store directory: ") + std::strerror(errno),
                     "check that it exists and is readable");
  }
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw make_error(dir, "the store is in use by another process (or another open store)",
                       "wait for it to finish: two processes on one store would lose each "
                       "other's journal records and overwrite each other's chunks");
    }
    // A file system without flock on directories (NFS, Lustre without -o flock): go on
    // unlocked, as before there was a lock, and say so.
    std::fprintf(stderr,
                 "cachebench: warning: %s: cannot lock the store directory (%s); make sure no "
                 "other process uses this store\n",
                 dir.c_str(), std::strerror(err));
  }
}

StoreDirLock::~StoreDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

StoreDirLock& StoreDirLock::operator=(StoreDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool holds_store(const std::string& dir) {
  struct stat st {};
  return ::lstat(marker_path(dir).c_str(), &st) == 0 || Journal::begins_journal(journal_path(dir));
}

std::vector<std::string> clear_store_dir(const std::string& dir) {
  // A store is a directory with a marker; a malformed marker is still one (clear is how
  // it is started over), but then the data files are found by name.
  uint64_t n_files = 0;
  try {
    n_files = read_store_marker(dir).n_files;
  } catch (const Error&) {
    // A malformed marker, or none beside a journal the store wrote (it begins with the
    // store's start record): a damaged store, cleared by its files' names. Files that are
    // only named like a store's are not deleted.
    if (!holds_store(dir)) throw;
    for (;; ++n_files) {
      struct stat st {};
      if (::lstat(data_file_path(dir, n_files).c_str(), &st) != 0) break;
    }
  }
  std::vector<std::string> names;
  for (uint64_t i = 0; i < n_files; ++i) names.push_back(data_file_path(dir, i));
  names.push_back(journal_path(dir));
  names.push_back(journal_path(dir) + ".tmp");
  names.push_back(journal_path(dir) + ".compact");  // an online compaction's, left by a crash
  for (int i = 1;; ++i) {                           // the corrupt journals recovery kept
    const std::string p = journal_path(dir) + ".corrupt-" + std::to_string(i);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) break;
    names.push_back(p);
  }
  // The marker's temporary files (write_file_atomically names them .tmp.PID; .tmp: older).
  const std::string tmp_prefix =
      std::filesystem::path(marker_path(dir)).filename().string() + ".tmp";
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = f.path().filename().string();
    if (name.rfind(tmp_prefix, 0) == 0 &&
        (name.size() == tmp_prefix.size() || name[tmp_prefix.size()] == '.')) {
      names.push_back(f.path().string());
    }
  }
  names.push_back(
      marker_path(dir));  // last: a failed clear leaves a store that can be cleared again
  // Every file checked before any goes: one that is not a regular file (a FIFO, a directory)
  // is the user's to look at, and refusing it halfway would leave half a store (its data
  // files gone, its marker and journal still naming them).
  std::vector<std::string> present;
  for (const std::string& p : names) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      throw make_error(p, std::string("cannot stat: ") + std::strerror(errno),
                       "check the store directory; nothing was deleted");
    }
    // A symbolic link counts as what it names (as stat and verify see it); one that names
    // nothing is only a link, and deleting it touches nothing else.
    struct stat target {};
    if (!S_ISREG(st.st_mode) &&
        !(S_ISLNK(st.st_mode) && (::stat(p.c_str(), &target) != 0 || S_ISREG(target.st_mode)))) {
      throw make_error(p,
                       "a file of the store that is not a regular file (" + file_kind(p) +
                           "), so nothing was deleted",
                       not_regular_fix(dir) + " again");
    }
    present.push_back(p);
  }
  std::vector<std::string> removed;
  for (const std::string& p : present) {
    if (::unlink(p.c_str()) == 0) {
      removed.push_back(p);
    } else if (errno != ENOENT) {
      throw make_error(p, std::string("cannot delete: ") + std::strerror(errno));
    }
  }
  return removed;
}

std::string make_scratch_dir(const std::string& parent, const std::string& prefix,
                             const std::string& fix) {
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw make_error(
        parent, std::string("cannot create a scratch directory in it: ") + std::strerror(errno),
        fix);
  }
  return tmpl;
}

bool remove_scratch_dir(const std::string& path, const std::string& whose,
                        const std::vector<std::string>& own) {
  std::vector<std::string> removed;
  try {
    if (holds_store(path)) removed = clear_store_dir(path);
  } catch (const Error& e) {
    std::fprintf(stderr,
                 "cachebench: %s, %s, is left as it is: its store could not be removed (%s)\n",
                 path.c_str(), whose.c_str(), e.what());
    return false;
  }
  for (const std::string& f : own) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(f.c_str());
  }
  if (::rmdir(path.c_str()) == 0) return true;
  const int err = errno;
  std::string others;
  size_t n_others = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (++n_others > 3) continue;
    others += (others.empty() ? "" : ", ") + it->path().filename().string();
    std::error_code kind_ec;  // not `ec`, which ends the loop
    if (it->is_directory(kind_ec)) others += "/";
  }
  if (n_others > 3) others += " and " + std::to_string(n_others - 3) + " more";
  if (err != ENOTEMPTY && err != EEXIST) {
    std::fprintf(stderr, "cachebench: %s, %s, could not be removed (%s)%s\n", path.c_str(),
                 whose.c_str(), std::strerror(err),
                 removed.empty() ? "" : "; its store's files were removed");
  } else if (!removed.empty()) {
    std::fprintf(stderr,
                 "cachebench: removed the store's %zu files from %s, %s, but not the directory, "
                 "which holds what is not the store's (%s): remove it yourself if that is not "
                 "needed\n",
                 removed.size(), path.c_str(), whose.c_str(), others.c_str());
  } else {
    std::fprintf(stderr,
                 "cachebench: left %s, %s, as it is: it holds no store (no marker, no journal a "
                 "store wrote) but other files (%s): remove it yourself if they are not needed\n",
                 path.c_str(), whose.c_str(), others.c_str());
  }
  return false;
}

}  // namespace cb::store
