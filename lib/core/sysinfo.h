#pragma once
/// Facts about the machine the process runs on.

#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace cb {

/// Bytes of physical memory (0 when the system does not say).
inline uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

/// Bytes of memory available to a new allocation without swapping, as the kernel estimates it
/// (/proc/meminfo's MemAvailable; what this process already holds is not in it). Falls back
/// to physical_memory_bytes() where the system does not say.
inline uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return physical_memory_bytes();
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  }
  std::fclose(f);
  return found ? static_cast<uint64_t>(kib) * 1024 : physical_memory_bytes();
}

/// CPU time the calling thread has used, in seconds. Time a hypervisor gave other guests
/// ("steal") and time spent waiting for a CPU are not in it: over a stretch in which a thread
/// computes without waiting, its CPU time over the wall clock says how much of the machine it
/// had.
inline double thread_cpu_seconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace cb
