#pragma once
/// The small file-I/O interface under the SSD tier: batches of positioned reads and
/// writes. Implementations: io_uring (queue depth per batch), pread/pwrite, and a
/// FaultyIo wrapper that fails on command (tests).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace cb::store {

/// One positioned transfer; `result` is set to the bytes moved or to -errno.
struct IoOp {
  int fd = -1;
  uint64_t offset = 0;
  void* buf = nullptr;
  uint32_t len = 0;
  bool write = false;
  int64_t result = 0;
};

/// Executes batches of IoOps; thread-safe (any number of threads may submit at once).
class IoBackend {
 public:
  virtual ~IoBackend() = default;
  /// Runs all `n` ops (in any order) and returns when every one has a result.
  virtual void submit(IoOp* ops, size_t n) = 0;
  /// fdatasync(fd): 0 or -errno.
  virtual int sync(int fd);
  /// "io_uring", "pread", ...
  virtual std::string name() const = 0;
};

/// pread/pwrite in a loop (retries EINTR and partial transfers until EOF or error).
std::shared_ptr<IoBackend> make_pread_backend();
/// Test seams of the io_uring backend for the paths a kernel rarely takes (EAGAIN, EBUSY, a
/// ring that fails for good): each stands in for one liburing call, gets the real call to pass
/// on or not, and returns what the call would (-errno on failure); called from every thread
/// that submits. Empty: the real call.
struct UringHooks {
  using Hook = std::function<int(const std::function<int()>& real)>;
  Hook submit;  ///< io_uring_submit: entries taken
  Hook wait;    ///< io_uring_wait_cqe of a batch with ops in flight: 0 with a completion
};

/// io_uring backend, or nullptr (with `why` set) when the kernel refuses io_uring. A submit
/// that takes nothing (EAGAIN, EBUSY or 0) is retried after 100 us while none of the batch's ops
/// is in flight, and after a completion otherwise; EINTR is retried. A ring is retired after
/// 1,000 such refusals in a row with nothing in flight, any other submit error, or a wait on it
/// that fails: the batch waits for its ops in flight and finishes the rest with pread/pwrite,
/// and the next batch opens a new ring. Ops still in flight after a minute fail with -EIO and
/// their ring is left open (the kernel may yet write their buffers).
std::shared_ptr<IoBackend> make_uring_backend(unsigned queue_depth, std::string* why,
                                              UringHooks hooks = {});

/// Which backend the SSD tier uses.
enum class IoMode { Auto, Uring, Pread };
/// Parses "auto" / "uring" / "pread"; throws cb::Error otherwise.
IoMode parse_io_mode(const std::string& s);

}  // namespace cb::store
