// rdma:// READ rendezvous on the real path (docs/PROTOCOL.md "Rendezvous (bit 2)"): large
// owned pool slices are offered and READ by the peer, byte for byte and in stream order
// among small owned and plain writes, both ways, through read(), read_owned() and
// peek()/consume(); the
// offers are really used (stats: the ring carried only the small bytes); at the offer limit
// the slices go in-band; a peer without bit 2 keeps the in-band path; connections closed
// mid-transfer leak no pool blocks or registrations.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <variant>

#include "conduit/memory/buffer.h"
#include "conduit/memory/pool.h"
#include "conduit/transport/connection.h"
#include "conduit/transport/registered_memory.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

class RdmaRendezvous : public RdmaDeviceTest {};

// One write: plain bytes (write()) or an owned chain (write_owned()).
struct Item {
  std::vector<uint8_t> plain;
  memory::Chain owned;
  size_t sent = 0;
};

struct Plan {
  std::deque<Item> items;
  std::vector<uint8_t> expect;
  uint64_t large_bytes = 0;  // bytes in owned slices of at least `large`
};

// Owned slices of the given sizes from `pool`, each followed by a small owned slice and a
// small plain write, filled with random bytes.
Plan make_plan(memory::BlockPool& pool, const std::vector<size_t>& sizes, size_t large, uint32_t seed) {
  Plan p;
  std::mt19937 rng(seed);
  auto owned = [&](size_t n) {
    auto s = pool.allocate(n);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return;
    // Four random bytes per draw: a byte per draw kept the loop away for ~11 s per plan
    // under ASan in the guest.
    uint8_t* d = s->writable_data();
    for (size_t k = 0; k < n; k += 4) {
      const uint32_t r = rng();
      std::memcpy(d + k, &r, std::min<size_t>(4, n - k));
    }
    p.expect.insert(p.expect.end(), s->data(), s->data() + n);
    if (n >= large) p.large_bytes += n;
    Item it;
    it.owned.append(std::move(*s));
    p.items.push_back(std::move(it));
  };
  for (size_t size : sizes) {
    owned(size);
    owned(100 + rng() % 5000);
    Item it;
    it.plain.resize(1 + rng() % 3000);
    for (auto& b : it.plain) b = static_cast<uint8_t>(rng());
    p.expect.insert(p.expect.end(), it.plain.begin(), it.plain.end());
    p.items.push_back(std::move(it));
  }
  return p;
}

// Writes the plan from `from` (handlers) and reads it on `to`, alternating read(),
// read_owned() and peek()/consume() calls; returns what arrived.
std::vector<uint8_t> run_plan(reactor::EventLoop& loop, Connection& from, Connection& to, Plan& plan,
                              int timeout_ms = 240000) {
  std::vector<uint8_t> got;
  got.reserve(plan.expect.size());
  std::vector<uint8_t> buf(48 << 10);
  int turn = 0;  // read(), read_owned(), peek() + consume(), in turn
  to.set_read_handler([&](Connection& c) {
    for (;;) {
      turn = (turn + 1) % 3;
      if (turn == 0) {
        memory::Chain chain;
        auto n = c.read_owned(chain, 1 << 20);
        if (!n.ok() || *n == 0) return;
        for (size_t i = 0; i < chain.count(); ++i)
          got.insert(got.end(), chain.slice(i).data(), chain.slice(i).data() + chain.slice(i).size());
      } else if (turn == 1) {
        auto n = c.read(buf);
        if (!n.ok() || *n == 0) return;
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
      } else {
        auto v = c.peek();
        if (!v.ok() || v->empty()) return;
        const size_t n = std::min<size_t>(v->size(), 100000);  // part of it: the rest comes next
        got.insert(got.end(), v->data(), v->data() + n);
        if (!c.consume(n).ok()) return;
      }
    }
  });
  auto pump = [&](Connection& c) {
    while (!plan.items.empty()) {
      Item& it = plan.items.front();
      if (it.plain.empty()) {
        while (!it.owned.empty()) {
          auto n = c.write_owned(it.owned);
          if (!n.ok()) return;
        }
      } else {
        while (it.sent < it.plain.size()) {
          auto n = c.write(std::span(it.plain.data() + it.sent, it.plain.size() - it.sent));
          if (!n.ok()) return;
          it.sent += *n;
        }
      }
      plan.items.pop_front();
    }
    c.set_write_handler(nullptr);
  };
  from.set_write_handler(pump);
  pump(from);
  run_until(loop, [&] { return got.size() >= plan.expect.size() || to.state() == ConnState::kError; }, timeout_ms);
  from.set_write_handler(nullptr);
  to.set_read_handler(nullptr);
  return got;
}

