// The receive area that starts at rx_initial and grows to rx_buffer once the peer has
// filled it (docs/PROTOCOL.md "Growing the receive area"): small at setup, full-size after
// the traffic that needs it, byte for byte across the switch in ring mode and in the
// baseline, with every scope, with read_owned views held across it, never with rx_initial=0;
// and a raw Valkey-style writer sees it as nothing but a second RegisterXferMemory (a new
// address and length) while the old key stops working under scope=mw.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "conduit/memory/buffer.h"
#include "conduit/transport/connection.h"
#include "raw_peer.h"
#include "rdma/protocol.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

constexpr uint64_t kInitial = 64u << 10;   // rx_initial's default
constexpr uint64_t kFull = 1u << 20;       // rx_buffer's default

class RdmaRxGrowth : public RdmaDeviceTest {};

TEST_F(RdmaRxGrowth, TheAreaStartsSmallAndGrowsOnceThePeerFillsIt) {
  for (const char* opts : {"", "?features=none", "?scope=private", "?scope=shared", "?scope=shared&features=none"}) {
    SCOPED_TRACE(std::string("options ") + opts);
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    const uint64_t at_setup = pair.server->stats().pinned_bytes;
    EXPECT_GE(at_setup, kInitial);
    EXPECT_LT(at_setup, kInitial * 2) << "setup took more than the initial area";
    // Less than the area: nothing grows.
    const auto small = random_bytes(kInitial / 2, 1);
    EXPECT_TRUE(transfer(*pair.loop, *pair.client, *pair.server, small) == small);
    EXPECT_EQ(pair.server->stats().pinned_bytes, at_setup) << "the area grew before the peer filled it";
    // More than the area: the writer uses all it was given, the reader reads it all, and the
    // next space it gets is a full-size area.  The bytes cross the switch intact.
    const auto big = random_bytes(6 * kFull + 123, 2);
    EXPECT_TRUE(transfer(*pair.loop, *pair.client, *pair.server, big) == big);
    EXPECT_GE(pair.server->stats().pinned_bytes, kFull) << "the receive area did not grow";
    EXPECT_LT(pair.server->stats().pinned_bytes, kFull + kInitial) << "the small area was not given back";
    // The client's staging followed the server's area; its own area stayed small.
    EXPECT_GE(pair.client->stats().pinned_bytes, kFull);
    EXPECT_LT(pair.client->stats().pinned_bytes, kFull + 2 * kInitial);
    // The other way, and on at full size.
    const auto back = random_bytes(3 * kFull, 3);
    EXPECT_TRUE(transfer(*pair.loop, *pair.server, *pair.client, back) == back);
    const auto again = random_bytes(2 * kFull, 4);
    EXPECT_TRUE(transfer(*pair.loop, *pair.client, *pair.server, again) == again);
    EXPECT_EQ(pair.client->state(), ConnState::kConnected);
    EXPECT_EQ(pair.server->state(), ConnState::kConnected);
  }
}

TEST_F(RdmaRxGrowth, RxInitialZeroAdvertisesTheFullAreaAtOnce) {
  auto p = make_pair(addr_, "?rx_initial=0", "?rx_initial=0");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_GE((*p)->server->stats().pinned_bytes, kFull);
  EXPECT_GE((*p)->client->stats().pinned_bytes, kFull);
}

// read_owned views hold space: the area is replaced only once the last of them is released
// (and the hold bound, scaled to the small area, keeps them from holding all of it).
TEST_F(RdmaRxGrowth, ViewsHeldAcrossTheSwitchKeepTheirBytes) {
  for (const char* opts : {"", "?features=none"}) {
    SCOPED_TRACE(std::string("options ") + opts);
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    const auto data = random_bytes(3 * kFull, 5);
    size_t sent = 0;
    auto pump = [&](Connection& c) {
      while (sent < data.size()) {
        auto n = c.write(std::span(data.data() + sent, std::min<size_t>(40000, data.size() - sent)));
        if (!n.ok()) break;
        sent += *n;
      }
      if (sent == data.size()) c.set_write_handler(nullptr);
    };
    pair.client->set_write_handler(pump);
    std::vector<uint8_t> got;
    std::vector<memory::Chain> held;  // released in bulk when a read would-block
    pair.server->set_read_handler([&](Connection& c) {
      for (;;) {
        memory::Chain chain;
        auto n = c.read_owned(chain, 30000);
        if (!n.ok() || *n == 0) {
          held.clear();  // releases: space goes back (and, once all of it is, the area may grow)
          if (!n.ok() || *n == 0) return;
        }
        for (size_t i = 0; i < chain.count(); ++i)
          got.insert(got.end(), chain.slice(i).data(), chain.slice(i).data() + chain.slice(i).size());
        held.push_back(std::move(chain));
      }
    });
    pump(*pair.client);
    ASSERT_TRUE(run_until(*pair.loop, [&] {
      if (got.size() < data.size() && !held.empty()) held.clear();
      return got.size() >= data.size();
    }, 120000)) << got.size() << " of " << data.size() << " bytes arrived";
    EXPECT_TRUE(got == data);
    held.clear();
    EXPECT_GE(pair.server->stats().pinned_bytes, kFull) << "the receive area did not grow";
    pair.server->set_read_handler(nullptr);
  }
}

