#include "conduit/base/json.h"

#include <gtest/gtest.h>

#include <limits>

namespace conduit {
namespace {

TEST(Json, StringsAreQuotedAndEscaped) {
  EXPECT_EQ(json_string(""), "\"\"");
  EXPECT_EQ(json_string("rxe0"), "\"rxe0\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string(std::string_view("\n\x01\x1f", 3)), "\"\\u000a\\u0001\\u001f\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"") << "UTF-8 passes through";
}

TEST(Json, NumbersHaveFixedDecimalsAndNoInfinities) {
  EXPECT_EQ(json_number(1.5), "1.500000");
  EXPECT_EQ(json_number(2.0 / 3.0, 2), "0.67");
  EXPECT_EQ(json_number(-3, 0), "-3");
  EXPECT_EQ(json_number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(json_number(std::numeric_limits<double>::quiet_NaN()), "null");
}

}  // namespace
}  // namespace conduit
