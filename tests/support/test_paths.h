#pragma once
/// The build's absolute paths for tests, compiled into one generated file (the cb_test_paths
/// library, tests/CMakeLists.txt) rather than into each test's compile line, so that a clone at
/// another path compiles the same test objects and the compiler cache serves them.

namespace cb::test {

const char* source_dir();        ///< the repository
const char* binary_dir();        ///< the build tree
const char* default_data_dir();  ///< ../shared beside the repository (CACHEBENCH_DATA overrides)
const char* crash_writer();      ///< the store's crash test writer (tests/unit/store)

}  // namespace cb::test
