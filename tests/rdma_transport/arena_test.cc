// rdma:// on the registered arena: steady-state setup registers nothing, a peer reaches
// its own receive area and nothing else (scope=mw), zero-copy writes from pool slices arrive
// byte for byte and their slices come back, and connections that come and go leak nothing.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "conduit/transport/registered_memory.h"
#include "raw_peer.h"
#include "rdma/rdma.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;
using reactor::EventLoop;

class RdmaArena : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    has_mw_ = (ctx->attr().device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
    CONDUIT_REQUIRE_ADDR_OR_SKIP(a);
    addr_ = a;
  }
  uint64_t registrations(EventLoop& loop) {
    uint64_t n = 0;
    for (const auto& a : rdma::arena_stats(loop)) n += a.pool.registrations + a.rx.registrations;
    return n;
  }
  static uint64_t in_use(EventLoop& loop) {
    uint64_t n = 0;
    for (const auto& a : rdma::arena_stats(loop)) n += a.pool.bytes_in_use + a.rx.bytes_in_use + a.rx_shared.bytes_in_use;
    return n;
  }
  std::string addr_;
  bool has_mw_ = false;
};

TEST_F(RdmaArena, SteadyStateSetupRegistersNothingAndLeaksNothing) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  std::vector<std::unique_ptr<Connection>> accepted;
  auto lst = listen(loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  std::ostringstream trace;
  auto cycle = [&](int n) {
    std::vector<std::unique_ptr<Connection>> clients;
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      auto c = connect(loop, (*lst)->url(), [&](Connection&, Status s) { ok += s.ok() ? 1 : 0; });
      ASSERT_TRUE(c.ok());
      clients.push_back(std::move(*c));
    }
    ASSERT_TRUE(run_until(loop, [&] { return ok == n && accepted.size() == static_cast<size_t>(n); }));
    // The keeper tops the spares up behind the allocations at its own pace (lowest priority):
    // steady state is the arena as it stands once it caught up with the peak.
    ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000)) << "spares still being registered";
    for (const auto& a : rdma::arena_stats(loop))
      trace << "cycle: pool " << a.pool.bytes_in_use << " in use/" << a.pool.regions << " regions, rx "
            << a.rx.bytes_in_use << "/" << a.rx.regions << ", registrations " << a.pool.registrations << "+"
            << a.rx.registrations << "\n";
    clients.clear();
    accepted.clear();
    // Let the closes finish: every slice back in the arena, and the spares it keeps ahead
    // of demand registered (a cycle that started earlier would need more regions).
    ASSERT_TRUE(run_until(loop, [&] { return in_use(loop) == 0 && spares_idle(loop); }, 20000))
        << "closed connections still hold " << in_use(loop) << " bytes of the arena";
  };
  cycle(4);  // warm-up: the arena maps and registers its first regions
  const uint64_t warm = registrations(loop);
  EXPECT_GT(warm, 0u);
  const auto before = rdma::arena_stats(loop);
  for (int round = 0; round < 3; ++round) cycle(4);
  EXPECT_EQ(registrations(loop), warm) << "connections set up in steady state registered memory\n" << trace.str();
  const auto after = rdma::arena_stats(loop);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].pool.regions, before[i].pool.regions) << "regions grew: a leak";
    EXPECT_EQ(after[i].rx.regions, before[i].rx.regions);
    EXPECT_EQ(after[i].rx.bytes_in_use, 0u) << "receive areas still held after every connection closed";
  }
}

