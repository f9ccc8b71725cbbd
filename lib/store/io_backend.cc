#include "lib/store/io_backend.h"

#include <liburing.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "lib/core/error.h"

namespace cb::store {

int IoBackend::sync(int fd) {
  return ::fdatasync(fd) == 0 ? 0 : -errno;
}

IoMode parse_io_mode(const std::string& s) {
  if (s == "auto") return IoMode::Auto;
  if (s == "uring" || s == "io_uring") return IoMode::Uring;
  if (s == "pread") return IoMode::Pread;
  throw make_error("--io", "unknown I/O mode '" + s + "'", "use auto, uring or pread");
}

namespace {

int64_t transfer_all(IoOp& op) {
  uint64_t done = 0;
  char* p = static_cast<char*>(op.buf);
  while (done < op.len) {
    ssize_t r = op.write
                    ? ::pwrite(op.fd, p + done, op.len - done, static_cast<off_t>(op.offset + done))
                    : ::pread(op.fd, p + done, op.len - done, static_cast<off_t>(op.offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return done > 0 ? static_cast<int64_t>(done) : -errno;
    }
    if (r == 0) break;  // EOF: a short read
    done += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(done);
}

class PreadBackend final : public IoBackend {
 public:
  void submit(IoOp* ops, size_t n) override {
    for (size_t i = 0; i < n; ++i) ops[i].result = transfer_all(ops[i]);
  }
  std::string name() const override { return "pread"; }
};

class UringBackend final : public IoBackend {
 public:
  UringBackend(unsigned depth, UringHooks hooks) : depth_(depth), hooks_(std::move(hooks)) {}
  ~UringBackend() override {
    for (io_uring* r : rings_) {
      io_uring_queue_exit(r);
      delete r;
    }
  }

  /// Creates one ring up front so that an unusable io_uring is detected at start-up.
  bool probe(std::string* why) {
    io_uring* r = new io_uring;
    int rc = io_uring_queue_init(depth_, r, 0);
    if (rc < 0) {
      delete r;
      if (why) *why = std::string("io_uring_queue_init: ") + std::strerror(-rc);
      return false;
    }
    rings_.push_back(r);
    free_.push_back(r);
    return true;
  }

  void submit(IoOp* ops, size_t n) override {
    for (size_t i = 0; i < n; ++i) ops[i].result = -EIO;
    io_uring* ring = acquire();
    if (ring == nullptr) {
      for (size_t i = 0; i < n; ++i) ops[i].result = transfer_all(ops[i]);
      return;
    }
    std::vector<char> done(n, 0);
    // queued: prepared, not yet taken by the kernel; inflight: taken, not completed.
    size_t next = 0, queued = 0, inflight = 0;
    int busy = 0;  // submits in a row that the kernel refused with nothing in flight
    while (next < n || queued > 0 || inflight > 0) {
      while (next < n && queued + inflight < depth_) {
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (sqe == nullptr) break;
        IoOp& op = ops[next];
        if (op.write)
          io_uring_prep_write(sqe, op.fd, op.buf, op.len, op.offset);
        else
          io_uring_prep_read(sqe, op.fd, op.buf, op.len, op.offset);
        io_uring_sqe_set_data64(sqe, next);
        ++next;
        ++queued;
      }
      if (queued > 0) {
        const int rc = through(hooks_.submit, [ring] { return io_uring_submit(ring); });
        if (rc > 0) {
          queued -= std::min(queued, static_cast<size_t>(rc));
          inflight += static_cast<size_t>(rc);
          busy = 0;
        } else if ((rc == -EAGAIN || rc == -EBUSY || rc == 0) && inflight == 0 && ++busy < 1000) {
          // Nothing of ours is in flight to wait for: try again shortly.
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          continue;
        } else if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
          busy = 1000;
        }
        if (busy >= 1000) {
          retire(ring, ops, n, &done, inflight);
          return;
        }
      }
      io_uring_cqe* cqe = nullptr;
      const int wrc = inflight == 0
                          ? -EAGAIN
                          : through(hooks_.wait, [&] { return io_uring_wait_cqe(ring, &cqe); });
      if (wrc == 0) {
        inflight -= complete(ring, cqe, ops, n, &done);
        while (inflight > 0 && io_uring_peek_cqe(ring, &cqe) == 0) {
          inflight -= complete(ring, cqe, ops, n, &done);
        }
      } else if (wrc != -EINTR && wrc != -EAGAIN) {  // the ring cannot be waited on
        retire(ring, ops, n, &done, inflight);
        return;
      }
    }
    release(ring);
  }
  std::string name() const override { return "io_uring"; }

 private:
  /// `real()`, or the test hook standing in for it (made a std::function only then).
  template <class Real>
  static int through(const UringHooks::Hook& hook, Real real) {
    return hook ? hook(real) : real();
  }
  /// Records one completion; 1 when it was one of this batch's ops (0: a stray, ignored).
  size_t complete(io_uring* ring, io_uring_cqe* cqe, IoOp* ops, size_t n, std::vector<char>* done) {
    const uint64_t i = io_uring_cqe_get_data64(cqe);
    int64_t res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    if (i >= n || (*done)[i]) return 0;
    IoOp& op = ops[i];
    if (res > 0 && static_cast<uint64_t>(res) < op.len) {
      // Finish a partial transfer synchronously from where the kernel stopped.
      IoOp rest = op;
      rest.offset += static_cast<uint64_t>(res);
      rest.buf = static_cast<char*>(op.buf) + res;
      rest.len = op.len - static_cast<uint32_t>(res);
      int64_t r2 = transfer_all(rest);
      if (r2 > 0) res += r2;
    }
    op.result = res;
    (*done)[i] = 1;
    return 1;
  }
  /// The ring refuses submissions (or waits on it fail): waits for the ops the kernel took
  /// (their buffers are the caller's), finishes the others synchronously, and closes the ring,
  /// whose unsubmitted entries must never reach a later batch. Ops the kernel still holds after a
  /// minute are failed and their ring leaked rather than closed: their buffers may yet be written.
  void retire(io_uring* ring, IoOp* ops, size_t n, std::vector<char>* done, size_t inflight) {
    for (int waited = 0; inflight > 0 && waited < 60;) {
      io_uring_cqe* cqe = nullptr;
      const int rc = wait_cqe_1s(ring, &cqe);
      if (rc == 0) {
        inflight -= complete(ring, cqe, ops, n, done);
      } else if (rc != -EINTR) {
        ++waited;
      }
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      rings_.erase(std::remove(rings_.begin(), rings_.end(), ring), rings_.end());
    }
    for (size_t i = 0; i < n; ++i) {
      if ((*done)[i]) continue;
      if (inflight == 0) {
        ops[i].result = transfer_all(ops[i]);
      } else {
        ops[i].result = -EIO;  // may still be in the kernel's hands: not redone
      }
    }
    if (inflight == 0) {
      io_uring_queue_exit(ring);
      delete ring;
    }
  }
  /// Waits up to a second for a completion: 0 with *cqe set, or -errno (-EAGAIN: none came).
  /// Polls the ring's fd rather than calling io_uring_wait_cqe_timeout, which on kernels without
  /// IORING_FEAT_EXT_ARG (before 5.11) submits a timeout entry and with it every entry still
  /// queued: ops that retire() is about to finish itself.
  static int wait_cqe_1s(io_uring* ring, io_uring_cqe** cqe) {
    if (io_uring_peek_cqe(ring, cqe) == 0) return 0;
    pollfd p{ring->ring_fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 1000);
    if (ready < 0) return -errno;
    const int rc = io_uring_peek_cqe(ring, cqe);
    if (rc != 0 && ready > 0 && (p.revents & (POLLERR | POLLNVAL)) != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(1));  // a broken ring: still a second
    }
    return rc;
  }
  io_uring* acquire() {
    std::lock_guard<std::mutex> g(mu_);
    if (!free_.empty()) {
      io_uring* r = free_.back();
      free_.pop_back();
      return r;
    }
    io_uring* r = new io_uring;
    if (io_uring_queue_init(depth_, r, 0) < 0) {
      delete r;
      return nullptr;
    }
    rings_.push_back(r);
    return r;
  }
  void release(io_uring* r) {
    std::lock_guard<std::mutex> g(mu_);
    free_.push_back(r);
  }

  unsigned depth_;
  UringHooks hooks_;
  std::mutex mu_;
  std::vector<io_uring*> rings_;
  std::vector<io_uring*> free_;
};

}  // namespace

std::shared_ptr<IoBackend> make_pread_backend() {
  return std::make_shared<PreadBackend>();
}

std::shared_ptr<IoBackend> make_uring_backend(unsigned queue_depth, std::string* why,
                                              UringHooks hooks) {
  auto b = std::make_shared<UringBackend>(queue_depth == 0 ? 32 : queue_depth, std::move(hooks));
  if (!b->probe(why)) return nullptr;
  return b;
}

}  // namespace cb::store
