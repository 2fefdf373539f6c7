// Shared machinery of the rpc suites: the transport rows (the conformance table's, a
// subset), a server with the echo service on a row's URL, loop driving with deadlines, and
// a child-process server for the kill tests.  Never wait without a deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/rpc/channel.h"
#include "conduit/rpc/server.h"
#include "conformance/transport_table.h"
#include "echo_service.h"

namespace conduit::rpctest {

using conformance::TransportCase;

#define RPC_ASSERT_OK(expr)                                   \
  do {                                                        \
    const ::conduit::Status rpc_s_ = (expr);                  \
    ASSERT_TRUE(rpc_s_.ok()) << rpc_s_.to_string();           \
  } while (0)

// The rows the rpc suites run on: tcp, shm, shm_ring4k (a ring smaller than most frames),
// and the rdma rows (label rdma, Soft-RoCE guest).
std::vector<TransportCase> rpc_cases(std::string_view label);
// A fresh listen URL for the row, or skips the test (fails under CONDUIT_REQUIRE_RDMA=1).
std::string listen_url_or_skip(const TransportCase& c);
// Adds the row's connect options to a URL the server returned.
std::string client_url(const TransportCase& c, const std::string& bound);

::testing::AssertionResult run_until(reactor::EventLoop& loop, const std::function<bool()>& done,
                                     const std::string& what, std::chrono::milliseconds limit = std::chrono::seconds(60));
// Polls done() (from another thread's point of view) until true or the deadline.
::testing::AssertionResult wait_until(const std::function<bool()>& done, const std::string& what,
                                      std::chrono::milliseconds limit = std::chrono::seconds(60));

const google::protobuf::MethodDescriptor* echo_method(const char* name);

// A server with the echo service.
struct EchoServer {
  static std::unique_ptr<EchoServer> start(const std::string& url, rpc::ServerOptions o = {}, std::string name = "");
  rpc::EchoServiceImpl service;
  std::unique_ptr<rpc::Server> server;
  std::string url;  // bound
  explicit EchoServer(std::string name) : service(std::move(name)) {}
};

// A server in a child process (exec of this test binary with --rpc-serve), for kill tests.
class ChildServer {
 public:
  // Starts it on `listen_url`; url() is the bound URL.  name: the echo service's name.
  static std::unique_ptr<ChildServer> start(const std::string& listen_url, const std::string& name = "child");
  ~ChildServer();
  void kill();  // SIGKILL and reap
  const std::string& url() const { return url_; }
  bool alive() const { return pid_ > 0; }

 private:
  int pid_ = -1;
  std::string url_;
};
// The child's side: `argv[0] --rpc-serve URL NAME`; prints "url <bound>\n" and serves.
bool is_child_invocation(int argc, char** argv);
int child_main(int argc, char** argv);

class RpcTest : public ::testing::TestWithParam<TransportCase> {};

}  // namespace conduit::rpctest
