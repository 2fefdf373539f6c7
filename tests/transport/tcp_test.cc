// tcp:// specifics not covered by the transport-independent conformance suite: the
// listener's reuseport option.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;

TEST(TcpReuseport, SecondListenerOnTheSamePortNeedsReuseportOnBoth) {
  auto loop = EventLoop::create().value();
  auto noop = [](std::unique_ptr<Connection>) {};
  auto first = listen(*loop, "tcp://127.0.0.1:0", noop);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  // Without the option the port is taken (EADDRINUSE), with it on one side only as well.
  auto plain = listen(*loop, (*first)->url(), noop);
  EXPECT_FALSE(plain.ok());
  auto one_sided = listen(*loop, (*first)->url() + "?reuseport=1", noop);
  EXPECT_FALSE(one_sided.ok());

  auto a = listen(*loop, "tcp://127.0.0.1:0?reuseport=1", noop);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = listen(*loop, (*a)->url() + "?reuseport=1", noop);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ((*a)->url(), (*b)->url());
}

TEST(TcpReuseport, BadValueIsRejected) {
  auto loop = EventLoop::create().value();
  auto l = listen(*loop, "tcp://127.0.0.1:0?reuseport=maybe", [](std::unique_ptr<Connection>) {});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().to_string().find("reuseport"), std::string::npos) << l.status().to_string();
}

// Two loops, one reuseport listener each: connections from many client ports reach both.
TEST(TcpReuseport, ConnectionsAreSpreadOverTheListeners) {
  auto loop = EventLoop::create().value();
  int accepted[2] = {0, 0};
  std::vector<std::unique_ptr<Connection>> server_side;
  auto a = listen(*loop, "tcp://127.0.0.1:0?reuseport=1", [&](std::unique_ptr<Connection> c) {
    ++accepted[0];
    server_side.push_back(std::move(c));
  });
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = listen(*loop, (*a)->url() + "?reuseport=1", [&](std::unique_ptr<Connection> c) {
    ++accepted[1];
    server_side.push_back(std::move(c));
  });
  ASSERT_TRUE(b.ok()) << b.status().to_string();

  constexpr int kClients = 64;  // P(all on one listener) = 2^-63 with a uniform hash
  std::vector<std::unique_ptr<Connection>> clients;
  int connected = 0;
  for (int i = 0; i < kClients; ++i) {
    auto c = connect(*loop, (*a)->url(), [&](Connection&, Status s) {
      EXPECT_TRUE(s.ok()) << s.to_string();
      ++connected;
    });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    clients.push_back(std::move(c).value());
  }
  const uint64_t deadline = monotonic_ns() + 10'000'000'000ull;
  while ((connected < kClients || accepted[0] + accepted[1] < kClients) && monotonic_ns() < deadline)
    ASSERT_TRUE(loop->run_once(10).ok());
  EXPECT_EQ(connected, kClients);
  EXPECT_EQ(accepted[0] + accepted[1], kClients);
  EXPECT_GT(accepted[0], 0) << "listener b took all " << accepted[1];
  EXPECT_GT(accepted[1], 0) << "listener a took all " << accepted[0];
}

}  // namespace
}  // namespace conduit::transport
