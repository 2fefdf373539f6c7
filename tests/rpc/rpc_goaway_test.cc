// A client that breaks the protocol, on every transport row (rdma in the guest): the server
// answers with a GOAWAY the client can read, then half-closes (shutdown_write) and drains,
// so the client reads the GOAWAY and a clean end of stream -- on rdma that is the half-close
// message (feature bit 3), which the raw-TCP hostile tests cannot reach.  Other clients of
// the same server keep working.
#include "conduit/rpc/echo.pb.h"
#include "conduit/rpc/status.pb.h"
#include "conduit/transport/connection.h"
#include "rpc_harness.h"
#include "wire.h"

namespace conduit::rpctest {
namespace {

namespace wire = rpc::wire;

// The frames in `bytes` and each one's error message.
std::vector<std::pair<wire::FrameHeader, std::string>> frames_in(const std::string& bytes) {
  std::vector<std::pair<wire::FrameHeader, std::string>> out;
  wire::FrameParser p({});
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  for (;;) {
    auto ev = p.next(in);
    if (ev.kind != wire::FrameParser::Kind::kFrame) break;
    std::string msg;
    (void)wire::decode_meta(in.subspan(wire::kHeaderSize, ev.header.meta_len), nullptr, &msg);
    out.emplace_back(ev.header, msg);
    in = in.subspan(ev.frame_bytes);
  }
  return out;
}

// A REQUEST frame where HELLO must come first: a protocol error after which the stream is
// still made of frames, so the server drains (skips) what else comes until the client closes.
std::string request_before_hello() {
  wire::FrameHeader h;
  h.type = wire::FrameType::kRequest;
  h.call_id = 1;
  std::string out(wire::kHeaderSize, '\0');
  wire::encode_header(h, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

size_t connections(const EchoServer& es) {
  rpc::StatusResponse st;
  es.server->status(&st);
  return static_cast<size_t>(st.connections_size());
}

class RpcGoaway : public ::testing::TestWithParam<TransportCase> {};

TEST_P(RpcGoaway, ABrokenClientReadsTheGoawayThenACleanEndOfStream) {
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) {
    if (!HasFailure()) GTEST_SKIP() << "row not available";
    return;
  }
  auto es = EchoServer::start(url);
  ASSERT_TRUE(es);
  auto good = rpc::Channel::create(client_url(GetParam(), es->url)).value();
  auto call_ok = [&] {
    rpc::echo::EchoRequest req;
    req.set_payload("still here");
    rpc::echo::EchoResponse resp;
    rpc::Controller cntl;
    rpc::echo::EchoService_Stub(good.get()).Echo(&cntl, &req, &resp, nullptr);
    EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
    return !cntl.Failed() && resp.payload() == "still here";
  };
  ASSERT_TRUE(call_ok());

  auto loop = reactor::EventLoop::create().value();
  bool connected = false;
  Status connect_status;
  auto conn = transport::connect(*loop, client_url(GetParam(), es->url), [&](transport::Connection&, Status s) {
                connected = true;
                connect_status = s;
              }).value();
  ASSERT_TRUE(run_until(*loop, [&] { return connected; }, "connect"));
  RPC_ASSERT_OK(connect_status);

  ASSERT_TRUE(wait_until([&] { return connections(*es) == 2; }, "the server sees both clients"));
  // The bad frame, then more frames the server must drain: 160 KiB it has not read when it
  // decides, which a plain close would turn into a reset.
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += request_before_hello();
  size_t sent = 0;
  ASSERT_TRUE(run_until(*loop, [&] {
    auto w = conn->write({reinterpret_cast<const uint8_t*>(garbage.data()) + sent, garbage.size() - sent});
    if (w.ok()) sent += *w;
    else EXPECT_TRUE(w.status().would_block()) << w.status().to_string();
    return sent == garbage.size() || (!w.ok() && !w.status().would_block());
  }, "sending the garbage"));
  const auto sent_at = std::chrono::steady_clock::now();

  std::string got;
  bool ended = false;
  Status read_error;
  conn->set_read_handler([&](transport::Connection& c) {
    uint8_t buf[4096];
    for (;;) {
      auto r = c.read(buf);
      if (!r.ok()) {
        if (r.status().would_block()) return;
        read_error = r.status();
        ended = true;
        c.set_read_handler(nullptr);
        return;
      }
      if (*r == 0) {
        ended = true;
        c.set_read_handler(nullptr);
        return;
      }
      got.append(reinterpret_cast<const char*>(buf), *r);
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return ended; }, "the server's GOAWAY and end of stream", std::chrono::seconds(30)));
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sent_at).count();
  EXPECT_TRUE(read_error.ok()) << "the server half-closes after its GOAWAY, so the stream ends cleanly, not with "
                               << read_error.to_string();
  auto frames = frames_in(got);
  ASSERT_FALSE(frames.empty()) << "no frame from the server (" << got.size() << " bytes)";
  EXPECT_EQ(frames.back().first.type, wire::FrameType::kGoaway);
  EXPECT_EQ(frames.back().first.code, static_cast<uint32_t>(rpc::ErrorCode::kInvalidArgument));
  EXPECT_NE(frames.back().second.find("not HELLO"), std::string::npos) << frames.back().second;
  // Half-closed, not closed: the end of stream comes from the server's shutdown_write() right
  // after its GOAWAY, not from its close when the drain gives up (after 500 ms).
  EXPECT_LT(elapsed_ms, 400) << "the end of stream came from the server's close, not its shutdown_write()";
  conn->close();

  EXPECT_TRUE(call_ok());
}

INSTANTIATE_TEST_SUITE_P(host, RpcGoaway, ::testing::ValuesIn(rpc_cases("")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(rdma, RpcGoaway, ::testing::ValuesIn(rpc_cases("rdma")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RpcGoaway);

}  // namespace
}  // namespace conduit::rpctest