// The public view (conduit/transport/registered_memory.h, what conduit-kv's INFO reports):
// nothing before the first connection, then the loop's arena with the bytes its
// connections hold -- the same figures as the transport's own arena statistics.
TEST_F(RdmaArena, RegisteredMemoryShowsTheArenaAndWhatConnectionsHold) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  EXPECT_TRUE(registered_memory(loop).empty());
  std::vector<std::unique_ptr<Connection>> accepted, clients;
  auto lst = listen(loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  int ok = 0;
  for (int i = 0; i < 2; ++i) {
    auto c = connect(loop, (*lst)->url(), [&](Connection&, Status s) { ok += s.ok() ? 1 : 0; });
    ASSERT_TRUE(c.ok());
    clients.push_back(std::move(*c));
  }
  ASSERT_TRUE(run_until(loop, [&] { return ok == 2 && accepted.size() == 2; }));
  // A byte from every end: the first write takes the staging area.
  std::vector<Connection*> ends;
  for (auto* v : {&accepted, &clients})
    for (auto& c : *v) ends.push_back(c.get());
  std::vector<bool> wrote(ends.size(), false);
  ASSERT_TRUE(run_until(loop, [&] {
    bool all = true;
    for (size_t i = 0; i < ends.size(); ++i) {
      const uint8_t b = 1;
      if (!wrote[i]) wrote[i] = ends[i]->write(std::span<const uint8_t>(&b, 1)).ok();
      all = all && wrote[i];
    }
    return all;
  }));
  // The arena's spare keeper registers regions ahead of demand on its own thread, so the
  // registered total may grow between two readings (never shrink): the public view is read
  // between two readings of the transport's own.
  const auto own = rdma::arena_stats(loop);
  const auto pub = registered_memory(loop);
  const auto own_after = rdma::arena_stats(loop);
  ASSERT_EQ(pub.size(), 1u) << "one loop, one device: one arena";
  ASSERT_EQ(own.size(), 1u);
  ASSERT_EQ(own_after.size(), 1u);
  const RegisteredMemory& m = pub[0];
  EXPECT_EQ(m.transport, "rdma");
  EXPECT_EQ(m.device, own[0].device);
  EXPECT_FALSE(m.device.empty());
  EXPECT_GT(m.pool.regions, 0u);
  EXPECT_GT(m.pool.bytes_registered, 0u);
  EXPECT_GE(m.pool.bytes_registered, own[0].pool.bytes_registered);
  EXPECT_LE(m.pool.bytes_registered, own_after[0].pool.bytes_registered);
  // Four connection ends: each holds its control slots and, since its first write, a
  // staging area of the peer's receive area (rx_initial, 64 KiB by default: one byte
  // does not grow it) from the pool.
  uint64_t pinned = 0;
  for (auto* v : {&accepted, &clients})
    for (auto& c : *v) pinned += c->stats().pinned_bytes;
  const uint64_t rx_in_use = m.rx.bytes_in_use + m.rx_shared.bytes_in_use;
  EXPECT_GE(m.pool.bytes_in_use, 4u * (64u << 10));
  if (has_mw_) {
    EXPECT_GE(rx_in_use, 4u * (64u << 10)) << "scope=mw: the receive areas come from the arena";
    EXPECT_GT(m.rx.bytes_registered, 0u);
  }
  EXPECT_LE(pinned, m.pool.bytes_in_use + rx_in_use) << "the connections' slices lie in the arena";
  clients.clear();
  accepted.clear();
  ASSERT_TRUE(run_until(loop, [&] {
    const auto now = registered_memory(loop);
    return now.size() == 1 && now[0].rx.bytes_in_use + now[0].rx_shared.bytes_in_use == 0 &&
           now[0].pool.bytes_in_use < m.pool.bytes_in_use;
  }, 5000)) << "closed connections give their slices back (the arena itself stays registered)";
  EXPECT_GE(registered_memory(loop)[0].pool.bytes_registered, m.pool.bytes_registered)
      << "closing connections deregistered part of the arena";
}

