// auto://'s RDMA retry schedule (fallback_schedule.h) and its options; the schedule in
// action over a real device is tests/transport/auto_retry_rdma_test.cc (label rdma).
#include <gtest/gtest.h>

#include "auto/fallback_schedule.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(AutoFallbackSchedule, WaitsDoublesCapsAndForgetsOnSuccess) {
  FallbackSchedule s;
  const std::string d = "192.0.2.1:7000";
  EXPECT_TRUE(s.decide(d, 0).try_rdma);  // never failed: try
  EXPECT_EQ(s.on_rdma_failed(d, 0, 1000, 3000, "rejected"), 1000u);
  auto x = s.decide(d, 400 * kMs);
  EXPECT_FALSE(x.try_rdma);
  EXPECT_EQ(x.retry_in_ms, 600u);
  EXPECT_EQ(x.failures, 1u);
  EXPECT_EQ(x.last_reason, "rejected");
  EXPECT_TRUE(s.decide("192.0.2.2:7000", 400 * kMs).try_rdma);  // per destination
  EXPECT_TRUE(s.decide(d, 1000 * kMs).try_rdma);                // due
  EXPECT_EQ(s.on_rdma_failed(d, 1000 * kMs, 1000, 3000, "timeout"), 2000u);
  EXPECT_FALSE(s.decide(d, 2999 * kMs).try_rdma);
  EXPECT_TRUE(s.decide(d, 3000 * kMs).try_rdma);
  EXPECT_EQ(s.on_rdma_failed(d, 3000 * kMs, 1000, 3000, "timeout"), 3000u);  // capped
  EXPECT_EQ(s.on_rdma_failed(d, 6000 * kMs, 1000, 3000, "timeout"), 3000u);
  s.on_rdma_ok(d);
  EXPECT_TRUE(s.decide(d, 6001 * kMs).try_rdma);
  EXPECT_EQ(s.on_rdma_failed(d, 7000 * kMs, 1000, 3000, "again"), 1000u);  // starts over
}

TEST(AutoFallbackSchedule, OptionsAreChecked) {
  auto loop = reactor::EventLoop::create().value();
  for (const char* url : {"auto://127.0.0.1:1?rdma_retry_ms=soon", "auto://127.0.0.1:1?rdma_retry_ms=99999999999",
                          "auto://127.0.0.1:1?rdma_retry_max_ms=0"}) {
    auto c = connect(*loop, url, [](Connection&, Status) {});
    ASSERT_FALSE(c.ok()) << url;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << c.status().to_string();
    EXPECT_NE(c.status().to_string().find("rdma_retry"), std::string::npos) << c.status().to_string();
  }
}

}  // namespace
}  // namespace conduit::transport
