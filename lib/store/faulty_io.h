#pragma once
/// An IoBackend that fails on command, for fault-injection tests: ENOSPC or EIO on
/// writes, EIO or short reads, bit flips in data read back. Counts are consumed per op.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "lib/store/io_backend.h"

namespace cb::store {

/// Wraps another backend; faults apply to the next ops in submission order.
class FaultyIo final : public IoBackend {
 public:
  /// Faults are injected around `inner`.
  explicit FaultyIo(std::shared_ptr<IoBackend> inner);

  /// The next `n` writes fail with -`err` (ENOSPC, EIO, ...).
  void fail_writes(int n, int err);
  /// The next `n` reads fail with -`err`.
  void fail_reads(int n, int err);
  /// The next `n` reads return half the bytes asked for.
  void short_reads(int n);
  /// The next `n` reads succeed but one bit of the data is flipped.
  void flip_bits(int n);
  /// The next `n` fdatasync calls fail with -EIO.
  void fail_syncs(int n);
  /// Every write fails with -`err` until cleared with 0 (a full disk).
  void fail_all_writes(int err);

  void submit(IoOp* ops, size_t n) override;
  int sync(int fd) override;
  std::string name() const override { return "faulty(" + inner_->name() + ")"; }

  /// Faults injected so far.
  uint64_t injected() const { return injected_.load(); }

 private:
  std::shared_ptr<IoBackend> inner_;
  std::mutex mu_;
  int write_fail_n_ = 0, write_err_ = 0, read_fail_n_ = 0, read_err_ = 0;
  int short_n_ = 0, flip_n_ = 0, sync_fail_n_ = 0, all_writes_err_ = 0;
  std::atomic<uint64_t> injected_{0};
};

}  // namespace cb::store
