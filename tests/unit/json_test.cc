// common/json.h, the one JSON writer: strings are escaped wherever they come from.
#include "common/json.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus::json {
namespace {

TEST(Json, QuotedEscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(quotedString("plain"), "\"plain\"");
  EXPECT_EQ(quotedString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quotedString("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(quotedString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(quotedString(std::string("nul\0end", 7)), "\"nul\\u0000end\"");
  EXPECT_EQ(quotedString("h\xc3\xa9"), "\"h\xc3\xa9\"");  // UTF-8 passes through
}

TEST(Json, FieldAndNumberAppend) {
  std::string out = "{";
  field(out, "host", "a\"b");
  out += ", ";
  number(out, "rank", -3);
  out += "}";
  EXPECT_EQ(out, "{\"host\": \"a\\\"b\", \"rank\": -3}");
}

}  // namespace
}  // namespace chorus::json
