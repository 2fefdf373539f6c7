// ClusterChannel over tcp: load-balancing policies, a dead server taken out and brought
// back after it restarts, retries, file-based naming that changes under the channel.
#include <unistd.h>

#include <fstream>
#include <map>
#include <thread>

#include "conduit/rpc/cluster.h"
#include "conduit/rpc/echo.pb.h"
#include "rpc_harness.h"

namespace conduit::rpctest {
namespace {

using rpc::ClusterChannel;
using rpc::ClusterOptions;
using rpc::Controller;
using rpc::echo::EchoRequest;
using rpc::echo::EchoResponse;
using rpc::echo::EchoService_Stub;

std::string call_server(ClusterChannel& ch, bool idempotent = true, int64_t key = -1, Status* st = nullptr) {
  EchoRequest req;
  EchoResponse resp;
  Controller cntl;
  cntl.set_idempotent(idempotent);
  cntl.set_timeout_ms(5000);
  if (key >= 0) cntl.set_request_key(static_cast<uint64_t>(key));
  EchoService_Stub(&ch).Echo(&cntl, &req, &resp, nullptr);
  if (st != nullptr) *st = cntl.status();
  return cntl.Failed() ? "error: " + cntl.ErrorText() : resp.server();
}

ClusterOptions fast() {
  ClusterOptions o;
  o.health_check_ms = 50;
  o.channel.reconnect_backoff_ms = 20;
  o.channel.connect_timeout_ms = 2000;
  return o;
}

TEST(RpcCluster, ThreeServersOneDeadThenItRejoins) {
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  auto b = EchoServer::start("tcp://127.0.0.1:0", {}, "b");
  auto c = ChildServer::start("tcp://127.0.0.1:0", "c");
  ASSERT_TRUE(a && b && c);
  const std::string c_url = c->url();
  auto ch = ClusterChannel::create("list://" + a->url + "," + b->url + "," + c_url, fast()).value();
  std::map<std::string, int> seen;
  for (int i = 0; i < 30; ++i) ++seen[call_server(*ch)];
  EXPECT_EQ(seen["a"], 10);
  EXPECT_EQ(seen["b"], 10);
  EXPECT_EQ(seen["c"], 10);

  c->kill();
  seen.clear();
  for (int i = 0; i < 60; ++i) ++seen[call_server(*ch)];
  EXPECT_EQ(seen["a"] + seen["b"], 60) << "every call succeeds on the live servers";
  ASSERT_TRUE(wait_until([&] {
    for (auto& s : ch->servers()) if (s.url == c_url) return !s.healthy;
    return false;
  }, "c taken out"));

  // Restart c on the same address: the health check brings it back.
  auto c2 = ChildServer::start(c_url, "c");
  ASSERT_TRUE(c2);
  ASSERT_TRUE(wait_until([&] {
    for (auto& s : ch->servers()) if (s.url == c_url) return s.healthy;
    return false;
  }, "c back in", std::chrono::seconds(20)));
  seen.clear();
  for (int i = 0; i < 30; ++i) ++seen[call_server(*ch)];
  EXPECT_GT(seen["c"], 0);
  EXPECT_EQ(seen["a"] + seen["b"] + seen["c"], 30);
}

TEST(RpcCluster, CallsThatNeverReachedAServerAreRetriedEvenIfNotIdempotent) {
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  ASSERT_TRUE(a);
  // A port nobody listens on (bound and closed: refused).
  auto gone = EchoServer::start("tcp://127.0.0.1:0", {}, "gone");
  const std::string dead = gone->url;
  gone.reset();
  auto ch = ClusterChannel::create("list://" + dead + "," + a->url, fast()).value();
  for (int i = 0; i < 10; ++i) {
    Status st;
    EXPECT_EQ(call_server(*ch, /*idempotent=*/false, -1, &st), "a") << st.to_string();
  }
}

TEST(RpcCluster, NonIdempotentCallsAreNotRetriedAfterReachingAServer) {
  auto child = ChildServer::start("tcp://127.0.0.1:0", "x");
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  ASSERT_TRUE(child && a);
  ClusterOptions o = fast();
  o.lb = rpc::LbPolicy::kConsistentHash;
  auto ch = ClusterChannel::create("list://" + child->url() + "," + a->url, o).value();
  // Find a key that lands on the child, then have a slow call there die with it.
  int64_t key = -1;
  for (int64_t k = 0; k < 64 && key < 0; ++k)
    if (call_server(*ch, true, k) == "x") key = k;
  ASSERT_GE(key, 0);
  EchoRequest slow;
  slow.set_sleep_us(10'000'000);
  EchoResponse resp;
  Controller cntl;
  cntl.set_request_key(static_cast<uint64_t>(key));
  auto fut = ch->call_future(echo_method("Echo"), &cntl, &slow, &resp);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  child->kill();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fut.get().code(), Code::kUnavailable);
  EXPECT_EQ(cntl.retries(), 0);
}

TEST(RpcCluster, ConsistentHashingKeepsAKeyOnOneServer) {
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  auto b = EchoServer::start("tcp://127.0.0.1:0", {}, "b");
  auto c = EchoServer::start("tcp://127.0.0.1:0", {}, "c");
  ASSERT_TRUE(a && b && c);
  ClusterOptions o = fast();
  o.lb = rpc::LbPolicy::kConsistentHash;
  auto ch = ClusterChannel::create("list://" + a->url + "," + b->url + "," + c->url, o).value();
  std::map<std::string, int> spread;
  for (int64_t k = 0; k < 60; ++k) {
    const std::string first = call_server(*ch, true, k);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(call_server(*ch, true, k), first) << "key " << k;
    ++spread[first];
  }
  EXPECT_EQ(spread.size(), 3u) << "60 keys over 3 servers";
}

TEST(RpcCluster, RandomPolicyUsesEveryServer) {
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  auto b = EchoServer::start("tcp://127.0.0.1:0", {}, "b");
  ASSERT_TRUE(a && b);
  ClusterOptions o = fast();
  o.lb = rpc::LbPolicy::kRandom;
  auto ch = ClusterChannel::create("list://" + a->url + "," + b->url, o).value();
  std::map<std::string, int> seen;
  for (int i = 0; i < 100; ++i) ++seen[call_server(*ch)];
  EXPECT_GT(seen["a"], 10);
  EXPECT_GT(seen["b"], 10);
  EXPECT_EQ(seen["a"] + seen["b"], 100);
}

TEST(RpcCluster, FileNamingFollowsTheFile) {
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  auto b = EchoServer::start("tcp://127.0.0.1:0", {}, "b");
  ASSERT_TRUE(a && b);
  const std::string path = ::testing::TempDir() + "rpc_servers_" + std::to_string(getpid());
  std::ofstream(path) << "# servers\n" << a->url << "\n";
  auto ch = ClusterChannel::create("file://" + path + "?poll_ms=50", fast()).value();
  EXPECT_EQ(call_server(*ch), "a");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a new mtime
  std::ofstream(path) << a->url << "\n\n" << b->url << "\n";
  ASSERT_TRUE(wait_until([&] { return ch->servers().size() == 2; }, "the second server from the file"));
  std::map<std::string, int> seen;
  for (int i = 0; i < 10; ++i) ++seen[call_server(*ch)];
  EXPECT_EQ(seen["a"], 5);
  EXPECT_EQ(seen["b"], 5);
  std::ofstream(path) << b->url << "\n";
  ASSERT_TRUE(wait_until([&] { return ch->servers().size() == 1; }, "a removed"));
  EXPECT_EQ(call_server(*ch), "b");
  ::unlink(path.c_str());
}

TEST(RpcCluster, NamingErrorsAreClear) {
  EXPECT_EQ(rpc::make_naming("nothing").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(rpc::make_naming("dns://x").status().code(), Code::kNotFound);
  EXPECT_FALSE(ClusterChannel::create("file:///nonexistent/servers").ok());
  // A registry can be added without touching the channel.
  RPC_ASSERT_OK(rpc::register_naming("fixed", [](std::string_view rest) { return rpc::make_naming("list://" + std::string(rest)); }));
  auto a = EchoServer::start("tcp://127.0.0.1:0", {}, "a");
  auto ch = ClusterChannel::create("fixed://" + a->url).value();
  EXPECT_EQ(call_server(*ch), "a");
}

}  // namespace
}  // namespace conduit::rpctest
