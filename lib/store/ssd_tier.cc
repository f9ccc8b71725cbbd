#include "lib/store/ssd_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "lib/core/error.h"
#include "lib/store/checksum.h"
#include "lib/store/preallocate.h"
#include "lib/store/size_parse.h"

namespace cb::store {

namespace {
constexpr uint64_t kAlign = 4096;

uint64_t round_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
}  // namespace

SsdTier::SsdTier(const std::string& dir, const StoreDirInfo& info, std::shared_ptr<IoBackend> io,
                 bool try_direct, bool create)
    : Tier(TierKind::Ssd, info.chunk_bytes, info.n_slots()),
      dir_(dir),
      info_(info),
      io_(std::move(io)) {
  direct_ = try_direct;
  if (!try_direct) direct_note_ = "O_DIRECT disabled by configuration";
  // A new store's files are made here, exclusively (O_EXCL): a file already named like one
  // is not this store's to write over, nor, when the store fails to start, to remove.
  std::vector<std::string> made;
  try {
    for (uint64_t i = 0; i < info.n_files; ++i) open_data_file(i, create, &made);
    if (direct_ && !fds_.empty()) probe_direct();
  } catch (...) {
    for (int f : fds_) ::close(f);
    fds_.clear();
    for (const std::string& m : made) ::unlink(m.c_str());
    throw;
  }
}

void SsdTier::open_data_file(uint64_t i, bool create, std::vector<std::string>* made) {
  const std::string p = data_file_path(dir_, i);
  const uint64_t first = i * info_.slots_per_file;
  const uint64_t slots = std::min(info_.slots_per_file, info_.n_slots() - first);
  const uint64_t bytes = slots * info_.chunk_bytes;
  // A new file is made first and closed (not with O_DIRECT, which a file system may refuse
  // after making the file), then opened as an existing store's file is: through
  // open_regular, so that something put in its place since (a FIFO) is refused, not opened.
  // An existing store's files were checked by check_store_files; a file gone since is not
  // made anew full of zeros.
  int fd = -1;
  bool to_open = !create;
  if (create) {
    fd = open_regular(p, O_RDWR | O_CREAT | O_EXCL);
    if (fd < 0 && errno == EEXIST) {
      throw make_error(p, "exists already, and a new store does not write over it",
                       "move it away, or give a --store-dir that holds no such file");
    }
    if (fd >= 0) {
      made->push_back(p);
      ::close(fd);
      fd = -1;
      to_open = true;
    }
  }
  if (to_open && direct_) {
    fd = open_regular(p, O_RDWR | O_DIRECT);
    if (fd == -1 && errno == EINVAL) {
      direct_ = false;
      direct_refused_ = true;
      direct_note_ = "O_DIRECT refused by the filesystem (EINVAL); using buffered I/O";
    }
  }
  if (to_open && fd == -1) fd = open_regular(p, O_RDWR);
  if (fd < 0) {
    const int err = errno;
    if (fd == kNotRegularFile) {
      throw StoreDamage(
          error_message(p, "data file of the store is not a regular file (" + file_kind(p) + ")",
                        not_regular_fix(dir_)));
    }
    // The file itself may be what is read-only (the directory was checked writable).
    throw make_error(
        p, std::string("cannot open data file: ") + std::strerror(err),
        err == EACCES ? "make " + p + " readable and writable by this user (chmod u+rw " + p +
                            ", as its owner)"
        : err == EROFS ? "the store's file system is mounted read-only: mount it read-write"
                       : "check the store directory");
  }
  fds_.push_back(fd);
  // A file as long as its slots may still be sparse (made by a build that fell back to
  // ftruncate where the file system has no fallocate): its blocks are made now.
  if (looks_preallocated(fd, bytes)) return;
  const int rc = preallocate_file(p, fd, bytes);
  if (rc != 0) {
    throw make_error(p, "cannot preallocate " + format_size(bytes) + ": " + std::strerror(rc),
                     rc == ENOSPC  ? "lower --ssd or free disk space"
                     : rc == EFBIG ? "raise the file-size limit (ulimit -f) or lower --ssd"
                                   : "check the store directory");
  }
}

void SsdTier::probe_direct() {
  // Some filesystems accept O_DIRECT at open and refuse the I/O (EINVAL): detect it now.
  void* p = std::aligned_alloc(kAlign, kAlign);
  const ssize_t r = ::pread(fds_[0], p, kAlign, 0);
  const int err = errno;
  std::free(p);
  if (r >= 0 || err != EINVAL) return;
  for (uint64_t i = 0; i < fds_.size(); ++i) {
    const int fd = open_regular(data_file_path(dir_, i), O_RDWR);
    if (fd < 0) continue;
    ::close(fds_[i]);
    fds_[i] = fd;
  }
  direct_ = false;
  direct_refused_ = true;
  direct_note_ = "O_DIRECT I/O refused by the filesystem (EINVAL); using buffered I/O";
}

SsdTier::~SsdTier() {
  for (int fd : fds_) ::close(fd);
}

bool SsdTier::transfer(ChunkIo* ops, size_t n, bool write) {
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].offset != 0) {  // whole chunks only (O_DIRECT alignment): a caller's bug
      for (size_t j = 0; j < n; ++j) ops[j].error = EINVAL;
      return false;
    }
  }
  std::vector<IoOp> io(n);
  std::vector<size_t> bounce_off(n, SIZE_MAX);
  size_t bounce_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t len = round_up(ops[i].len);
    const bool aligned =
        (reinterpret_cast<uintptr_t>(ops[i].buf) % kAlign) == 0 && len == ops[i].len;
    if (!aligned) {
      bounce_off[i] = bounce_bytes;
      bounce_bytes += len;
    }
  }
  // Bounce buffers for unaligned caller memory, kept per thread so their pages stay mapped.
  thread_local std::unique_ptr<void, FreeDeleter> bounce;
  thread_local size_t bounce_cap = 0;
  if (bounce_bytes > bounce_cap) {
    bounce.reset(std::aligned_alloc(kAlign, bounce_bytes));
    bounce_cap = bounce ? bounce_bytes : 0;
    if (!bounce) {
      for (size_t i = 0; i < n; ++i) ops[i].error = ENOMEM;
      return false;
    }
  }
  char* b = static_cast<char*>(bounce.get());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t slot = ops[i].slot;
    ops[i].error = 0;
    io[i].fd = fds_[slot / info_.slots_per_file];
    io[i].offset = (slot % info_.slots_per_file) * info_.chunk_bytes;
    io[i].len = static_cast<uint32_t>(round_up(ops[i].len));
    io[i].write = write;
    if (bounce_off[i] == SIZE_MAX) {
      io[i].buf = ops[i].buf;
    } else {
      io[i].buf = b + bounce_off[i];
      if (write) {
        copy_with_sum(ops[i], io[i].buf, ops[i].buf);
        std::memset(static_cast<char*>(io[i].buf) + ops[i].len, 0, io[i].len - ops[i].len);
      }
    }
  }
  io_->submit(io.data(), n);
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    if (io[i].result < 0) {
      ops[i].error = static_cast<int>(-io[i].result);
    } else if (static_cast<uint64_t>(io[i].result) < ops[i].len) {
      ops[i].error = EIO;                    // short transfer
    } else if (bounce_off[i] == SIZE_MAX) {  // moved in place
      if (ops[i].sum != nullptr) *ops[i].sum = checksum(ops[i].buf, ops[i].len, ops[i].sum_seed);
    } else if (!write) {
      copy_with_sum(ops[i], ops[i].buf, io[i].buf);
    }
    if (ops[i].error != 0) ok = false;
  }
  return ok;
}

