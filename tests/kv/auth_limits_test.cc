// Limits before AUTH (issue 9, item 3), on every transport: with requirepass set, a client
// that has not authenticated may send at most 10 arguments of at most 16 KiB
// ("-ERR Protocol error: unauthenticated multibulk length / bulk length", then the
// connection is closed, as in Redis), and may not queue more than 1 KiB of counted output
// (Redis' fix for CVE-2025-21605).  After AUTH the configured limits apply, also to a
// command pipelined right behind the AUTH.
//
// The rules live above the transport (client_limits.h), so the same cases run over tcp
// and shm here, and over rdma in the Soft-RoCE guest (kv_auth_limits_rdma_test, built with
// CONDUIT_KV_AUTH_LIMITS_RDMA, label `rdma`).
#include <gtest/gtest.h>

#include <cstdlib>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;

constexpr const char* kPassword = "s3cret";

class AuthLimits : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.requirepass = kPassword;
#ifdef CONDUIT_KV_AUTH_LIMITS_RDMA
    const char* addr = std::getenv("CONDUIT_RDMA_ADDR");
    if (addr == nullptr || *addr == '\0') {
      unavailable_ = "CONDUIT_RDMA_ADDR (an address on the RDMA netdev) is not set";
      return;
    }
    o.tcp = false;
    o.bind = addr;
    o.listen.push_back("rdma://" + std::string(addr) + ":0");
#else
    o.port = 0;
    if (testing::shm_available()) o.listen.push_back("shm://" + testing::unique_name("kv-auth"));
#endif
    server_ = new ServerThread(o);
    if (!server_->ok()) unavailable_ = "server: " + server_->status().to_string();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (GetParam() == "shm" && !testing::shm_available()) GTEST_SKIP() << "shm transport not available";
    if (!unavailable_.empty()) {
      const char* req = std::getenv("CONDUIT_REQUIRE_RDMA");
      if (GetParam() == "rdma" && (req == nullptr || std::string(req) != "1"))
        GTEST_SKIP() << unavailable_ << "; run the `rdma` tests in the testbed: testbed/run ctest -L rdma";
      FAIL() << unavailable_;
    }
    url_ = server_->url(GetParam());
    ASSERT_FALSE(url_.empty());
  }
  std::unique_ptr<Client> connect(bool authenticated) {
    ClientOptions co;
    if (authenticated) co.password = kPassword;
    auto c = Client::connect(url_, co);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // The server answered `error` and closed the connection.
  static void expect_refused_and_closed(Client& c, const std::vector<std::string>& cmd, const std::string& error) {
    EXPECT_EQ(fmt(c.command(cmd)), error);
    EXPECT_FALSE(c.command({"PING"}).ok()) << "still open after " << error;
  }

  static ServerThread* server_;
  static std::string unavailable_;
  std::string url_;
};
ServerThread* AuthLimits::server_ = nullptr;
std::string AuthLimits::unavailable_;

TEST_P(AuthLimits, TenArgumentsOf16KiBBeforeAuth) {
  auto c = connect(false);
  ASSERT_TRUE(c);
  // At the limits: an ordinary NOAUTH.
  std::vector<std::string> at_limits(10, std::string(16384, 'a'));
  at_limits[0] = "PING";
  EXPECT_EQ(fmt(c->command(at_limits)), "-NOAUTH Authentication required.");
  // One argument more: refused and closed.
  expect_refused_and_closed(*c, std::vector<std::string>(11, "a"), "-ERR Protocol error: unauthenticated multibulk length");
  auto c2 = connect(false);
  ASSERT_TRUE(c2);
  expect_refused_and_closed(*c2, {"AUTH", std::string(16385, 'p')}, "-ERR Protocol error: unauthenticated bulk length");
}

TEST_P(AuthLimits, ConfiguredLimitsAfterAuth) {
  auto c = connect(true);
  ASSERT_TRUE(c);
  std::vector<std::string> del = {"DEL"};
  for (int i = 0; i < 1000; ++i) del.push_back("k" + std::to_string(i));
  EXPECT_EQ(fmt(c->command(del)), ":0");
  EXPECT_EQ(fmt(c->command({"SET", "big", std::string(1 << 20, 'v')})), "+OK");
  // A big command pipelined right behind the AUTH already gets the full limits.
  auto fresh = connect(false);
  ASSERT_TRUE(fresh);
  auto r = fresh->pipeline({{"AUTH", kPassword}, del, {"STRLEN", "big"}});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(fmt((*r)[0]), "+OK");
  EXPECT_EQ(fmt((*r)[1]), ":0");
  EXPECT_EQ(fmt((*r)[2]), ":1048576");
}

TEST_P(AuthLimits, UnauthenticatedClientCannotQueueOutput) {
  // 2000 pipelined PINGs before AUTH: their NOAUTH errors (70 KB) pass the 1 KiB budget
  // (plus the uncounted 16 KiB); the client is closed instead of being buffered for.
  auto c = connect(false);
  ASSERT_TRUE(c);
  std::vector<std::vector<std::string>> pings(2000, {"PING"});
  EXPECT_FALSE(c->pipeline(pings).ok());
  // An authenticated client gets all 2000 answers.
  auto a = connect(true);
  ASSERT_TRUE(a);
  auto r = a->pipeline(pings);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->size(), 2000u);
  EXPECT_EQ(fmt(r->back()), "+PONG");
}

#ifdef CONDUIT_KV_AUTH_LIMITS_RDMA
INSTANTIATE_TEST_SUITE_P(Transports, AuthLimits, ::testing::Values("rdma"), [](const auto& p) { return p.param; });
#else
INSTANTIATE_TEST_SUITE_P(Transports, AuthLimits, ::testing::Values("tcp", "shm"), [](const auto& p) { return p.param; });
#endif

}  // namespace
}  // namespace conduit::kv
