#include "eval/bench_store.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/sysinfo.h"
#include "lib/policy/eviction.h"
#include "lib/policy/placement.h"
#include "lib/policy/registry.h"
#include "lib/store/attention_store.h"
#include "lib/store/checksum.h"
#include "lib/store/size_parse.h"
#include "lib/store/store_dir.h"

namespace cb::eval {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kPlainIo = 4ull << 20;  // baseline request size

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double secs_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

double gbs(uint64_t bytes, double s) {
  return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0;
}

/// 4096-aligned, zero-initialized (touched) memory.
struct AlignedBuf {
  explicit AlignedBuf(uint64_t n) : size(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, kAlign, std::max<uint64_t>(n, kAlign)) != 0) {
      throw make_error("bench store", "cannot allocate " + store::format_size(n));
    }
    data.reset(static_cast<char*>(p));
    std::memset(p, 0, std::max<uint64_t>(n, kAlign));
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  uint64_t size;
};

/// The entry every save writes: K and V of each layer, layer-major, random bytes.
struct Entry {
  store::EntryShape shape;
  int64_t tokens = 0;
  uint64_t layer_bytes = 0;  // one of K or V of one layer
  std::unique_ptr<AlignedBuf> src, dst;
  store::ModelFingerprint fp = store::ModelFingerprint::from_description("llama-2-7b/32x4096/f16");

  Entry(int n_layers, uint32_t token_bytes, int64_t n_tokens, uint64_t seed) {
    shape.n_layers = n_layers;
    shape.token_bytes = token_bytes;
    tokens = n_tokens;
    layer_bytes = static_cast<uint64_t>(tokens) * token_bytes;
    const uint64_t total = 2 * layer_bytes * static_cast<uint64_t>(n_layers);
    src = std::make_unique<AlignedBuf>(total);
    dst = std::make_unique<AlignedBuf>(total);
    std::mt19937_64 rng(seed);
    auto* w = reinterpret_cast<uint64_t*>(src->data.get());
    for (uint64_t i = 0; i < total / 8; ++i) w[i] = rng();
  }
  uint64_t bytes() const { return src->size; }
  char* k(char* base, int l) const { return base + 2 * static_cast<uint64_t>(l) * layer_bytes; }
  char* v(char* base, int l) const { return k(base, l) + layer_bytes; }
  std::vector<store::TokenId> history(store::SessionId s) const {
    std::vector<store::TokenId> t(static_cast<size_t>(tokens));
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = static_cast<store::TokenId>((s * 7919 + i) % 32000);
    return t;
  }
};

/// Saves `n` entries (all in flight at once), waits for every commit; returns seconds.
double save_all(store::AttentionStore& st, const Entry& e, store::SessionId first, int n) {
  const auto t0 = SteadyClock::now();
  std::vector<store::SaveHandle> handles;
  std::vector<std::shared_future<bool>> commits;
  for (int i = 0; i < n; ++i) {
    const store::SessionId s = first + static_cast<uint64_t>(i);
    store::SaveRequest req{s, e.fp, store::KeyEncoding::PreRope, e.shape, e.history(s), -1};
    req.append = false;  // whole entries: the bandwidth of a full save
    store::SaveHandle h = st.begin_save(req);
    if (!h.ok()) {
      throw make_error("bench store", "the store refused a save of " +
                                          store::format_size(e.bytes()) + " (tier full)");
    }
    char* base = e.src->data.get();
    for (int l = 0; l < e.shape.n_layers; ++l)
      h.write_layer(l, store::LayerSource{e.k(base, l), e.v(base, l)});
    commits.push_back(h.commit());
    handles.push_back(std::move(h));
  }
  bool ok = true;
  for (auto& c : commits) ok = c.get() && ok;
  const double s = secs_since(t0);
  if (!ok) throw make_error("bench store", "a save failed (I/O error); see the store's log");
  return s;
}

/// Loads the `n` entries one after another into the same buffer; returns seconds.
double load_all(store::AttentionStore& st, const Entry& e, store::SessionId first, int n) {
  std::vector<store::LayerTarget> targets(static_cast<size_t>(e.shape.n_layers));
  char* base = e.dst->data.get();
  for (int l = 0; l < e.shape.n_layers; ++l) targets[l] = {e.k(base, l), e.v(base, l)};
  const auto t0 = SteadyClock::now();
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    const store::SessionId s = first + static_cast<uint64_t>(i);
    store::LookupKey key{s, e.fp, store::KeyEncoding::PreRope, e.history(s), e.shape};
    store::LoadHandle h = st.load(key, targets);
    ok = h.ok() && h.wait_all() && ok;
  }
  const double s = secs_since(t0);
  if (!ok) throw make_error("bench store", "a load missed or failed verification");
  if (std::memcmp(e.src->data.get(), base, e.bytes()) != 0)
    throw make_error("bench store", "loaded bytes differ from the saved ones");
  return s;
}