// Both ways, with the memory window scope (only whole-region blocks are offered on rxe: the
// arena's blocks of 256 KiB and more are each a region) and scope=shared (every slice from
// rendezvous_min up).
TEST_F(RdmaRendezvous, OwnedWritesReadByteForByteBothWaysInOrder) {
  const std::vector<size_t> sizes = {256 << 10, 1 << 20, 2 << 20, 16 << 20, 300 << 10, 2 << 20};
  for (const char* opts : {"?scope=shared", ""}) {
    SCOPED_TRACE(std::string("options '") + opts + "'");
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    ASSERT_NE(std::string(pair.client->caps().extensions).find("rendezvous"), std::string::npos)
        << pair.client->caps().extensions;
    memory::BlockPool* pool = pair.client->pool();
    ASSERT_NE(pool, nullptr);
    const size_t in_use_before = pool->stats().bytes_in_use;
    // The staging areas the first writes take stay with their connections.
    const uint64_t pinned_before = pair.client->stats().pinned_bytes + pair.server->stats().pinned_bytes;
    auto staged = [&] { return pair.client->stats().pinned_bytes + pair.server->stats().pinned_bytes - pinned_before; };
    uint32_t seed = 1;
    for (Connection* from : {pair.client.get(), pair.server.get()}) {
      Connection* to = from == pair.client.get() ? pair.server.get() : pair.client.get();
      const ConnStats w0 = from->stats(), r0 = to->stats();
      // What is offered: every slice >= 256 KiB, with either scope.
      Plan plan = make_plan(*pool, sizes, 256 << 10, seed++);
      const auto got = run_plan(*pair.loop, *from, *to, plan);
      ASSERT_EQ(got.size(), plan.expect.size()) << to->error().to_string();
      EXPECT_TRUE(got == plan.expect) << "rendezvous bytes differ or are out of order";
      const ConnStats& w = from->stats();
      const ConnStats& r = to->stats();
      EXPECT_GT(w.rendezvous_offers - w0.rendezvous_offers, 0u);
      EXPECT_EQ(w.rendezvous_fallbacks - w0.rendezvous_fallbacks, 0u);
      EXPECT_EQ(w.rendezvous_bytes_sent - w0.rendezvous_bytes_sent, plan.large_bytes);
      EXPECT_EQ(r.rendezvous_bytes_read - r0.rendezvous_bytes_read, plan.large_bytes);
      EXPECT_EQ(r.rendezvous_reads - r0.rendezvous_reads, w.rendezvous_offers - w0.rendezvous_offers);
      // Through the ring: only the small writes.
      EXPECT_EQ((w.bytes_written - w0.bytes_written) - (w.rendezvous_bytes_sent - w0.rendezvous_bytes_sent),
                plan.expect.size() - plan.large_bytes);
    }
    ASSERT_TRUE(run_until(*pair.loop, [&] { return pool->stats().bytes_in_use <= in_use_before + staged(); }, 20000))
        << "offered slices or READ blocks not released: " << pool->stats().bytes_in_use << " vs " << in_use_before << " + " << staged() << " staged";
  }
}

