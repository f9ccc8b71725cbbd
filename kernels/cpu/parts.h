#pragma once
/// The CPU kernels' own threads (the GEMV of decode's linear layers, decode's attention): how
/// many, and running a kernel's parts on them.

#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace cb::kernels::cpu {

/// As many threads as OpenBLAS uses (OPENBLAS_NUM_THREADS, else one a core), at most 16: one
/// setting for every kernel, whether BLAS or the kernel itself splits the work.
int kernel_threads();

/// Calls fn(p) for p in [0, parts), each on its own thread (the caller runs part 0, and any
/// part a thread could not be started for); returns when all are done. `fn` must not throw,
/// and parts must write disjoint data.
template <typename Fn>
void run_parts(int64_t parts, Fn&& fn) {
  std::vector<std::thread> pool;
  if (parts > 1) pool.reserve(static_cast<size_t>(parts - 1));  // no reallocation while running
  for (int64_t p = 1; p < parts; ++p) {
    try {
      pool.emplace_back(fn, p);
    } catch (const std::system_error&) {  // no thread to be had: this one computes that part
      fn(p);
    }
  }
  fn(int64_t{0});
  for (std::thread& t : pool) t.join();
}

}  // namespace cb::kernels::cpu