void erase_all(store::AttentionStore& st, store::SessionId first, int n) {
  for (int i = 0; i < n; ++i) st.erase(first + static_cast<uint64_t>(i));
  st.wait_idle();
}

struct TierTimes {
  std::vector<double> save, load;
};

/// reps + 1 rounds of save-all / load-all / erase-all (the first is a warm-up).
TierTimes run_store(store::AttentionStore& st, const Entry& e, int n, int reps, const char* what,
                    const std::function<void()>& poll) {
  TierTimes t;
  for (int r = 0; r <= reps; ++r) {
    if (poll) poll();
    const store::SessionId first = 1 + static_cast<uint64_t>(r) * static_cast<uint64_t>(n);
    const double ts = save_all(st, e, first, n);
    const double tl = load_all(st, e, first, n);
    erase_all(st, first, n);
    if (r > 0) {
      t.save.push_back(ts);
      t.load.push_back(tl);
    }
    std::fprintf(stderr, "bench store: %s round %d/%d: save %.3f s, load %.3f s%s\n", what, r, reps,
                 ts, tl, r == 0 ? " (warm-up)" : "");
  }
  return t;
}

double time_memcpy(const Entry& e, int n) {
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < n; ++i) std::memcpy(e.dst->data.get(), e.src->data.get(), e.bytes());
  return secs_since(t0);
}

// --- plain O_DIRECT baseline --------------------------------------------------------

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void io_fail(const std::string& path, const char* what, int err) {
  throw make_error(path, std::string(what) + ": " + std::strerror(err),
                   err == ENOSPC ? "free disk space or lower --traffic" : "check the directory");
}

/// Writes `bytes` sequentially in 4 MiB O_DIRECT requests, fdatasync, reads them back;
/// deletes the file. Returns {write s, read s}.
/// Creates (truncates) a baseline file with O_DIRECT, or without it where the filesystem
/// refuses it (`*direct` says which); throws when it cannot be created.
int open_baseline(const std::string& path, bool* direct) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  *direct = fd >= 0;
  if (fd < 0 && errno == EINVAL)
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_fail(path, "cannot create the baseline file", errno);
  return fd;
}

