// Conduit's negotiated extensions of the RDMA stream protocol, on a real device:
//   ring       incremental Credit returns, the writer wraps around the peer's buffer;
//   solicited  the receiver arms for solicited completions and wakes once per batch;
//   half-close shutdown_write() (half_close_test.cc).
// All are offered by default and fall back to the Valkey baseline when either side
// does not offer them (features=none is what a Valkey peer looks like).  Between Conduit
// peers they are settled in the connection handshake (a Hello in rdma_cm's private data);
// with cm_features=false on either side, by GetServerFeature / SetClientFeature messages.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;
using namespace conduit::transport::testing;

// Waits until both sides agree on the extensions (negotiation follows the connection).
std::string settle(Pair& p, const std::string& want) {
  run_until(*p.loop, [&] {
    return std::string(p.client->caps().extensions) == want && std::string(p.server->caps().extensions) == want;
  }, 5000);
  return std::string(p.client->caps().extensions) + "/" + std::string(p.server->caps().extensions);
}

class RdmaExtensions : public RdmaDeviceTest {};

TEST_F(RdmaExtensions, NegotiatedOnlyWhenBothSidesOfferThem) {
  struct Case {
    std::string server, client, want;
  } cases[] = {
      {"", "", "ring,solicited,half-close,rendezvous"},
      {"", "?rendezvous_min=0", "ring,solicited,half-close"},  // rendezvous off: bit 2 not offered
      {"?scope=private", "", "ring,solicited,half-close"},     // no windows to offer slices with
      {"?features=4", "", "rendezvous"},
      {"?features=none", "", ""},  // a Valkey server: answers 0, never sees SetClientFeature
      {"", "?features=none", ""},  // a Valkey client: never asks
      {"", "?features=1", "ring"},
      {"?features=2", "", "solicited"},
      {"", "?features=8", "half-close"},
      {"?features=9", "?features=10", "half-close"},
      {"?features=1", "?features=2", ""},
  };
  // In the handshake (a Hello both ways, the default), or by messages when either side
  // has cm_features=false (as with a Valkey peer or an older Conduit): the same outcome.
  const auto with = [](const std::string& opts, const char* more) {
    return *more == 0 ? opts : opts + (opts.empty() ? "?" : "&") + more;
  };
  for (const char* server_more : {"", "cm_features=false"}) {
    for (const char* client_more : {"", "cm_features=false"}) {
      if (*server_more != 0 && *client_more != 0) continue;
      for (const Case& c : cases) {
        const std::string server = with(c.server, server_more), client = with(c.client, client_more);
        SCOPED_TRACE("server '" + server + "' client '" + client + "'");
        auto p = make_pair(addr_, server, client);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        EXPECT_EQ(settle(**p, c.want), c.want + "/" + c.want);
        // And the connection works in that mode.
        std::vector<uint8_t> data(200000);
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
        EXPECT_TRUE(transfer(*(*p)->loop, *(*p)->client, *(*p)->server, data, 3000, 7001) == data);
      }
    }
  }
}

// Settled in the handshake, the extensions are in force on the server when it hands the
// connection over (at ESTABLISHED, before any message); by messages, the server learns them
// only from the client's SetClientFeature, which follows its answer to GetServerFeature.
// The client sends those as soon as it sees ESTABLISHED, which may be before the server sees
// its own: their completions can then be taken before the server's CM event, and the server
// hands over with the extensions already settled.  Either way they change all at once.
TEST_F(RdmaExtensions, AHelloSettlesTheExtensionsBeforeAnyMessage) {
  const std::string all = "ring,solicited,half-close,rendezvous";
  for (const char* client_opts : {"", "?cm_features=false"}) {
    SCOPED_TRACE(std::string("client '") + client_opts + "'");
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop.ok());
    std::unique_ptr<Connection> server;
    std::string at_accept = "(not accepted)", at_connect = "(not connected)";
    auto l = listen(**loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) {
      at_accept = std::string(c->caps().extensions);
      server = std::move(c);
    });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    Status st = Status::InProgress();
    auto client = connect(**loop, (*l)->url() + client_opts, [&](Connection& c, Status s) {
      at_connect = std::string(c.caps().extensions);
      st = s;
    });
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    ASSERT_TRUE(run_until(**loop, [&] { return server && !st.in_progress(); }, 10000));
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(at_connect, all);  // the client waits for the answer either way
    if (*client_opts == 0) {
      EXPECT_EQ(at_accept, all);
    } else {
      EXPECT_TRUE(at_accept.empty() || at_accept == all) << at_accept;
    }
    run_until(**loop, [&] { return std::string(server->caps().extensions) == all; }, 5000);
    EXPECT_EQ(std::string(server->caps().extensions), all);
  }
}

