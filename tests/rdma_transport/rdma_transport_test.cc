// rdma:// end to end on a real device: setup, data both ways through buffer
// re-registration, writability without POLLOUT, peer close, options.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;
using namespace conduit::transport::testing;

Result<std::unique_ptr<Pair>> make_rdma_pair(const std::string& addr, const std::string& opts = "") {
  return make_pair(addr, opts, opts);
}

class RdmaTransport : public RdmaDeviceTest {};

TEST_F(RdmaTransport, ConnectsAndReportsState) {
  auto p = make_rdma_pair(addr_);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  EXPECT_EQ(pair.client->state(), ConnState::kConnected);
  EXPECT_EQ(pair.server->state(), ConnState::kConnected);
  EXPECT_EQ(pair.client->caps().transport, "rdma");
  EXPECT_TRUE(pair.client->caps().one_sided);
  EXPECT_NE(pair.client->describe().find("rdma"), std::string::npos);
  EXPECT_NE(pair.client->peer_address().find(addr_), std::string::npos) << pair.client->peer_address();
}

TEST_F(RdmaTransport, DataBothWaysAcrossManyBufferReRegistrations) {
  // A 64 KiB receive buffer and 3 MiB of data: ~48 re-registrations each way.
  auto p = make_rdma_pair(addr_, "?rx_buffer=65536");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  std::vector<uint8_t> data(3 << 20);
  std::mt19937 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  auto got = transfer(*pair.loop, *pair.client, *pair.server, data, 10000);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  std::reverse(data.begin(), data.end());
  auto back = transfer(*pair.loop, *pair.server, *pair.client, data, 70000);
  ASSERT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data);
  EXPECT_GE(pair.client->stats().bytes_written, 3u << 20);
  EXPECT_GT(pair.client->stats().write_would_block, 0u) << "a 64 KiB window must have filled up";
}

// busy_poll_us: while traffic flows the loop polls the CQ from its before-sleep hook and
// never blocks; the data is the same as with completion events.
TEST_F(RdmaTransport, BusyPollingKeepsTheLoopAwakeAndDeliversEverything) {
  auto p = make_rdma_pair(addr_, "?rx_buffer=65536&busy_poll_us=500000");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  std::vector<uint8_t> data(2 << 20);
  std::mt19937 rng(11);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t wakeups = pair.loop->wakeups();
  auto got = transfer(*pair.loop, *pair.client, *pair.server, data, 30000);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(pair.loop->wakeups() - wakeups, 0u) << "the loop slept in epoll_wait although busy polling was on";
}

TEST_F(RdmaTransport, WritableAgainOnlyAfterThePeerConsumes) {
  auto p = make_rdma_pair(addr_, "?rx_buffer=65536");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  ASSERT_TRUE(run_until(*pair.loop, [&] { return pair.client->write(std::span<const uint8_t>()).ok(); }));
  std::vector<uint8_t> block(65536, 0xab);
  // Wait until the server's buffer is known, then fill it completely.
  size_t written = 0;
  ASSERT_TRUE(run_until(*pair.loop, [&] {
    auto n = pair.client->write(std::span(block.data() + written, block.size() - written));
    if (n.ok()) written += *n;
    return written == block.size();
  }));
  auto more = pair.client->write(block);
  EXPECT_TRUE(more.status().would_block()) << more.status().to_string();
  bool writable = false;
  pair.client->set_write_handler([&](Connection&) { writable = true; });
  // Nobody reads: the loop must sleep, not spin, and the handler must not fire.
  const uint64_t iters = pair.loop->iterations();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pair.loop->run_once(20).ok());
  EXPECT_FALSE(writable);
  EXPECT_LT(pair.loop->iterations() - iters, 50u);
  // The server drains its buffer; that re-registers it and wakes the writer.
  uint8_t buf[65536];
  size_t drained = 0;
  ASSERT_TRUE(run_until(*pair.loop, [&] {
    auto n = pair.server->read(buf);
    if (n.ok()) drained += *n;
    return drained == block.size();
  }));
  ASSERT_TRUE(run_until(*pair.loop, [&] { return writable; }));
}

