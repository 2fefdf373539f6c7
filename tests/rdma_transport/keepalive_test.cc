// rdma:// keepalives on a real device: time the program's own loop did not run is not the
// peer's silence.  Both ends here share one loop, so while the thread is away neither sends
// nor hears a Keepalive; when it comes back the connection must stay up (the CI failure of
// RdmaRendezvous, whose plan building kept the loop away for ~11 s under ASan and TCG).  A
// peer that really goes silent is still dropped (hostile_peer_test.cc "keepalive silence").
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "conduit/transport/connection.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

class RdmaKeepalive : public RdmaDeviceTest {};

TEST_F(RdmaKeepalive, AStalledLoopDoesNotTimeOutAPeerOnIt) {
  const std::string opts = "?keepalive_ms=100&keepalive_timeout_ms=500";
  auto p = make_pair(addr_, opts, opts);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  // Keepalives flow (features negotiated, so each side times the other out).
  run_until(*pair.loop, [] { return false; }, 400);
  ASSERT_EQ(pair.client->state(), ConnState::kConnected) << pair.client->error().to_string();
  ASSERT_EQ(pair.server->state(), ConnState::kConnected) << pair.server->error().to_string();
  // Away for three timeouts, then back for several.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  run_until(*pair.loop, [] { return false; }, 1200);
  EXPECT_EQ(pair.client->state(), ConnState::kConnected) << pair.client->error().to_string();
  EXPECT_EQ(pair.server->state(), ConnState::kConnected) << pair.server->error().to_string();
  // And the stream still works both ways.
  const std::vector<uint8_t> data(100000, 0x5a);
  EXPECT_EQ(transfer(*pair.loop, *pair.client, *pair.server, data), data);
  EXPECT_EQ(transfer(*pair.loop, *pair.server, *pair.client, data), data);
}

}  // namespace
}  // namespace conduit::transport