/// Moves bytes [done, n) of a request at `off` synchronously; 0, or the errno (EIO for an
/// end of file) of the call that failed.
int io_rest(int fd, bool write, char* buf, uint64_t n, uint64_t off, uint64_t done) {
  while (done < n) {
    const off_t at = static_cast<off_t>(off + done);
    const ssize_t r =
        write ? ::pwrite(fd, buf + done, n - done, at) : ::pread(fd, buf + done, n - done, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? errno : EIO;
    done += static_cast<uint64_t>(r);
  }
  return 0;
}

/// Joins every thread of `t` when it goes out of scope, also when starting one threw.
struct JoinAll {
  std::vector<std::thread>& t;
  ~JoinAll() {
    for (auto& th : t) th.join();
  }
};

std::pair<double, double> plain_io(const std::string& path, uint64_t bytes, const AlignedBuf& buf,
                                   bool* direct) {
  Fd f;
  f.fd = open_baseline(path, direct);
  struct Unlink {
    const std::string& p;
    ~Unlink() { ::unlink(p.c_str()); }
  } unlink_at_end{path};
  auto loop = [&](bool write) {
    for (uint64_t off = 0; off < bytes;) {
      const uint64_t n = std::min(kPlainIo, bytes - off);
      const ssize_t r = write ? ::pwrite(f.fd, buf.data.get(), n, static_cast<off_t>(off))
                              : ::pread(f.fd, buf.data.get(), n, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) io_fail(path, write ? "baseline write" : "baseline read", errno);
      if (r == 0) io_fail(path, "baseline read: unexpected end of file", EIO);
      off += static_cast<uint64_t>(r);
    }
  };
  auto t0 = SteadyClock::now();
  loop(true);
  if (::fdatasync(f.fd) != 0) io_fail(path, "baseline fdatasync", errno);
  const double tw = secs_since(t0);
  t0 = SteadyClock::now();
  loop(false);
  return {tw, secs_since(t0)};
}

/// Moves requests [first, end) of [0, bytes) of `fd` (in `req`-byte requests, in order),
/// `depth` in flight through `ring` (the reference's own, not the store's I/O code): writes
/// from `src`, reads into `dst`, `depth` buffers of `req` bytes, a request into buffer
/// (index - first) % depth, so no two reads in flight share memory (the store reads each chunk
/// into its own; the bytes are not looked at). A short transfer is finished synchronously. On an
/// error it stops submitting, waits for the requests in flight (they use the buffers), then throws;
/// if the ring itself fails, so that they cannot be waited for, it sets `*ring_broken` first (the
/// caller must then never free `dst`).
void uring_pass(io_uring& ring, int fd, bool write, uint64_t bytes, uint64_t req, uint64_t first,
                uint64_t end, int depth, const AlignedBuf& src, char* dst, const std::string& path,
                bool* ring_broken) {
  const char* what = write ? "baseline write" : "baseline read";
  const auto buf_of = [&](uint64_t i) {
    return write ? src.data.get() : dst + (i - first) % static_cast<uint64_t>(depth) * req;
  };
  const uint64_t n_req = std::min(end, (bytes + req - 1) / req);
  uint64_t next = first, inflight = 0;  // the next request (an index into all of them)
  int err = 0;
  const char* err_what = what;
  const auto finish = [&](io_uring_cqe* cqe) {
    const uint64_t i = io_uring_cqe_get_data64(cqe);
    const int64_t res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
    if (err != 0) return;
    if (res < 0) {
      err = static_cast<int>(-res);
      return;
    }
    const uint64_t off = i * req;
    err =
        io_rest(fd, write, buf_of(i), std::min(req, bytes - off), off, static_cast<uint64_t>(res));
  };
  bool submitting = true;  // false after io_uring_submit failed: the ring takes no more
  while (inflight > 0 || (err == 0 && next < n_req)) {
    if (submitting) {
      while (err == 0 && next < n_req && inflight < static_cast<uint64_t>(depth)) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (sqe == nullptr) break;
        const uint64_t off = next * req, n = std::min(req, bytes - off);
        if (write) {
          io_uring_prep_write(sqe, fd, buf_of(next), static_cast<unsigned>(n), off);
        } else {
          io_uring_prep_read(sqe, fd, buf_of(next), static_cast<unsigned>(n), off);
        }
        io_uring_sqe_set_data64(sqe, next);
        ++next;
        ++inflight;
      }
      const int rc = io_uring_submit(&ring);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        if (err == 0) {
          err = -rc;
          err_what = "io_uring_submit";
        }
        // What the ring took is waited for below; what it did not take never completes.
        submitting = false;
        inflight -= std::min<uint64_t>(inflight, io_uring_sq_ready(&ring));
      }
    }
    // Requests prepared but not yet taken by the kernel (EAGAIN, EBUSY) are not waited for:
    // they are submitted again first.
    if (inflight <= (submitting ? io_uring_sq_ready(&ring) : 0)) {
      std::this_thread::yield();
      continue;
    }
    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(&ring, &cqe);
    if (w == -EINTR || w == -EAGAIN) continue;
    if (w < 0) {
      // The ring itself failed, so its reads cannot be waited for: their buffer must never be
      // freed (a read landing in reused memory would corrupt it). Writes only read `src`.
      if (!write) *ring_broken = true;
      io_fail(path, "io_uring_wait_cqe", -w);
    }
    finish(cqe);
    while (inflight > 0 && io_uring_peek_cqe(&ring, &cqe) == 0) finish(cqe);
  }
  if (err != 0) io_fail(path, err_what, err);
}

/// The same as uring_pass from `depth` threads of synchronous requests (thread t issues
/// requests t, t + depth, ..., reading into the t-th `req` bytes of `dst`), where io_uring is
/// unavailable.
void threads_pass(int fd, bool write, uint64_t bytes, uint64_t req, int depth,
                  const AlignedBuf& src, const AlignedBuf& dst, const std::string& path) {
  const uint64_t n_req = (bytes + req - 1) / req;
  std::vector<int> err(static_cast<size_t>(depth), 0);
  {
    std::vector<std::thread> threads;
    const JoinAll join_all{threads};
    for (int t = 0; t < depth; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t i = static_cast<uint64_t>(t); i < n_req && err[t] == 0; i += depth) {
          const uint64_t off = i * req;
          char* p = write ? src.data.get() : dst.data.get() + static_cast<uint64_t>(t) * req;
          err[t] = io_rest(fd, write, p, std::min(req, bytes - off), off, 0);
        }
      });
    }
  }
  for (int e : err) {
    if (e != 0) io_fail(path, write ? "baseline write" : "baseline read", e);
  }
}