// More large slices in one write_owned() call than offers may be outstanding: the rest go
// in-band (counted as fallbacks), never would-block for it, and the stream stays in order.
TEST_F(RdmaRendezvous, AtTheOfferLimitSlicesGoInBand) {
  auto p = make_pair(addr_, "?scope=shared", "?scope=shared");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  memory::BlockPool* pool = pair.client->pool();
  std::mt19937 rng(3);
  memory::Chain chain;
  std::vector<uint8_t> expect;
  for (int i = 0; i < 40; ++i) {
    auto s = pool->allocate(256 << 10);
    ASSERT_TRUE(s.ok());
    for (size_t k = 0; k < s->size(); ++k) s->writable_data()[k] = static_cast<uint8_t>(rng());
    expect.insert(expect.end(), s->data(), s->data() + s->size());
    chain.append(std::move(*s));
  }
  Plan plan;
  plan.expect = expect;
  Item it;
  it.owned = std::move(chain);
  plan.items.push_back(std::move(it));
  const auto got = run_plan(*pair.loop, *pair.client, *pair.server, plan);
  ASSERT_EQ(got.size(), expect.size()) << pair.server->error().to_string();
  EXPECT_TRUE(got == expect);
  const ConnStats& w = pair.client->stats();
  EXPECT_GT(w.rendezvous_offers, 0u);
  EXPECT_GT(w.rendezvous_fallbacks, 0u) << "40 offers in one call never reached the limit";
  EXPECT_LT(w.rendezvous_bytes_sent, expect.size());
}

// A peer that does not offer bit 2 -- a Valkey-mode peer (features=none) on either side, or
// a Conduit peer with rendezvous_min=0 -- keeps every owned write in-band.
TEST_F(RdmaRendezvous, WithoutTheBitEverythingGoesInBand) {
  struct Case {
    const char *server, *client;
  } cases[] = {{"?scope=shared&features=none", "?scope=shared"},
               {"?scope=shared", "?scope=shared&features=none"},
               {"?scope=shared&rendezvous_min=0", "?scope=shared"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.server) + " / " + c.client);
    auto p = make_pair(addr_, c.server, c.client);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    EXPECT_EQ(std::string(pair.client->caps().extensions).find("rendezvous"), std::string::npos);
    Plan plan = make_plan(*pair.client->pool(), {2 << 20, 1 << 20}, 256 << 10, 9);
    const auto got = run_plan(*pair.loop, *pair.client, *pair.server, plan);
    ASSERT_EQ(got.size(), plan.expect.size());
    EXPECT_TRUE(got == plan.expect);
    EXPECT_EQ(pair.client->stats().rendezvous_offers, 0u);
    EXPECT_EQ(pair.server->stats().rendezvous_reads, 0u);
  }
}

// 50 connections on one loop, each closed (by either side) while offers are outstanding or
// being READ: afterwards no pool block is in use beyond the baseline and no region was
// registered beyond the first rounds' (registered_memory(loop), what INFO reports).
// A reader (server) and a writer (client), each on a loop of its own, both driven from the
// test's thread by until(): a test can run the writer's loop alone, so that nothing is READ.
struct TwoLoops {
  std::unique_ptr<reactor::EventLoop> rl, wl;  // the reader's, the writer's
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> server, client;

  template <typename Pred>
  bool until(Pred pred, int timeout_ms) {
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * kMs;
    while (!pred() && monotonic_ns() < deadline)
      if (!rl->run_once(0).ok() || !wl->run_once(1).ok()) return false;
    return pred();
  }

