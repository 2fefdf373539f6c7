// Calls over every transport row: sync/async/future, deadlines, cancellation, errors,
// metadata and interceptors, size limits, many concurrent calls, attachments, graceful
// shutdown, a killed server, the status service.
#include <atomic>
#include <future>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/rpc/echo.pb.h"
#include "conduit/rpc/status.pb.h"
#include "rpc_harness.h"

namespace conduit::rpctest {
namespace {

using rpc::Channel;
using rpc::Controller;
using rpc::ErrorCode;
using rpc::echo::EchoRequest;
using rpc::echo::EchoResponse;
using rpc::echo::EchoService_Stub;

struct Fixture {
  std::unique_ptr<EchoServer> es;
  std::unique_ptr<Channel> ch;
};

Fixture make(const TransportCase& row, rpc::ServerOptions so = {}, rpc::ChannelOptions co = {}) {
  Fixture f;
  const std::string url = listen_url_or_skip(row);
  if (url.empty()) return f;
  f.es = EchoServer::start(url, so);
  if (!f.es) return f;
  auto ch = Channel::create(client_url(row, f.es->url), co);
  if (!ch.ok()) {
    ADD_FAILURE() << ch.status().to_string();
    return f;
  }
  f.ch = std::move(*ch);
  return f;
}

#define MAKE_OR_SKIP(f, ...)                                 \
  auto f = make(GetParam(), ##__VA_ARGS__);                  \
  if (!f.ch) {                                               \
    if (!HasFailure()) GTEST_SKIP() << "row not available";  \
    return;                                                  \
  }

TEST_P(RpcTest, SyncAsyncAndFutureCalls) {
  MAKE_OR_SKIP(f);
  EchoService_Stub stub(f.ch.get());
  EchoRequest req;
  req.set_payload("hello");
  EchoResponse resp;
  Controller cntl;
  stub.Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ(resp.payload(), "hello");

  // Asynchronous with protobuf's Closure: done runs on the channel's thread.
  Controller c2;
  EchoResponse r2;
  std::promise<void> p;
  struct Done : google::protobuf::Closure {
    std::promise<void>* p;
    void Run() override { p->set_value(); }
  } done;
  done.p = &p;
  req.set_payload("async");
  stub.Echo(&c2, &req, &r2, &done);
  ASSERT_EQ(p.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ASSERT_FALSE(c2.Failed()) << c2.ErrorText();
  EXPECT_EQ(r2.payload(), "async");

  // Future.
  Controller c3;
  EchoResponse r3;
  req.set_payload("future");
  auto fut = f.ch->call_future(echo_method("Echo"), &c3, &req, &r3);
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  RPC_ASSERT_OK(fut.get());
  EXPECT_EQ(r3.payload(), "future");
  EXPECT_GT(c3.latency_us(), 0u);
}

TEST_P(RpcTest, CallsOnTheCallersLoop) {
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) GTEST_SKIP() << "row not available";
  auto es = EchoServer::start(url);
  ASSERT_TRUE(es);
  auto loop = reactor::EventLoop::create().value();
  auto ch = Channel::create(*loop, client_url(GetParam(), es->url)).value();
  EchoService_Stub stub(ch.get());
  // Synchronous on the loop's own thread: the call drives the loop.
  EchoRequest req;
  req.set_payload("on-loop");
  EchoResponse resp;
  Controller cntl;
  stub.Echo(&cntl, &req, &resp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ(resp.payload(), "on-loop");
  // Asynchronous, std::function flavour.
  int done = 0;
  std::vector<Controller> cs(100);
  std::vector<EchoResponse> rs(100);
  for (int i = 0; i < 100; ++i) ch->call(echo_method("Echo"), &cs[i], &req, &rs[i], [&done] { ++done; });
  ASSERT_TRUE(run_until(*loop, [&] { return done == 100; }, "100 async calls"));
  for (auto& c : cs) EXPECT_FALSE(c.Failed()) << c.ErrorText();
}

TEST_P(RpcTest, DeadlineFiresAndReachesTheServer) {
  MAKE_OR_SKIP(f);
  EchoService_Stub stub(f.ch.get());
  EchoRequest req;
  req.set_sleep_us(3'000'000);
  EchoResponse resp;
  Controller cntl;
  cntl.set_timeout_ms(100);
  const uint64_t t0 = monotonic_ns();
  stub.Echo(&cntl, &req, &resp, nullptr);
  const double ms = (monotonic_ns() - t0) / 1e6;
  ASSERT_TRUE(cntl.Failed());
  EXPECT_EQ(cntl.error_code(), ErrorCode::kDeadlineExceeded) << cntl.ErrorText();
  EXPECT_GE(ms, 90);
  EXPECT_LT(ms, 2500);
  // The server learnt of it (deadline carried in the request, CANCEL sent).
  EXPECT_TRUE(wait_until([&] { return f.es->service.cancelled_seen() >= 1; }, "server-side cancellation"));
}

TEST_P(RpcTest, CancelFromTheClientReachesTheServer) {
  MAKE_OR_SKIP(f);
  EchoRequest req;
  req.set_sleep_us(5'000'000);
  EchoResponse resp;
  Controller cntl;
  auto fut = f.ch->call_future(echo_method("Echo"), &cntl, &req, &resp);
  ASSERT_TRUE(wait_until([&] { return f.es->server->calls_in_flight() == 1; }, "call in flight"));
  cntl.StartCancel();  // from this (non-loop) thread
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  const Status s = fut.get();
  EXPECT_EQ(s.code(), Code::kCancelled) << s.to_string();
  EXPECT_EQ(cntl.error_code(), ErrorCode::kCancelled);
  EXPECT_TRUE(wait_until([&] { return f.es->service.cancelled_seen() >= 1; }, "server saw the cancel"));
  // The connection is still good.
  Controller c2;
  EchoRequest r2;
  r2.set_payload("after");
  EchoService_Stub(f.ch.get()).Echo(&c2, &r2, &resp, nullptr);
  EXPECT_FALSE(c2.Failed()) << c2.ErrorText();
}

TEST_P(RpcTest, ServerErrorCodesAndMessagesReachTheCaller) {
  MAKE_OR_SKIP(f);
  EchoService_Stub stub(f.ch.get());
  for (ErrorCode code : {ErrorCode::kCancelled, ErrorCode::kDeadlineExceeded, ErrorCode::kUnavailable,
                         ErrorCode::kResourceExhausted, ErrorCode::kInvalidArgument, ErrorCode::kUnimplemented,
                         ErrorCode::kInternal}) {
    EchoRequest req;
    req.set_fail_code(static_cast<uint32_t>(code));
    req.set_fail_text("because " + std::string(rpc::error_code_name(code)));
    EchoResponse resp;
    Controller cntl;
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(cntl.error_code(), code);
    EXPECT_EQ(cntl.ErrorText(), "because " + std::string(rpc::error_code_name(code)));
  }
}

class TokenCheck : public rpc::ServerInterceptor {
 public:
  Status before(const rpc::CallInfo& call, Controller& cntl) override {
    seen.fetch_add(1);
    if (call.method.rfind("conduit.rpc.echo.", 0) != 0) return Status::Ok();
    const std::string* t = rpc::find_meta(cntl.request_metadata(), "token");
    if (t == nullptr || *t != "secret") return Status(Code::kPermissionDenied, "bad or missing token");
    return Status::Ok();
  }
  void after(const rpc::CallInfo&, const Controller&, uint64_t) override { after_seen.fetch_add(1); }
  std::atomic<int> seen{0}, after_seen{0};
};

class AddToken : public rpc::ClientInterceptor {
 public:
  Status before(std::string_view, Controller& cntl) override {
    cntl.request_metadata().emplace_back("token", "secret");
    cntl.request_metadata().emplace_back("trace-id", "t-" + std::to_string(++n));
    return Status::Ok();
  }
  void after(std::string_view, const Controller&) override { ++after_n; }
  int n = 0, after_n = 0;
};

TEST_P(RpcTest, MetadataAndInterceptors) {
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) GTEST_SKIP() << "row not available";
  auto es = std::make_unique<EchoServer>("");
  es->server = rpc::Server::create().value();
  auto check = std::make_shared<TokenCheck>();
  es->server->add_interceptor(check);
  RPC_ASSERT_OK(es->server->add_service(&es->service));
  auto bound = es->server->listen(url);
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  // Without the token: rejected by the server interceptor, message intact.
  auto plain = Channel::create(client_url(GetParam(), *bound)).value();
  EchoRequest req;
  EchoResponse resp;
  Controller c1;
  EchoService_Stub(plain.get()).Echo(&c1, &req, &resp, nullptr);
  EXPECT_EQ(c1.error_code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c1.ErrorText(), "bad or missing token");
  // With the client interceptor: accepted; trace-id comes back as response metadata.
  rpc::ChannelOptions co;
  auto add = std::make_shared<AddToken>();
  co.interceptors.push_back(add);
  auto ch = Channel::create(client_url(GetParam(), *bound), co).value();
  Controller c2;
  EchoService_Stub(ch.get()).Echo(&c2, &req, &resp, nullptr);
  ASSERT_FALSE(c2.Failed()) << c2.ErrorText();
  const std::string* t = rpc::find_meta(c2.response_metadata(), "trace-id");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(*t, "t-1");
  EXPECT_EQ(add->after_n, 1);
  EXPECT_EQ(check->seen.load(), 2);
  EXPECT_TRUE(wait_until([&] { return check->after_seen.load() == 2; }, "after() of both calls"));
}

TEST_P(RpcTest, OversizedMessagesAreRefusedClearly) {
  rpc::ServerOptions so;
  so.max_request_bytes = 1 << 20;
  MAKE_OR_SKIP(f, so);
  EchoService_Stub stub(f.ch.get());
  for (int round = 0; round < 2; ++round) {  // before and after the server's HELLO is known
    EchoRequest req;
    req.mutable_payload()->assign((1 << 20) + 1, 'x');
    EchoResponse resp;
    Controller cntl;
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(cntl.error_code(), ErrorCode::kResourceExhausted) << cntl.ErrorText();
    EXPECT_NE(cntl.ErrorText().find("1048576"), std::string::npos) << cntl.ErrorText();
  }
  // Too big a response: the client's limit.
  rpc::ChannelOptions co;
  co.max_response_bytes = 4096;
  auto small = Channel::create(client_url(GetParam(), f.es->url), co).value();
  EchoRequest big;
  big.set_response_size(100000);
  EchoResponse resp;
  Controller c2;
  EchoService_Stub(small.get()).Echo(&c2, &big, &resp, nullptr);
  EXPECT_EQ(c2.error_code(), ErrorCode::kResourceExhausted) << c2.ErrorText();
  EXPECT_NE(c2.ErrorText().find("4096"), std::string::npos) << c2.ErrorText();
  // Both connections still serve normal calls.
  EchoRequest ok;
  ok.set_payload("fine");
  Controller c3, c4;
  stub.Echo(&c3, &ok, &resp, nullptr);
  EXPECT_FALSE(c3.Failed()) << c3.ErrorText();
  EchoService_Stub(small.get()).Echo(&c4, &ok, &resp, nullptr);
  EXPECT_FALSE(c4.Failed()) << c4.ErrorText();
}

TEST_P(RpcTest, TenThousandConcurrentCallsOnOneConnection) {
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) GTEST_SKIP() << "row not available";
  auto es = EchoServer::start(url);
  ASSERT_TRUE(es);
  auto loop = reactor::EventLoop::create().value();
  auto ch = Channel::create(*loop, client_url(GetParam(), es->url)).value();
  constexpr int kCalls = 10000;
  std::vector<EchoRequest> reqs(kCalls);
  std::vector<EchoResponse> resps(kCalls);
  std::vector<Controller> cntls(kCalls);
  int done = 0;
  for (int i = 0; i < kCalls; ++i) {
    reqs[i].set_payload(std::to_string(i));
    ch->call(echo_method("Echo"), &cntls[i], &reqs[i], &resps[i], [&done] { ++done; });
  }
  EXPECT_EQ(ch->in_flight(), static_cast<size_t>(kCalls) - static_cast<size_t>(done));
  ASSERT_TRUE(run_until(*loop, [&] { return done == kCalls; }, "10000 calls"));
  int bad = 0;
  for (int i = 0; i < kCalls; ++i)
    if (cntls[i].Failed() || resps[i].payload() != std::to_string(i)) ++bad;
  EXPECT_EQ(bad, 0);
}

TEST_P(RpcTest, BackpressureBoundsCallsInFlight) {
  rpc::ChannelOptions co;
  co.max_inflight = 8;
  MAKE_OR_SKIP(f, {}, co);
  EchoRequest slow;
  slow.set_sleep_us(200'000);
  std::vector<Controller> cs(12);
  std::vector<EchoResponse> rs(12);
  std::vector<std::future<Status>> fs;
  for (int i = 0; i < 12; ++i) fs.push_back(f.ch->call_future(echo_method("Echo"), &cs[i], &slow, &rs[i]));
  int exhausted = 0, ok = 0;
  for (auto& fu : fs) {
    Status s = fu.get();
    if (s.ok()) ++ok;
    if (s.code() == Code::kResourceExhausted) ++exhausted;
  }
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(exhausted, 4);
}

TEST_P(RpcTest, AttachmentsByteForByte) {
  MAKE_OR_SKIP(f);
  const bool tiny_ring = GetParam().name == "shm_ring4k";
  std::vector<size_t> sizes = {1, 1000, (64 << 10) + 3, 1 << 20};
  if (!tiny_ring) {
    sizes.push_back(16 << 20);
    sizes.push_back(64 << 20);
  }
  EchoService_Stub stub(f.ch.get());
  for (size_t n : sizes) {
    std::string bytes(n, '\0');
    uint64_t x = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      bytes[i] = static_cast<char>(x >> 56);
    }
    EchoRequest req;
    req.set_echo_attachment(true);
    EchoResponse resp;
    Controller cntl;
    cntl.set_timeout_ms(60000);
    cntl.request_attachment().append(bytes);
    stub.Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << n << ": " << cntl.ErrorText();
    ASSERT_EQ(cntl.response_attachment().size(), n);
    EXPECT_TRUE(cntl.response_attachment().to_string() == bytes) << "attachment of " << n << " bytes differs";
  }
}

TEST_P(RpcTest, GracefulShutdownFinishesInFlightCallsAndRefusesNewOnes) {
  MAKE_OR_SKIP(f);
  EchoRequest slow;
  slow.set_sleep_us(300'000);
  EchoResponse resp;
  Controller cntl;
  auto fut = f.ch->call_future(echo_method("Echo"), &cntl, &slow, &resp);
  ASSERT_TRUE(wait_until([&] { return f.es->server->calls_in_flight() == 1; }, "call in flight"));
  auto stopping = std::async(std::launch::async, [&] { return f.es->server->shutdown(10000); });
  RPC_ASSERT_OK(fut.get());  // finished, not cut off
  RPC_ASSERT_OK(stopping.get());
  EchoRequest req;
  Controller c2;
  EchoService_Stub(f.ch.get()).Echo(&c2, &req, &resp, nullptr);
  EXPECT_EQ(c2.error_code(), ErrorCode::kUnavailable) << c2.ErrorText();
}

TEST_P(RpcTest, KilledServerFailsEveryPendingCallWithUnavailable) {
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) GTEST_SKIP() << "row not available";
  auto child = ChildServer::start(url);
  ASSERT_TRUE(child);
  auto ch = Channel::create(client_url(GetParam(), child->url())).value();
  EchoRequest req;
  req.set_payload("warm");
  EchoResponse resp;
  Controller warm;
  EchoService_Stub(ch.get()).Echo(&warm, &req, &resp, nullptr);
  ASSERT_FALSE(warm.Failed()) << warm.ErrorText();
  constexpr int kCalls = 50;
  std::vector<Controller> cs(kCalls);
  std::vector<EchoResponse> rs(kCalls);
  EchoRequest slow;
  slow.set_sleep_us(30'000'000);
  std::vector<std::future<Status>> fs;
  for (int i = 0; i < kCalls; ++i) {
    cs[i].set_timeout_ms(20000);
    fs.push_back(ch->call_future(echo_method("Echo"), &cs[i], &slow, &rs[i]));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t t0 = monotonic_ns();
  child->kill();
  for (auto& fu : fs) {
    ASSERT_EQ(fu.wait_for(std::chrono::seconds(15)), std::future_status::ready) << "a call hangs after the kill";
    const Status s = fu.get();
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.to_string();
  }
  EXPECT_LT((monotonic_ns() - t0) / 1e9, 15.0);
}

TEST_P(RpcTest, StatusServiceReportsMethodsAndConnections) {
  MAKE_OR_SKIP(f);
  EchoService_Stub stub(f.ch.get());
  for (int i = 0; i < 20; ++i) {
    EchoRequest req;
    EchoResponse resp;
    Controller cntl;
    if (i % 5 == 0) req.set_fail_code(7);
    stub.Echo(&cntl, &req, &resp, nullptr);
  }
  rpc::StatusService_Stub status(f.ch.get());
  rpc::StatusRequest sreq;
  rpc::StatusResponse sresp;
  Controller cntl;
  status.GetStatus(&cntl, &sreq, &sresp, nullptr);
  ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
  bool found = false;
  for (const auto& m : sresp.methods()) {
    if (m.name() != "conduit.rpc.echo.EchoService/Echo") continue;
    found = true;
    EXPECT_EQ(m.calls(), 20u);
    EXPECT_EQ(m.errors(), 4u);
    EXPECT_EQ(m.kind(), "unary");
    EXPECT_GT(m.p50_us(), 0);
    EXPECT_GE(m.p999_us(), m.p50_us());
  }
  EXPECT_TRUE(found) << sresp.DebugString();
  ASSERT_EQ(sresp.connections_size(), 1) << sresp.DebugString();
  EXPECT_EQ(sresp.connections(0).transport(), GetParam().scheme == "auto" ? "tcp" : GetParam().scheme);
  EXPECT_EQ(sresp.listen_urls_size(), 1);
  // The schemas, for tools.
  rpc::ProtosRequest preq;
  rpc::ProtosResponse presp;
  Controller c2;
  status.GetProtos(&c2, &preq, &presp, nullptr);
  ASSERT_FALSE(c2.Failed()) << c2.ErrorText();
  EXPECT_FALSE(presp.file_descriptor_set().empty());
}

TEST_P(RpcTest, WorkerPoolAndPerMethodLimits) {
  rpc::ServerOptions so;
  so.worker_threads = 2;
  const std::string url = listen_url_or_skip(GetParam());
  if (url.empty()) GTEST_SKIP() << "row not available";
  auto es = std::make_unique<EchoServer>("");
  es->server = rpc::Server::create(so).value();
  RPC_ASSERT_OK(es->server->add_service(&es->service));
  RPC_ASSERT_OK(es->server->set_method_limit("conduit.rpc.echo.EchoService/Echo", 3));
  EXPECT_EQ(es->server->set_method_limit("conduit.rpc.echo.EchoService/Nope", 3).code(), Code::kNotFound);
  auto bound = es->server->listen(url);
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  rpc::ChannelOptions co;
  co.connections = 3;  // a pool: calls spread over three connections
  auto ch = Channel::create(client_url(GetParam(), *bound), co).value();
  // Quick calls through the workers, three at a time (the limit).
  std::vector<std::future<Status>> fs;
  for (int round = 0; round < 20; ++round) {
    std::vector<Controller> cs(3);
    std::vector<EchoResponse> rs(3);
    std::vector<EchoRequest> qs(3);
    fs.clear();
    for (int i = 0; i < 3; ++i) {
      qs[i].set_payload(std::to_string(round * 3 + i));
      fs.push_back(ch->call_future(echo_method("Echo"), &cs[i], &qs[i], &rs[i]));
    }
    for (int i = 0; i < 3; ++i) {
      RPC_ASSERT_OK(fs[i].get());
      EXPECT_EQ(rs[i].payload(), std::to_string(round * 3 + i));
    }
  }
  // Five slow calls against a limit of three: two refused with resource-exhausted.
  EchoRequest slow;
  slow.set_sleep_us(300'000);
  std::vector<Controller> sc(5);
  std::vector<EchoResponse> sr(5);
  fs.clear();
  for (int i = 0; i < 5; ++i) fs.push_back(ch->call_future(echo_method("Echo"), &sc[i], &slow, &sr[i]));
  int ok = 0, refused = 0;
  for (auto& f : fs) {
    const Status st = f.get();
    if (st.ok()) ++ok;
    if (st.code() == Code::kResourceExhausted) ++refused;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(refused, 2);
  rpc::StatusResponse sresp;
  es->server->status(&sresp);
  EXPECT_EQ(sresp.connections_size(), 3) << sresp.DebugString();
  EXPECT_EQ(sresp.worker_threads(), 2u);
  for (const auto& m : sresp.methods()) {
    if (m.name() == "conduit.rpc.echo.EchoService/Echo") {
      EXPECT_EQ(m.rejected(), 2u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(host, RpcTest, ::testing::ValuesIn(rpc_cases("")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(rdma, RpcTest, ::testing::ValuesIn(rpc_cases("rdma")),
                         [](const ::testing::TestParamInfo<TransportCase>& p) { return p.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RpcTest);

}  // namespace
}  // namespace conduit::rpctest
