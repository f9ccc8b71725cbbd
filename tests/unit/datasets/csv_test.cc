#include "datasets/csv.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/core/error.h"

namespace cb::datasets {
namespace {

using Fields = std::vector<std::string>;

std::string error_of(const std::string& text) {
  try {
    parse_csv(text, "f.csv");
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Csv, PlainAndQuotedFields) {
  const auto r = parse_csv("a,b,c\n\"x, y\",\"say \"\"hi\"\"\",\n", "f.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].fields, (Fields{"a", "b", "c"}));
  EXPECT_EQ(r[0].line, 1);
  EXPECT_EQ(r[1].fields, (Fields{"x, y", "say \"hi\"", ""}));
  EXPECT_EQ(r[1].line, 2);
}

TEST(Csv, LineBreaksInsideQuotesAndLineNumbers) {
  const auto r = parse_csv("\"one\ntwo\r\nthree\",b\r\nc,d\n\ne,f", "f.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].fields, (Fields{"one\ntwo\r\nthree", "b"}));
  EXPECT_EQ(r[0].line, 1);
  EXPECT_EQ(r[1].fields, (Fields{"c", "d"}));
  EXPECT_EQ(r[1].line, 4);
  EXPECT_EQ(r[2].fields, (Fields{"e", "f"}));  // no final newline, blank line skipped
  EXPECT_EQ(r[2].line, 6);
}

TEST(Csv, CrlfAndLoneCrTerminators) {
  const auto r = parse_csv("a,b\r\nc,d\re,f\r\n", "f.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].fields, (Fields{"c", "d"}));
  EXPECT_EQ(r[2].fields, (Fields{"e", "f"}));
  EXPECT_EQ(r[2].line, 3);
}

TEST(Csv, BomEmptyFieldsAndLiteralQuote) {
  const auto r = parse_csv("\xEF\xBB\xBF,x,\nab\"c,\"\"\n", "f.csv");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].fields, (Fields{"", "x", ""}));
  EXPECT_EQ(r[1].fields, (Fields{"ab\"c", ""}));
  EXPECT_TRUE(parse_csv("", "f.csv").empty());
  EXPECT_TRUE(parse_csv("\n\r\n", "f.csv").empty());
}

TEST(Csv, UnterminatedQuoteNamesFileAndStartLine) {
  const std::string e = error_of("a,b\nc,\"never closed\nmore\n");
  EXPECT_NE(e.find("f.csv:2"), std::string::npos) << e;
  EXPECT_NE(e.find("unterminated"), std::string::npos) << e;
  EXPECT_NE(e.find("field 2"), std::string::npos) << e;
}

TEST(Csv, TextAfterClosingQuote) {
  const std::string e = error_of("a\n\"x\ny\"z,b\n");
  EXPECT_NE(e.find("f.csv:3"), std::string::npos) << e;
  EXPECT_NE(e.find("closing quote"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace cb::datasets
