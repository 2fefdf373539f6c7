// Streams over every transport row: server-streaming, client-streaming, bidirectional,
// per-stream flow control (a small window, a paused reader), cancellation.
#include "conduit/rpc/echo.pb.h"
#include "rpc_harness.h"

namespace conduit::rpctest {
namespace {

using rpc::Channel;
using rpc::ClientStream;
using rpc::Controller;
using rpc::echo::EchoRequest;
using rpc::echo::EchoResponse;

struct Rig {
  std::unique_ptr<EchoServer> es;
  std::unique_ptr<reactor::EventLoop> loop;
  std::unique_ptr<Channel> ch;
};

// Small windows on both sides so that every test crosses flow control many times.
Rig rig(const TransportCase& row, uint32_t window = 4096) {
  Rig r;
  const std::string url = listen_url_or_skip(row);
  if (url.empty()) return r;
  rpc::ServerOptions so;
  so.stream_window = window;
  r.es = EchoServer::start(url, so);
  if (!r.es) return r;
  r.loop = reactor::EventLoop::create().value();
  rpc::ChannelOptions co;
  co.stream_window = window;
  r.ch = Channel::create(*r.loop, client_url(row, r.es->url), co).value();
  return r;
}

#define RIG_OR_SKIP(r, ...)                                  \
  auto r = rig(GetParam(), ##__VA_ARGS__);                   \
  if (!r.ch) {                                               \
    if (!HasFailure()) GTEST_SKIP() << "row not available";  \
    return;                                                  \
  }

using RpcStreamTest = RpcTest;

TEST_P(RpcStreamTest, ServerStreamingDeliversEveryMessageInOrder) {
  RIG_OR_SKIP(r);
  EchoRequest req;
  req.set_count(2000);
  req.set_response_size(100);  // 2000 x ~105 bytes through a 4 KiB window
  Controller cntl;
  auto s = r.ch->open_stream(echo_method("Expand"), &cntl, &req);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  uint64_t next = 0;
  bool bad = false, closed = false;
  Status final;
  (*s)->set_on_message([&](const google::protobuf::Message& m, const rpc::Attachment&) {
    const auto& e = static_cast<const EchoResponse&>(m);
    if (e.seq() != next || e.payload().size() != 100) bad = true;
    ++next;
  });
  (*s)->set_on_close([&](const Status& st) {
    final = st;
    closed = true;
  });
  ASSERT_TRUE(run_until(*r.loop, [&] { return closed; }, "server stream end"));
  RPC_ASSERT_OK(final);
  EXPECT_EQ(next, 2000u);
  EXPECT_FALSE(bad);
}

TEST_P(RpcStreamTest, ClientStreamingRespectsTheServersWindow) {
  RIG_OR_SKIP(r);
  Controller cntl;
  auto s = r.ch->open_stream(echo_method("Collect"), &cntl);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ClientStream& cs = **s;
  EchoRequest msg;
  msg.mutable_payload()->assign(1000, 'c');
  int sent = 0, would_block = 0;
  constexpr int kMessages = 500;
  EchoResponse result;
  bool closed = false;
  Status final;
  auto pump = [&] {
    while (sent < kMessages) {
      Status w = cs.write(msg);
      if (w.would_block()) {
        ++would_block;
        return;
      }
      ASSERT_TRUE(w.ok()) << w.to_string();
      ++sent;
    }
    RPC_ASSERT_OK(cs.close_send());
  };
  cs.set_on_writable(pump);
  cs.set_on_message([&](const google::protobuf::Message& m, const rpc::Attachment&) { result.CopyFrom(m); });
  cs.set_on_close([&](const Status& st) {
    final = st;
    closed = true;
  });
  pump();
  ASSERT_TRUE(run_until(*r.loop, [&] { return closed; }, "client stream end"));
  RPC_ASSERT_OK(final);
  EXPECT_EQ(result.seq(), static_cast<uint64_t>(kMessages));
  EXPECT_GE(result.total_bytes(), uint64_t{kMessages} * 1000);
  EXPECT_GT(would_block, 10) << "a 4 KiB window must have stopped the writer";
}

TEST_P(RpcStreamTest, BidiEchoWithAPausedReader) {
  RIG_OR_SKIP(r);
  Controller cntl;
  auto s = r.ch->open_stream(echo_method("Chat"), &cntl);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ClientStream& cs = **s;
  constexpr int kMessages = 1000;
  int sent = 0;
  uint64_t got = 0;
  bool bad = false, closed = false;
  Status final;
  EchoRequest msg;
  auto pump = [&] {
    while (sent < kMessages) {
      msg.set_payload("m" + std::to_string(sent) + std::string(200, 'b'));
      Status w = cs.write(msg);
      if (w.would_block()) return;
      ASSERT_TRUE(w.ok()) << w.to_string();
      ++sent;
    }
    RPC_ASSERT_OK(cs.close_send());
  };
  cs.set_on_writable(pump);
  cs.set_on_message([&](const google::protobuf::Message& m, const rpc::Attachment&) {
    const auto& e = static_cast<const EchoResponse&>(m);
    if (e.seq() != got || e.payload().rfind("m" + std::to_string(got), 0) != 0) bad = true;
    ++got;
  });
  cs.set_on_close([&](const Status& st) {
    final = st;
    closed = true;
  });
  // Pause reading for a while: the server must stop (its window spent), not buffer
  // without bound, and everything must flow again after resume().
  cs.pause();
  pump();
  (void)run_until(*r.loop, [] { return false; }, "a 200 ms pause", std::chrono::milliseconds(200));
  EXPECT_EQ(got, 0u);
  EXPECT_LT(sent, kMessages) << "the paused reader's window should have stopped the exchange";
  cs.resume();
  ASSERT_TRUE(run_until(*r.loop, [&] { return closed; }, "bidi end"));
  RPC_ASSERT_OK(final);
  EXPECT_EQ(got, static_cast<uint64_t>(kMessages));
  EXPECT_FALSE(bad);
}

TEST_P(RpcStreamTest, CancelEndsTheStreamOnBothSides) {
  RIG_OR_SKIP(r);
  Controller cntl;
  auto s = r.ch->open_stream(echo_method("Chat"), &cntl);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  bool closed = false;
  Status final;
  (*s)->set_on_close([&](const Status& st) {
    final = st;
    closed = true;
  });
  EchoRequest msg;
  msg.set_payload("x");
  ASSERT_TRUE(run_until(*r.loop, [&] { return (*s)->writable(); }, "initial credit"));
  RPC_ASSERT_OK((*s)->write(msg));
  (*s)->cancel();
  ASSERT_TRUE(closed);
  EXPECT_EQ(final.code(), Code::kCancelled) << final.to_string();
  EXPECT_EQ((*s)->write(msg).code(), Code::kClosed);
  ASSERT_TRUE(wait_until([&] { return r.es->server->calls_in_flight() == 0; }, "server call ended"));
}

TEST_P(RpcStreamTest, StreamsAndUnaryCallsShareOneConnection) {
  RIG_OR_SKIP(r, 64 << 10);
  std::vector<std::shared_ptr<ClientStream>> streams;
  std::vector<std::unique_ptr<Controller>> cntls;
  int closed = 0;
  uint64_t msgs = 0;
  for (int i = 0; i < 20; ++i) {
    EchoRequest req;
    req.set_count(100);
    req.set_response_size(64);
    cntls.push_back(std::make_unique<Controller>());
    auto s = r.ch->open_stream(echo_method("Expand"), cntls.back().get(), &req);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    (*s)->set_on_message([&](const google::protobuf::Message&, const rpc::Attachment&) { ++msgs; });
    (*s)->set_on_close([&](const Status& st) {
      EXPECT_TRUE(st.ok()) << st.to_string();
      ++closed;
    });
    streams.push_back(*s);
  }
  int unary = 0;
  std::vector<Controller> cs(200);
  std::vector<EchoResponse> rs(200);
  EchoRequest ping;
  ping.set_payload("u");
  for (int i = 0; i < 200; ++i) r.ch->call(echo_method("Echo"), &cs[i], &ping, &rs[i], [&] { ++unary; });
  ASSERT_TRUE(run_until(*r.loop, [&] { return closed == 20 && unary == 200; }, "streams + unary"));
  EXPECT_EQ(msgs, 2000u);
  for (auto& c : cs) EXPECT_FALSE(c.Failed()) << c.ErrorText();
}

TEST_P(RpcStreamTest, OpenStreamRejectsMisuse) {
  RIG_OR_SKIP(r);
  Controller cntl;
  EchoRequest req;
  EXPECT_EQ(r.ch->open_stream(echo_method("Echo"), &cntl, &req).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.ch->open_stream(echo_method("Expand"), &cntl, nullptr).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.ch->open_stream(echo_method("Chat"), &cntl, &req).status().code(), Code::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(host, RpcStreamTest, ::testing::ValuesIn(rpc_cases("")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(rdma, RpcStreamTest, ::testing::ValuesIn(rpc_cases("rdma")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RpcStreamTest);

}  // namespace
}  // namespace conduit::rpctest
