// Handshakes in progress are bounded: a client that sends connect requests and never
// completes them (no RTU: it never calls rdma_establish) holds a QP and registered memory
// on the server for each.  The listener refuses requests beyond max_handshakes at once and
// frees a stalled handshake after connect_timeout_ms; real clients then connect normally.
#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <thread>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

// A hostile client on its own event channel, driven synchronously from another thread.
struct StalledClient {
  rdma_event_channel* ch = nullptr;
  rdma_cm_id* id = nullptr;
  rdma_cm_event_type last = RDMA_CM_EVENT_ADDR_ERROR;
  ~StalledClient() {
    if (id) rdma_destroy_id(id);
    if (ch) rdma_destroy_event_channel(ch);
  }
  bool wait(rdma_cm_event_type want) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) return false;
    last = ev->event;
    rdma_ack_cm_event(ev);
    return last == want;
  }
  // Resolves and sends a REQ without a QP; returns the event that answers it (the server's
  // REP shows up as CONNECT_RESPONSE, which we then leave unanswered).
  rdma_cm_event_type start(const sockaddr* dst, uint32_t fake_qpn) {
    ch = rdma_create_event_channel();
    if (!ch || rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) return RDMA_CM_EVENT_ADDR_ERROR;
    if (rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(dst), 5000) != 0 || !wait(RDMA_CM_EVENT_ADDR_RESOLVED))
      return last;
    if (rdma_resolve_route(id, 5000) != 0 || !wait(RDMA_CM_EVENT_ROUTE_RESOLVED)) return last;
    rdma_conn_param p{};
    // No real QP: we never take part beyond the REQ.  Distinct numbers, or the server's CM
    // takes a second REQ for a stale duplicate of the first and rejects it itself.
    p.qp_num = fake_qpn;
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 7;
    if (rdma_connect(id, &p) != 0) return RDMA_CM_EVENT_ADDR_ERROR;
    wait(RDMA_CM_EVENT_CONNECT_RESPONSE);
    return last;
  }
};

TEST(RdmaHandshakes, InProgressAreBoundedAndTimedOut) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  (void)ctx;
  CONDUIT_REQUIRE_ADDR_OR_SKIP(addr);
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok());
  std::vector<std::unique_ptr<Connection>> accepted;
  auto l = listen(**loop, "rdma://" + addr + ":0?max_handshakes=2&connect_timeout_ms=1500",
                  [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  auto ep = Endpoint::parse((*l)->url());
  ASSERT_TRUE(ep.ok());
  auto hp = ep->host_port();
  ASSERT_TRUE(hp.ok());
  auto dst = verbs::SocketAddress::resolve(hp->first, hp->second);
  ASSERT_TRUE(dst.ok());

  // Three stalled clients, one after the other (the server loop runs meanwhile): the first
  // two get the server's REP and sit on it; the third is rejected at once.
  StalledClient c[3];
  rdma_cm_event_type got[3];
  for (int i = 0; i < 3; ++i) {
    bool done = false;
    std::thread t([&, i] {
      got[i] = c[i].start(dst->get(), 0x100000u + static_cast<uint32_t>(i) * 0x101u);
      done = true;
    });
    const uint64_t deadline = monotonic_ns() + 10000 * kMs;
    while (!done && monotonic_ns() < deadline) (void)(*loop)->run_once(10);
    t.join();
  }
  EXPECT_EQ(got[0], RDMA_CM_EVENT_CONNECT_RESPONSE) << rdma_event_str(got[0]);
  EXPECT_EQ(got[1], RDMA_CM_EVENT_CONNECT_RESPONSE) << rdma_event_str(got[1]);
  EXPECT_EQ(got[2], RDMA_CM_EVENT_REJECTED) << rdma_event_str(got[2]);
  EXPECT_TRUE(accepted.empty());

  // After connect_timeout_ms the stalled handshakes are gone: a real client gets in.
  const uint64_t t0 = monotonic_ns();
  run_until(**loop, [&] { return monotonic_ns() - t0 > 2000 * kMs; }, 3000);
  Status st = Status(Code::kInProgress, "");
  auto client = connect(**loop, (*l)->url(), [&](Connection&, Status s) { st = s; });
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE(run_until(**loop, [&] { return !st.in_progress() && !accepted.empty(); }, 10000));
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(accepted.size(), 1u);
}

// A peer whose rdma_cm takes the connect request and never answers it (a raw listener that
// neither accepts nor rejects): the client's connect_timeout_ms ends it, and the error says
// where the connect stood -- the request sent, no reply -- not only that it timed out.
TEST(RdmaHandshakes, AConnectTimeoutSaysWhereItStood) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  (void)ctx;
  CONDUIT_REQUIRE_ADDR_OR_SKIP(addr);
  auto ch = verbs::EventChannel::create();
  ASSERT_TRUE(ch.ok()) << ch.status().to_string();
  auto silent = verbs::CmId::create(*ch);
  ASSERT_TRUE(silent.ok()) << silent.status().to_string();
  auto any = verbs::SocketAddress::resolve(addr, 0);
  ASSERT_TRUE(any.ok());
  ASSERT_TRUE((*silent)->bind(*any).ok());
  ASSERT_TRUE((*silent)->listen(4).ok());
  const std::string where = (*silent)->local_address().to_string();
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok());
  Status st = Status(Code::kInProgress, "");
  auto client = connect(**loop, "rdma://" + where + "?connect_timeout_ms=1500", [&](Connection&, Status s) { st = s; });
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE(run_until(**loop, [&] { return !st.in_progress(); }, 10000));
  EXPECT_EQ(st.code(), Code::kTimedOut) << st.to_string();
  EXPECT_NE(st.to_string().find("waiting for the peer's reply"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace conduit::transport