/// The queue-depth-matched reference: `bytes` in `req`-byte O_DIRECT requests, `depth` in
/// flight, through `rings` io_urings fed by a thread each (the store's I/O threads each have
/// one), each ring a contiguous share of the requests (as each store thread moves a layer's
/// consecutive slots) and of `depth` (`engine()` "io_uring"),
/// or else from `depth` threads of synchronous requests ("threads"),
/// over one file made and preallocated once, as the store's data files are, and overwritten
/// in place every round after the first (as the store's slots are); fdatasync ends the
/// write. The file is deleted with the object.
class ParallelReference {
 public:
  ParallelReference(std::string path, uint64_t bytes, uint64_t req, int depth, int rings)
      : path_(std::move(path)),
        bytes_((bytes + kAlign - 1) / kAlign * kAlign),  // O_DIRECT: whole blocks
        req_(req),
        depth_(depth),
        rings_(std::max(1, std::min(rings, depth))),
        dst_(req * static_cast<uint64_t>(std::max(1, depth))) {
    bool direct = false;
    fd_.fd = open_baseline(path_, &direct);
    if (const int rc = ::posix_fallocate(fd_.fd, 0, static_cast<off_t>(bytes_)); rc != 0) {
      ::unlink(path_.c_str());
      io_fail(path_, "baseline fallocate", rc);
    }
    // The rings live as long as the reference (made once, not per round); none at all where
    // io_uring is unavailable.
    for (int r = 0; r < rings_; ++r) {
      auto ring = std::make_unique<io_uring>();
      if (io_uring_queue_init(static_cast<unsigned>(ring_depth(r)), ring.get(), 0) < 0) {
        close_rings();
        break;
      }
      ring_set_.push_back(std::move(ring));
    }
  }
  ~ParallelReference() {
    ::unlink(path_.c_str());
    close_rings();
    if (ring_broken_) (void)dst_.data.release();  // reads may still land in it
  }
  ParallelReference(const ParallelReference&) = delete;
  ParallelReference& operator=(const ParallelReference&) = delete;

  /// One round from `src` (at least `req` bytes): {write s, read s}.
  std::pair<double, double> run(const AlignedBuf& src) {
    const double tw = pass(true, src);
    return {tw, pass(false, src)};
  }
  /// "io_uring", or "threads" where no ring could be made.
  const char* engine() const { return ring_set_.empty() ? "threads" : "io_uring"; }
  /// Rings (threads) the requests are spread over.
  int rings() const { return rings_; }

 private:
  int ring_depth(int r) const { return depth_ / rings_ + (r < depth_ % rings_ ? 1 : 0); }
  void close_rings() {
    for (auto& ring : ring_set_) io_uring_queue_exit(ring.get());
    ring_set_.clear();
  }

  double pass(bool write, const AlignedBuf& src) {
    const auto t0 = SteadyClock::now();
    if (!ring_set_.empty()) {
      rings_pass(write, src);
    } else {
      threads_pass(fd_.fd, write, bytes_, req_, depth_, src, dst_, path_);
    }
    if (write && ::fdatasync(fd_.fd) != 0) io_fail(path_, "baseline fdatasync", errno);
    return secs_since(t0);
  }

  /// One thread per ring, each over its share of the requests. The first error is rethrown
  /// after every thread has finished.
  void rings_pass(bool write, const AlignedBuf& src) {
    std::vector<char> broken(static_cast<size_t>(rings_), 0);  // not vector<bool>: one per thread
    std::vector<std::exception_ptr> errors(static_cast<size_t>(rings_));
    const auto one = [&](int r) {
      bool b = false;  // set before uring_pass throws for a broken ring
      try {
        const uint64_t n = (bytes_ + req_ - 1) / req_, k = static_cast<uint64_t>(rings_);
        const uint64_t first = n * static_cast<uint64_t>(r) / k;
        const uint64_t end = n * static_cast<uint64_t>(r + 1) / k;
        // The ring's own `ring_depth(r)` read buffers, after those of the rings before it.
        uint64_t slot = 0;
        for (int q = 0; q < r; ++q) slot += static_cast<uint64_t>(ring_depth(q));
        uring_pass(*ring_set_[static_cast<size_t>(r)], fd_.fd, write, bytes_, req_, first, end,
                   ring_depth(r), src, dst_.data.get() + slot * req_, path_, &b);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
      broken[static_cast<size_t>(r)] = b ? 1 : 0;
    };
    {
      std::vector<std::thread> threads;
      const JoinAll join_all{threads};
      for (int r = 1; r < rings_; ++r) threads.emplace_back(one, r);
      one(0);
    }
    for (char b : broken) ring_broken_ = ring_broken_ || b != 0;
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  std::string path_;
  uint64_t bytes_, req_;
  int depth_, rings_;
  bool ring_broken_ = false;
  AlignedBuf dst_;
  Fd fd_;
  std::vector<std::unique_ptr<io_uring>> ring_set_;  // empty: io_uring unavailable
};

// --- directory handling ---------------------------------------------------------------

/// Creates `dir` (and parents) when missing; true when it created the last component. A path
/// that cannot be a directory (a file in its place, or in a parent's) or that this user may
/// not create is the command line's error (exit 2, "--store-dir: ...", as replay's is).
bool make_dirs(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw make_usage_error("--store-dir", dir + " is not a directory",
                             "give --store-dir a directory (one that is missing is created)");
    }
    return false;
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_dirs(dir.substr(0, slash));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    const int err = errno;
    if (err == EACCES || err == EROFS || err == ENOTDIR) {
      throw make_usage_error("--store-dir", "cannot create " + dir + ": " + std::strerror(err),
                             "choose a writable --store-dir");
    }
    throw make_error(dir, std::string("cannot create the store directory: ") + std::strerror(err),
                     "choose a writable --store-dir");
  }
  return true;
}

