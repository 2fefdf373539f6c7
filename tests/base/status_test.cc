#include "conduit/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace conduit {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_FALSE(s.is_error());
  EXPECT_EQ(s.to_string(), "ok");
}

TEST(Status, WouldBlockAndInProgressAreNotErrors) {
  EXPECT_FALSE(Status::WouldBlock().ok());
  EXPECT_FALSE(Status::WouldBlock().is_error());
  EXPECT_TRUE(Status::WouldBlock().would_block());
  EXPECT_FALSE(Status::InProgress().is_error());
  EXPECT_TRUE(Status::InProgress().in_progress());
  EXPECT_TRUE(Status(Code::kTimedOut, "x").is_error());
}

TEST(Status, ErrnoKeepsDetailAndMessage) {
  Status s = Status::FromErrno(ENOMEM, "ibv_reg_mr");
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_EQ(s.detail_kind(), DetailKind::kErrno);
  EXPECT_EQ(s.detail(), ENOMEM);
  EXPECT_NE(s.to_string().find("ibv_reg_mr: Cannot allocate memory"), std::string::npos) << s.to_string();
  EXPECT_NE(s.to_string().find("errno 12"), std::string::npos);
}

TEST(Status, ErrnoAutoMapsCodes) {
  EXPECT_TRUE(Status::FromErrnoAuto(EAGAIN, "read").would_block());
  EXPECT_TRUE(Status::FromErrnoAuto(EINPROGRESS, "connect").in_progress());
  EXPECT_EQ(Status::FromErrnoAuto(ENOMEM, "x").code(), Code::kResourceExhausted);
  EXPECT_EQ(Status::FromErrnoAuto(ECONNRESET, "x").code(), Code::kClosed);
  EXPECT_EQ(Status::FromErrnoAuto(ECONNREFUSED, "x").code(), Code::kUnavailable);
  EXPECT_EQ(Status::FromErrnoAuto(ENODEV, "x").code(), Code::kNotFound);
  EXPECT_EQ(Status::FromErrnoAuto(ETIMEDOUT, "x").code(), Code::kTimedOut);
  EXPECT_EQ(Status::FromErrnoAuto(EIO, "x").code(), Code::kIoError);
  EXPECT_EQ(Status::FromErrnoAuto(EIO, "x").detail(), EIO);
}

TEST(Status, AnnotatePrefixesAndKeepsCode) {
  Status s = Status(Code::kProtocolError, "bad opcode").annotate("conn 7");
  EXPECT_EQ(s.code(), Code::kProtocolError);
  EXPECT_EQ(s.message(), "conn 7: bad opcode");
  EXPECT_TRUE(Status::Ok().annotate("ctx").ok());
}

TEST(Status, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(Code::kInternal); ++c)
    EXPECT_NE(code_name(static_cast<Code>(c)), "unknown") << c;
}

TEST(Result, HoldsValueOrStatus) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  Result<int> bad = Status(Code::kNotFound, "nope");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(Result, FromOkStatusIsAnInternalError) {
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

Result<int> half(int x) {
  if (x % 2 != 0) return Status(Code::kInvalidArgument, "odd");
  return x / 2;
}

Result<int> quarter(int x) {
  CONDUIT_ASSIGN_OR_RETURN(int h, half(x));
  CONDUIT_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

Status check_even(int x) {
  CONDUIT_RETURN_IF_ERROR(half(x).status().ok() ? Status() : half(x).status());
  return {};
}

TEST(Result, MacrosPropagate) {
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(check_even(4).ok());
  EXPECT_FALSE(check_even(3).ok());
}

}  // namespace
}  // namespace conduit
