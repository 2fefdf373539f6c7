// rdma:// options that are derived from others after parsing (options.cc): rx_initial is
// normalized against rx_buffer, credit_bytes and hold_bytes default to parts of rx_buffer.
#include "rdma/options.h"

#include <gtest/gtest.h>

#include "rdma/protocol.h"

namespace conduit::transport::rdma {
namespace {

RdmaOptions parse(const std::string& query) {
  auto ep = Endpoint::parse("rdma://127.0.0.1:1" + query);
  EXPECT_TRUE(ep.ok()) << ep.status().to_string();
  auto o = parse_options(*ep);
  EXPECT_TRUE(o.ok()) << o.status().to_string();
  return o.ok() ? *o : RdmaOptions{};
}

TEST(RdmaOptions, RxInitialStartsAtTheProtocolMinimumAndNeverExceedsRxBuffer) {
  EXPECT_EQ(parse("").rx_initial, 64u << 10);
  EXPECT_EQ(parse("").rx_buffer, 1u << 20);
  EXPECT_EQ(parse("?rx_initial=0").rx_initial, 1u << 20) << "0: rx_buffer from the start";
  EXPECT_EQ(parse("?rx_initial=4M").rx_initial, 1u << 20) << "above rx_buffer: rx_buffer";
  EXPECT_EQ(parse("?rx_buffer=65536").rx_initial, 65536u) << "rx_buffer at the minimum: nothing smaller to start with";
  EXPECT_EQ(parse("?rx_initial=1000").rx_initial, kMinRxBuffer) << "below the protocol's minimum: the minimum";
  EXPECT_EQ(parse("?rx_buffer=8M&rx_initial=512K").rx_initial, 512u << 10);
  auto ep = Endpoint::parse("rdma://127.0.0.1:1?rx_initial=32M");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(parse_options(*ep).status().code(), Code::kInvalidArgument) << "beyond the table's range";
}

TEST(RdmaOptions, CreditAndHoldBytesFollowRxBuffer) {
  const RdmaOptions o = parse("?rx_buffer=4M");
  EXPECT_EQ(o.credit_bytes, 1u << 20);
  EXPECT_EQ(o.hold_bytes, 2u << 20);
  EXPECT_EQ(parse("?rx_buffer=65536&credit_bytes=1M").credit_bytes, 65536u);
}

}  // namespace
}  // namespace conduit::transport::rdma