/// The bench's own subdirectory; removes what the bench wrote there, then itself (and
/// the user's directory when the bench created it and it is empty).
struct ScratchDir {
  std::string parent, path;
  bool parent_created = false;
  ~ScratchDir() {
    if (!path.empty()) remove_own();
    if (parent_created) ::rmdir(parent.c_str());
  }
  void remove_own() {
    if (store::is_store_dir(path)) {
      try {
        store::clear_store_dir(path);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "bench store: cleanup: %s\n", ex.what());
      }
    }
    if (::rmdir(path.c_str()) != 0)
      std::fprintf(stderr, "bench store: cannot remove %s: %s\n", path.c_str(),
                   std::strerror(errno));
  }
};

// Room the SSD benchmark leaves for the store's journal and its compaction beside the data.
constexpr uint64_t kJournalRoom = 64ull << 20;

// `dir` must have room for the store's data files (`store_bytes`), the two reference files of
// `traffic` bytes each (one request, parallel requests) and kJournalRoom. At the least --traffic,
// one entry, the store takes `entry_store_bytes` (its whole chunks) and a reference file
// `entry_bytes`: the advice says whether lowering --traffic can help.
void check_space(const std::string& dir, uint64_t store_bytes, uint64_t traffic,
                 uint64_t entry_store_bytes, uint64_t entry_bytes) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0)
    throw make_error(dir, std::string("statvfs failed: ") + std::strerror(errno));
  const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t need = store_bytes + 2 * traffic + kJournalRoom;
  if (need > avail) {
    throw make_error(
        dir,
        "the SSD benchmark needs " + store::format_size(need) + " free (the store's " +
            store::format_size(store_bytes) + " of data files, two reference files of " +
            store::format_size(traffic) + ", and " + store::format_size(kJournalRoom) +
            " for the store's journal) but only " + store::format_size(avail) + " is available",
        std::string(entry_store_bytes + 2 * entry_bytes + kJournalRoom <= avail
                        ? "lower --traffic (the bytes moved per repetition, at least one entry: "
                          "--entry-size) or --chunk-size (each layer's K and V of an entry take "
                          "whole chunks)"
                    : avail > kJournalRoom + 2 * entry_bytes
                        ? "--traffic cannot make it fit (one entry already needs more): lower "
                          "--chunk-size (each layer's K and V of an entry take whole chunks)"
                        : "--traffic cannot make it fit") +
            ", free disk space, or give a --store-dir on a larger file system");
  }
}

// --- policies -------------------------------------------------------------------------

struct PolicySetup {
  std::vector<policy::EntryMeta> entries;
  policy::Capacity cap;
  policy::LookAhead ahead;
  uint64_t skv = 0;
};

/// `n` entries of random sizes around `skv` with random access times; host memory holds
/// about `dram_entries` of them and is full, the disk holds the rest and is full too.
PolicySetup make_policy_setup(size_t n, size_t queue, size_t dram_entries, uint64_t skv,
                              uint64_t seed) {
  PolicySetup p;
  p.skv = skv;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> size(0.5, 1.5);
  std::uniform_int_distribution<int64_t> when(0, 1000000000);
  p.entries.resize(n);
  const uint64_t dram_target = dram_entries * skv;
  for (size_t i = 0; i < n; ++i) {
    policy::EntryMeta& e = p.entries[i];
    e.session = rng() | 1;  // random ids; |1 keeps them non-zero
    e.bytes = std::max<uint64_t>(kAlign, static_cast<uint64_t>(size(rng) * skv) / kAlign * kAlign);
    e.inserted = when(rng);
    e.last_access = e.inserted + when(rng) / 2;
    const bool dram = p.cap.dram + e.bytes <= dram_target;
    e.tier = dram ? policy::Tier::kDram : policy::Tier::kSsd;
    (dram ? p.cap.dram : p.cap.ssd) += e.bytes;
  }
  // Duplicate ids are astronomically unlikely; make sure anyway.
  std::sort(p.entries.begin(), p.entries.end(),
            [](const auto& a, const auto& b) { return a.session < b.session; });
  for (size_t i = 1; i < n; ++i) {
    if (p.entries[i].session <= p.entries[i - 1].session)
      p.entries[i].session = p.entries[i - 1].session + 2;
  }
  std::shuffle(p.entries.begin(), p.entries.end(), rng);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  p.ahead.queue.resize(queue);
  for (auto& s : p.ahead.queue) s = p.entries[pick(rng)].session;
  p.ahead.skv = skv;
  return p;
}

