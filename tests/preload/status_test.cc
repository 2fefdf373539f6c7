#include "status_model.h"

#include <gtest/gtest.h>

namespace conduit::preload {
namespace {

TEST(PreloadStatus, FormatParseRoundTrip) {
  ProcessStatus p;
  p.pid = 1234;
  p.exe = "/usr/bin/redis-check-rdb";
  p.name = "redis-server";
  p.mode = "auto";
  p.started_ms = 1700000000000;
  p.fast = 3;
  p.tcp = 2;
  p.fallback = 1;
  p.io_uring = true;
  SocketStatus s;
  s.fd = 7;
  s.role = "server";
  s.phase = "tcp";
  s.mode = "tcp";
  s.local = "127.0.0.1:6379";
  s.peer = "127.0.0.1:40000";
  s.bytes_in = 10;
  s.bytes_out = 20;
  s.age_ms = 5;
  s.reason = "tabs\tand\nnewlines never break a record";
  p.sockets.push_back(s);
  const std::string text = format_status(p);
  Result<ProcessStatus> q = parse_status(text + "future\tkey=value\n");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->pid, 1234);
  EXPECT_EQ(q->name, "redis-server");
  EXPECT_EQ(q->fast, 3u);
  EXPECT_TRUE(q->io_uring);
  ASSERT_EQ(q->sockets.size(), 1u);
  EXPECT_EQ(q->sockets[0].reason, "tabs and newlines never break a record");
  EXPECT_EQ(q->sockets[0].bytes_out, 20u);
  EXPECT_NE(render_table({*q}).find("redis-server"), std::string::npos);
  EXPECT_NE(render_json({*q}).find("\"reason\":\"tabs and newlines"), std::string::npos);
  EXPECT_FALSE(parse_status("garbage").ok());
  EXPECT_FALSE(parse_status("conduit-preload-status\tv=2\nprocess\tpid=1\n").ok());
}

// A fast channel's transport::ConnSnapshot travels as ch.* fields and comes back whole.
TEST(PreloadStatus, ChannelSnapshotRoundTrips) {
  ProcessStatus p;
  p.pid = 77;
  SocketStatus s;
  s.fd = 9;
  s.role = "client";
  s.phase = "fast";
  s.mode = "rdma";
  s.has_channel = true;
  s.channel.transport = "rdma";
  s.channel.state = "failed";
  s.channel.error = "io-error: rdma 192.0.2.2:7: transport retry counter exceeded\t(wc status 12)";
  s.channel.credits = 0;
  s.channel.qp_state = "ERR";
  s.channel.qpn = 21;
  s.channel.device = "rxe0:1";
  s.channel.stats.wakeups = 4;
  s.channel.device_counters = {{"retry_exceeded_err", 1}, {"sent_pkts", 900}};
  p.sockets.push_back(s);
  SocketStatus plain;  // a socket that stayed TCP has no channel fields
  plain.fd = 10;
  plain.mode = "tcp";
  p.sockets.push_back(plain);
  Result<ProcessStatus> q = parse_status(format_status(p));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  ASSERT_EQ(q->sockets.size(), 2u);
  const SocketStatus& r = q->sockets[0];
  ASSERT_TRUE(r.has_channel);
  EXPECT_EQ(r.mode, "rdma");
  EXPECT_EQ(r.channel.state, "failed");
  EXPECT_EQ(r.channel.error, "io-error: rdma 192.0.2.2:7: transport retry counter exceeded (wc status 12)");
  EXPECT_EQ(r.channel.qp_state, "ERR");
  EXPECT_EQ(r.channel.qpn, 21u);
  EXPECT_EQ(r.channel.credits, 0);
  EXPECT_EQ(r.channel.stats.wakeups, 4u);
  EXPECT_EQ(r.channel.device_counters, s.channel.device_counters);
  EXPECT_FALSE(q->sockets[1].has_channel);
}

}  // namespace
}  // namespace conduit::preload
