// Conduit's half-close extension of the RDMA stream protocol (feature bit 3, HalfClose
// 0x8004), on a real device: shutdown_write() gives the peer every byte and then EOF while
// both sides go on reading; a peer that does not negotiate it (features=none: what a Valkey
// peer looks like) keeps the baseline, where shutdown_write() is a clear error.
#include <gtest/gtest.h>


#include "conduit/transport/connection.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

class RdmaHalfClose : public RdmaDeviceTest {};

struct Outcome {
  std::vector<uint8_t> got;
  bool eof = false;
  Status shut;  // what shutdown_write() returned
};

// Writes `data` from a to b with handlers, then shuts a's write side; b reads until EOF.
Outcome send_then_shut(reactor::EventLoop& loop, Connection& a, Connection& b, const std::vector<uint8_t>& data) {
  Outcome out;
  size_t sent = 0;
  bool shut = false;
  auto pump = [&](Connection& c) {
    while (sent < data.size()) {
      auto n = c.write(std::span(data.data() + sent, std::min<size_t>(40000, data.size() - sent)));
      if (!n.ok()) break;
      sent += *n;
    }
    if (sent == data.size() && !shut) {
      shut = true;
      out.shut = c.shutdown_write();
      c.set_write_handler(nullptr);
    }
  };
  a.set_write_handler(pump);
  b.set_read_handler([&](Connection& c) {
    uint8_t buf[30000];
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok()) break;
      if (*n == 0) {
        out.eof = true;
        c.set_read_handler(nullptr);
        break;
      }
      out.got.insert(out.got.end(), buf, buf + *n);
    }
  });
  pump(a);
  run_until(loop, [&] { return out.eof || (shut && !out.shut.ok()); }, 60000);
  a.set_write_handler(nullptr);
  b.set_read_handler(nullptr);
  return out;
}

// Both directions shut one after the other (the orderly close), in ring mode and in the
// baseline (whole-buffer re-registration), through a 64 KiB buffer many times over: the
// EOF position counts every registration's bytes.
TEST_F(RdmaHalfClose, EachSideReadsAllThenEofAndStillWrites) {
  for (const char* features : {"all", "10" /* solicited + half-close, no ring */, "8"}) {
    SCOPED_TRACE(std::string("features=") + features);
    const std::string opts = std::string("?rx_buffer=65536&features=") + features;
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    ASSERT_TRUE(pair.client->caps().half_close) << "the client's caps are final at connect";
    ASSERT_TRUE(run_until(*pair.loop, [&] { return pair.server->caps().half_close; }, 5000));
    const auto request = random_bytes(1 << 20, 1);
    Outcome up = send_then_shut(*pair.loop, *pair.client, *pair.server, request);
    ASSERT_TRUE(up.shut.ok()) << up.shut.to_string();
    EXPECT_TRUE(up.eof);
    EXPECT_TRUE(up.got == request) << up.got.size() << " of " << request.size() << " bytes";
    // The half-closed side: writes fail clearly, the connection stays connected.
    const uint8_t one[1] = {1};
    auto w = pair.client->write(one);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), Code::kClosed) << w.status().to_string();
    EXPECT_EQ(pair.client->state(), ConnState::kConnected);
    EXPECT_TRUE(pair.client->shutdown_write().ok()) << "a second shutdown_write is a no-op";
    // The other way: the server answers, then shuts too.
    const auto reply = random_bytes(700000, 2);
    Outcome down = send_then_shut(*pair.loop, *pair.server, *pair.client, reply);
    ASSERT_TRUE(down.shut.ok()) << down.shut.to_string();
    EXPECT_TRUE(down.eof);
    EXPECT_TRUE(down.got == reply) << down.got.size() << " of " << reply.size() << " bytes";
    EXPECT_EQ(pair.server->state(), ConnState::kConnected);
    EXPECT_EQ(pair.client->state(), ConnState::kConnected);
    // Both shut: closing loses nothing and fails nothing.
    pair.client->close();
    pair.server->close();
    EXPECT_EQ(pair.client->state(), ConnState::kClosed);
    EXPECT_EQ(pair.server->state(), ConnState::kClosed);
  }
}

// A shutdown_write() while the writer is pushed back (its data not all posted yet): the
// HalfClose waits behind the data, and a close right after it still delivers everything.
TEST_F(RdmaHalfClose, ShutdownThenCloseUnderBackpressureLosesNothing) {
  auto p = make_pair(addr_, "?rx_buffer=65536", "?rx_buffer=65536");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  const auto data = random_bytes(64 << 10, 3);
  size_t written = 0;
  for (;;) {
    auto n = pair.client->write(std::span(data.data() + written, data.size() - written));
    if (!n.ok()) break;
    written += *n;
    if (written == data.size()) break;
  }
  ASSERT_TRUE(pair.client->shutdown_write().ok());
  pair.client->close();  // the linger (Closer) finishes what is on the wire
  std::vector<uint8_t> got;
  bool eof = false;
  pair.server->set_read_handler([&](Connection& c) {
    uint8_t buf[8192];
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok()) break;
      if (*n == 0) {
        eof = true;
        break;
      }
      got.insert(got.end(), buf, buf + *n);
    }
  });
  ASSERT_TRUE(run_until(*pair.loop, [&] { return eof || pair.server->state() == ConnState::kError; }));
  EXPECT_TRUE(eof) << pair.server->error().to_string();
  EXPECT_EQ(got.size(), written);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
}

// Against a peer that does not negotiate the extension -- either side with features=none,
// which is what a Valkey server or client looks like -- the baseline stays: caps() say so,
// shutdown_write() is a clear kNotSupported, and the stream keeps working both ways.
TEST_F(RdmaHalfClose, ValkeyModePeerKeepsTheBaseline) {
  struct Case {
    const char *server, *client;
  } cases[] = {{"?features=none", ""}, {"", "?features=none"}, {"?features=3", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("server '") + c.server + "' client '" + c.client + "'");
    auto p = make_pair(addr_, c.server, c.client);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Pair& pair = **p;
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(pair.loop->run_once(5).ok());  // let negotiation end
    EXPECT_FALSE(pair.client->caps().half_close);
    EXPECT_FALSE(pair.server->caps().half_close);
    for (Connection* conn : {pair.client.get(), pair.server.get()}) {
      Status s = conn->shutdown_write();
      EXPECT_EQ(s.code(), Code::kNotSupported) << s.to_string();
      EXPECT_NE(s.to_string().find("half-close was not negotiated"), std::string::npos) << s.to_string();
    }
    const auto data = random_bytes(200000, 4);
    EXPECT_TRUE(transfer(*pair.loop, *pair.client, *pair.server, data) == data);
    EXPECT_TRUE(transfer(*pair.loop, *pair.server, *pair.client, data) == data);
  }
}

}  // namespace
}  // namespace conduit::transport