  // Connected, with the rendezvous extension on at both ends.
  static Result<std::unique_ptr<TwoLoops>> make(const std::string& addr, const std::string& server_opts,
                                                const std::string& client_opts) {
    auto t = std::make_unique<TwoLoops>();
    CONDUIT_ASSIGN_OR_RETURN(t->rl, reactor::EventLoop::create());
    CONDUIT_ASSIGN_OR_RETURN(t->wl, reactor::EventLoop::create());
    TwoLoops* raw = t.get();
    CONDUIT_ASSIGN_OR_RETURN(t->listener, listen(*t->rl, "rdma://" + addr + ":0" + server_opts,
                                                 [raw](std::unique_ptr<Connection> c) { raw->server = std::move(c); }));
    Status cs = Status(Code::kInProgress, "");
    CONDUIT_ASSIGN_OR_RETURN(t->client, connect(*t->wl, t->listener->url() + client_opts,
                                                [&cs](Connection&, Status st) { cs = st; }));
    if (!t->until([&] { return raw->server && !cs.in_progress(); }, 20000))
      return Status(Code::kTimedOut, "rdma pair setup timed out");
    CONDUIT_RETURN_IF_ERROR(cs);
    auto has_rv = [](Connection& c) { return std::string(c.caps().extensions).find("rendezvous") != std::string::npos; };
    if (!t->until([&] { return has_rv(*raw->server) && has_rv(*raw->client); }, 20000))
      return Status(Code::kTimedOut, "rendezvous not negotiated");
    return t;
  }
};

// Writes `plan` from `w`, running only `loop` (the writer's) while a write would-block.
void write_all(reactor::EventLoop& loop, Connection& w, Plan& plan) {
  const uint64_t deadline = monotonic_ns() + 20000 * kMs;
  while (!plan.items.empty() && monotonic_ns() < deadline) {
    Item& it = plan.items.front();
    Status st;
    if (it.plain.empty()) {
      st = w.write_owned(it.owned).status();
      if (st.ok() && !it.owned.empty()) st = Status::WouldBlock();
    } else {
      auto n = w.write(std::span(it.plain.data() + it.sent, it.plain.size() - it.sent));
      st = n.status();
      if (st.ok()) it.sent += *n;
      if (st.ok() && it.sent < it.plain.size()) st = Status::WouldBlock();
    }
    if (st.ok()) {
      plan.items.pop_front();
    } else {
      ASSERT_TRUE(st.would_block()) << st.to_string();
      ASSERT_TRUE(loop.run_once(10).ok());
    }
  }
  ASSERT_TRUE(plan.items.empty()) << "the writes did not go out";
}

// What `r` reads (read()), until EOF or an error.
struct Sink {
  std::vector<uint8_t> got;
  bool eof = false;
  Status error;
  void attach(Connection& r) {
    r.set_read_handler([this, buf = std::vector<uint8_t>(64 << 10)](Connection& c) mutable {
      for (;;) {
        auto n = c.read(buf);
        if (!n.ok()) {
          if (!n.status().would_block()) error = n.status();
          return;
        }
        if (*n == 0) {
          eof = true;
          return;
        }
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
      }
    });
  }
};

// A writer that closes with offers its peer has not READ yet: close() lingers until their
// ReadDone (the Closer reads the control messages), so the reader gets every byte and then
// EOF -- as over TCP -- instead of an error naming lost offered bytes.  Only the writer's
// loop runs while it writes and closes, so nothing is READ before the close.
TEST_F(RdmaRendezvous, CloseWithOffersUnreadDeliversThemThenEof) {
  for (const char* opts : {"?scope=shared", ""}) {
    SCOPED_TRACE(std::string("options '") + opts + "'");
    auto made = TwoLoops::make(addr_, opts, opts);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    TwoLoops& t = **made;
    Connection& r = *t.server;
    Plan plan = make_plan(*t.client->pool(), {2 << 20, 2 << 20}, 256 << 10, 7);
    write_all(*t.wl, *t.client, plan);
    EXPECT_EQ(t.client->stats().rendezvous_offers, 2u);
    t.client.reset();  // close() with both offers outstanding
    for (int k = 0; k < 20; ++k) ASSERT_TRUE(t.wl->run_once(5).ok());  // a Closer that would not wait is done by now
    EXPECT_EQ(r.stats().rendezvous_reads, 0u);
    Sink sink;
    sink.attach(r);
    t.until([&] { return sink.eof || !sink.error.ok(); }, 60000);
    EXPECT_TRUE(sink.error.ok()) << sink.error.to_string();
    EXPECT_TRUE(sink.eof);
    EXPECT_EQ(sink.got.size(), plan.expect.size());
    EXPECT_TRUE(sink.got == plan.expect) << "bytes differ or are out of order";
    EXPECT_EQ(r.stats().rendezvous_bytes_read, plan.large_bytes);
    r.set_read_handler(nullptr);
    t.server.reset();
    t.until([] { return false; }, 100);  // the Closer's last events
  }
}