TEST_F(RdmaTransport, PeerCloseIsEofAfterTheData) {
  auto p = make_rdma_pair(addr_);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  const char msg[] = "last words";
  bool sent = false;
  ASSERT_TRUE(run_until(*pair.loop, [&] {
    if (!sent) sent = pair.client->write(std::span(reinterpret_cast<const uint8_t*>(msg), sizeof msg)).ok();
    return sent;
  }));
  ASSERT_TRUE(pair.loop->run_once(0).ok());  // flush
  pair.client->close();
  std::string got;
  bool eof = false;
  pair.server->set_read_handler([&](Connection& c) {
    uint8_t buf[64];
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok()) break;
      if (*n == 0) {
        eof = true;
        break;
      }
      got.append(reinterpret_cast<char*>(buf), *n);
    }
  });
  ASSERT_TRUE(run_until(*pair.loop, [&] { return eof; }));
  EXPECT_EQ(got, std::string(msg, sizeof msg));
  EXPECT_EQ(pair.client->write(std::span(reinterpret_cast<const uint8_t*>(msg), 1)).status().code(), Code::kClosed);
}

TEST_F(RdmaTransport, NoListenerFailsThroughTheCallback) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  Status result = Status(Code::kInProgress, "");
  auto c = connect(**loop, "rdma://" + addr_ + ":1?connect_timeout_ms=5000",
                   [&](Connection&, Status s) { result = s; });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(run_until(**loop, [&] { return !result.in_progress(); }));
  EXPECT_TRUE(result.is_error()) << result.to_string();
  EXPECT_EQ((*c)->state(), ConnState::kError);
}

TEST_F(RdmaTransport, BadOptionsAreRejected) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  auto cb = [](std::unique_ptr<Connection>) {};
  EXPECT_EQ(listen(**loop, "rdma://" + addr_ + ":0?rx_buffer=100", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(listen(**loop, "rdma://" + addr_ + ":0?bogus=1", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(listen(**loop, "rdma://" + addr_ + ":0?features=maybe", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(listen(**loop, "rdma://" + addr_ + ":0?device=nosuchdev", cb).ok(), true)
      << "device is checked per connection";
}

// Every CQ of a loop reports through the loop's one completion channel per device
// (cq_hub.h): once the loop has its first connection, more connections open no file
// descriptors, and each one's completions still reach it.  (Fewer is fine: in the ASan build
// in the guest the count once went from 12 to 11, an fd open when `before` was taken and
// closed by the second count; the loop now settles before each count, and a failure lists
// what the fds are.)
TEST_F(RdmaTransport, ConnectionsShareTheLoopsCompletionChannel) {
  const auto fds = [] {  // "fd -> target" per open fd
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(e.path(), ec);
      out.push_back(e.path().filename().string() + " -> " + (ec ? std::string("?") : target.string()));
    }
    return out;
  };
  const auto listing = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& f : v) s += "\n  " + f;
    return s;
  };
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  std::vector<std::unique_ptr<Connection>> servers, clients;
  auto l = listen(**loop, "rdma://" + addr_ + ":0?recv_depth=32&send_depth=32",
                  [&](std::unique_ptr<Connection> c) { servers.push_back(std::move(c)); });
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  int connected = 0;
  const auto open = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) {
      auto c = connect(**loop, (*l)->url() + "?recv_depth=32&send_depth=32", [&](Connection&, Status s) {
        EXPECT_TRUE(s.ok()) << s.to_string();
        ++connected;
      });
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      clients.push_back(std::move(*c));
    }
    ASSERT_TRUE(run_until(**loop, [&] { return connected == static_cast<int>(clients.size()) && servers.size() == clients.size(); }, 30000));
  };
  const auto settle = [&] { (void)run_until(**loop, [] { return false; }, 100); };
  open(1);
  settle();
  const auto before = fds();
  open(16);
  settle();
  const auto after = fds();
  EXPECT_LE(after.size(), before.size()) << "17 connections (34 ends) on one loop; open before the 16:"
                                         << listing(before) << "\nand after:" << listing(after);
  // A byte each way on every connection: every CQ's events reach its own connection.
  size_t got = 0;
  for (size_t i = 0; i < servers.size(); ++i) {
    servers[i]->set_read_handler([&](Connection& c) {
      uint8_t b;
      if (auto n = c.read(std::span(&b, 1)); n.ok() && *n == 1) (void)c.write(std::span(&b, 1));
    });
    clients[i]->set_read_handler([&, i](Connection& c) {
      uint8_t b;
      if (auto n = c.read(std::span(&b, 1)); n.ok() && *n == 1 && b == static_cast<uint8_t>(i)) ++got;
    });
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    const uint8_t b = static_cast<uint8_t>(i);
    ASSERT_TRUE(clients[i]->write(std::span(&b, 1)).ok());
  }
  EXPECT_TRUE(run_until(**loop, [&] { return got == clients.size(); }, 10000)) << got << " of " << clients.size();
}

