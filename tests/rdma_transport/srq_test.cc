// rdma:// with srq=1: connections take their receives from one shared receive queue per
// loop and device.  Data both ways (also against a peer without srq), many connections on
// one small SRQ, closes and errors while others run, and no slot ever lost
// (rdma::srq_stats: posted == depth whenever nothing is in flight).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma/rdma.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;
using conduit::transport::testing::kMs;
using conduit::transport::testing::run_until;

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The loop's only SRQ (these tests use one depth per loop).
rdma::SrqStats only_srq(EventLoop& loop) {
  auto all = rdma::srq_stats(loop);
  EXPECT_EQ(all.size(), 1u);
  return all.empty() ? rdma::SrqStats{} : all.front();
}

// Every slot back in the SRQ once traffic has stopped (a leak leaves posted < depth forever).
bool all_slots_posted(EventLoop& loop, uint32_t attached_at_most = 0) {
  return run_until(loop, [&] {
    auto s = rdma::srq_stats(loop);
    return s.size() == 1 && s[0].posted == s[0].depth && s[0].attached <= attached_at_most;
  }, 30000);
}

// One peer of a stream test: writes `out` and collects what arrives; optionally echoes.
struct Peer {
  explicit Peer(std::unique_ptr<Connection> c = nullptr) : conn(std::move(c)) {}
  std::unique_ptr<Connection> conn;
  std::vector<uint8_t> out;  // to send
  size_t sent = 0;
  std::vector<uint8_t> in;   // received
  bool echo = false;         // server side: send back what arrives
  bool eof = false;

  void pump() {
    while (sent < out.size()) {
      auto n = conn->write(std::span(out.data() + sent, std::min<size_t>(out.size() - sent, 1 << 16)));
      if (!n.ok()) break;
      sent += *n;
    }
  }
  void install() {
    conn->set_write_handler([this](Connection&) { pump(); });
    conn->set_read_handler([this](Connection& c) {
      uint8_t buf[16384];
      for (;;) {
        auto n = c.read(buf);
        if (!n.ok()) break;
        if (*n == 0) {
          eof = true;
          break;
        }
        in.insert(in.end(), buf, buf + *n);
        if (echo) out.insert(out.end(), buf, buf + *n);
      }
      if (echo) pump();
    });
    pump();
  }
};

class RdmaSrq : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    (void)ctx;
    CONDUIT_REQUIRE_ADDR_OR_SKIP(a);
    addr_ = a;
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop_ = std::move(*l);
  }
  void TearDown() override {
    accepted_.clear();
    listener_.reset();
    loop_.reset();
  }

  void listen_with(const std::string& opts) {
    auto l = listen(*loop_, "rdma://" + addr_ + ":0" + opts,
                    [this](std::unique_ptr<Connection> c) { accepted_.push_back(std::move(c)); });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    listener_ = std::move(*l);
  }
  // Connects `n` clients and waits for all of them (and their server sides).
  std::vector<std::unique_ptr<Connection>> connect_n(int n, const std::string& opts) {
    std::vector<std::unique_ptr<Connection>> out;
    const size_t before = accepted_.size();
    int done = 0, failed = 0;
    for (int i = 0; i < n; ++i) {
      auto c = connect(*loop_, listener_->url() + opts, [&](Connection&, Status s) {
        ++done;
        if (!s.ok()) {
          ++failed;
          ADD_FAILURE() << s.to_string();
        }
      });
      EXPECT_TRUE(c.ok()) << c.status().to_string();
      if (c.ok()) out.push_back(std::move(*c));
    }
    EXPECT_TRUE(run_until(*loop_, [&] { return done == n && accepted_.size() == before + n; }, 120000))
        << done << " connected, " << accepted_.size() - before << " accepted";
    EXPECT_EQ(failed, 0);
    return out;
  }

  std::string addr_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Connection>> accepted_;
};

