#pragma once
/// Facts about the machine the process runs on.

#include <time.h>
#include <unistd.h>

#include <algorithm>
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

/// The aggregate counters of /proc/stat's "cpu" line, in clock ticks.
struct CpuTicks {
  unsigned long long steal = 0, total = 0;
  bool known = false;  ///< false where /proc/stat cannot be read
};

inline CpuTicks cpu_ticks() {
  CpuTicks t;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return t;
  // user nice system idle iowait irq softirq steal (guest time is already counted in user)
  unsigned long long v[8];
  t.known = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                        &v[3], &v[4], &v[5], &v[6], &v[7]) == 8;
  std::fclose(f);
  if (!t.known) return t;
  for (auto x : v) t.total += x;
  t.steal = v[7];
  return t;
}

/// The share of this machine's CPU time, all CPUs together, that its hypervisor gave to other
/// guests between two readings ("steal"): wall-clock timings over such an interval measure
/// them too (a single busy thread on an idle 2-CPU machine may lose twice this share). -1 when
/// unknown (no /proc/stat, no tick passed, or a counter that went back).
inline double steal_share(const CpuTicks& from, const CpuTicks& to) {
  if (!from.known || !to.known || to.total <= from.total || to.steal < from.steal) return -1;
  const double share =
      static_cast<double>(to.steal - from.steal) / static_cast<double>(to.total - from.total);
  return std::min(share, 1.0);
}

/// Above this steal_share, commands say that a run's wall-clock timings measured other guests.
inline constexpr double kNotableSteal = 0.05;

}  // namespace cb
