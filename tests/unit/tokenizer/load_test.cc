// load_tokenizer: a tokenizer file that is not a regular file is named as what it is, never
// read in a way that blocks, and never taken for a missing one.

#include "lib/tokenizer/load.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "lib/core/error.h"
#include "lib/tokenizer/sentencepiece.h"
#include "tests/support/test_data.h"

namespace cb::tokenizer {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

std::string fresh_dir(const std::string& name) {
  const std::string d = cb::test::tmp_dir() + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Each of these hung (a FIFO's open for reading waits for a writer) or said "no such file".
TEST(LoadTokenizer, AFifoOrDirectoryIsNamedNotWaitedOn) {
  ::alarm(60);  // a blocked open ends as SIGALRM, which fails the test
  const std::string d = fresh_dir("tok_fifo");
  const std::string fifo = ": not a regular file (a FIFO)";
  for (const char* name : {"tokenizer.model", "tokenizer.json", "tok.gguf", "vocab"}) {
    const std::string p = d + "/" + name;
    if (::mkfifo(p.c_str(), 0644) != 0) {
      ::alarm(0);  // not left to end a later test
      FAIL() << "mkfifo " << p;
    }
    const std::string e = error_of([&] { load_tokenizer(p); });  // --tokenizer PATH
    EXPECT_NE(e.find(p + fifo), std::string::npos) << e;
  }
  // In a model directory, a tokenizer.model that is not a file is named, not passed over.
  std::string e = error_of([&] { load_tokenizer(d); });
  EXPECT_NE(e.find(d + "/tokenizer.model" + fifo), std::string::npos) << e;
  std::remove((d + "/tokenizer.model").c_str());
  e = error_of([&] { load_tokenizer(d); });
  EXPECT_NE(e.find(d + "/tokenizer.json" + fifo), std::string::npos) << e;
  e = error_of([&] { SentencePieceTokenizer::open(d + "/tok.gguf"); });
  EXPECT_NE(e.find(d + "/tok.gguf" + fifo), std::string::npos) << e;

  const std::string t = fresh_dir("tok_dir");
  ASSERT_EQ(::mkdir((t + "/tokenizer.model").c_str(), 0755), 0);
  e = error_of([&] { load_tokenizer(t); });
  EXPECT_NE(e.find(t + "/tokenizer.model: a directory, not a file"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { load_tokenizer(t + "/absent.model"); }).find("no such file"),
            std::string::npos);
  ::alarm(0);
}

}  // namespace
}  // namespace cb::tokenizer
