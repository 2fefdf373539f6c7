// Connection::snapshot(), the introspection record (ConnSnapshot) that rpc's status service,
// the preload's status files and conduit-stat share: what tcp, shm and auto:// fill in, and
// its key=value spelling.  The rdma fields (QP state, counters) are checked in the guest by
// tests/tools/stat_test.sh rdma.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

template <typename Pred>
bool run_until(reactor::EventLoop& loop, Pred pred, int timeout_ms = 20000) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  while (!pred() && monotonic_ns() < deadline)
    if (!loop.run_once(10).ok()) return false;
  return pred();
}

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client, server;
};

// Connects `client_url` to a listener on `listen_url` and writes 5 bytes each way.
Pair connected(reactor::EventLoop& loop, const std::string& listen_url, const std::string& client_scheme) {
  Pair p;
  auto l = listen(loop, listen_url, [&](std::unique_ptr<Connection> c) { p.server = std::move(c); });
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  if (!l.ok()) return p;
  p.listener = std::move(*l);
  std::string url = p.listener->url();
  url = client_scheme + url.substr(url.find("://"));
  Status done(Code::kInProgress, "");
  auto c = connect(loop, url, [&](Connection&, Status s) { done = s; });
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return p;
  p.client = std::move(*c);
  EXPECT_TRUE(run_until(loop, [&] { return !done.in_progress() && p.server; }));
  EXPECT_TRUE(done.ok()) << done.to_string();
  const uint8_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(p.client->write(hello).value_or(0), 5u);
  uint8_t buf[16];
  size_t got = 0;
  EXPECT_TRUE(run_until(loop, [&] {
    auto r = p.server->read(buf);
    if (r.ok()) got += *r;
    return got == 5;
  }));
  return p;
}

TEST(ConnSnapshot, TcpHasAddressesStateBytesAndNoCreditWindow) {
  auto loop = reactor::EventLoop::create().value();
  Pair p = connected(*loop, "tcp://127.0.0.1:0", "tcp");
  ASSERT_TRUE(p.client && p.server);
  const ConnSnapshot c = p.client->snapshot();
  EXPECT_EQ(c.transport, "tcp");
  EXPECT_EQ(c.state, "connected");
  EXPECT_EQ(c.local, p.client->local_address());
  EXPECT_EQ(c.peer, p.client->peer_address());
  EXPECT_EQ(c.stats.bytes_written, 5u);
  EXPECT_EQ(c.credits, -1);
  EXPECT_TRUE(c.qp_state.empty() && c.device.empty() && c.fallback.empty() && c.error.empty());
  EXPECT_EQ(p.server->snapshot().stats.bytes_read, 5u);
}

TEST(ConnSnapshot, ShmCreditsAreTheRingsFreeSpace) {
  auto loop = reactor::EventLoop::create().value();
  Pair p = connected(*loop, "shm://snapshot-test-" + std::to_string(getpid()) + "?ring=65536", "shm");
  ASSERT_TRUE(p.client && p.server);
  const ConnSnapshot c = p.client->snapshot();
  EXPECT_EQ(c.transport, "shm");
  EXPECT_EQ(c.state, "connected");
  EXPECT_GT(c.credits, 0);
  EXPECT_LE(c.credits, 65536);
  EXPECT_GT(c.stats.pinned_bytes, 0u);
  EXPECT_EQ(c.stats.bytes_written, 5u);
}

// On a host without an RDMA device (or to a peer that serves only TCP), auto:// says why.
TEST(ConnSnapshot, AutoOnTcpNamesItsFallbackReason) {
  auto loop = reactor::EventLoop::create().value();
  Pair p = connected(*loop, "tcp://127.0.0.1:0", "auto");
  ASSERT_TRUE(p.client && p.server);
  const ConnSnapshot c = p.client->snapshot();
  EXPECT_EQ(c.transport, "auto/tcp");
  EXPECT_FALSE(c.fallback.empty());
  EXPECT_EQ(c.state, "connected");
}

TEST(ConnSnapshot, FieldsRoundTripAndUnknownKeysAreLeftToTheCaller) {
  ConnSnapshot s;
  s.transport = "rdma";
  s.state = "open";
  s.local = "192.0.2.1:5000";
  s.peer = "192.0.2.2:41000";
  s.extensions = "ring,solicited";
  s.error = "closed: peer gone";
  s.stats.bytes_read = 7;
  s.stats.bytes_written = 1ull << 40;
  s.stats.wakeups = 3;
  s.credits = 65536;
  s.qp_state = "RTS";
  s.qpn = 17;
  s.device = "rxe0:1";
  s.device_counters = {{"rcvd_rnr_err", 2}, {"retry_exceeded_err", 1}};
  ConnSnapshot back;
  for (const auto& [k, v] : snapshot_fields(s)) EXPECT_TRUE(snapshot_field(back, k, v)) << k;
  EXPECT_EQ(snapshot_fields(back), snapshot_fields(s));
  EXPECT_EQ(back.device_counters, s.device_counters);
  EXPECT_EQ(back.credits, 65536);
  EXPECT_EQ(back.stats.bytes_written, 1ull << 40);
  EXPECT_FALSE(snapshot_field(back, "fd", "3"));
  // An empty text field is absent, not "".
  ConnSnapshot empty;
  for (const auto& [k, v] : snapshot_fields(empty)) EXPECT_NE(k, "fallback");
}

}  // namespace
}  // namespace conduit::transport