bool SsdTier::write(ChunkIo* ops, size_t n) {
  return transfer(ops, n, true);
}
bool SsdTier::read(ChunkIo* ops, size_t n) {
  return transfer(ops, n, false);
}

bool SsdTier::sync(const std::vector<uint64_t>& slots, std::string* error) {
  std::vector<bool> touched(fds_.size(), false);
  for (uint64_t s : slots) touched[s / info_.slots_per_file] = true;
  bool ok = true;
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (!touched[i]) continue;
    const int rc = io_->sync(fds_[i]);
    if (rc == 0) continue;
    if (ok && error != nullptr) {
      *error = data_file_path(dir_, i) + ": cannot sync written chunks: " + std::strerror(-rc);
    }
    ok = false;
  }
  return ok;
}

std::string SsdTier::locate(uint64_t slot) const {
  return data_file_path(dir_, slot / info_.slots_per_file) + " at byte " +
         std::to_string((slot % info_.slots_per_file) * info_.chunk_bytes);
}

std::string SsdTier::describe() const {
  std::string s = "ssd: " + format_size(capacity_bytes()) + " in " +
                  std::to_string(allocator().capacity()) + " chunks, " +
                  std::to_string(fds_.size()) + " files, " + io_->name() +
                  (direct_ ? ", O_DIRECT" : ", buffered");
  if (!direct_note_.empty()) s += " (" + direct_note_ + ")";
  return s;
}

}  // namespace cb::store