// A raw baseline writer (what Valkey's client does): fill the advertised area, wait for the
// next RegisterXferMemory, write into whatever it names.  The second one names a new,
// full-size area; under scope=mw the first area's key no longer opens anything.
TEST_F(RdmaRxGrowth, AValkeyWriterSeesASecondRegisterXferMemory) {
  auto l = reactor::EventLoop::create();
  ASSERT_TRUE(l.ok());
  reactor::EventLoop& loop = **l;
  std::unique_ptr<Connection> server;
  auto lst = listen(loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { server = std::move(c); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  const uint16_t port = static_cast<uint16_t>(std::stoi((*lst)->url().substr((*lst)->url().rfind(':') + 1)));
  std::vector<uint8_t> got;
  std::atomic<int> step{0};
  rdma::CtrlMsg first, second;
  Status peer_status, stale_write = Status(Code::kInProgress, "");
  std::thread t([&] {
    testing::RawPeer peer;
    peer_status = [&]() -> Status {
      CONDUIT_RETURN_IF_ERROR(peer.connect(addr_, port));
      first = peer.server_xfer;
      // Fill the area: byte i of the stream is (i * 7) & 0xff.
      for (uint32_t i = 0; i < first.length; ++i) peer.data->data()[i] = static_cast<uint8_t>(i * 7);
      CONDUIT_RETURN_IF_ERROR(peer.write_imm(first.length, first.length));
      for (;;) {
        CONDUIT_ASSIGN_OR_RETURN(rdma::CtrlMsg m, peer.recv_ctrl(20000));
        if (m.opcode == static_cast<uint16_t>(rdma::Opcode::kRegisterXferMemory)) {
          second = m;
          break;
        }
      }
      peer.server_xfer = second;
      for (uint32_t i = 0; i < second.length; ++i) peer.data->data()[i] = static_cast<uint8_t>((first.length + i) * 7);
      CONDUIT_RETURN_IF_ERROR(peer.write_imm(second.length, second.length));
      step = 1;
      while (step.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // All read: a third RegisterXferMemory re-advertises the full area (the baseline).
      for (;;) {
        CONDUIT_ASSIGN_OR_RETURN(rdma::CtrlMsg m, peer.recv_ctrl(20000));
        if (m.opcode != static_cast<uint16_t>(rdma::Opcode::kRegisterXferMemory)) continue;
        if (m.length != second.length || m.addr != second.addr)
          return Status(Code::kInternal, "third RegisterXferMemory: " + m.to_string());
        break;
      }
      // The first area's key, written with the old address: refused under scope=mw.
      ibv_sge sge = peer.data->sge(0, 64);
      verbs::SendWr wr = verbs::SendWr::write_imm(&sge, 1, first.addr, first.rkey, 64).id(77).signaled();
      CONDUIT_RETURN_IF_ERROR(peer.id->qp()->post_send(wr));
      const uint64_t deadline = monotonic_ns() + 10'000 * kMs;
      verbs::Completion wc[1];
      while (monotonic_ns() < deadline && stale_write.in_progress()) {
        CONDUIT_ASSIGN_OR_RETURN(int n, peer.cq->poll(wc));
        if (n == 1 && wc[0].wr_id == 77) stale_write = wc[0].ok() ? Status() : wc[0].as_status();
      }
      return Status();
    }();
    step = 3;
  });
  std::vector<uint8_t> buf(65536);
  ASSERT_TRUE(run_until(loop, [&] {
    if (server) {
      for (;;) {
        auto n = server->read(buf);
        if (!n.ok() || *n == 0) break;
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
      }
    }
    if (step.load() == 1 && got.size() == first.length + second.length) step = 2;
    return step.load() == 3;
  }, 60000));
  t.join();
  ASSERT_TRUE(peer_status.ok()) << peer_status.to_string();
  EXPECT_EQ(first.length, kInitial);
  EXPECT_EQ(second.length, kFull);
  EXPECT_NE(second.addr, first.addr);
  ASSERT_EQ(got.size(), first.length + second.length);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != static_cast<uint8_t>(i * 7)) FAIL() << "byte " << i << " differs";
  EXPECT_FALSE(stale_write.in_progress()) << "the write with the first area's key never completed";
  EXPECT_EQ(stale_write.detail(), IBV_WC_REM_ACCESS_ERR) << "a write with the first area's key: " << stale_write.to_string();
}

}  // namespace
}  // namespace conduit::transport