// The staging mirror of the peer's buffer is taken at the first write, not at setup: a
// connection that has not written pins its control slots and receive area only.  At the
// arena's cap that first write would-blocks, the write handler stays quiet, and both
// resume once blocks come back.
TEST_F(RdmaArena, StagingIsTakenAtTheFirstWriteAndWaitsForBlocksAtTheCap) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  std::unique_ptr<Connection> server;
  auto lst = listen(loop, "rdma://" + addr_ + ":0?arena_mb=16", [&](std::unique_ptr<Connection> c) { server = std::move(c); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  bool connected = false;
  // The loop's first connection or listener to create the device's arena sets its cap: both say 16.
  const std::string url = (*lst)->url();
  auto c = connect(loop, url + (url.find('?') == std::string::npos ? "?" : "&") + "arena_mb=16",
                   [&](Connection&, Status s) { connected = s.ok(); });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  Connection& client = **c;
  int writable_calls = 0;
  client.set_write_handler([&](Connection& self) {
    ++writable_calls;
    self.set_write_handler(nullptr);
  });
  ASSERT_TRUE(run_until(loop, [&] { return connected && server && writable_calls == 1; }))
      << "the client never learned the server's buffer";
  const uint64_t rx = 64u << 10;  // rx_initial's default: the area, and the staging that mirrors it
  EXPECT_LT(client.stats().pinned_bytes, rx + (rx >> 1)) << "setup took a staging area";
  EXPECT_LT(server->stats().pinned_bytes, rx + (rx >> 1));
  // Fill the arena (16 MiB) with the application's own blocks.  The spare keeper registers
  // staging spares on its own thread (asked for when RegisterXferMemory arrived); a region
  // it is still registering holds part of the cap and becomes free blocks when done, so the
  // arena is full only when the keeper is idle and an allocation still would-blocks.
  memory::BlockPool* pool = client.pool();
  ASSERT_NE(pool, nullptr);
  std::vector<memory::Slice> held;
  for (;;) {
    ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000)) << "spares still being registered";
    auto s = pool->allocate(rx);
    if (!s.ok()) {
      ASSERT_TRUE(s.status().would_block()) << s.status().to_string();
      break;
    }
    held.push_back(std::move(*s));
    ASSERT_LT(held.size(), 1024u) << "the arena's cap did not hold";
  }
  const uint8_t msg[3] = {7, 8, 9};
  Result<size_t> w = client.write(msg);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.status().would_block()) << w.status().to_string();
  client.set_write_handler([&](Connection& self) {
    ++writable_calls;
    if (self.write(msg).ok()) self.set_write_handler(nullptr);
  });
  run_until(loop, [] { return false; }, 200);
  EXPECT_EQ(writable_calls, 1) << "the write handler ran while the staging area could not be had";
  EXPECT_EQ(client.state(), ConnState::kConnected) << client.error().to_string();
  held.clear();  // blocks come back: the waiting write goes on
  std::vector<uint8_t> got;
  server->set_read_handler([&](Connection& self) {
    uint8_t buf[16];
    auto n = self.read(buf);
    if (n.ok()) got.insert(got.end(), buf, buf + *n);
  });
  ASSERT_TRUE(run_until(loop, [&] { return got.size() == 3; })) << "the write never resumed";
  EXPECT_EQ(got, std::vector<uint8_t>({7, 8, 9}));
  EXPECT_EQ(writable_calls, 2);
  EXPECT_GE(client.stats().pinned_bytes, 2 * rx) << "the staging area is the connection's now";
}

// One raw peer, two connections A and B to the same server (same loop, same PD, one
// arena): with A's QP it tries B's area with B's key, and just past its own area with its
// own key.  Both must fail on the peer's side, and B and the well-behaved traffic go on.
void try_cross_write(const std::string& addr, uint16_t port, Status* result_a_to_b, Status* result_past_end) {
  RawPeer a, b;
  Status s = a.connect(addr, port);
  if (s.ok()) s = b.connect(addr, port);
  if (!s.ok()) {
    *result_a_to_b = *result_past_end = s;
    return;
  }
  auto write_with = [](RawPeer& via, uint64_t remote, uint32_t rkey) -> Status {
    ibv_sge sge = via.data->sge(0, 64);
    SendWr wr = SendWr::write(&sge, 1, remote, rkey).signaled();
    CONDUIT_RETURN_IF_ERROR(via.id->qp()->post_send(wr));
    Completion wc[1];
    const uint64_t deadline = monotonic_ns() + 5000 * kMs;
    while (monotonic_ns() < deadline) {
      CONDUIT_ASSIGN_OR_RETURN(int n, via.cq->poll(wc));
      if (n == 1 && wc[0].opcode == IBV_WC_RDMA_WRITE) return wc[0].as_status();
      if (n == 1 && !wc[0].ok()) return wc[0].as_status();
    }
    return Status(Code::kTimedOut, "no completion");
  };
  *result_a_to_b = write_with(a, b.server_xfer.addr, b.server_xfer.rkey);
  *result_past_end = write_with(b, b.server_xfer.addr + (16u << 20), b.server_xfer.rkey);
}

