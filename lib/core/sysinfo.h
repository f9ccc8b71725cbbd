#pragma once
/// Facts about the machine the process runs on.

#include <unistd.h>

#include <cstdint>

namespace cb {

/// Bytes of physical memory (0 when the system does not say).
inline uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace cb