// A reader whose pool is at its cap (arena_mb) when an offer comes: the READ waits, in
// order, with the stream behind it -- no error, no fallback to memory the NIC cannot reach
// -- and resumes when blocks come back.
TEST_F(RdmaRendezvous, AReaderAtItsPoolCapWaitsForBlocksThenResumes) {
  auto made = TwoLoops::make(addr_, "?scope=shared&arena_mb=16", "?scope=shared");
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  TwoLoops& t = **made;
  Connection& r = *t.server;
  memory::BlockPool* pool = r.pool();
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->options().cap_bytes, size_t{16} << 20);
  // Fill the reader's pool to its cap.  The arena's spare keeper registers regions on its
  // own thread (the staging spares asked for when RegisterXferMemory arrived): a region it
  // is still registering holds part of the cap and turns into free blocks when done, so the
  // pool is full only once the keeper is idle and an allocation still would-blocks (CI saw
  // the allocation after the first would-block succeed).
  auto keeper_idle = [&] { return spares_idle(*t.rl); };
  std::vector<memory::Slice> held;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(t.until(keeper_idle, 20000)) << "the spare keeper never finished";
    auto s = pool->allocate(1 << 20);
    if (s.status().would_block()) break;
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    held.push_back(std::move(*s));
  }
  ASSERT_FALSE(held.empty());
  ASSERT_TRUE(t.until(keeper_idle, 20000)) << "the spare keeper never finished";
  ASSERT_TRUE(pool->allocate(1 << 20).status().would_block()) << "the pool did not reach its cap";
  const uint64_t refused = pool->stats().would_block;
  Plan plan = make_plan(*t.client->pool(), {2 << 20, 300 << 10}, 256 << 10, 11);
  write_all(*t.wl, *t.client, plan);
  EXPECT_EQ(t.client->stats().rendezvous_offers, 2u);
  Sink sink;
  sink.attach(r);
  // Both loops run: the first offer cannot be READ, so nothing behind it is delivered.
  t.until([] { return false; }, 1000);
  EXPECT_TRUE(sink.error.ok()) << sink.error.to_string();
  EXPECT_EQ(sink.got.size(), 0u) << "bytes behind an unread offer were delivered";
  EXPECT_EQ(r.stats().rendezvous_reads, 0u);
  EXPECT_GT(pool->stats().would_block, refused) << "the READ's destination was not refused at the cap";
  EXPECT_EQ(r.state(), ConnState::kConnected) << r.error().to_string();
  EXPECT_EQ(t.client->state(), ConnState::kConnected) << t.client->error().to_string();
  held.clear();  // the blocks come back: the waiter is told
  ASSERT_TRUE(t.until([&] { return sink.got.size() >= plan.expect.size() || !sink.error.ok(); }, 60000))
      << "the READ did not resume when blocks came back";
  EXPECT_TRUE(sink.error.ok()) << sink.error.to_string();
  EXPECT_TRUE(sink.got == plan.expect) << "bytes differ or are out of order";
  EXPECT_EQ(r.stats().rendezvous_bytes_read, plan.large_bytes);
  r.set_read_handler(nullptr);
}

