#include "conduit/base/log.h"

#include <gtest/gtest.h>

namespace conduit {
namespace {

int g_evaluations = 0;
int side_effect() { return ++g_evaluations; }

TEST(Log, ParsesLevels) {
  LogLevel l{};
  EXPECT_TRUE(parse_log_level("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_TRUE(parse_log_level("4", &l));
  EXPECT_EQ(l, LogLevel::kError);
  EXPECT_TRUE(parse_log_level("warning", &l));
  EXPECT_EQ(l, LogLevel::kWarn);
  EXPECT_FALSE(parse_log_level("loud", &l));
  EXPECT_EQ(l, LogLevel::kWarn) << "out-parameter must be untouched on failure";
}

TEST(Log, DisabledStatementsDoNotEvaluateOperands) {
  const LogLevel saved = log_level();
  set_log_level(LogLevel::kError);
  g_evaluations = 0;
  CONDUIT_LOG(kInfo) << side_effect();
  EXPECT_EQ(g_evaluations, 0);
  testing::internal::CaptureStderr();
  CONDUIT_LOG(kError) << "value=" << side_effect();
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(g_evaluations, 1);
  EXPECT_NE(out.find("ERROR log_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("value=1\n"), std::string::npos) << out;
  set_log_level(saved);
}

TEST(Log, BelowCompileTimeFloorCompilesOut) {
  // CONDUIT_MIN_LOG_LEVEL is 1 (debug) by default: trace never runs, whatever the run-time level.
  const LogLevel saved = log_level();
  set_log_level(LogLevel::kTrace);
  g_evaluations = 0;
  CONDUIT_LOG(kTrace) << side_effect();
  EXPECT_EQ(g_evaluations, CONDUIT_MIN_LOG_LEVEL > 0 ? 0 : 1);
  set_log_level(saved);
}

}  // namespace
}  // namespace conduit