/// Median over `reps` of the time of `calls` calls to `fn` (returns decisions made).
PolicyRate time_policy(const std::string& name, const std::string& op, int reps, int calls,
                       const std::function<void()>& poll, const std::function<size_t()>& fn) {
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    if (poll) poll();
    size_t decisions = 0;
    const auto t0 = SteadyClock::now();
    for (int c = 0; c < calls; ++c) decisions += fn();
    const double s = secs_since(t0);
    if (decisions > 0) per.push_back(s / static_cast<double>(decisions));
  }
  PolicyRate out{name, op, 0, 0};
  const double m = median(per);
  if (m > 0) {
    out.per_s = 1.0 / m;
    out.ms_per = 1e3 * m;
  }
  std::fprintf(stderr, "bench store: policy %s %s: %.1f decisions/s\n", name.c_str(), op.c_str(),
               out.per_s);
  return out;
}

std::vector<PolicyRate> bench_policies(const BenchStoreOptions& opt, uint64_t skv) {
  const PolicySetup p =
      make_policy_setup(opt.policy_entries, opt.policy_queue,
                        std::max<size_t>(1, opt.policy_dram_entries), skv, opt.seed);
  std::vector<size_t> all(p.entries.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<PolicyRate> out;
  const int reps = std::max(1, opt.reps), calls = std::max(1, opt.policy_calls);
  for (const std::string& name : policy::eviction_policy_names()) {
    const auto pol = policy::make_eviction_policy(name);
    // A new entry of Skv bytes needs host memory: DRAM victims cascade to a full SSD.
    out.push_back(time_policy(name, "make_room", reps, calls, opt.poll, [&] {
      const policy::Plan plan =
          pol->make_room(p.entries, p.cap, policy::Tier::kDram, p.skv, p.ahead);
      if (!plan.ok) throw make_error("bench store", "policy " + name + " could not make room");
      return size_t{1};
    }));
    out.push_back(time_policy(name, "order", reps, calls, opt.poll, [&] {
      return pol->order(p.entries, all, p.cap, p.ahead).empty() ? size_t{0} : size_t{1};
    }));
    if (name == "scheduler-aware") {
      // One decision per fetch planned over the prefetch window (Cmem / Skv jobs).
      out.push_back(time_policy(name, "plan_prefetch", reps, 1, opt.poll, [&] {
        const auto moves = policy::plan_prefetch(p.entries, p.cap, p.ahead);
        return static_cast<size_t>(std::count_if(moves.begin(), moves.end(), [](const auto& m) {
          return m.from == policy::Tier::kSsd && m.to == policy::Tier::kDram;
        }));
      }));
    }
  }
  return out;
}

}  // namespace