TEST_F(RdmaRendezvous, ConnectionsClosedMidTransferLeakNothing) {
  auto l = reactor::EventLoop::create();
  ASSERT_TRUE(l.ok());
  reactor::EventLoop& loop = **l;
  std::vector<std::unique_ptr<Connection>> accepted;
  auto lst = listen(loop, "rdma://" + addr_ + ":0?scope=shared",
                    [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  size_t regions_after_warmup = 0;
  std::mt19937 rng(17);
  for (int i = 0; i < 50; ++i) {
    SCOPED_TRACE("connection " + std::to_string(i));
    Status cs = Status(Code::kInProgress, "");
    auto c = connect(loop, (*lst)->url() + "?scope=shared", [&](Connection&, Status s) { cs = s; });
    ASSERT_TRUE(c.ok());
    std::unique_ptr<Connection> client = std::move(*c);
    ASSERT_TRUE(run_until(loop, [&] { return !accepted.empty() && !cs.in_progress(); }, 20000));
    ASSERT_TRUE(cs.ok()) << cs.to_string();
    std::unique_ptr<Connection> server = std::move(accepted.back());
    accepted.clear();
    const bool client_writes = i % 2 == 0;
    Connection& w = client_writes ? *client : *server;
    Connection& r = client_writes ? *server : *client;
    // The server switches the extension on when the client's SetClientFeature arrives.
    ASSERT_TRUE(run_until(loop, [&] { return std::string(w.caps().extensions).find("rendezvous") != std::string::npos; },
                          20000));
    memory::Chain chain;
    for (size_t n : {size_t{1} << 20, size_t{512} << 10, size_t{2} << 20}) {
      auto s = w.pool()->allocate(n);
      ASSERT_TRUE(s.ok());
      s->writable_data()[0] = static_cast<uint8_t>(rng());
      chain.append(std::move(*s));
    }
    uint64_t read_bytes = 0;
    std::vector<uint8_t> buf(64 << 10);
    r.set_read_handler([&](Connection& c2) {
      for (;;) {
        auto n = c2.read(buf);
        if (!n.ok() || *n == 0) return;
        read_bytes += *n;
      }
    });
    // (An accepted connection may not know the peer's buffer yet: the first call may would-block.)
    Status ws = Status::WouldBlock();
    const uint64_t deadline = monotonic_ns() + 20000 * kMs;
    while (ws.would_block() && monotonic_ns() < deadline) {
      auto n = w.write_owned(chain);
      ws = n.status();
      if (ws.would_block()) {
        Status rs = loop.run_once(10);
        ASSERT_TRUE(rs.ok()) << rs.to_string();
      }
    }
    ASSERT_TRUE(ws.ok()) << ws.to_string() << " (writer state " << conn_state_name(w.state()) << ")";
    // Close at different points: right away (offers unread), after the first READ, or once
    // some bytes were delivered.
    const int when = i % 3;
    if (when == 1) {
      ASSERT_TRUE(run_until(loop, [&] { return r.stats().rendezvous_reads > 0; }, 20000));
    }
    if (when == 2) run_until(loop, [&] { return read_bytes > 0; }, 20000);
    r.set_read_handler(nullptr);
    EXPECT_GT(w.stats().rendezvous_offers, 0u) << "the large slices went in-band";
    if (i % 4 < 2) {
      client.reset();
      run_until(loop, [&] { return server->state() != ConnState::kConnected; }, 200);
      server.reset();
    } else {
      server.reset();
      run_until(loop, [&] { return client->state() != ConnState::kConnected; }, 200);
      client.reset();
    }
    chain = memory::Chain();
    // Lingering closers finish; blocks parked with a QP come back with it.
    for (int k = 0; k < 20; ++k) (void)loop.run_once(5);
    if (i == 4) regions_after_warmup = registered_memory(loop)[0].pool.regions;
  }
  // No connection is left: every block (control slots, staging, offered slices, READ
  // destinations, receive areas) is back.
  ASSERT_TRUE(run_until(loop, [&] {
    const auto m = registered_memory(loop);
    return m.size() == 1 && m[0].pool.bytes_in_use == 0 && m[0].rx_shared.bytes_in_use == 0;
  }, 20000)) << "pool bytes in use " << registered_memory(loop)[0].pool.bytes_in_use << ", receive areas "
             << registered_memory(loop)[0].rx_shared.bytes_in_use;
  EXPECT_LE(registered_memory(loop)[0].pool.regions, regions_after_warmup + 2)
      << "regions keep growing as connections come and go";
}

}  // namespace
}  // namespace conduit::transport
