#include "conduit/verbs/bootstrap.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "conduit/verbs/cm.h"

namespace conduit::verbs {
namespace {

BootstrapInfo sample() {
  BootstrapInfo b;
  b.endpoint.qp_num = 0x123456;
  b.endpoint.psn = 0xabcdef;
  b.endpoint.lid = 0x42;
  for (int i = 0; i < 16; ++i) b.endpoint.gid[i] = static_cast<uint8_t>(i * 3);
  b.addr = 0x1122334455667788ull;
  b.rkey = 0xdeadbeef;
  b.length = 4096;
  return b;
}

TEST(Bootstrap, RecordLayoutIsBigEndianAndVersioned) {
  uint8_t rec[kBootstrapRecordSize];
  encode_bootstrap(sample(), rec);
  EXPECT_EQ(std::memcmp(rec, "CDQP", 4), 0);
  EXPECT_EQ(rec[4], 1);
  EXPECT_EQ(rec[6], 0x00);
  EXPECT_EQ(rec[7], 0x42);
  EXPECT_EQ(rec[8], 0x00);
  EXPECT_EQ(rec[9], 0x12);
  EXPECT_EQ(rec[11], 0x56);
  EXPECT_EQ(rec[32], 0x11);
  EXPECT_EQ(rec[39], 0x88);
  EXPECT_EQ(rec[40], 0xde);
  auto back = decode_bootstrap(rec);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, sample());
}

TEST(Bootstrap, RejectsForeignRecords) {
  uint8_t rec[kBootstrapRecordSize];
  encode_bootstrap(sample(), rec);
  rec[0] = 'X';
  EXPECT_EQ(decode_bootstrap(rec).status().code(), Code::kProtocolError);
  encode_bootstrap(sample(), rec);
  rec[4] = 2;
  EXPECT_EQ(decode_bootstrap(rec).status().code(), Code::kProtocolError);
  encode_bootstrap(sample(), rec);
  rec[12] = 0x01;  // PSN wider than 24 bits
  EXPECT_EQ(decode_bootstrap(rec).status().code(), Code::kProtocolError);
}

TEST(Bootstrap, ExchangeOverLoopbackTcp) {
  auto listener = tcp_listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  auto port = bound_port(listener->get());
  ASSERT_TRUE(port.ok());
  BootstrapInfo server_info = sample();
  server_info.rkey = 1;
  Result<BootstrapInfo> server_got = Status(Code::kInternal, "not run");
  std::thread server([&] {
    auto conn = tcp_accept(listener->get(), 5000);
    if (!conn.ok()) {
      server_got = conn.status();
      return;
    }
    server_got = exchange_bootstrap(conn->get(), server_info, 5000);
  });
  auto conn = tcp_connect("127.0.0.1", *port, 5000);
  ASSERT_TRUE(conn.ok()) << conn.status().to_string();
  BootstrapInfo client_info = sample();
  client_info.rkey = 2;
  auto client_got = exchange_bootstrap(conn->get(), client_info, 5000);
  server.join();
  ASSERT_TRUE(client_got.ok()) << client_got.status().to_string();
  ASSERT_TRUE(server_got.ok()) << server_got.status().to_string();
  EXPECT_EQ(client_got->rkey, 1u);
  EXPECT_EQ(server_got->rkey, 2u);
}

TEST(Bootstrap, PeerClosingEarlyIsAnError) {
  auto listener = tcp_listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  std::thread server([&] {
    auto conn = tcp_accept(listener->get(), 5000);
    if (conn.ok()) ::send(conn->get(), "CDQP", 4, MSG_NOSIGNAL);  // then close mid-record
  });
  auto conn = tcp_connect("127.0.0.1", *bound_port(listener->get()), 5000);
  ASSERT_TRUE(conn.ok());
  auto got = exchange_bootstrap(conn->get(), sample(), 5000);
  server.join();
  EXPECT_EQ(got.status().code(), Code::kClosed) << got.status().to_string();
}

TEST(Bootstrap, SilentPeerTimesOut) {
  auto listener = tcp_listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto conn = tcp_connect("127.0.0.1", *bound_port(listener->get()), 5000);
  ASSERT_TRUE(conn.ok());
  auto got = exchange_bootstrap(conn->get(), sample(), 200);
  EXPECT_EQ(got.status().code(), Code::kTimedOut) << got.status().to_string();
}

TEST(Bootstrap, ConnectToClosedPortTimesOut) {
  auto listener = tcp_listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const uint16_t port = *bound_port(listener->get());
  listener->reset();
  auto conn = tcp_connect("127.0.0.1", port, 200);
  EXPECT_EQ(conn.status().code(), Code::kTimedOut) << conn.status().to_string();
}

TEST(SocketAddress, ResolvesNumericHosts) {
  auto a = SocketAddress::resolve("127.0.0.1", 7471);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->to_string(), "127.0.0.1:7471");
  auto b = SocketAddress::resolve("::1", 80);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->to_string(), "[::1]:80");
  EXPECT_EQ(SocketAddress::resolve("no-such-host.invalid", 1).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace conduit::verbs