// Every mode, byte for byte, both ways, through a 64 KiB buffer many times over, with
// writes and reads of sizes that never line up with the buffer.
TEST_F(RdmaExtensions, DataBothWaysInEveryMode) {
  for (const char* features : {"none", "1", "2", "3"}) {
    SCOPED_TRACE(std::string("features=") + features);
    const std::string opts = std::string("?rx_buffer=65536&features=") + features;
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    settle(pair, std::string(features) == "none" ? "" : std::string(features) == "1" ? "ring"
                                                     : std::string(features) == "2" ? "solicited"
                                                                                    : "ring,solicited");
    std::vector<uint8_t> data(3 << 20);
    std::mt19937 rng(5);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    auto got = transfer(*pair.loop, *pair.client, *pair.server, data, 10007, 7001);
    ASSERT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data);
    std::reverse(data.begin(), data.end());
    auto back = transfer(*pair.loop, *pair.server, *pair.client, data, 70001, 7001);
    ASSERT_EQ(back.size(), data.size());
    EXPECT_TRUE(back == data);
  }
}

// Ring mode's point: a writer that filled the peer's buffer may go on once the reader has
// consumed credit_bytes of it, not only once it has consumed all of it.
TEST_F(RdmaExtensions, RingWriterResumesAfterACreditNotAWholeBuffer) {
  for (bool ring : {true, false}) {
    SCOPED_TRACE(ring ? "ring" : "baseline");
    const std::string opts = std::string("?rx_buffer=65536&credit_bytes=16384&features=") + (ring ? "1" : "none");
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    settle(pair, ring ? "ring" : "");
    std::vector<uint8_t> block(65536);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i);
    size_t written = 0;
    ASSERT_TRUE(run_until(*pair.loop, [&] {
      auto n = pair.client->write(std::span(block.data() + written, block.size() - written));
      if (n.ok()) written += *n;
      return written == block.size();
    }));
    EXPECT_TRUE(pair.client->write(block).status().would_block());
    bool writable = false;
    pair.client->set_write_handler([&](Connection&) { writable = true; });
    // The reader takes a quarter of the buffer.
    uint8_t buf[16384];
    size_t drained = 0;
    ASSERT_TRUE(run_until(*pair.loop, [&] {
      auto n = pair.server->read(std::span(buf, sizeof buf - drained));
      if (n.ok()) drained += *n;
      return drained == sizeof buf;
    }));
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(pair.loop->run_once(10).ok());
    EXPECT_EQ(writable, ring);
    if (ring) {
      // Exactly the credited space, written at the start of the buffer (the wrap), and
      // read back in order after the rest of the first block.
      std::vector<uint8_t> second(16384, 0x5a);
      auto n = pair.client->write(std::span(second.data(), second.size()));
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      EXPECT_EQ(*n, second.size());
      EXPECT_TRUE(pair.client->write(second).status().would_block());
      std::vector<uint8_t> rest;
      ASSERT_TRUE(run_until(*pair.loop, [&] {
        uint8_t b[4096];
        auto r = pair.server->read(b);
        if (r.ok()) rest.insert(rest.end(), b, b + *r);
        return rest.size() == 65536 - 16384 + 16384;
      }));
      EXPECT_TRUE(std::equal(block.begin() + 16384, block.end(), rest.begin()));
      EXPECT_TRUE(std::all_of(rest.begin() + (65536 - 16384), rest.end(), [](uint8_t b) { return b == 0x5a; }));
    }
  }
}

