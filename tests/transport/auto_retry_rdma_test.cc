// auto:// with rdma_retry_ms in the Soft-RoCE guest: after falling back to TCP, new
// connections start on TCP without trying RDMA until the retry time, then use RDMA again
// once the peer serves it (live connections are not migrated).
#include <gtest/gtest.h>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "rdma_env.h"

namespace conduit::transport {
namespace {

constexpr uint64_t kMs = 1'000'000;

template <typename Pred>
bool run_until(reactor::EventLoop& loop, Pred pred, int timeout_ms = 20000) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * kMs;
  while (!pred() && monotonic_ns() < deadline)
    if (!loop.run_once(10).ok()) return false;
  return pred();
}

struct Attempt {
  std::unique_ptr<Connection> conn;
  Status status = Status(Code::kInProgress, "");
};

TEST(AutoRdmaRetry, StartsOnTcpUntilTheRetryTimeThenUsesRdmaAgain) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  (void)ctx;
  CONDUIT_REQUIRE_ADDR_OR_SKIP(addr);
  auto loop = reactor::EventLoop::create().value();
  std::vector<std::unique_ptr<Connection>> accepted;
  auto keep = [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); };
  // TCP only at first: the RDMA attempt is rejected (nobody listens for RDMA there).
  auto tcp = listen(*loop, "tcp://" + addr + ":0", keep);
  ASSERT_TRUE(tcp.ok()) << tcp.status().to_string();
  const std::string port = (*tcp)->url().substr((*tcp)->url().rfind(':') + 1);
  const std::string url = "auto://" + addr + ":" + port + "?rdma_retry_ms=3000&rdma_timeout_ms=5000";
  auto attempt = [&]() {
    auto a = std::make_unique<Attempt>();
    Attempt* raw = a.get();
    auto c = connect(*loop, url, [raw](Connection&, Status s) { raw->status = s; });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (c.ok()) a->conn = std::move(*c);
    EXPECT_TRUE(run_until(*loop, [&] { return !raw->status.in_progress(); }));
    EXPECT_TRUE(raw->status.ok()) << raw->status.to_string();
    return a;
  };
  auto first = attempt();
  ASSERT_TRUE(first->conn);
  // The retry time runs from the failed RDMA attempt, which ended before this point (the
  // attempt itself may take long on a loaded guest: measure from after it).
  const uint64_t t0 = monotonic_ns();
  EXPECT_EQ(first->conn->caps().transport, "tcp");

  // Now the peer serves RDMA on the same port; within the retry time we still start on TCP
  // (RDMA is not even tried: it would succeed now).
  auto rdma = listen(*loop, "rdma://" + addr + ":" + port, keep);
  ASSERT_TRUE(rdma.ok()) << rdma.status().to_string();
  auto second = attempt();
  ASSERT_TRUE(second->conn);
  if (monotonic_ns() - t0 < 2500 * kMs) {  // a very slow guest may already be past it
    EXPECT_EQ(second->conn->caps().transport, "tcp");
  }

  // After the retry time the next connection tries RDMA and gets it; the older TCP ones
  // stay as they are.
  ASSERT_TRUE(run_until(*loop, [&] { return monotonic_ns() - t0 > 3100 * kMs; }, 10000));
  auto third = attempt();
  ASSERT_TRUE(third->conn);
  EXPECT_EQ(third->conn->caps().transport, "rdma");
  EXPECT_EQ(first->conn->caps().transport, "tcp");
  EXPECT_EQ(first->conn->state(), ConnState::kConnected);
  // And a success clears the schedule: the next one goes straight to RDMA as well.
  auto fourth = attempt();
  ASSERT_TRUE(fourth->conn);
  EXPECT_EQ(fourth->conn->caps().transport, "rdma");
}

}  // namespace
}  // namespace conduit::transport