BenchStoreResult bench_store(const BenchStoreOptions& opt) {
  if (opt.n_layers <= 0 || opt.token_bytes == 0)
    throw make_error("bench store", "entry shape needs layers > 0 and token bytes > 0");
  if (opt.reps < 1) throw make_error("--reps", "needs at least 1 repetition");
  if (opt.ref_depth < 1 || opt.ref_depth > 256)
    throw make_error("--ref-depth", "needs 1..256 requests in flight");
  if (opt.ref_threads < 0 || opt.ref_threads > 64)
    throw make_error("--ref-threads", "needs 0 (as --io-threads) to 64 threads");
  if (opt.run_ssd && opt.chunk_bytes > (1ull << 30)) {
    throw make_error("--chunk-size", "chunks above 1 GiB are not benchmarked (one request each)");
  }
  if (opt.run_ssd && (opt.chunk_bytes == 0 || opt.chunk_bytes % kAlign != 0)) {
    throw make_error("--chunk-size", "a chunk of " + std::to_string(opt.chunk_bytes) +
                                         " bytes is not a whole number of 4 KiB blocks");
  }
  const uint64_t per_token = 2ull * static_cast<uint64_t>(opt.n_layers) * opt.token_bytes;
  const int64_t tokens = static_cast<int64_t>(opt.entry_bytes / per_token);
  if (tokens < 1) {
    throw make_error("--entry-size", "an entry of " + store::format_size(opt.entry_bytes) +
                                         " holds no token (one token is " +
                                         store::format_size(per_token) + ")");
  }
  BenchStoreResult r;
  r.reps = opt.reps;
  r.n_layers = opt.n_layers;
  r.token_bytes = opt.token_bytes;
  r.tokens_per_entry = tokens;
  r.chunk_bytes = opt.chunk_bytes;
  r.io_threads = opt.io_threads;
  r.entry_bytes = static_cast<uint64_t>(tokens) * per_token;
  r.entries_per_rep = static_cast<int>(std::max<uint64_t>(1, opt.traffic_bytes / r.entry_bytes));
  r.traffic_bytes = r.entry_bytes * static_cast<uint64_t>(r.entries_per_rep);
  const int n = r.entries_per_rep;

  store::StoreConfig base;
  base.chunk_bytes = opt.chunk_bytes;
  base.io_threads = opt.io_threads;
  base.io_mode = store::parse_io_mode(opt.io);
  // Store capacity: the chunks of `n` entries.
  const uint64_t tpc = opt.chunk_bytes / opt.token_bytes;
  if (tpc == 0) throw make_error("--chunk-size", "a chunk is smaller than one token of one layer");
  const uint64_t chunks_per_entry = 2ull * static_cast<uint64_t>(opt.n_layers) *
                                    ((static_cast<uint64_t>(tokens) + tpc - 1) / tpc);
  const uint64_t store_bytes = chunks_per_entry * opt.chunk_bytes * static_cast<uint64_t>(n);
  // Each layer's K and V of an entry take whole chunks: a small entry in large chunks needs a
  // store many times --traffic, and the DRAM tier's is memory-locked.
  const uint64_t phys = physical_memory_bytes();
  if (opt.run_dram && phys > 0 && store_bytes > phys / 2) {
    throw make_usage_error("--traffic",
                           "entries of " + store::format_size(r.entry_bytes) + " take " +
                               std::to_string(chunks_per_entry) + " chunks of " +
                               store::format_size(opt.chunk_bytes) +
                               " each (every layer's K and V whole chunks): " + std::to_string(n) +
                               " of them need a DRAM tier of " + store::format_size(store_bytes) +
                               ", more than half of this machine's " + store::format_size(phys),
                           "lower --traffic or --chunk-size, or raise --entry-size");
  }

  // The directory and its free space are checked before anything is allocated.
  ScratchDir scratch;
  if (opt.run_ssd) {
    if (opt.store_dir.empty())
      throw make_error("--store-dir", "the SSD benchmark needs a store directory");
    scratch.parent = opt.store_dir;
    scratch.parent_created = make_dirs(opt.store_dir);
    if (::access(opt.store_dir.c_str(), W_OK | X_OK) != 0) {
      throw make_usage_error("--store-dir",
                             opt.store_dir + " is not writable (" + std::strerror(errno) + ")",
                             "fix its permissions or pass a writable --store-dir");
    }
    // The store's files, the one-request reference's file and the parallel reference's.
    check_space(opt.store_dir, store_bytes, r.traffic_bytes, chunks_per_entry * opt.chunk_bytes,
                r.entry_bytes);
    const std::string sub = opt.store_dir + "/cachebench-bench-store." + std::to_string(::getpid());
    if (::mkdir(sub.c_str(), 0755) != 0) {
      throw make_error(sub,
                       std::string("cannot create the bench directory: ") + std::strerror(errno));
    }
    scratch.path = sub;
  }

  std::fprintf(stderr,
               "bench store: entry %s (%d layers x K,V x %lld tokens x %u B), %d per round, "
               "%s + warm-up\n",
               store::format_size(r.entry_bytes).c_str(), opt.n_layers,
               static_cast<long long>(tokens), opt.token_bytes, n,
               count_of(opt.reps, "round").c_str());
  Entry e(opt.n_layers, opt.token_bytes, tokens, opt.seed);

  // Reference rates: memcpy and XXH3 of the same bytes.
  {
    std::vector<double> tm, tx;
    time_memcpy(e, 1);
    for (int i = 0; i < opt.reps; ++i) {
      if (opt.poll) opt.poll();
      tm.push_back(time_memcpy(e, n));
      const auto t0 = SteadyClock::now();
      volatile uint64_t h = store::checksum(e.src->data.get(), e.bytes(), 7);
      (void)h;
      tx.push_back(secs_since(t0));
    }
    r.memcpy_gbs = gbs(r.traffic_bytes, median(tm));
    r.xxh3_gbs = gbs(r.entry_bytes, median(tx));
  }

  if (opt.run_dram) {
    store::StoreConfig cfg = base;
    cfg.dram_bytes = store_bytes;
    store::AttentionStore st(cfg);
    for (auto& d : st.describe()) r.store_notes.push_back(d);
    const TierTimes t = run_store(st, e, n, opt.reps, "dram", opt.poll);
    r.dram_save_gbs = gbs(r.traffic_bytes, median(t.save));
    r.dram_load_gbs = gbs(r.traffic_bytes, median(t.load));
    r.dram_save_ratio = ratio(r.dram_save_gbs, r.memcpy_gbs);
    r.dram_load_ratio = ratio(r.dram_load_gbs, r.memcpy_gbs);
  }

  if (opt.run_ssd) {
    const std::string& sub = scratch.path;
    std::vector<double> pw, pr, qw, qr;
    AlignedBuf io_buf(std::max(kPlainIo, opt.chunk_bytes));
    std::memcpy(io_buf.data.get(), e.src->data.get(), std::min(io_buf.size, e.bytes()));
    ParallelReference parallel(
        sub + "/parallel-baseline.bin", r.traffic_bytes, opt.chunk_bytes, opt.ref_depth,
        opt.ref_threads > 0 ? opt.ref_threads : static_cast<int>(opt.io_threads));
    r.ref_depth = opt.ref_depth;
    r.ref_threads = parallel.rings();
    r.ref_engine = parallel.engine();
    {
      store::StoreConfig cfg = base;
      cfg.ssd_bytes = store_bytes;
      cfg.store_dir = sub;
      store::AttentionStore st(cfg);
      for (auto& d : st.describe()) {
        r.store_notes.push_back(d);
        if (d.rfind("ssd:", 0) == 0) {
          r.ssd_direct = d.find(", O_DIRECT") != std::string::npos;
          r.io_backend = d.find("io_uring") != std::string::npos ? "io_uring" : "pread";
        }
      }
      TierTimes t;
      for (int rep = 0; rep <= opt.reps; ++rep) {
        if (opt.poll) opt.poll();
        const store::SessionId first = 1 + static_cast<uint64_t>(rep) * static_cast<uint64_t>(n);
        const double ts = save_all(st, e, first, n);
        const double tl = load_all(st, e, first, n);
        erase_all(st, first, n);
        const auto [tw, tr] =
            plain_io(sub + "/plain-baseline.bin", r.traffic_bytes, io_buf, &r.plain_direct);
        const auto [pqw, pqr] = parallel.run(io_buf);
        if (rep > 0) {
          t.save.push_back(ts);
          t.load.push_back(tl);
          pw.push_back(tw);
          pr.push_back(tr);
          qw.push_back(pqw);
          qr.push_back(pqr);
        }
        std::fprintf(stderr,
                     "bench store: ssd round %d/%d: store write %.3f s read %.3f s; plain write "
                     "%.3f s read %.3f s; %d in flight: write %.3f s read %.3f s%s\n",
                     rep, opt.reps, ts, tl, tw, tr, opt.ref_depth, pqw, pqr,
                     rep == 0 ? " (warm-up)" : "");
      }
      r.ssd_write_gbs = gbs(r.traffic_bytes, median(t.save));
      r.ssd_read_gbs = gbs(r.traffic_bytes, median(t.load));
    }
    r.plain_write_gbs = gbs(r.traffic_bytes, median(pw));
    r.plain_read_gbs = gbs(r.traffic_bytes, median(pr));
    r.ssd_write_ratio = ratio(r.ssd_write_gbs, r.plain_write_gbs);
    r.ssd_read_ratio = ratio(r.ssd_read_gbs, r.plain_read_gbs);
    r.parallel_write_gbs = gbs(r.traffic_bytes, median(qw));
    r.parallel_read_gbs = gbs(r.traffic_bytes, median(qr));
    r.ssd_write_ceiling_ratio =
        ratio(r.ssd_write_gbs, std::max(r.plain_write_gbs, r.parallel_write_gbs));
    r.ssd_read_ceiling_ratio =
        ratio(r.ssd_read_gbs, std::max(r.plain_read_gbs, r.parallel_read_gbs));
  }

  if (opt.run_policy && opt.policy_entries > 0) {
    r.policy_entries = opt.policy_entries;
    r.policy_queue = opt.policy_queue;
    r.policy = bench_policies(opt, r.entry_bytes);
  }
  return r;
}

}  // namespace cb::eval