// Solicited events: the writer posts a WR per 1 KiB write (flush_bytes=1024) and pauses
// between them, so a receiver woken per completion wakes about once per write; with the
// extension it wakes once per batch (the writer's loop iteration), at the batch's last,
// solicited WR -- here a zero-length WRITE_WITH_IMM, since every data WR went out early.
TEST_F(RdmaExtensions, SolicitedEventsWakeTheReceiverOncePerBatch) {
  constexpr int kBatches = 8;
  constexpr int kWritesPerBatch = 12;
  auto run = [&](const char* features) -> std::pair<uint64_t, size_t> {
    // rx_initial=0: the whole run (96 KiB, written without waiting) fits the receive area
    // from the start, in the baseline too (there a smaller area comes back only once full).
    const std::string opts =
        std::string("?flush_bytes=1024&keepalive_ms=0&keepalive_timeout_ms=0&rx_initial=0&features=") + features;
    std::atomic<uint16_t> port{0};
    std::atomic<bool> stop{false};
    std::atomic<size_t> received{0};
    std::atomic<uint64_t> wakeups{0};
    std::thread server([&] {
      auto loop = EventLoop::create();
      if (!loop.ok()) return;
      std::unique_ptr<Connection> conn;
      auto l = listen(**loop, "rdma://" + addr_ + ":0" + opts, [&](std::unique_ptr<Connection> c) {
        conn = std::move(c);
        conn->set_read_handler([&](Connection& c2) {
          uint8_t buf[65536];
          for (;;) {
            auto n = c2.read(buf);
            if (!n.ok() || *n == 0) break;
            received += *n;
          }
        });
      });
      if (!l.ok()) return;
      const std::string url = (*l)->url();
      port = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
      while (!stop) {
        (void)(*loop)->run_once(20);
        if (conn) wakeups = conn->stats().wakeups;
      }
    });
    while (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto loop = EventLoop::create();
    EXPECT_TRUE(loop.ok());
    bool up = false;
    auto c = connect(**loop, "rdma://" + addr_ + ":" + std::to_string(port.load()) + opts,
                     [&](Connection&, Status s) { up = s.ok(); });
    EXPECT_TRUE(c.ok());
    EXPECT_TRUE(run_until(**loop, [&] { return up; }));
    for (int i = 0; i < 50; ++i) (void)(*loop)->run_once(5);  // negotiation settles
    const uint64_t before = wakeups;
    std::vector<uint8_t> kib(1024, 0x42);
    for (int b = 0; b < kBatches; ++b) {
      for (int w = 0; w < kWritesPerBatch; ++w) {
        EXPECT_TRUE((*c)->write(kib).ok());
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
      }
      (void)(*loop)->run_once(0);  // the batch ends: the before-sleep hook closes it
      run_until(**loop, [&] { return received == size_t{1024} * kWritesPerBatch * (b + 1); }, 10000);
    }
    const size_t got = received;
    const uint64_t woke = wakeups - before;
    stop = true;
    server.join();
    return {woke, got};
  };
  const auto [solicited_wakeups, solicited_bytes] = run("2");
  const auto [baseline_wakeups, baseline_bytes] = run("none");
  const size_t total = size_t{1024} * kWritesPerBatch * kBatches;
  EXPECT_EQ(solicited_bytes, total) << "a batch was never delivered: its end did not wake the receiver";
  EXPECT_EQ(baseline_bytes, total);
  EXPECT_LE(solicited_wakeups, uint64_t{2} * kBatches) << "baseline " << baseline_wakeups;
  EXPECT_GT(baseline_wakeups, solicited_wakeups * 2) << "solicited " << solicited_wakeups;
  std::printf("receiver wakeups for %d batches of %d WRs: solicited %llu, baseline %llu\n", kBatches,
              kWritesPerBatch, static_cast<unsigned long long>(solicited_wakeups),
              static_cast<unsigned long long>(baseline_wakeups));
}

}  // namespace
}  // namespace conduit::transport
