#include "lib/store/faulty_io.h"

#include <cerrno>
#include <utility>
#include <vector>

namespace cb::store {

FaultyIo::FaultyIo(std::shared_ptr<IoBackend> inner) : inner_(std::move(inner)) {}

void FaultyIo::fail_writes(int n, int err) {
  std::lock_guard<std::mutex> g(mu_);
  write_fail_n_ = n;
  write_err_ = err;
}
void FaultyIo::fail_reads(int n, int err) {
  std::lock_guard<std::mutex> g(mu_);
  read_fail_n_ = n;
  read_err_ = err;
}
void FaultyIo::short_reads(int n) {
  std::lock_guard<std::mutex> g(mu_);
  short_n_ = n;
}
void FaultyIo::flip_bits(int n) {
  std::lock_guard<std::mutex> g(mu_);
  flip_n_ = n;
}
void FaultyIo::fail_syncs(int n) {
  std::lock_guard<std::mutex> g(mu_);
  sync_fail_n_ = n;
}
void FaultyIo::fail_all_writes(int err) {
  std::lock_guard<std::mutex> g(mu_);
  all_writes_err_ = err;
}

void FaultyIo::submit(IoOp* ops, size_t n) {
  enum Fault : uint8_t { None, Fail, Short, Flip };
  std::vector<Fault> fault(n, None);
  std::vector<int> err(n, 0);
  {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < n; ++i) {
      if (ops[i].write) {
        if (all_writes_err_ != 0) {
          fault[i] = Fail;
          err[i] = all_writes_err_;
        } else if (write_fail_n_ > 0) {
          --write_fail_n_;
          fault[i] = Fail;
          err[i] = write_err_;
        }
      } else if (read_fail_n_ > 0) {
        --read_fail_n_;
        fault[i] = Fail;
        err[i] = read_err_;
      } else if (short_n_ > 0) {
        --short_n_;
        fault[i] = Short;
      } else if (flip_n_ > 0) {
        --flip_n_;
        fault[i] = Flip;
      }
    }
  }
  std::vector<IoOp> pass;
  std::vector<size_t> idx;
  for (size_t i = 0; i < n; ++i) {
    if (fault[i] == Fail) {
      ops[i].result = -err[i];
      ++injected_;
    } else {
      pass.push_back(ops[i]);
      idx.push_back(i);
    }
  }
  if (!pass.empty()) inner_->submit(pass.data(), pass.size());
  for (size_t j = 0; j < pass.size(); ++j) {
    IoOp& op = ops[idx[j]];
    op.result = pass[j].result;
    if (fault[idx[j]] == Short && op.result > 0) {
      op.result /= 2;
      ++injected_;
    } else if (fault[idx[j]] == Flip && op.result > 0) {
      static_cast<unsigned char*>(op.buf)[op.result / 2] ^= 0x10;
      ++injected_;
    }
  }
}

int FaultyIo::sync(int fd) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (sync_fail_n_ > 0) {
      --sync_fail_n_;
      ++injected_;
      return -EIO;
    }
  }
  return inner_->sync(fd);
}

}  // namespace cb::store
