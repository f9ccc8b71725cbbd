#include "datasets/mmlu.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::datasets {
namespace {

std::string load_error(const std::string& name, const std::string& text) {
  const std::string p = test::write_tmp(name, text);
  try {
    load_mmlu_csv(p);
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "no error for " << name;
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Mmlu, SubjectFromPath) {
  EXPECT_EQ(mmlu_subject_from_path("/d/test/high_school_physics_test.csv"), "high_school_physics");
  EXPECT_EQ(mmlu_subject_from_path("dev/anatomy_dev.csv"), "anatomy");
  EXPECT_EQ(mmlu_subject_from_path("val/anatomy_val.csv"), "anatomy");
  EXPECT_EQ(mmlu_subject_from_path("x/other.csv"), "other");
}

TEST(Mmlu, OriginalLayoutWithoutHeader) {
  const auto f = parse_mmlu_csv(
      "\"What is 2+2, roughly?\",3,4,5,\"six, or \"\"6\"\"\",B\r\n"
      "\"Multi\nline\",a,b,c,d,D\r\n",
      "algebra_test.csv");
  EXPECT_EQ(f.subject, "algebra");
  EXPECT_EQ(f.format, MmluFormat::kOriginal);
  ASSERT_EQ(f.questions.size(), 2u);
  EXPECT_EQ(f.questions[0].question, "What is 2+2, roughly?");
  EXPECT_EQ(f.questions[0].choices[3], "six, or \"6\"");
  EXPECT_EQ(f.questions[0].answer, 1);
  EXPECT_EQ(f.questions[1].question, "Multi\nline");
  EXPECT_EQ(f.questions[1].answer, 3);
  EXPECT_EQ(f.questions[1].line, 2);
}

TEST(Mmlu, ConvertedLayoutWithHeader) {
  const auto f = parse_mmlu_csv(
      "question,choice0,choice1,choice2,choice3,answer\nq1,a,b,c,d,0\nq2,a,b,c,d,3\n", "x_dev.csv");
  EXPECT_EQ(f.format, MmluFormat::kConverted);
  ASSERT_EQ(f.questions.size(), 2u);
  EXPECT_EQ(f.questions[0].answer, 0);
  EXPECT_EQ(f.questions[1].answer, 3);
  EXPECT_EQ(f.questions[1].line, 3);
}

TEST(Mmlu, WrongFieldCount) {
  const std::string e = load_error("mmlu_fields_test.csv", "q,a,b,c,d,A\nq,a,b,c,A\n");
  EXPECT_TRUE(contains(e, ":2:")) << e;
  EXPECT_TRUE(contains(e, "expected 6 fields")) << e;
  EXPECT_TRUE(contains(e, "found 5")) << e;
}

TEST(Mmlu, AnswerOutOfRange) {
  std::string e = load_error("mmlu_e_test.csv", "q,a,b,c,d,A\nq,a,b,c,d,E\n");
  EXPECT_TRUE(contains(e, ":2:")) << e;
  EXPECT_TRUE(contains(e, "answer")) << e;
  EXPECT_TRUE(contains(e, "'E'")) << e;
  e = load_error("mmlu_4_test.csv",
                 "question,choice0,choice1,choice2,choice3,answer\nq,a,b,c,d,1\nq,a,b,c,d,4\n");
  EXPECT_TRUE(contains(e, ":3:")) << e;
  EXPECT_TRUE(contains(e, "'4'")) << e;
  EXPECT_TRUE(contains(e, "0-3")) << e;
  // Each layout takes only its own answer form.
  e = load_error("mmlu_mixed_test.csv", "q,a,b,c,d,2\n");
  EXPECT_TRUE(contains(e, "A-D")) << e;
}

TEST(Mmlu, HeaderMismatch) {
  const std::string e =
      load_error("mmlu_header_test.csv", "question,A,B,C,D,answer\nq,a,b,c,d,0\n");
  EXPECT_TRUE(contains(e, ":1:")) << e;
  EXPECT_TRUE(contains(e, "header")) << e;
  EXPECT_TRUE(contains(e, "question,choice0,choice1,choice2,choice3,answer")) << e;
}

TEST(Mmlu, UnterminatedQuoteAndEmptyFile) {
  std::string e = load_error("mmlu_quote_test.csv", "q,a,b,c,d,A\n\"q,a,b,c,d,A\nq,a,b,c,d,B\n");
  EXPECT_TRUE(contains(e, ":2:")) << e;
  EXPECT_TRUE(contains(e, "unterminated")) << e;
  e = load_error("mmlu_empty_test.csv", "question,choice0,choice1,choice2,choice3,answer\n");
  EXPECT_TRUE(contains(e, "no questions")) << e;
}

// Every other text input refuses bytes that are not UTF-8 text; MMLU's CSVs used to be scored
// as garbled prompts (a Latin-1 file) or as a binary file's bytes.
TEST(Mmlu, NotUtf8OrNulRefusedWithLine) {
  std::string e = load_error("mmlu_latin1_test.csv", "q,a,b,c,d,A\nCaf\xE9?,a,b,c,d,B\n");
  EXPECT_TRUE(contains(e, "mmlu_latin1_test.csv:2: not UTF-8 text: byte 0xE9 at offset 15")) << e;
  EXPECT_TRUE(contains(e, "save the CSV as UTF-8")) << e;
  e = load_error("mmlu_nul_test.csv", std::string("q,a,b,c,d,A\nq,a,b") + '\0' + ",c,d,B\n");
  EXPECT_TRUE(contains(e, "mmlu_nul_test.csv:2: not UTF-8 text: byte 0x00 at offset 17")) << e;
  // A BOM is valid UTF-8 (and skipped by the CSV reader).
  EXPECT_EQ(parse_mmlu_csv("\xEF\xBB\xBFq\xC3\xA9,a,b,c,d,A\n", "x_test.csv").questions.size(), 1u);
}

TEST(Mmlu, RealDirectory) {
  CB_REQUIRE_DATA(root, "data/mmlu/test");
  const std::string dir = test::data_path("data/mmlu");
  const auto names = list_mmlu_subjects(dir);
  ASSERT_EQ(names.size(), 57u);
  EXPECT_EQ(names.front(), "abstract_algebra");
  const auto subjects = load_mmlu_dir(dir);
  ASSERT_EQ(subjects.size(), 57u);
  size_t test_rows = 0, dev_rows = 0;
  for (const auto& s : subjects) {
    test_rows += s.test.size();
    dev_rows += s.dev.size();
    EXPECT_EQ(s.dev.size(), 5u) << s.name;
    for (const auto& q : s.test) {
      ASSERT_GE(q.answer, 0);
      ASSERT_LE(q.answer, 3);
    }
  }
  EXPECT_EQ(test_rows, 14042u);
  EXPECT_EQ(dev_rows, 285u);
  const auto& aa = subjects.front();
  EXPECT_EQ(aa.name, "abstract_algebra");
  ASSERT_EQ(aa.test.size(), 100u);
  EXPECT_EQ(aa.test[0].question,
            "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.");
  EXPECT_EQ(aa.test[0].choices[1], "4");
  EXPECT_EQ(aa.test[0].answer, 1);
  EXPECT_EQ(aa.test.back().answer, 2);
}

TEST(Mmlu, RealFileWithCrlfInsideQuotes) {
  CB_REQUIRE_DATA(p, "data/mmlu/dev/college_mathematics_dev.csv");
  const auto f = load_mmlu_csv(p);
  EXPECT_EQ(f.format, MmluFormat::kConverted);
  ASSERT_EQ(f.questions.size(), 5u);
  bool crlf = false;
  for (const auto& q : f.questions) crlf = crlf || contains(q.question, "\r\nI. All of");
  EXPECT_TRUE(crlf);
}

TEST(Mmlu, DirectoryErrors) {
  const std::string root = test::tmp_dir() + "/mmlu_dir";
  std::filesystem::remove_all(root);  // left by an earlier run
  ::mkdir(root.c_str(), 0755);
  try {
    load_mmlu_dir(root);
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_TRUE(contains(e.what(), "no test/ folder")) << e.what();
  }
  ::mkdir((root + "/test").c_str(), 0755);
  test::write_tmp("mmlu_dir/test/chem_test.csv", "q,a,b,c,d,A\n");
  // Few-shot without a dev/ folder names it (it used to load no dev questions, and the run
  // failed only at the first subject's --shots check, without saying dev/ was missing).
  try {
    load_mmlu_dir(root);
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_TRUE(contains(e.what(), root + "/dev: no dev/ folder")) << e.what();
  }
  EXPECT_EQ(load_mmlu_dir(root, false).size(), 1u);
  ::mkdir((root + "/dev").c_str(), 0755);
  try {
    load_mmlu_dir(root);
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_TRUE(contains(e.what(), "chem_dev.csv")) << e.what();
  }
  // Zero-shot reads no dev file, so a missing one is no error.
  const auto zero_shot = load_mmlu_dir(root, false);
  ASSERT_EQ(zero_shot.size(), 1u);
  EXPECT_TRUE(zero_shot[0].dev.empty());
  test::write_tmp("mmlu_dir/dev/chem_dev.csv", "q,a,b,c,d,C\n");
  const auto s = load_mmlu_dir(root);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].dev[0].answer, 2);
  // A directory named like a subject's file is named, not skipped.
  ::mkdir((root + "/test/bio_test.csv").c_str(), 0755);
  try {
    load_mmlu_dir(root);
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_TRUE(contains(e.what(), "bio_test.csv")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not a regular file")) << e.what();
  }
}

}  // namespace
}  // namespace cb::datasets
