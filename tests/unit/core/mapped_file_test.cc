#include "lib/core/mapped_file.h"

#include <gtest/gtest.h>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace {

TEST(MappedFileTest, MapsContents) {
  const std::string p = cb::test::write_tmp("mapped.bin", std::string("hello\0world", 11));
  cb::MappedFile f(p);
  ASSERT_EQ(f.size(), 11u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), 11),
            std::string("hello\0world", 11));
  cb::MappedFile moved(std::move(f));
  EXPECT_EQ(moved.size(), 11u);
  EXPECT_EQ(f.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
}

TEST(MappedFileTest, EmptyFileIsEmpty) {
  const std::string p = cb::test::write_tmp("empty.bin", "");
  cb::MappedFile f(p);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.data(), nullptr);
}

TEST(MappedFileTest, MissingFileNamesPath) {
  try {
    cb::MappedFile f("/nonexistent/dir/model.gguf");
    FAIL() << "expected cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(MappedFileTest, DirectoryIsRejected) {
  EXPECT_THROW(cb::MappedFile f(cb::test::tmp_dir()), cb::Error);
}

TEST(ErrorTest, MessageHasWhereWhatAndFix) {
  const cb::Error e = cb::make_error("a.gguf", "bad magic", "re-download it");
  EXPECT_STREQ(e.what(), "a.gguf: bad magic; re-download it");
  EXPECT_STREQ(cb::make_error("", "oops").what(), "oops");
}

}  // namespace