TEST_F(RdmaArena, APeerReachesItsOwnAreaAndNothingElse) {
  if (!has_mw_) GTEST_SKIP() << "no memory windows: scope=auto is private here";
  auto p = make_pair(addr_, "", "");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  std::vector<std::unique_ptr<Connection>> more;
  auto lst = listen(*pair.loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { more.push_back(std::move(c)); });
  ASSERT_TRUE(lst.ok());
  const uint16_t port = static_cast<uint16_t>(std::stoi((*lst)->url().substr((*lst)->url().rfind(':') + 1)));
  Status a_to_b = Status(Code::kInProgress, ""), past_end = Status(Code::kInProgress, "");
  std::atomic<bool> done{false};
  std::thread t([&] {
    try_cross_write(addr_, port, &a_to_b, &past_end);
    done = true;
  });
  run_until(*pair.loop, [&] { return done.load(); }, 30000);
  t.join();
  EXPECT_EQ(a_to_b.detail(), IBV_WC_REM_ACCESS_ERR) << "A's QP wrote into B's area: " << a_to_b.to_string();
  EXPECT_FALSE(past_end.ok()) << "a write past the end of the area was accepted";
  // The first pair, on the same arena, still moves data byte for byte.
  std::vector<uint8_t> data(1 << 20);
  std::mt19937 rng(3);
  for (auto& x : data) x = static_cast<uint8_t>(rng());
  auto got = transfer(*pair.loop, *pair.client, *pair.server, data);
  EXPECT_TRUE(got == data);
}

// Zero-copy send: pool slices of every size, straight from where they lie, both ways;
// every slice comes back to the pool once its completion arrived.
TEST_F(RdmaArena, OwnedWritesFromThePoolByteForByteAndReleased) {
  for (const char* opts : {"", "?features=none"}) {
    SCOPED_TRACE(std::string("options ") + opts);
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    memory::BlockPool* pool = pair.client->pool();
    ASSERT_NE(pool, nullptr) << "rdma connections offer their arena";
    const size_t in_use_before = pool->stats().bytes_in_use;
    // The staging areas the first writes take stay with their connections.
    const uint64_t pinned_before = pair.client->stats().pinned_bytes + pair.server->stats().pinned_bytes;
    auto staged = [&] { return pair.client->stats().pinned_bytes + pair.server->stats().pinned_bytes - pinned_before; };
    std::mt19937 rng(11);
    for (Connection* from : {pair.client.get(), pair.server.get()}) {
      Connection* to = from == pair.client.get() ? pair.server.get() : pair.client.get();
      std::vector<uint8_t> expect;
      memory::Chain chain;
      for (size_t size : {size_t{1}, size_t{100}, size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{3} << 20}) {
        auto c = pool->allocate_chain(size, 256 << 10);
        ASSERT_TRUE(c.ok()) << c.status().to_string();
        for (size_t i = 0; i < c->count(); ++i) {
          memory::Slice& s = c->slice(i);
          for (size_t k = 0; k < s.size(); ++k) s.writable_data()[k] = static_cast<uint8_t>(rng());
          expect.insert(expect.end(), s.data(), s.data() + s.size());
        }
        chain.append(std::move(*c));
      }
      std::vector<uint8_t> got;
      std::vector<uint8_t> buf(1 << 16);
      to->set_read_handler([&](Connection& c) {
        for (;;) {
          auto n = c.read(buf);
          if (!n.ok() || *n == 0) break;
          got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
        }
      });
      auto pump = [&](Connection& c) {
        while (!chain.empty()) {
          auto n = c.write_owned(chain);
          if (!n.ok()) break;
        }
        if (chain.empty()) c.set_write_handler(nullptr);
      };
      from->set_write_handler(pump);
      pump(*from);
      ASSERT_TRUE(run_until(*pair.loop, [&] { return got.size() >= expect.size(); }, 60000))
          << got.size() << " of " << expect.size();
      EXPECT_TRUE(got == expect) << "zero-copy bytes differ";
      to->set_read_handler(nullptr);
      from->set_write_handler(nullptr);
    }
    ASSERT_TRUE(run_until(*pair.loop, [&] { return pool->stats().bytes_in_use <= in_use_before + staged(); }, 10000))
        << "handed-over slices not released: " << pool->stats().bytes_in_use << " vs " << in_use_before << " + " << staged() << " staged";
  }
}

}  // namespace
}  // namespace conduit::transport
