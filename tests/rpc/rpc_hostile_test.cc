// Hostile and broken peers over raw TCP sockets: another wire version, garbage, frames out
// of order, unknown methods.  Each gets a clear error (a GOAWAY it can read) and a closed
// connection, and no other connection notices.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "conduit/base/fd.h"
#include "conduit/rpc/echo.pb.h"
#include "conduit/transport/connection.h"
#include "conduit/transport/endpoint.h"
#include "rpc_harness.h"
#include "wire.h"

namespace conduit::rpctest {
namespace {

namespace wire = rpc::wire;
using rpc::echo::EchoRequest;
using rpc::echo::EchoResponse;

std::string frame(wire::FrameType t, uint64_t id = 0, uint32_t code = 0, std::string body = "", uint64_t arg = 0,
                  uint8_t version = wire::kVersion) {
  wire::FrameHeader h;
  h.type = t;
  h.call_id = id;
  h.code = code;
  h.body_len = static_cast<uint32_t>(body.size());
  h.arg = arg;
  h.version = version;
  std::string out(wire::kHeaderSize, '\0');
  wire::encode_header(h, reinterpret_cast<uint8_t*>(out.data()));
  return out + body;
}
std::string hello() { return frame(wire::FrameType::kHello, 0, 0, "", 65536); }

struct Raw {
  UniqueFd fd;
  explicit Raw(const std::string& url) {
    auto ep = transport::Endpoint::parse(url).value();
    auto hp = ep.host_port().value();
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(hp.second);
    inet_pton(AF_INET, hp.first.c_str(), &a.sin_addr);
    timeval tv{10, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  void send(const std::string& s) { ASSERT_EQ(::send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }
  // Everything until EOF (or the receive timeout): the server's frames.
  std::string drain() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }
};

struct Seen {
  std::vector<wire::FrameHeader> frames;
  std::vector<std::string> messages;
};
Seen parse_all(const std::string& bytes) {
  Seen s;
  wire::FrameParser p({});
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  for (;;) {
    auto ev = p.next(in);
    if (ev.kind != wire::FrameParser::Kind::kFrame) break;
    s.frames.push_back(ev.header);
    std::string msg;
    (void)wire::decode_meta(in.subspan(wire::kHeaderSize, ev.header.meta_len), nullptr, &msg);
    s.messages.push_back(msg);
    in = in.subspan(ev.frame_bytes);
  }
  return s;
}

class RpcHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    es = EchoServer::start("tcp://127.0.0.1:0");
    ASSERT_TRUE(es);
    good = rpc::Channel::create(es->url).value();
    ASSERT_TRUE(call_ok());
  }
  // A well-behaved client on its own connection keeps working.
  bool call_ok() {
    EchoRequest req;
    req.set_payload("still here");
    EchoResponse resp;
    rpc::Controller cntl;
    rpc::echo::EchoService_Stub(good.get()).Echo(&cntl, &req, &resp, nullptr);
    EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
    return !cntl.Failed() && resp.payload() == "still here";
  }
  // The server's last frame is a GOAWAY with `code` whose message mentions `what`.
  void expect_goaway(const std::string& got, rpc::ErrorCode code, const std::string& what) {
    Seen s = parse_all(got);
    ASSERT_FALSE(s.frames.empty()) << "no frame from the server";
    EXPECT_EQ(s.frames.back().type, wire::FrameType::kGoaway);
    EXPECT_EQ(s.frames.back().code, static_cast<uint32_t>(code));
    EXPECT_NE(s.messages.back().find(what), std::string::npos) << s.messages.back();
  }
  std::unique_ptr<EchoServer> es;
  std::unique_ptr<rpc::Channel> good;
};

TEST_F(RpcHostile, AnotherWireVersionGetsAClearErrorAndAClose) {
  Raw r(es->url);
  r.send(frame(wire::FrameType::kHello, 0, 0, "", 65536, /*version=*/2));
  expect_goaway(r.drain(), rpc::ErrorCode::kUnimplemented, "wire version 2");
  EXPECT_TRUE(call_ok());
}

TEST_F(RpcHostile, GarbageClosesOnlyThatConnection) {
  Raw r(es->url);
  r.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(100, 'x'));
  expect_goaway(r.drain(), rpc::ErrorCode::kInvalidArgument, "bad magic");
  EXPECT_TRUE(call_ok());
}

TEST_F(RpcHostile, FramesBeforeHelloOrFromTheWrongSide) {
  {
    Raw r(es->url);
    r.send(frame(wire::FrameType::kRequest, 1, 0));
    expect_goaway(r.drain(), rpc::ErrorCode::kInvalidArgument, "not HELLO");
  }
  {
    Raw r(es->url);
    r.send(hello() + frame(wire::FrameType::kResponse, 1, 0));
    expect_goaway(r.drain(), rpc::ErrorCode::kInvalidArgument, "unexpected RESPONSE");
  }
  {
    Raw r(es->url);
    r.send(hello() + hello());
    expect_goaway(r.drain(), rpc::ErrorCode::kInvalidArgument, "second HELLO");
  }
  EXPECT_TRUE(call_ok());
}

TEST_F(RpcHostile, UnknownMethodsAndUnparsableRequestsGetErrorsNotCloses) {
  Raw r(es->url);
  const uint32_t echo_id = wire::method_id("conduit.rpc.echo.EchoService/Echo");
  r.send(hello() + frame(wire::FrameType::kRequest, 1, 0xdeadbeef, "", 0) +
         frame(wire::FrameType::kRequest, 2, echo_id, "\xff\xff\xff", 0) +
         frame(wire::FrameType::kRequest, 3, echo_id, std::string("\x0a\x02hi", 4), 0) +
         frame(wire::FrameType::kPing, 0, 0, "", 42));
  ::shutdown(r.fd.get(), SHUT_WR);
  Seen s = parse_all(r.drain());
  ASSERT_GE(s.frames.size(), 5u);  // HELLO, 3 responses, PONG
  EXPECT_EQ(s.frames[0].type, wire::FrameType::kHello);
  EXPECT_EQ(s.frames[1].code, static_cast<uint32_t>(rpc::ErrorCode::kUnimplemented));
  EXPECT_NE(s.messages[1].find("0xdeadbeef"), std::string::npos) << s.messages[1];
  EXPECT_EQ(s.frames[2].code, static_cast<uint32_t>(rpc::ErrorCode::kInvalidArgument));
  EXPECT_EQ(s.frames[3].code, 0u);
  EXPECT_EQ(s.frames[3].call_id, 3u);
  EXPECT_EQ(s.frames[4].type, wire::FrameType::kPong);
  EXPECT_EQ(s.frames[4].arg, 42u);
  EXPECT_TRUE(call_ok());
}

TEST_F(RpcHostile, AServerOfAnotherVersionFailsCallsWithUnimplemented) {
  // A fake server answering in version 2: the client's calls fail clearly, nothing hangs.
  auto loop = reactor::EventLoop::create().value();
  std::unique_ptr<transport::Connection> peer;
  auto l = transport::listen(*loop, "tcp://127.0.0.1:0", [&](std::unique_ptr<transport::Connection> c) {
    peer = std::move(c);
    const std::string f = frame(wire::FrameType::kHello, 0, 0, "", 65536, 2);
    (void)peer->write({reinterpret_cast<const uint8_t*>(f.data()), f.size()});
  }).value();
  auto ch = rpc::Channel::create(*loop, l->url()).value();
  EchoRequest req;
  EchoResponse resp;
  rpc::Controller cntl;
  bool done = false;
  ch->call(echo_method("Echo"), &cntl, &req, &resp, [&] { done = true; });
  ASSERT_TRUE(run_until(*loop, [&] { return done; }, "the call to fail"));
  EXPECT_EQ(cntl.error_code(), rpc::ErrorCode::kUnavailable) << cntl.ErrorText();
  EXPECT_NE(cntl.ErrorText().find("wire version 2"), std::string::npos) << cntl.ErrorText();
}

}  // namespace
}  // namespace conduit::rpctest