TEST_F(RdmaTransport, ManyConnectionsOnOneLoop) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  std::vector<std::unique_ptr<Connection>> servers;
  auto l = listen(**loop, "rdma://" + addr_ + ":0?rx_buffer=65536&recv_depth=32&send_depth=32",
                  [&](std::unique_ptr<Connection> c) { servers.push_back(std::move(c)); });
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  constexpr int kConns = 64;
  std::vector<std::unique_ptr<Connection>> clients;
  int connected = 0;
  for (int i = 0; i < kConns; ++i) {
    auto c = connect(**loop, (*l)->url() + "?rx_buffer=65536&recv_depth=32&send_depth=32", [&](Connection&, Status s) {
      EXPECT_TRUE(s.ok()) << s.to_string();
      ++connected;
    });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    clients.push_back(std::move(*c));
  }
  ASSERT_TRUE(run_until(**loop, [&] { return connected == kConns && servers.size() == kConns; }, 60000))
      << connected << " connected, " << servers.size() << " accepted";
  // Each client sends its index; each server echoes what it gets.
  for (auto& s : servers)
    s->set_read_handler([](Connection& c) {
      uint8_t buf[64];
      auto n = c.read(buf);
      if (n.ok() && *n > 0) (void)c.write(std::span(buf, *n));
    });
  int echoed = 0;
  for (int i = 0; i < kConns; ++i) {
    clients[i]->set_read_handler([&, i](Connection& c) {
      uint8_t buf[64];
      auto n = c.read(buf);
      if (n.ok() && *n == 4) {
        int v;
        std::memcpy(&v, buf, 4);
        EXPECT_EQ(v, i);
        ++echoed;
      }
    });
  }
  std::vector<int> pending(kConns);
  for (int i = 0; i < kConns; ++i) pending[i] = i;
  ASSERT_TRUE(run_until(**loop, [&] {
    for (int i = 0; i < kConns; ++i)
      if (pending[i] >= 0 && clients[i]->write(std::span(reinterpret_cast<uint8_t*>(&pending[i]), 4)).ok()) pending[i] = -1;
    return echoed == kConns;
  }, 60000)) << echoed;
}

}  // namespace
}  // namespace conduit::transport

namespace conduit::transport {
namespace {

// auto:// in the guest: RDMA when the peer listens for it, TCP when it does not.
class AutoTransport : public RdmaTransport {};

TEST_F(AutoTransport, PicksRdmaWhenThePeerServesIt) {
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok());
  std::unique_ptr<Connection> server;
  auto l = listen(**loop, "auto://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { server = std::move(c); });
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  Status st = Status(Code::kInProgress, "");
  // The pick is under test, not the bound on the attempt (the next test's): in the TCG guest,
  // beside a suite that sets up many QPs at once, an rdma setup can outlast the default
  // 2000 ms, and auto:// then rightly falls back to TCP.
  auto c = connect(**loop, (*l)->url() + "?rdma_timeout_ms=20000", [&](Connection&, Status s) { st = s; });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(run_until(**loop, [&] { return server && !st.in_progress(); }, 30000));
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ((*c)->caps().transport, "rdma");
  EXPECT_EQ(server->caps().transport, "rdma");
}

TEST_F(AutoTransport, FallsBackToTcpWhenThePeerHasNoRdmaListener) {
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok());
  std::unique_ptr<Connection> server;
  auto l = listen(**loop, "tcp://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { server = std::move(c); });
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  const std::string port = (*l)->url().substr((*l)->url().rfind(':') + 1);
  Status st = Status(Code::kInProgress, "");
  const uint64_t t0 = monotonic_ns();
  auto c = connect(**loop, "auto://" + addr_ + ":" + port + "?rdma_timeout_ms=3000", [&](Connection&, Status s) { st = s; });
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE(run_until(**loop, [&] { return server && !st.in_progress(); }));
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ((*c)->caps().transport, "tcp");
  EXPECT_LT(monotonic_ns() - t0, 4000 * kMs) << "fallback must be bounded by rdma_timeout_ms";
  // And it carries data.
  std::string got;
  server->set_read_handler([&](Connection& s) {
    uint8_t b[16];
    auto n = s.read(b);
    if (n.ok()) got.append(reinterpret_cast<char*>(b), *n);
  });
  ASSERT_TRUE((*c)->write(std::span(reinterpret_cast<const uint8_t*>("hi"), 2)).ok());
  ASSERT_TRUE(run_until(**loop, [&] { return got == "hi"; }));
}

}  // namespace
}  // namespace conduit::transport
