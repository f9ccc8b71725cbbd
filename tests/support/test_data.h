#pragma once
/// Locating ../shared test data (CACHEBENCH_DATA overrides the default) and scratch
/// files. Tests that need shared data call CB_REQUIRE_DATA and skip with a message when
/// the file is absent.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/test_paths.h"

// CB_SANITIZED: built with ASan or TSan, whose slowdown (and its variance) distorts timings;
// tests that assert timing ratios skip there and run in the optimized build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CB_SANITIZED 1
#endif
#endif

namespace cb::test {

inline std::string data_dir() {
  const char* env = std::getenv("CACHEBENCH_DATA");
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(default_data_dir());
}

/// Absolute path of `rel` under the shared data directory.
inline std::string data_path(const std::string& rel) {
  return data_dir() + "/" + rel;
}

inline bool file_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

/// A scratch directory for files a test writes (under the build tree).
inline std::string tmp_dir() {
  const char* env = std::getenv("CACHEBENCH_TEST_TMP");
  std::string d = (env != nullptr && *env != '\0') ? env : std::string(binary_dir()) + "/test_tmp";
  ::mkdir(d.c_str(), 0755);
  return d;
}

/// Writes `bytes` to tmp_dir()/name and returns the path.
inline std::string write_tmp(const std::string& name, const std::string& bytes) {
  const std::string p = tmp_dir() + "/" + name;
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace cb::test

/// Skips the current test with a message when shared file `rel` is missing.
#define CB_REQUIRE_DATA(var, rel)                     \
  const std::string var = ::cb::test::data_path(rel); \
  if (!::cb::test::file_exists(var))                  \
  GTEST_SKIP() << "shared data not found: " << var    \
               << " (set CACHEBENCH_DATA to the folder holding models/ and data/)"
