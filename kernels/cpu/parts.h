#pragma once
/// The CPU kernels' own threads (the GEMV of decode's linear layers, decode's attention): how
/// many, and running a kernel's parts on them.

#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace cb::kernels::cpu {

/// As many threads as OpenBLAS uses (OPENBLAS_NUM_THREADS, else one a core), at most 16: one
/// setting for every kernel, whether BLAS or the kernel itself splits the work.
int kernel_threads();

/// Calls fn(p) for p in [0, parts), each on its own thread (the caller runs part 0, and any
/// part a thread could not be started for); returns when all are done, then rethrows the
/// first exception a part threw (by part number). Parts must write disjoint data.
template <typename Fn>
void run_parts(int64_t parts, Fn&& fn) {
  if (parts <= 0) return;
  if (parts == 1) {  // the common small call: no thread, no bookkeeping
    fn(int64_t{0});
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  const auto part = [&](int64_t p) {
    try {
      fn(p);
    } catch (...) {
      errors[static_cast<size_t>(p)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int64_t p = 1; p < parts; ++p) {
    try {  // a failed emplace_back leaves the pool as it was (std::thread moves never throw)
      pool.emplace_back(part, p);
    } catch (...) {  // no thread (or no memory for one) to be had: this one computes that part
      part(p);
    }
  }
  part(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace cb::kernels::cpu
