#include "datasets/piqa.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::datasets {
namespace {

std::string error_of(const std::string& jsonl, const std::string& labels, const std::string& tag) {
  const std::string j = test::write_tmp("piqa_" + tag + ".jsonl", jsonl);
  const std::string l = test::write_tmp("piqa_" + tag + "-labels.lst", labels);
  try {
    load_piqa(j, l);
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "no error for " << tag;
  return "";
}

const char* kRow = "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\"}\n";

TEST(Piqa, SmallFiles) {
  const std::string j = test::write_tmp(
      "piqa_ok.jsonl",
      std::string(kRow) + "{\"id\": 7, \"goal\": \"G\", \"sol1\": \"x\", \"sol2\": \"y\"}");
  const std::string l = test::write_tmp("piqa_ok-labels.lst", "1\r\n0\n\n");
  const auto ex = load_piqa(j, l);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].goal, "g");
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].sol2, "y");
  EXPECT_EQ(ex[1].label, 0);
}

TEST(Piqa, CountMismatchNamesBothFiles) {
  const std::string e = error_of(std::string(kRow) + kRow, "0\n", "count");
  EXPECT_NE(e.find("piqa_count.jsonl"), std::string::npos) << e;
  EXPECT_NE(e.find("piqa_count-labels.lst"), std::string::npos) << e;
  EXPECT_NE(e.find("2 examples but 1 labels"), std::string::npos) << e;
}

TEST(Piqa, BadRows) {
  std::string e =
      error_of(std::string(kRow) + "{\"goal\": \"g\", \"sol1\": \"a\"}\n", "0\n1\n", "missing");
  EXPECT_NE(e.find("piqa_missing.jsonl:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("\"sol2\""), std::string::npos) << e;
  e = error_of(std::string(kRow) + "{\"goal\": \n", "0\n1\n", "json");
  EXPECT_NE(e.find("piqa_json.jsonl:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
  e = error_of(kRow, "2\n", "label");
  EXPECT_NE(e.find("piqa_label-labels.lst:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("'2'"), std::string::npos) << e;
}

// An editor's byte order mark before the first label is skipped, as in the JSON lines (it was
// read as part of the label: "label '\ufeff0' is not 0 or 1").
TEST(Piqa, LabelsBomSkipped) {
  const std::string j = test::write_tmp("piqa_bom.jsonl", std::string(kRow) + kRow);
  const std::string l = test::write_tmp("piqa_bom-labels.lst",
                                        "\xEF\xBB\xBF"
                                        "1\n0\n");
  const auto ex = load_piqa(j, l);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].label, 1);
  EXPECT_EQ(ex[1].label, 0);
}

// A label with bytes a terminal shows as nothing (a BOM past the start, a zero-width space) is
// quoted with them escaped, not as "label '0'".
TEST(Piqa, InvisibleLabelBytesEscaped) {
  std::string e = error_of(std::string(kRow) + kRow,
                           "0\n\xEF\xBB\xBF"
                           "1\n",
                           "bom2");
  EXPECT_NE(e.find("piqa_bom2-labels.lst:2: label '\\xEF\\xBB\\xBF1' is not 0 or 1"),
            std::string::npos)
      << e;
  e = error_of(kRow, "0\xE2\x80\x8B\x1B\n", "zwsp");
  EXPECT_NE(e.find("label '0\\xE2\\x80\\x8B\\x1B'"), std::string::npos) << e;
}

// Found by fuzzing (fuzz/json_lines_fuzz.cc): a number too large for a double is nlohmann's
// out_of_range error, not a parse_error, and escaped the JSON lines reader uncaught.
TEST(Piqa, NumberOverflowIsInvalidJson) {
  const std::string e =
      error_of(std::string(kRow) + "{\"goal\": \"g\", \"n\": 1E400}\n", "0\n1\n", "overflow");
  EXPECT_NE(e.find("piqa_overflow.jsonl:2: invalid JSON: number overflow parsing '1E400'"),
            std::string::npos)
      << e;
}

TEST(Piqa, RealValidation) {
  CB_REQUIRE_DATA(p, "data/piqa/valid.jsonl");
  const auto ex = load_piqa_dir(test::data_path("data/piqa"));
  ASSERT_EQ(ex.size(), 1838u);
  EXPECT_EQ(ex[0].goal, "How do I ready a guinea pig cage for it's new occupants?");
  EXPECT_EQ(ex[0].label, 0);
  EXPECT_EQ(ex[1].goal, "dresser");
  EXPECT_EQ(ex[1].label, 1);
  size_t ones = 0;
  for (const auto& x : ex) ones += static_cast<size_t>(x.label);
  EXPECT_GT(ones, 800u);
  EXPECT_LT(ones, 1038u);
}

}  // namespace
}  // namespace cb::datasets