TEST_F(RdmaSrq, BadOptionsAreRejected) {
  auto cb = [](std::unique_ptr<Connection>) {};
  EXPECT_EQ(listen(*loop_, "rdma://" + addr_ + ":0?srq=maybe", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(listen(*loop_, "rdma://" + addr_ + ":0?srq=1&srq_depth=8", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(listen(*loop_, "rdma://" + addr_ + ":0?srq=1&srq_depth=99999", cb).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(listen(*loop_, "rdma://" + addr_ + ":0?srq=on&srq_depth=16", cb).ok());
}

// Both ends use the SRQ (one loop, one device: the same queue), 64 KiB buffers, 3 MiB each
// way: ~48 re-registrations each way, every RegisterXferMemory through a shared slot.
TEST_F(RdmaSrq, DataBothWaysAcrossBufferReRegistrations) {
  listen_with("?srq=1&rx_buffer=65536");
  auto clients = connect_n(1, "?srq=1&rx_buffer=65536");
  ASSERT_EQ(clients.size(), 1u);
  ASSERT_EQ(accepted_.size(), 1u);
  EXPECT_EQ(only_srq(*loop_).attached, 2u) << "both QPs share the loop's SRQ";
  Peer a(std::move(clients[0])), b(std::move(accepted_[0]));
  a.out = pattern(3 << 20, 1);
  b.out = pattern(3 << 20, 2);
  a.install();
  b.install();
  ASSERT_TRUE(run_until(*loop_, [&] { return a.in.size() == b.out.size() && b.in.size() == a.out.size(); }, 120000))
      << a.in.size() << " / " << b.in.size();
  EXPECT_TRUE(a.in == b.out);
  EXPECT_TRUE(b.in == a.out);
  EXPECT_GT(a.conn->stats().write_would_block + b.conn->stats().write_would_block, 0u);
  const rdma::SrqStats st = only_srq(*loop_);
  EXPECT_GT(st.completions, 2u * 48u) << "the receives did not come from the SRQ";
  EXPECT_TRUE(all_slots_posted(*loop_, 2));
  a.conn.reset();
  b.conn.reset();
  EXPECT_TRUE(all_slots_posted(*loop_, 0)) << "posted " << only_srq(*loop_).posted;
}

// A server with srq=1 and a baseline client: the SRQ is receiver-local, nothing on the wire changes.
TEST_F(RdmaSrq, WorksAgainstAPeerWithoutSrq) {
  listen_with("?srq=1&rx_buffer=65536");
  auto clients = connect_n(1, "?rx_buffer=65536");
  ASSERT_EQ(clients.size(), 1u);
  Peer a(std::move(clients[0])), b(std::move(accepted_[0]));
  a.out = pattern(1 << 20, 3);
  b.echo = true;
  a.install();
  b.install();
  ASSERT_TRUE(run_until(*loop_, [&] { return a.in.size() == a.out.size(); }, 120000)) << a.in.size();
  EXPECT_TRUE(a.in == a.out);
  EXPECT_EQ(only_srq(*loop_).attached, 1u) << "only the server side uses the SRQ";
}

// 64 connections on a 64-slot SRQ (one slot per connection on average: senders meet an
// empty queue and ride RNR retries), each echoing its own pattern, verified byte for byte.
TEST_F(RdmaSrq, SixtyFourConnectionsOnOneSmallSrq) {
  constexpr int kConns = 64;
  constexpr size_t kBytes = 160 * 1024;  // > 2 x the 64 KiB buffer: re-registration on every connection
  listen_with("?srq=1&srq_depth=64&rx_buffer=65536&send_depth=32");
  auto clients = connect_n(kConns, "?rx_buffer=65536&send_depth=32&recv_depth=32");
  ASSERT_EQ(clients.size(), size_t{kConns});
  ASSERT_EQ(accepted_.size(), size_t{kConns});
  std::vector<std::unique_ptr<Peer>> cs, ss;
  for (int i = 0; i < kConns; ++i) {
    cs.push_back(std::make_unique<Peer>());
    cs.back()->conn = std::move(clients[i]);
    cs.back()->out = pattern(kBytes, 100 + i);
    ss.push_back(std::make_unique<Peer>());
    ss.back()->conn = std::move(accepted_[i]);
    ss.back()->echo = true;
  }
  for (auto& s : ss) s->install();
  for (auto& c : cs) c->install();
  auto done = [&] {
    for (auto& c : cs)
      if (c->in.size() < kBytes) return false;
    return true;
  };
  ASSERT_TRUE(run_until(*loop_, done, 300000)) << [&] {
    size_t got = 0;
    for (auto& c : cs) got += c->in.size();
    return std::to_string(got) + " of " + std::to_string(kBytes * kConns) + " bytes echoed";
  }();
  for (int i = 0; i < kConns; ++i) EXPECT_TRUE(cs[i]->in == cs[i]->out) << "connection " << i;
  EXPECT_EQ(only_srq(*loop_).attached, size_t{kConns});
  EXPECT_TRUE(all_slots_posted(*loop_, kConns));
}

// While 6 connections stream, one client closes gracefully mid-stream, one server side is
// closed, and one server side is destroyed abruptly: the others finish byte for byte and no
// slot of the three is lost.
TEST_F(RdmaSrq, ClosesWhileOthersRun) {
  constexpr int kConns = 6;
  constexpr size_t kBytes = 512 * 1024;
  listen_with("?srq=1&srq_depth=32&rx_buffer=65536");
  auto clients = connect_n(kConns, "?rx_buffer=65536");
  ASSERT_EQ(clients.size(), size_t{kConns});
  std::vector<std::unique_ptr<Peer>> cs, ss;
  for (int i = 0; i < kConns; ++i) {
    cs.push_back(std::make_unique<Peer>());
    cs.back()->conn = std::move(clients[i]);
    cs.back()->out = pattern(kBytes, 200 + i);
    ss.push_back(std::make_unique<Peer>());
    ss.back()->conn = std::move(accepted_[i]);
    ss.back()->echo = true;
  }
  for (auto& s : ss) s->install();
  for (auto& c : cs) c->install();
  ASSERT_TRUE(run_until(*loop_, [&] { return cs[0]->in.size() > 100000 && cs[1]->in.size() > 100000; }, 120000));
  cs[0]->conn->close();   // graceful, data on the wire: the Closer path
  ss[1]->conn->close();   // server side closes: the client sees EOF or an error
  ss[2]->conn.reset();    // server side destroyed outright
  auto done = [&] {
    for (int i = 3; i < kConns; ++i)
      if (cs[i]->in.size() < kBytes) return false;
    return true;
  };
  ASSERT_TRUE(run_until(*loop_, done, 300000));
  for (int i = 3; i < kConns; ++i) EXPECT_TRUE(cs[i]->in == cs[i]->out) << "connection " << i;
  // The closed connections' peers notice.
  EXPECT_TRUE(run_until(*loop_, [&] {
    return (ss[0]->eof || ss[0]->conn->state() == ConnState::kError) &&
           (cs[1]->eof || cs[1]->conn->state() == ConnState::kError) &&
           (cs[2]->eof || cs[2]->conn->state() == ConnState::kError);
  }));
  cs.clear();
  ss.clear();
  EXPECT_TRUE(all_slots_posted(*loop_, 0)) << "posted " << only_srq(*loop_).posted << " of 32, attached "
                                           << only_srq(*loop_).attached;
}

// Connections come and go (graceful closes with data in flight from both sides, abrupt
// destruction) on a 32-slot SRQ; afterwards every slot is posted and a new connection
// still moves data.
TEST_F(RdmaSrq, NoSlotLeakAfterManyConnectionsComeAndGo) {
  listen_with("?srq=1&srq_depth=32&rx_buffer=65536");
  for (int round = 0; round < 10; ++round) {
    auto clients = connect_n(4, "?rx_buffer=65536");
    ASSERT_EQ(clients.size(), 4u);
    const std::string msg = "round " + std::to_string(round);
    for (auto& c : clients) ASSERT_TRUE(c->write(std::span(reinterpret_cast<const uint8_t*>(msg.data()), msg.size())).ok());
    for (auto& s : accepted_) ASSERT_TRUE(s->write(std::span(reinterpret_cast<const uint8_t*>(msg.data()), msg.size())).ok());
    ASSERT_TRUE(loop_->run_once(0).ok());
    // Half of each side closes with its write possibly still on the wire; the rest vanish.
    clients[0]->close();
    accepted_[1]->close();
    accepted_[2].reset();
    clients[3].reset();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop_->run_once(5).ok());
    clients.clear();
    accepted_.clear();
  }
  EXPECT_TRUE(all_slots_posted(*loop_, 0)) << "posted " << only_srq(*loop_).posted << " of 32, attached "
                                           << only_srq(*loop_).attached;
  const uint64_t before = only_srq(*loop_).completions;
  auto clients = connect_n(1, "?rx_buffer=65536");
  ASSERT_EQ(clients.size(), 1u);
  Peer a(std::move(clients[0])), b(std::move(accepted_[0]));
  a.out = pattern(1 << 20, 9);
  b.echo = true;
  a.install();
  b.install();
  ASSERT_TRUE(run_until(*loop_, [&] { return a.in.size() == a.out.size(); }, 120000)) << a.in.size();
  EXPECT_TRUE(a.in == a.out);
  EXPECT_GT(only_srq(*loop_).completions, before + 16);
}

}  // namespace
}  // namespace conduit::transport
