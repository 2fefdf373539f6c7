// Commands over real connections, once per transport (tcp, and shm where available), and
// over tcp to a server with 4 io threads (tcp_io4).  Expected replies and error texts are
// Redis 7.0's.
//
// Built a second time with CONDUIT_KV_COMMANDS_RDMA as kv_commands_rdma_test (ctest label
// `rdma`): the same cases over rdma:// on CONDUIT_RDMA_ADDR, in the Soft-RoCE guest.  There
// a missing device or address skips, or fails when CONDUIT_REQUIRE_RDMA=1.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;

class Commands : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
#ifdef CONDUIT_KV_COMMANDS_RDMA
    const char* addr = std::getenv("CONDUIT_RDMA_ADDR");
    if (addr == nullptr || *addr == '\0') {
      rdma_unavailable_ = "CONDUIT_RDMA_ADDR (an address on the RDMA netdev) is not set";
      return;
    }
    ServerOptions ro;
    ro.tcp = false;
    ro.bind = addr;
    ro.listen.push_back("rdma://" + std::string(addr) + ":0");
    ro.hz = 50;
    ro.protected_mode = false;  // the rdma peer address is not loopback; the guest is isolated
    server_ = new ServerThread(ro);
    if (!server_->ok()) rdma_unavailable_ = "rdma listener: " + server_->status().to_string();
    return;
#endif
    ServerOptions o;
    o.port = 0;
    o.hz = 50;  // quicker active expiry for the expiry test
    if (testing::shm_available()) o.listen.push_back("shm://" + testing::unique_name("kv-commands"));
    server_ = new ServerThread(o);
    ASSERT_TRUE(server_->ok()) << server_->status().to_string();
    ServerOptions threaded;
    threaded.port = 0;
    threaded.hz = 50;
    threaded.io_threads = 4;
    server_io4_ = new ServerThread(threaded);
    ASSERT_TRUE(server_io4_->ok()) << server_io4_->status().to_string();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete server_io4_;
    server_io4_ = nullptr;
  }
  static ServerThread& server() { return GetParam() == "tcp_io4" ? *server_io4_ : *server_; }
  std::string scheme() const { return GetParam() == "tcp_io4" ? "tcp" : GetParam(); }
  void SetUp() override {
    if (GetParam() == "shm" && !testing::shm_available()) GTEST_SKIP() << "shm transport not available";
    if (GetParam() == "rdma" && !rdma_unavailable_.empty()) {
      const char* req = std::getenv("CONDUIT_REQUIRE_RDMA");
      if (req != nullptr && std::string(req) == "1") FAIL() << "CONDUIT_REQUIRE_RDMA=1 but " << rdma_unavailable_;
      GTEST_SKIP() << rdma_unavailable_ << "; run the `rdma` tests in the testbed: testbed/run ctest -L rdma";
    }
    const std::string url = server().url(scheme());
    ASSERT_FALSE(url.empty());
    auto c = Client::connect(url);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    c_ = std::move(c).value();
    ASSERT_EQ(r({"FLUSHALL"}), "+OK");
  }
  std::string r(std::initializer_list<std::string_view> args) { return fmt(c_->command(args)); }
  std::string r(const std::vector<std::string>& args) { return fmt(c_->command(args)); }

  static ServerThread* server_;
  static ServerThread* server_io4_;
  static std::string rdma_unavailable_;
  std::unique_ptr<Client> c_;
};
ServerThread* Commands::server_ = nullptr;
ServerThread* Commands::server_io4_ = nullptr;
std::string Commands::rdma_unavailable_;

TEST_P(Commands, PingEchoUnknownArity) {
  EXPECT_EQ(r({"PING"}), "+PONG");
  EXPECT_EQ(r({"ping", "hi"}), "\"hi\"");
  EXPECT_EQ(r({"PING", "a", "b"}), "-ERR wrong number of arguments for 'ping' command");
  EXPECT_EQ(r({"ECHO", "x y"}), "\"x y\"");
  EXPECT_EQ(r({"NOSUCH", "a", "b"}), "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' ");
  EXPECT_EQ(r({"GET"}), "-ERR wrong number of arguments for 'get' command");
  EXPECT_EQ(r({"SET", "k"}), "-ERR wrong number of arguments for 'set' command");
  EXPECT_EQ(r({"GeT", "nokey"}), "nil");
}

TEST_P(Commands, SetGetAndOptions) {
  EXPECT_EQ(r({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(r({"GET", "k"}), "\"v\"");
  EXPECT_EQ(r({"SET", "k", "v2", "NX"}), "nil");
  EXPECT_EQ(r({"SET", "k2", "v", "XX"}), "nil");
  EXPECT_EQ(r({"SET", "k", "v3", "XX", "GET"}), "\"v\"");
  EXPECT_EQ(r({"GET", "k"}), "\"v3\"");
  EXPECT_EQ(r({"SET", "n", "1", "GET"}), "nil");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "100"}), "+OK");
  EXPECT_EQ(r({"TTL", "k"}), ":100");
  EXPECT_EQ(r({"SET", "k", "w", "KEEPTTL"}), "+OK");
  EXPECT_EQ(r({"TTL", "k"}), ":100");
  EXPECT_EQ(r({"SET", "k", "w"}), "+OK");
  EXPECT_EQ(r({"TTL", "k"}), ":-1");
  EXPECT_EQ(r({"SET", "k", "v", "PX", "100000"}), "+OK");
  EXPECT_EQ(r({"TTL", "k"}), ":100");
  EXPECT_EQ(r({"SET", "k", "v", "NX", "XX"}), "-ERR syntax error");
  EXPECT_EQ(r({"SET", "k", "v", "EX"}), "-ERR syntax error");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "10", "PX", "10"}), "-ERR syntax error");
  EXPECT_EQ(r({"SET", "k", "v", "KEEPTTL", "EX", "10"}), "-ERR syntax error");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "abc"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "0"}), "-ERR invalid expire time in 'set' command");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "-5"}), "-ERR invalid expire time in 'set' command");
  EXPECT_EQ(r({"SET", "k", "v", "FOO"}), "-ERR syntax error");
  EXPECT_EQ(r({"LPUSH", "l", "a"}), ":1");
  EXPECT_EQ(r({"SET", "l", "v", "GET"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"SET", "l", "v"}), "+OK");  // plain SET replaces any type
  EXPECT_EQ(r({"TYPE", "l"}), "+string");
}

TEST_P(Commands, StringCommands) {
  EXPECT_EQ(r({"SETNX", "a", "1"}), ":1");
  EXPECT_EQ(r({"SETNX", "a", "2"}), ":0");
  EXPECT_EQ(r({"SETEX", "b", "100", "x"}), "+OK");
  EXPECT_EQ(r({"TTL", "b"}), ":100");
  EXPECT_EQ(r({"SETEX", "b", "0", "x"}), "-ERR invalid expire time in 'setex' command");
  EXPECT_EQ(r({"SETEX", "b", "x", "x"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"GETSET", "a", "9"}), "\"1\"");
  EXPECT_EQ(r({"GETSET", "zz", "9"}), "nil");
  EXPECT_EQ(r({"GETDEL", "a"}), "\"9\"");
  EXPECT_EQ(r({"EXISTS", "a"}), ":0");
  EXPECT_EQ(r({"GETDEL", "a"}), "nil");
  EXPECT_EQ(r({"MSET", "x", "1", "y", "2"}), "+OK");
  EXPECT_EQ(r({"MSET", "x", "1", "y"}), "-ERR wrong number of arguments for 'mset' command");
  EXPECT_EQ(r({"MGET", "x", "nope", "y"}), "[\"1\", nil, \"2\"]");
  EXPECT_EQ(r({"APPEND", "s", "ab"}), ":2");
  EXPECT_EQ(r({"APPEND", "s", "cd"}), ":4");
  EXPECT_EQ(r({"STRLEN", "s"}), ":4");
  EXPECT_EQ(r({"STRLEN", "none"}), ":0");
  EXPECT_EQ(r({"GETRANGE", "s", "1", "-2"}), "\"bc\"");
  EXPECT_EQ(r({"LPUSH", "l", "a"}), ":1");
  EXPECT_EQ(r({"GET", "l"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"APPEND", "l", "a"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"MGET", "l"}), "[nil]");
}

TEST_P(Commands, Counters) {
  EXPECT_EQ(r({"INCR", "c"}), ":1");
  EXPECT_EQ(r({"INCRBY", "c", "10"}), ":11");
  EXPECT_EQ(r({"DECR", "c"}), ":10");
  EXPECT_EQ(r({"DECRBY", "c", "20"}), ":-10");
  EXPECT_EQ(r({"INCRBY", "c", "x"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SET", "s", "abc"}), "+OK");
  EXPECT_EQ(r({"INCR", "s"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SET", "s", " 1"}), "+OK");
  EXPECT_EQ(r({"INCR", "s"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SET", "m", "9223372036854775807"}), "+OK");
  EXPECT_EQ(r({"INCR", "m"}), "-ERR increment or decrement would overflow");
  EXPECT_EQ(r({"DECRBY", "m", "-9223372036854775808"}), "-ERR decrement would overflow");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "1.5"}), "\"1.5\"");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "x"}), "-ERR value is not a valid float");
  EXPECT_EQ(r({"SET", "t", "5", "EX", "100"}), "+OK");
  EXPECT_EQ(r({"INCR", "t"}), ":6");
  EXPECT_EQ(r({"TTL", "t"}), ":100");  // INCR keeps the TTL
}

TEST_P(Commands, KeysDelExistsTypeRename) {
  EXPECT_EQ(r({"MSET", "a", "1", "b", "2", "c", "3"}), "+OK");
  EXPECT_EQ(r({"EXISTS", "a", "a", "nope", "b"}), ":3");
  EXPECT_EQ(r({"DEL", "a", "nope"}), ":1");
  EXPECT_EQ(r({"UNLINK", "b"}), ":1");
  EXPECT_EQ(r({"DBSIZE"}), ":1");
  EXPECT_EQ(r({"TYPE", "c"}), "+string");
  EXPECT_EQ(r({"TYPE", "nope"}), "+none");
  EXPECT_EQ(r({"RENAME", "nope", "x"}), "-ERR no such key");
  EXPECT_EQ(r({"SET", "d", "4", "EX", "100"}), "+OK");
  EXPECT_EQ(r({"RENAME", "d", "e"}), "+OK");
  EXPECT_EQ(r({"GET", "e"}), "\"4\"");
  EXPECT_EQ(r({"TTL", "e"}), ":100");
  EXPECT_EQ(r({"EXISTS", "d"}), ":0");
  EXPECT_EQ(r({"RENAME", "e", "c"}), "+OK");
  EXPECT_EQ(r({"GET", "c"}), "\"4\"");
  EXPECT_EQ(r({"MSET", "user:1", "a", "user:2", "b", "other", "c"}), "+OK");
  auto keys = c_->command({"KEYS", "user:*"});
  ASSERT_TRUE(keys.ok());
  std::set<std::string> got;
  for (const auto& e : keys->elements) got.insert(e.str);
  EXPECT_EQ(got, (std::set<std::string>{"user:1", "user:2"}));
  EXPECT_EQ(r({"KEYS", "us?r:[12]"}), keys->elements.size() == 2 ? fmt(*keys) : "");
}

TEST_P(Commands, Scan) {
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 1000; ++i) cmds.push_back({"SET", "key:" + std::to_string(i), "v"});
  auto p = c_->pipeline(cmds);
  ASSERT_TRUE(p.ok());
  std::set<std::string> seen;
  std::string cursor = "0";
  int rounds = 0;
  do {
    auto s = c_->command({"SCAN", cursor, "COUNT", "37"});
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(s->elements.size(), 2u) << fmt(*s);
    cursor = s->elements[0].str;
    for (const auto& e : s->elements[1].elements) seen.insert(e.str);
    ASSERT_LT(++rounds, 10000);
  } while (cursor != "0");
  EXPECT_EQ(seen.size(), 1000u);
  auto m = c_->command({"SCAN", "0", "MATCH", "key:99*", "COUNT", "100000"});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->elements[1].elements.size(), 11u);  // key:99, key:990..999
  EXPECT_EQ(r({"SCAN", "x"}), "-ERR invalid cursor");
  EXPECT_EQ(r({"SCAN", "0", "COUNT", "0"}), "-ERR syntax error");
  EXPECT_EQ(r({"LPUSH", "alist", "x"}), ":1");
  auto t = c_->command({"SCAN", "0", "TYPE", "list", "COUNT", "100000"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(fmt(t->elements[1]), "[\"alist\"]");
}

TEST_P(Commands, ExpireTtlPersist) {
  EXPECT_EQ(r({"EXPIRE", "nope", "10"}), ":0");
  EXPECT_EQ(r({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(r({"TTL", "k"}), ":-1");
  EXPECT_EQ(r({"PTTL", "nope"}), ":-2");
  EXPECT_EQ(r({"EXPIRE", "k", "100"}), ":1");
  EXPECT_EQ(r({"TTL", "k"}), ":100");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "NX"}), ":0");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "GT"}), ":0");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "LT"}), ":1");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "NX", "XX"}), "-ERR NX and XX, GT or LT options at the same time are not compatible");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "GT", "LT"}), "-ERR GT and LT options at the same time are not compatible");
  EXPECT_EQ(r({"EXPIRE", "k", "50", "BOGUS"}), "-ERR Unsupported option BOGUS");
  EXPECT_EQ(r({"EXPIRE", "k", "x"}), "-ERR value is not an integer or out of range");
  auto pttl = c_->command({"PTTL", "k"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(pttl->integer, 49000);
  EXPECT_LE(pttl->integer, 50000);
  EXPECT_EQ(r({"PERSIST", "k"}), ":1");
  EXPECT_EQ(r({"PERSIST", "k"}), ":0");
  EXPECT_EQ(r({"TTL", "k"}), ":-1");
  EXPECT_EQ(r({"PEXPIREAT", "k", "1000"}), ":1");  // in the past: deleted
  EXPECT_EQ(r({"EXISTS", "k"}), ":0");
  EXPECT_EQ(r({"EXPIRE", "k2", "9223372036854775807"}), "-ERR invalid expire time in 'expire' command");
  EXPECT_EQ(r({"SET", "k2", "v"}), "+OK");
  EXPECT_EQ(r({"EXPIRE", "k2", "9223372036854775807"}), "-ERR invalid expire time in 'expire' command");
}

// Issue 9 item 9: expiry arithmetic is overflow-safe (the UBSan build reported EXPIRETIME
// of a key expiring at LLONG_MAX, and the release build answered a negative number).
TEST_P(Commands, ExpiryAtTheEndOfTime) {
  EXPECT_EQ(r({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(r({"PEXPIREAT", "k", "9223372036854775807"}), ":1");  // Redis 7.0 accepts it
  EXPECT_EQ(r({"PEXPIRETIME", "k"}), ":9223372036854775807");
  EXPECT_EQ(r({"EXPIRETIME", "k"}), ":9223372036854776");  // rounded, as Redis rounds
  EXPECT_GT(c_->command({"TTL", "k"})->integer, 9'223'372'036'854'775 - 4'000'000'000);
  EXPECT_GT(c_->command({"PTTL", "k"})->integer, 9'223'372'036'854'775'807 - 4'000'000'000'000);
  EXPECT_EQ(r({"EXPIREAT", "k", "9223372036854775"}), ":1");
  EXPECT_EQ(r({"PEXPIRETIME", "k"}), ":9223372036854775000");
  EXPECT_EQ(r({"EXPIREAT", "k", "9223372036854776"}), "-ERR invalid expire time in 'expireat' command");
  EXPECT_EQ(r({"EXPIRE", "k", "9223372036854775"}), "-ERR invalid expire time in 'expire' command");
  EXPECT_EQ(r({"PEXPIRE", "k", "9223372036854775807"}), "-ERR invalid expire time in 'pexpire' command");
  EXPECT_EQ(r({"EXPIREAT", "k", "-9223372036854775808"}), "-ERR invalid expire time in 'expireat' command");
  EXPECT_EQ(r({"SET", "k", "v", "EX", "9223372036854775"}), "-ERR invalid expire time in 'set' command");
  EXPECT_EQ(r({"SET", "k", "v", "PXAT", "9223372036854775807"}), "+OK");
  EXPECT_EQ(r({"EXPIRETIME", "k"}), ":9223372036854776");
  EXPECT_EQ(r({"SETEX", "k", "9223372036854775", "v"}), "-ERR invalid expire time in 'setex' command");
  EXPECT_EQ(r({"PSETEX", "k", "9223372036854775807", "v"}), "-ERR invalid expire time in 'psetex' command");
  EXPECT_EQ(r({"PEXPIREAT", "k", "-9223372036854775808"}), ":1");  // in the past: deleted
  EXPECT_EQ(r({"EXISTS", "k"}), ":0");
  EXPECT_EQ(r({"SCAN", "0", "COUNT", "9223372036854775807"}), "[\"0\", []]");
}

TEST_P(Commands, LazyAndActiveExpiry) {
  EXPECT_EQ(r({"SET", "lazy", "v", "PX", "300"}), "+OK");
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 500; ++i) cmds.push_back({"SET", "vol:" + std::to_string(i), "v", "PX", "300"});
  for (int i = 0; i < 50; ++i) cmds.push_back({"SET", "keep:" + std::to_string(i), "v"});
  ASSERT_TRUE(c_->pipeline(cmds).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  EXPECT_EQ(r({"GET", "lazy"}), "nil");  // lazy: expired on access
  // Active: the cron removes the rest without anyone touching them.
  std::string n;
  for (int i = 0; i < 100; ++i) {
    n = r({"DBSIZE"});
    if (n == ":50") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(n, ":50");
  auto info = server().info("stats");
  EXPECT_NE(info.find("expired_keys:"), std::string::npos);
}

TEST_P(Commands, SelectAndFlush) {
  EXPECT_EQ(r({"SET", "k", "db0"}), "+OK");
  EXPECT_EQ(r({"SELECT", "3"}), "+OK");
  EXPECT_EQ(r({"GET", "k"}), "nil");
  EXPECT_EQ(r({"SET", "k", "db3"}), "+OK");
  EXPECT_EQ(r({"SELECT", "16"}), "-ERR DB index is out of range");
  EXPECT_EQ(r({"SELECT", "x"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"FLUSHDB"}), "+OK");
  EXPECT_EQ(r({"DBSIZE"}), ":0");
  EXPECT_EQ(r({"SELECT", "0"}), "+OK");
  EXPECT_EQ(r({"GET", "k"}), "\"db0\"");
  EXPECT_EQ(r({"FLUSHDB", "BOGUS"}), "-ERR syntax error");
  EXPECT_EQ(r({"FLUSHALL", "ASYNC"}), "+OK");
  EXPECT_EQ(r({"DBSIZE"}), ":0");
}

TEST_P(Commands, Lists) {
  EXPECT_EQ(r({"RPUSH", "l", "a", "b", "c"}), ":3");
  EXPECT_EQ(r({"LPUSH", "l", "z"}), ":4");
  EXPECT_EQ(r({"LRANGE", "l", "0", "-1"}), "[\"z\", \"a\", \"b\", \"c\"]");
  EXPECT_EQ(r({"LRANGE", "l", "1", "2"}), "[\"a\", \"b\"]");
  EXPECT_EQ(r({"LRANGE", "l", "-2", "100"}), "[\"b\", \"c\"]");
  EXPECT_EQ(r({"LRANGE", "l", "5", "10"}), "[]");
  EXPECT_EQ(r({"LRANGE", "nope", "0", "-1"}), "[]");
  EXPECT_EQ(r({"LLEN", "l"}), ":4");
  EXPECT_EQ(r({"LPOP", "l"}), "\"z\"");
  EXPECT_EQ(r({"RPOP", "l"}), "\"c\"");
  EXPECT_EQ(r({"LPOP", "l", "5"}), "[\"a\", \"b\"]");
  EXPECT_EQ(r({"EXISTS", "l"}), ":0");
  EXPECT_EQ(r({"LPOP", "l"}), "nil");
  EXPECT_EQ(r({"LPOP", "l", "2"}), "nil");
  EXPECT_EQ(r({"LPOP", "l", "-1"}), "-ERR value is out of range, must be positive");
  EXPECT_EQ(r({"LRANGE", "l", "a", "1"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SET", "s", "v"}), "+OK");
  EXPECT_EQ(r({"LPUSH", "s", "a"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"LRANGE", "s", "0", "1"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"LLEN", "s"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"LPUSH", "l"}), "-ERR wrong number of arguments for 'lpush' command");
}

TEST_P(Commands, Hashes) {
  EXPECT_EQ(r({"HSET", "h", "f1", "v1", "f2", "v2"}), ":2");
  EXPECT_EQ(r({"HSET", "h", "f1", "x"}), ":0");
  EXPECT_EQ(r({"HGET", "h", "f1"}), "\"x\"");
  EXPECT_EQ(r({"HGET", "h", "nope"}), "nil");
  EXPECT_EQ(r({"HLEN", "h"}), ":2");
  auto all = c_->command({"HGETALL", "h"});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->elements.size(), 4u);
  std::set<std::string> kv;
  for (const auto& e : all->elements) kv.insert(e.str);
  EXPECT_EQ(kv, (std::set<std::string>{"f1", "x", "f2", "v2"}));
  EXPECT_EQ(r({"HDEL", "h", "f1", "nope"}), ":1");
  EXPECT_EQ(r({"HDEL", "h", "f2"}), ":1");
  EXPECT_EQ(r({"EXISTS", "h"}), ":0");
  EXPECT_EQ(r({"HGETALL", "h"}), "[]");
  EXPECT_EQ(r({"HSET", "h", "f1"}), "-ERR wrong number of arguments for 'hset' command");
  EXPECT_EQ(r({"HSET", "h", "a", "1", "b"}), "-ERR wrong number of arguments for 'hset' command");
  EXPECT_EQ(r({"SET", "s", "v"}), "+OK");
  EXPECT_EQ(r({"HGET", "s", "f"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"HINCRBY", "h", "n", "5"}), ":5");
  EXPECT_EQ(r({"HMGET", "h", "n", "x"}), "[\"5\", nil]");
}

TEST_P(Commands, SetsAndSortedSets) {
  EXPECT_EQ(r({"SADD", "s", "a", "b", "c", "a"}), ":3");
  EXPECT_EQ(r({"SCARD", "s"}), ":3");
  EXPECT_EQ(r({"SISMEMBER", "s", "b"}), ":1");
  std::set<std::string> popped;
  for (int i = 0; i < 3; ++i) {
    auto p = c_->command({"SPOP", "s"});
    ASSERT_TRUE(p.ok());
    popped.insert(p->str);
  }
  EXPECT_EQ(popped, (std::set<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r({"SPOP", "s"}), "nil");
  EXPECT_EQ(r({"EXISTS", "s"}), ":0");
  EXPECT_EQ(r({"SADD", "s", "x"}), ":1");
  EXPECT_EQ(r({"SPOP", "s", "5"}), "[\"x\"]");
  EXPECT_EQ(r({"ZADD", "z", "2", "b", "1", "a", "3", "c"}), ":3");
  EXPECT_EQ(r({"ZADD", "z", "1.5", "b"}), ":0");
  EXPECT_EQ(r({"ZADD", "z", "CH", "5", "b"}), ":1");
  EXPECT_EQ(r({"ZSCORE", "z", "b"}), "\"5\"");
  EXPECT_EQ(r({"ZADD", "z", "x", "b"}), "-ERR value is not a valid float");
  EXPECT_EQ(r({"ZADD", "z", "1"}), "-ERR wrong number of arguments for 'zadd' command");
  EXPECT_EQ(r({"ZADD", "z", "1", "a", "2"}), "-ERR syntax error");
  EXPECT_EQ(r({"ZADD", "z", "NX", "XX", "1", "a"}), "-ERR XX and NX options at the same time are not compatible");
  EXPECT_EQ(r({"ZRANGE", "z", "0", "-1", "WITHSCORES"}), "[\"a\", \"1\", \"c\", \"3\", \"b\", \"5\"]");
  EXPECT_EQ(r({"ZPOPMIN", "z"}), "[\"a\", \"1\"]");
  EXPECT_EQ(r({"ZPOPMIN", "z", "5"}), "[\"c\", \"3\", \"b\", \"5\"]");
  EXPECT_EQ(r({"ZPOPMIN", "z"}), "[]");
  EXPECT_EQ(r({"ZCARD", "z"}), ":0");
  EXPECT_EQ(r({"ZADD", "z", "INCR", "2", "m"}), "\"2\"");
  EXPECT_EQ(r({"ZINCRBY", "z", "0.5", "m"}), "\"2.5\"");
}

TEST_P(Commands, Streams) {
  auto id = c_->command({"XADD", "st", "*", "f", "v"});
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(id->type, ReplyType::kBulk);
  EXPECT_NE(id->str.find('-'), std::string::npos);
  EXPECT_EQ(r({"XADD", "st2", "1-1", "a", "b"}), "\"1-1\"");
  EXPECT_EQ(r({"XADD", "st2", "1-1", "a", "b"}),
            "-ERR The ID specified in XADD is equal or smaller than the target stream top item");
  EXPECT_EQ(r({"XADD", "st2", "0-0", "a", "b"}), "-ERR The ID specified in XADD must be greater than 0-0");
  EXPECT_EQ(r({"XADD", "st2", "1-*", "c", "d"}), "\"1-2\"");
  EXPECT_EQ(r({"XADD", "st2", "5", "e", "f"}), "\"5-0\"");
  EXPECT_EQ(r({"XADD", "st2", "x-y", "e", "f"}), "-ERR Invalid stream ID specified as stream command argument");
  EXPECT_EQ(r({"XADD", "st2", "*", "e"}), "-ERR wrong number of arguments for 'xadd' command");
  EXPECT_EQ(r({"XLEN", "st2"}), ":3");
  EXPECT_EQ(r({"XRANGE", "st2", "-", "+", "COUNT", "2"}), "[[\"1-1\", [\"a\", \"b\"]], [\"1-2\", [\"c\", \"d\"]]]");
  EXPECT_EQ(r({"XADD", "st2", "MAXLEN", "1", "*", "g", "h"}).substr(0, 1), "\"");
  EXPECT_EQ(r({"XLEN", "st2"}), ":1");
  EXPECT_EQ(r({"XADD", "none", "NOMKSTREAM", "*", "a", "b"}), "nil");
  EXPECT_EQ(r({"TYPE", "st"}), "+stream");
}

TEST_P(Commands, HelloResp3AndClientCommands) {
  auto id = c_->command({"CLIENT", "ID"});
  ASSERT_TRUE(id.ok());
  EXPECT_GT(id->integer, 0);
  EXPECT_EQ(r({"CLIENT", "GETNAME"}), "nil");
  EXPECT_EQ(r({"CLIENT", "SETNAME", "tester"}), "+OK");
  EXPECT_EQ(r({"CLIENT", "SETNAME", "bad name"}), "-ERR Client names cannot contain spaces, newlines or special characters.");
  EXPECT_EQ(r({"CLIENT", "GETNAME"}), "\"tester\"");
  auto list = c_->command({"CLIENT", "LIST"});
  ASSERT_TRUE(list.ok());
  EXPECT_NE(list->str.find("name=tester"), std::string::npos);
  EXPECT_NE(list->str.find("transport=" + scheme()), std::string::npos);
  EXPECT_EQ(r({"CLIENT", "BOGUS"}), "-ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.");
  EXPECT_EQ(r({"HELLO", "4"}), "-NOPROTO unsupported protocol version");
  auto h = c_->command({"HELLO", "3"});
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->type, ReplyType::kMap) << fmt(*h);
  EXPECT_NE(fmt(*h).find("\"proto\": :3"), std::string::npos);
  EXPECT_EQ(r({"GET", "nope"}), "nil");
  EXPECT_EQ(c_->command({"GET", "nope"})->type, ReplyType::kNull);
  EXPECT_EQ(r({"HSET", "h", "a", "1"}), ":1");
  EXPECT_EQ(r({"HGETALL", "h"}), "{\"a\": \"1\"}");
  EXPECT_EQ(r({"ZADD", "z", "1.5", "m"}), ":1");
  EXPECT_EQ(r({"ZSCORE", "z", "m"}), ",1.5");
  EXPECT_EQ(c_->command({"INFO", "server"})->type, ReplyType::kVerbatim);
  auto h2 = c_->command({"HELLO", "2"});
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2->type, ReplyType::kArray);
}

// INFO memory counts rdma://'s registered arenas (mem_rdma_*): zero where no rdma client
// ever connected (tcp, shm), non-zero and consistent with an rdma client connected.
TEST_P(Commands, InfoMemoryCountsRegisteredArenas) {
  auto field = [](const std::string& info, const std::string& key) -> uint64_t {
    const size_t at = info.find("\n" + key + ":");
    return at == std::string::npos ? ~uint64_t{0} : std::stoull(info.substr(at + key.size() + 2));
  };
  const char* keys[] = {"mem_rdma_arenas",          "mem_rdma_arena_regions",       "mem_rdma_arena_mapped",
                        "mem_rdma_arena_registered", "mem_rdma_arena_pool_in_use",   "mem_rdma_arena_rx_in_use",
                        "mem_rdma_arena_registrations", "mem_rdma_arena_register_usec", "mem_rdma_arena_would_block"};
  auto info = c_->command({"INFO", "memory"});
  ASSERT_TRUE(info.ok());
  const std::string& m = info->str;
  for (const char* k : keys) EXPECT_NE(field(m, k), ~uint64_t{0}) << k << " missing:\n" << m;
  EXPECT_NE(m.find("\nmem_rdma_arena_registered_human:"), std::string::npos) << m;
  if (GetParam() != "rdma") {
    for (const char* k : keys) EXPECT_EQ(field(m, k), 0u) << k << ": nothing registers over " << GetParam();
    return;
  }
  EXPECT_GE(field(m, "mem_rdma_arenas"), 1u) << m;
  EXPECT_GT(field(m, "mem_rdma_arena_regions"), 0u) << m;
  EXPECT_GT(field(m, "mem_rdma_arena_registrations"), 0u) << m;
  const uint64_t registered = field(m, "mem_rdma_arena_registered");
  const uint64_t in_use = field(m, "mem_rdma_arena_pool_in_use") + field(m, "mem_rdma_arena_rx_in_use");
  EXPECT_GT(field(m, "mem_rdma_arena_pool_in_use"), 0u) << "this client's control slots at least:\n" << m;
  EXPECT_GE(field(m, "mem_rdma_arena_mapped"), in_use) << m;
  EXPECT_GE(registered, in_use) << m;
  // With the receive areas in the arena (scope=mw, rxe's default) the clients' pinned
  // slices (mem_transport_pinned) lie inside what the arena has in use.
  if (field(m, "mem_rdma_arena_rx_in_use") > 0) {
    EXPECT_LE(field(m, "mem_transport_pinned"), in_use) << m;
  }
  // A client that comes and goes takes off what it added, no more: its staging area came
  // after the accept (this once sent used_memory to ~2^64).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a cron tick has counted this client's staging
  const uint64_t before = field(c_->command({"INFO", "memory"})->str, "mem_transport_pinned");
  {
    auto other = Client::connect(server().url(scheme()));
    ASSERT_TRUE(other.ok()) << other.status().to_string();
    EXPECT_EQ(fmt((*other)->command({"PING"})), "+PONG");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a cron tick (hz 50) sees its staging
  }
  uint64_t after = ~uint64_t{0};
  for (int i = 0; i < 500 && after != before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = field(c_->command({"INFO", "memory"})->str, "mem_transport_pinned");
  }
  EXPECT_EQ(after, before) << "the closed client's pinned bytes were not taken off exactly";
}

TEST_P(Commands, InfoConfigCommand) {
  auto info = c_->command({"INFO"});
  ASSERT_TRUE(info.ok());
  for (const char* s : {"# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Transports", "redis_version:",
                        "connected_clients:", "used_memory:", "aof_enabled:0", "total_commands_processed:"})
    EXPECT_NE(info->str.find(s), std::string::npos) << s;
  EXPECT_NE(info->str.find("transport_" + scheme() + ":"), std::string::npos);
  EXPECT_NE(info->str.find(GetParam() == "tcp_io4" ? "io_threads_active:1\r\n" : "io_threads_active:0\r\n"),
            std::string::npos);
  auto only = c_->command({"INFO", "clients"});
  EXPECT_EQ(only->str.find("# Server"), std::string::npos);
  EXPECT_EQ(r({"CONFIG", "GET", "maxmemory"}), "[\"maxmemory\", \"0\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "100mb"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "GET", "maxmemory"}), "[\"maxmemory\", \"104857600\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "0"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "GET", "save"}), "[\"save\", \"\"]");
  EXPECT_EQ(r({"CONFIG", "GET", "appendonly"}), "[\"appendonly\", \"no\"]");
  auto many = c_->command({"CONFIG", "GET", "*"});
  EXPECT_GT(many->elements.size(), 20u);
  EXPECT_EQ(r({"CONFIG", "SET", "nosuch", "1"}), "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'");
  EXPECT_EQ(r({"CONFIG", "SET", "daemonize", "no"}),
            "-ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config");
  EXPECT_EQ(r({"CONFIG", "SET", "port", "1"}),
            "-ERR CONFIG SET failed (possibly related to argument 'port') - conduit-kv cannot change 'port' while it "
            "runs (restart it with --port)");
  EXPECT_EQ(r({"CONFIG", "SET", "hz", "abc"}),
            "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer");
  EXPECT_EQ(r({"CONFIG", "GET"}), "-ERR wrong number of arguments for 'config|get' command");
  EXPECT_EQ(r({"CONFIG", "FOO"}), "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.");
  auto count = c_->command({"COMMAND", "COUNT"});
  EXPECT_GT(count->integer, 80);
  auto docs = c_->command({"COMMAND", "DOCS", "get"});
  EXPECT_NE(fmt(*docs).find("summary"), std::string::npos);
  auto all = c_->command({"COMMAND"});
  EXPECT_EQ(static_cast<int64_t>(all->elements.size()), count->integer);
  EXPECT_EQ(r({"COMMAND", "INFO", "get"}).substr(0, 15), "[[\"get\", :2, [+");
}

TEST_P(Commands, PipelineAndInline) {
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 2000; ++i) cmds.push_back({"INCR", "ctr"});
  auto p = c_->pipeline(cmds);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(fmt(p->back()), ":2000");
  auto raw = c_->raw("PING\r\nSET a \"b c\"\r\nGET a\r\n\r\n*1\r\n$4\r\nPING\r\n", 4);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(fmt((*raw)[0]), "+PONG");
  EXPECT_EQ(fmt((*raw)[1]), "+OK");
  EXPECT_EQ(fmt((*raw)[2]), "\"b c\"");
  EXPECT_EQ(fmt((*raw)[3]), "+PONG");
}

TEST_P(Commands, ProtocolErrorClosesOnlyThatClient) {
  auto other = Client::connect(server().url(scheme()));
  ASSERT_TRUE(other.ok());
  auto bad = c_->raw("*1\r\n$-5\r\n", 1);
  ASSERT_TRUE(bad.ok()) << bad.status().to_string();
  EXPECT_EQ(fmt((*bad)[0]), "-ERR Protocol error: invalid bulk length");
  auto after = c_->command({"PING"});
  EXPECT_FALSE(after.ok());  // closed
  EXPECT_EQ(fmt((*other)->command({"PING"})), "+PONG");
}

TEST_P(Commands, QuitAndBigValues) {
  std::string big(3 << 20, 'v');
  EXPECT_EQ(r({"SET", "big", big}), "+OK");
  EXPECT_EQ(r({"STRLEN", "big"}), ":" + std::to_string(big.size()));
  auto g = c_->command({"GET", "big"});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->str.size(), big.size());
  EXPECT_EQ(r({"QUIT"}), "+OK");
  EXPECT_FALSE(c_->command({"PING"}).ok());
}

// OBJECT's subcommands and TOUCH (Redis 7.0's texts; the encodings are conduit-kv's own,
// docs/KV.md).  IDLETIME needs a second to pass.
TEST_P(Commands, ObjectAndTouch) {
  EXPECT_EQ(r({"SET", "s", "v"}), "+OK");
  EXPECT_EQ(r({"RPUSH", "l", "a"}), ":1");
  EXPECT_EQ(r({"HSET", "h", "f", "v"}), ":1");
  EXPECT_EQ(r({"SADD", "st", "m"}), ":1");
  EXPECT_EQ(r({"ZADD", "z", "1", "m"}), ":1");
  EXPECT_EQ(r({"XADD", "x", "1-1", "f", "v"}), "\"1-1\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "s"}), "\"raw\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "l"}), "\"deque\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "h"}), "\"hashtable\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "st"}), "\"hashtable\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "z"}), "\"rbtree\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "x"}), "\"vector\"");
  EXPECT_EQ(r({"OBJECT", "ENCODING", "nope"}), "nil");
  EXPECT_EQ(r({"OBJECT", "REFCOUNT", "s"}), ":1");
  EXPECT_EQ(r({"OBJECT", "REFCOUNT", "nope"}), "nil");
  EXPECT_EQ(r({"OBJECT", "FREQ", "s"}),
            "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when "
            "switching between policies at runtime LRU and LFU data will take some time to adjust.");
  EXPECT_EQ(r({"OBJECT", "NOSUCH", "s"}).substr(0, 40), "-ERR unknown subcommand 'NOSUCH'. Try OB");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_GE(c_->command({"OBJECT", "IDLETIME", "s"})->integer, 2);
  EXPECT_GE(c_->command({"OBJECT", "IDLETIME", "l"})->integer, 2);
  // TTL, TYPE and EXISTS do not make a key recently used (Redis' LOOKUP_NOTOUCH).
  EXPECT_EQ(r({"TTL", "h"}), ":-1");
  EXPECT_EQ(r({"TYPE", "h"}), "+hash");
  EXPECT_EQ(r({"EXISTS", "h"}), ":1");
  // TOUCH counts existing keys and makes them recently used; OBJECT itself does not.
  EXPECT_EQ(r({"TOUCH", "s", "nope", "l"}), ":2");
  EXPECT_EQ(r({"OBJECT", "IDLETIME", "s"}), ":0");
  EXPECT_EQ(r({"OBJECT", "IDLETIME", "l"}), ":0");
  EXPECT_GE(c_->command({"OBJECT", "IDLETIME", "h"})->integer, 2);
  EXPECT_EQ(r({"OBJECT", "IDLETIME", "nope"}), "nil");
}

TEST_P(Commands, BitCountPosOp) {
  EXPECT_EQ(r({"SET", "b", "foobar"}), "+OK");
  EXPECT_EQ(r({"BITCOUNT", "b"}), ":26");
  EXPECT_EQ(r({"BITCOUNT", "b", "0", "0"}), ":4");
  EXPECT_EQ(r({"BITCOUNT", "b", "1", "1"}), ":6");
  EXPECT_EQ(r({"BITCOUNT", "b", "-2", "-1"}), ":7");
  EXPECT_EQ(r({"BITCOUNT", "b", "5", "30", "BIT"}), ":17");
  EXPECT_EQ(r({"BITCOUNT", "nope"}), ":0");
  EXPECT_EQ(r({"BITCOUNT", "b", "0"}), "-ERR syntax error");
  EXPECT_EQ(r({"SET", "p", std::string("\xff\xf0\x00", 3)}), "+OK");
  EXPECT_EQ(r({"BITPOS", "p", "0"}), ":12");
  EXPECT_EQ(r({"SET", "p", std::string("\x00\xff\xf0", 3)}), "+OK");
  EXPECT_EQ(r({"BITPOS", "p", "1", "0"}), ":8");
  EXPECT_EQ(r({"BITPOS", "p", "1", "2"}), ":16");
  EXPECT_EQ(r({"BITPOS", "p", "1", "2", "-1", "BYTE"}), ":16");
  EXPECT_EQ(r({"BITPOS", "p", "1", "7", "15", "BIT"}), ":8");
  EXPECT_EQ(r({"SET", "z", std::string("\x00\x00\x00", 3)}), "+OK");
  EXPECT_EQ(r({"BITPOS", "z", "1"}), ":-1");
  EXPECT_EQ(r({"BITPOS", "nope", "0"}), ":0");
  EXPECT_EQ(r({"BITPOS", "p", "2"}), "-ERR The bit argument must be 1 or 0.");
  EXPECT_EQ(r({"SET", "k1", "foobar"}), "+OK");
  EXPECT_EQ(r({"SET", "k2", "abcdef"}), "+OK");
  EXPECT_EQ(r({"BITOP", "AND", "dest", "k1", "k2"}), ":6");
  EXPECT_EQ(r({"GET", "dest"}), "\"`bc`ab\"");
  EXPECT_EQ(r({"BITOP", "OR", "dest", "k1", "k2"}), ":6");
  EXPECT_EQ(r({"GET", "dest"}), "\"goofev\"");
  EXPECT_EQ(r({"BITOP", "XOR", "dest", "k1", "nope"}), ":6");
  EXPECT_EQ(r({"GET", "dest"}), "\"foobar\"");
  EXPECT_EQ(r({"SET", "one", std::string("\x0f", 1)}), "+OK");
  EXPECT_EQ(r({"BITOP", "NOT", "dest", "one"}), ":1");
  EXPECT_EQ(r({"STRLEN", "dest"}), ":1");
  EXPECT_EQ(r({"BITCOUNT", "dest"}), ":4");
  EXPECT_EQ(r({"BITOP", "NOT", "dest", "k1", "k2"}), "-ERR BITOP NOT must be called with a single source key.");
  EXPECT_EQ(r({"BITOP", "AND", "dest", "nope", "nope2"}), ":0");
  EXPECT_EQ(r({"EXISTS", "dest"}), ":0");  // an empty result deletes the destination
  EXPECT_EQ(r({"RPUSH", "list", "x"}), ":1");
  EXPECT_EQ(r({"BITCOUNT", "list"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
}

TEST_P(Commands, Bitfield) {
  EXPECT_EQ(r({"BITFIELD", "bf", "SET", "u8", "0", "255", "GET", "u8", "0"}), "[:0, :255]");
  EXPECT_EQ(r({"BITFIELD", "bf", "INCRBY", "u8", "0", "10"}), "[:9]");  // WRAP is the default
  EXPECT_EQ(r({"BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "300"}), "[:255]");
  EXPECT_EQ(r({"BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1"}), "[nil]");
  EXPECT_EQ(r({"BITFIELD", "bf", "GET", "u8", "0"}), "[:255]");
  EXPECT_EQ(r({"BITFIELD", "bf", "OVERFLOW", "SAT", "INCRBY", "i8", "8", "-200"}), "[:-128]");
  EXPECT_EQ(r({"BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "i8", "8", "-1"}), "[:127]");
  EXPECT_EQ(r({"BITFIELD", "bf", "SET", "i5", "#1", "-3", "GET", "i5", "#1", "GET", "u5", "#1"}), "[:-3, :-3, :29]");
  EXPECT_EQ(r({"BITFIELD", "bf", "GET", "i64", "0"}).substr(0, 1), "[");
  EXPECT_EQ(r({"BITFIELD", "bf", "GET", "u64", "0"}),
            "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
  EXPECT_EQ(r({"BITFIELD", "bf", "GET", "u8", "-1"}), "-ERR bit offset is not an integer or out of range");
  EXPECT_EQ(r({"BITFIELD", "bf", "OVERFLOW", "NOPE", "GET", "u8", "0"}), "-ERR Invalid OVERFLOW type specified");
  EXPECT_EQ(r({"BITFIELD_RO", "bf", "GET", "u8", "0"}), "[:255]");
  EXPECT_EQ(r({"BITFIELD_RO", "bf", "SET", "u8", "0", "1"}), "-ERR BITFIELD_RO only supports the GET subcommand");
  EXPECT_EQ(r({"BITFIELD", "fresh", "GET", "u8", "0"}), "[:0]");
  EXPECT_EQ(r({"EXISTS", "fresh"}), ":0");
}

TEST_P(Commands, CollectionScans) {
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 300; ++i) {
    const std::string n = std::to_string(i);
    cmds.push_back({"HSET", "h", "f" + n, "v" + n});
    cmds.push_back({"SADD", "s", "m" + n});
    cmds.push_back({"ZADD", "z", n, "m" + n});
  }
  ASSERT_TRUE(c_->pipeline(cmds).ok());
  for (const char* cmd : {"HSCAN", "SSCAN", "ZSCAN"}) {
    const std::string key = std::string(cmd) == "HSCAN" ? "h" : std::string(cmd) == "SSCAN" ? "s" : "z";
    std::set<std::string> seen;
    std::string cursor = "0";
    int rounds = 0;
    do {
      auto s = c_->command({cmd, key, cursor, "COUNT", "17"});
      ASSERT_TRUE(s.ok());
      ASSERT_EQ(s->elements.size(), 2u) << fmt(*s);
      cursor = s->elements[0].str;
      const auto& items = s->elements[1].elements;
      const size_t step = std::string(cmd) == "SSCAN" ? 1 : 2;
      ASSERT_EQ(items.size() % step, 0u);
      for (size_t i = 0; i < items.size(); i += step) {
        seen.insert(items[i].str);
        if (std::string(cmd) == "HSCAN") {
          EXPECT_EQ(items[i + 1].str, "v" + items[i].str.substr(1));
        } else if (std::string(cmd) == "ZSCAN") {
          EXPECT_EQ(items[i + 1].str, items[i].str.substr(1));
        }
      }
      ASSERT_LT(++rounds, 1000);
    } while (cursor != "0");
    EXPECT_EQ(seen.size(), 300u) << cmd;
    auto m = c_->command({cmd, key, "0", "MATCH", "*29?", "COUNT", "1000"});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->elements[1].elements.size(), (std::string(cmd) == "SSCAN" ? 1u : 2u) * 10) << cmd;  // 290..299
    EXPECT_EQ(r({cmd, key, "x"}), "-ERR invalid cursor");
    EXPECT_EQ(r({cmd, "nope", "0"}), "[\"0\", []]");
  }
  EXPECT_EQ(r({"SSCAN", "h", "0"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
}

TEST_P(Commands, InfoStatsSectionsAndErrorCounts) {
  EXPECT_EQ(r({"CONFIG", "RESETSTAT"}), "+OK");
  EXPECT_EQ(r({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(r({"GET", "k"}), "\"v\"");
  EXPECT_EQ(r({"SELECT", "2"}), "+OK");
  EXPECT_EQ(r({"SET", "e", "v", "EX", "100"}), "+OK");
  EXPECT_EQ(r({"SELECT", "0"}), "+OK");
  EXPECT_EQ(r({"INCR", "k"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"LPUSH", "k", "x"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"NOSUCH"}).substr(0, 20), "-ERR unknown command");
  const std::string cs = c_->command({"INFO", "commandstats"})->str;
  EXPECT_NE(cs.find("# Commandstats"), std::string::npos) << cs;
  EXPECT_NE(cs.find("cmdstat_set:calls=2,usec="), std::string::npos) << cs;
  EXPECT_NE(cs.find("cmdstat_incr:calls=1,"), std::string::npos) << cs;
  EXPECT_NE(cs.find(",rejected_calls=0,failed_calls=1"), std::string::npos) << cs;
  const std::string es = c_->command({"INFO", "errorstats"})->str;
  EXPECT_NE(es.find("errorstat_ERR:count=2"), std::string::npos) << es;
  EXPECT_NE(es.find("errorstat_WRONGTYPE:count=1"), std::string::npos) << es;
  EXPECT_NE(c_->command({"INFO", "stats"})->str.find("total_error_replies:3"), std::string::npos);
  const std::string ks = c_->command({"INFO", "keyspace"})->str;
  EXPECT_NE(ks.find("db0:keys=1,expires=0,avg_ttl=0"), std::string::npos) << ks;
  EXPECT_NE(ks.find("db2:keys=1,expires=1,avg_ttl="), std::string::npos) << ks;
  EXPECT_EQ(r({"CONFIG", "RESETSTAT"}), "+OK");
  EXPECT_NE(c_->command({"INFO", "stats"})->str.find("total_error_replies:0"), std::string::npos);
  EXPECT_EQ(c_->command({"INFO", "errorstats"})->str.find("errorstat_"), std::string::npos);
}

TEST_P(Commands, LatencyMemoryScriptsWaitLastsave) {
  // LATENCY: a command slower than the threshold is recorded under "command".
  EXPECT_EQ(r({"LATENCY", "RESET"}), ":0");
  EXPECT_EQ(r({"LATENCY", "LATEST"}), "[]");
  EXPECT_EQ(r({"CONFIG", "SET", "latency-monitor-threshold", "1"}), "+OK");
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 100000; ++i) cmds.push_back({"SET", "key:" + std::to_string(i), "v"});
  ASSERT_TRUE(c_->pipeline(cmds).ok());
  for (int i = 0; i < 20 && r({"LATENCY", "LATEST"}) == "[]"; ++i) (void)c_->command({"KEYS", "*:1*9"});
  auto latest = c_->command({"LATENCY", "LATEST"});
  EXPECT_EQ(r({"CONFIG", "SET", "latency-monitor-threshold", "0"}), "+OK");
  ASSERT_TRUE(latest.ok());
  ASSERT_GE(latest->elements.size(), 1u) << fmt(*latest);
  ASSERT_EQ(latest->elements[0].elements.size(), 4u) << fmt(*latest);  // event, time, latest, max
  EXPECT_EQ(latest->elements[0].elements[0].str, "command");
  EXPECT_GE(latest->elements[0].elements[2].integer, 1);
  EXPECT_NE(c_->command({"LATENCY", "DOCTOR"})->str.find("The latency monitor is disabled"), std::string::npos);
  EXPECT_EQ(r({"CONFIG", "SET", "latency-monitor-threshold", "1000"}), "+OK");
  EXPECT_NE(c_->command({"LATENCY", "DOCTOR"})->str.find("1. command: "), std::string::npos);
  EXPECT_EQ(r({"CONFIG", "SET", "latency-monitor-threshold", "0"}), "+OK");
  EXPECT_EQ(r({"LATENCY", "RESET", "command"}), ":1");
  // LATENCY HISTOGRAM: calls and cumulative counts per power-of-two bucket (microseconds).
  EXPECT_EQ(r({"CONFIG", "RESETSTAT"}), "+OK");
  EXPECT_EQ(r({"SET", "a", "b"}), "+OK");
  EXPECT_EQ(r({"SET", "a", "c"}), "+OK");
  EXPECT_GE(c_->command({"CLIENT", "ID"})->integer, 1);
  auto h = c_->command({"LATENCY", "HISTOGRAM", "set", "client", "nosuch"});
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->elements.size(), 4u) << fmt(*h);  // set, client|id (RESP2: name, value pairs)
  EXPECT_EQ(h->elements[0].str, "set");
  ASSERT_EQ(h->elements[1].elements.size(), 4u) << fmt(*h);
  EXPECT_EQ(fmt(h->elements[1].elements[0]), "\"calls\"");
  EXPECT_EQ(fmt(h->elements[1].elements[1]), ":2");
  const auto& buckets = h->elements[1].elements[3].elements;
  ASSERT_GE(buckets.size(), 2u);
  EXPECT_EQ(buckets.back().integer, 2);  // cumulative: the last bucket holds every call
  EXPECT_EQ(h->elements[2].str, "client|id");
  EXPECT_EQ(r({"LATENCY", "HISTOGRAM", "nosuch"}), "[]");
  // latency-tracking no: calls are still counted (INFO commandstats), no histograms.
  EXPECT_EQ(r({"CONFIG", "SET", "latency-tracking", "no"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "RESETSTAT"}), "+OK");
  EXPECT_EQ(r({"SET", "a", "b"}), "+OK");
  EXPECT_EQ(r({"LATENCY", "HISTOGRAM", "set"}), "[]");
  EXPECT_NE(c_->command({"INFO", "commandstats"})->str.find("cmdstat_set:calls=1,"), std::string::npos);
  EXPECT_EQ(r({"CONFIG", "SET", "latency-tracking", "yes"}), "+OK");
  EXPECT_EQ(r({"LATENCY", "LATEST"}), "[]");
  // MEMORY USAGE: grows with the value; nil for a missing key.
  EXPECT_EQ(r({"SET", "small", "x"}), "+OK");
  EXPECT_EQ(r({"SET", "big", std::string(100000, 'x')}), "+OK");
  const int64_t small = c_->command({"MEMORY", "USAGE", "small"})->integer;
  const int64_t big = c_->command({"MEMORY", "USAGE", "big", "SAMPLES", "0"})->integer;
  EXPECT_GT(small, 0);
  EXPECT_GE(big, 100000);
  EXPECT_LT(small, 200);
  EXPECT_EQ(r({"MEMORY", "USAGE", "nope"}), "nil");
  EXPECT_EQ(r({"MEMORY", "USAGE", "big", "SAMPLES"}), "-ERR syntax error");
  // No script engine: flushing and listing nothing is true, loading or running is refused.
  EXPECT_EQ(r({"FUNCTION", "FLUSH"}), "+OK");
  EXPECT_EQ(r({"FUNCTION", "FLUSH", "ASYNC"}), "+OK");
  EXPECT_EQ(r({"FUNCTION", "LIST"}), "[]");
  const std::string no_scripts =
      "-ERR conduit-kv has no script engine: Lua scripts and functions (EVAL, FUNCTION LOAD, SCRIPT LOAD) are not "
      "supported";
  EXPECT_EQ(r({"FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() return 1 end)"}), no_scripts);
  EXPECT_EQ(r({"SCRIPT", "LOAD", "return 1"}), no_scripts);
  EXPECT_EQ(r({"SCRIPT", "FLUSH"}), "+OK");
  EXPECT_EQ(r({"EVAL", "return 1", "0"}).substr(0, 27), "-ERR unknown command 'EVAL'");
  // WAIT: no replicas, so 0 at once; LASTSAVE: the start time (no RDB saves).
  EXPECT_EQ(r({"WAIT", "0", "0"}), ":0");
  EXPECT_EQ(r({"WAIT", "1", "10"}), ":0");
  const int64_t lastsave = c_->command({"LASTSAVE"})->integer;
  EXPECT_GT(lastsave, 1600000000);
  EXPECT_LE(lastsave, static_cast<int64_t>(std::time(nullptr)));
}

// conduit-kv is always a master: REPLICAOF NO ONE is true, following another server is
// refused (Redis' port check first).
TEST_P(Commands, ReplicaofNoOneOnly) {
  EXPECT_EQ(r({"REPLICAOF", "NO", "ONE"}), "+OK");
  EXPECT_EQ(r({"SLAVEOF", "no", "one"}), "+OK");
  EXPECT_EQ(r({"REPLICAOF", "127.0.0.1", "6380"}),
            "-ERR conduit-kv has no replication: it cannot become a replica of 127.0.0.1:6380 (REPLICAOF NO ONE is "
            "accepted; it is always a master)");
  EXPECT_EQ(r({"SLAVEOF", "h", "1"}).substr(0, 36), "-ERR conduit-kv has no replication: ");
  EXPECT_EQ(r({"REPLICAOF", "h", "port"}), "-ERR Invalid master port");
  EXPECT_EQ(r({"REPLICAOF", "h", "70000"}), "-ERR Invalid master port");
  EXPECT_EQ(r({"REPLICAOF", "NO"}), "-ERR wrong number of arguments for 'replicaof' command");
  EXPECT_NE(c_->command({"INFO", "replication"})->str.find("role:master"), std::string::npos);
  EXPECT_EQ(r({"CONFIG", "SET", "replicaof", "no one"}), "+OK");
}

#ifdef CONDUIT_KV_COMMANDS_RDMA
INSTANTIATE_TEST_SUITE_P(Transports, Commands, ::testing::Values("rdma"), [](const auto& p) { return p.param; });
#else
INSTANTIATE_TEST_SUITE_P(Transports, Commands, ::testing::Values("tcp", "shm", "tcp_io4"),
                         [](const auto& p) { return p.param; });

// --- servers with special options ------------------------------------------------------------------

TEST(ServerOptionsTest, RequirePass) {
  ServerOptions o;
  o.port = 0;
  o.requirepass = "s3cret";
  ServerThread s(o);
  ASSERT_TRUE(s.ok());
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  auto& cl = **c;
  EXPECT_EQ(fmt(cl.command({"GET", "k"})), "-NOAUTH Authentication required.");
  EXPECT_EQ(fmt(cl.command({"AUTH", "wrong"})), "-WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_EQ(fmt(cl.command({"HELLO", "3"})).substr(0, 7), "-NOAUTH");
  EXPECT_EQ(fmt(cl.command({"AUTH", "s3cret"})), "+OK");
  EXPECT_EQ(fmt(cl.command({"SET", "k", "v"})), "+OK");
  ClientOptions co;
  co.password = "s3cret";
  co.resp = RespVersion::kResp3;
  auto c3 = Client::connect(s.url("tcp"), co);
  ASSERT_TRUE(c3.ok()) << c3.status().to_string();
  EXPECT_EQ(fmt((*c3)->command({"GET", "k"})), "\"v\"");
  co.password = "nope";
  EXPECT_FALSE(Client::connect(s.url("tcp"), co).ok());
  ServerOptions o2;
  o2.port = 0;
  ServerThread s2(o2);
  auto c4 = Client::connect(s2.url("tcp"));
  EXPECT_EQ(fmt((*c4)->command({"AUTH", "x"})),
            "-ERR AUTH <password> called without any password configured for the default user. Are you sure your "
            "configuration is correct?");
}

TEST(ServerOptionsTest, MaxmemoryNoEvictionReturnsOom) {
  ServerOptions o;
  o.port = 0;
  ServerThread s(o);
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  auto& cl = **c;
  auto info = cl.command({"INFO", "memory"});
  const size_t at = info->str.find("used_memory:");
  const uint64_t used = std::stoull(info->str.substr(at + 12));
  const uint64_t limit = used + (8 << 20);
  EXPECT_EQ(fmt(cl.command({"CONFIG", "SET", "maxmemory", std::to_string(limit)})), "+OK");
  const std::string value(64 * 1024, 'x');
  std::string last;
  int i = 0;
  for (; i < 1000; ++i) {
    last = fmt(cl.command({"SET", "k" + std::to_string(i), value}));
    if (last != "+OK") break;
  }
  EXPECT_EQ(last, "-OOM command not allowed when used memory > 'maxmemory'.");
  EXPECT_GT(i, 10);
  EXPECT_LT(i, 1000);
  // Reads and deletes still work; deleting makes room again.
  EXPECT_EQ(fmt(cl.command({"GET", "nope"})), "nil");
  EXPECT_EQ(fmt(cl.command({"FLUSHALL"})), "+OK");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(fmt(cl.command({"SET", "again", "v"})), "+OK");
}

TEST(ServerOptionsTest, MaxClients) {
  ServerOptions o;
  o.port = 0;
  o.maxclients = 2;
  ServerThread s(o);
  auto a = Client::connect(s.url("tcp"));
  auto b = Client::connect(s.url("tcp"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(fmt((*a)->command({"PING"})), "+PONG");
  EXPECT_EQ(fmt((*b)->command({"PING"})), "+PONG");
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());  // TCP accepts; the server answers and closes
  auto r = (*c)->raw("", 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(fmt((*r)[0]), "-ERR max number of clients reached");
  EXPECT_NE(s.info("stats").find("rejected_connections:1"), std::string::npos);
}

TEST(ServerOptionsTest, ShutdownCommand) {
  ServerOptions o;
  o.port = 0;
  ServerThread s(o);
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  auto r = (*c)->command({"SHUTDOWN", "NOSAVE"});
  EXPECT_FALSE(r.ok());  // no reply: the connection closes
  for (int i = 0; i < 100 && !s.shutdown_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(s.shutdown_requested());
}
// maxmemory policies pick their victims as Redis does.  Each case fills a few 256 KiB
// values, then lowers maxmemory just below the memory in use (CONFIG SET evicts at once,
// as Redis' updateMaxmemory), so exactly one key must go; maxmemory-samples 64 over at most
// four candidates makes the sampling see every key (a miss has odds below 1e-7).
class Eviction : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.maxmemory_samples = 64;
    server_ = std::make_unique<ServerThread>(o);
    ASSERT_TRUE(server_->ok());
    auto c = Client::connect(server_->url("tcp"));
    ASSERT_TRUE(c.ok());
    c_ = std::move(c).value();
  }
  std::string r(std::initializer_list<std::string_view> args) { return fmt(c_->command(args)); }
  void set_big(const std::string& key, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> cmd = {"SET", key, std::string(256 * 1024, 'v')};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    ASSERT_EQ(fmt(c_->command(cmd)), "+OK");
  }
  uint64_t used() {
    const std::string info = c_->command({"INFO", "memory"})->str;
    return std::stoull(info.substr(info.find("used_memory:") + 12));
  }
  // Lowers maxmemory 64 KiB below what is in use: one 256 KiB value must go.
  std::string squeeze() { return r({"CONFIG", "SET", "maxmemory", std::to_string(used() - 64 * 1024)}); }
  int64_t evicted() {
    const std::string info = c_->command({"INFO", "stats"})->str;
    return std::stoll(info.substr(info.find("evicted_keys:") + 13));
  }
  std::unique_ptr<ServerThread> server_;
  std::unique_ptr<Client> c_;
};

TEST_F(Eviction, AllkeysLruEvictsTheLeastRecentlyUsed) {
  ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "+OK");
  for (const char* k : {"old", "a", "b", "c"}) set_big(k);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the LRU clock counts seconds
  EXPECT_EQ(r({"TOUCH", "a", "b", "c"}), ":3");
  EXPECT_GE(c_->command({"OBJECT", "IDLETIME", "old"})->integer, 2);
  EXPECT_EQ(squeeze(), "+OK");
  EXPECT_EQ(r({"EXISTS", "old"}), ":0");
  EXPECT_EQ(r({"EXISTS", "a", "b", "c"}), ":3");
  EXPECT_EQ(evicted(), 1);
}

TEST_F(Eviction, VolatileLruTouchesOnlyKeysWithATtl) {
  ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"}), "+OK");
  set_big("oldest-no-ttl");
  set_big("old-ttl", {"EX", "1000"});
  set_big("new-ttl", {"EX", "1000"});
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_EQ(r({"TOUCH", "new-ttl"}), ":1");
  EXPECT_EQ(squeeze(), "+OK");
  EXPECT_EQ(r({"EXISTS", "old-ttl"}), ":0");
  EXPECT_EQ(r({"EXISTS", "oldest-no-ttl", "new-ttl"}), ":2");
}

TEST_F(Eviction, VolatileTtlEvictsTheNearestExpiry) {
  ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", "volatile-ttl"}), "+OK");
  set_big("persistent");
  set_big("soon", {"EX", "100"});
  set_big("later", {"EX", "1000"});
  set_big("latest", {"EX", "5000"});
  EXPECT_EQ(squeeze(), "+OK");
  EXPECT_EQ(r({"EXISTS", "soon"}), ":0");
  EXPECT_EQ(r({"EXISTS", "persistent", "later", "latest"}), ":3");
}

TEST_F(Eviction, VolatilePoliciesWithoutTtlKeysReplyOom) {
  for (const char* policy : {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    ASSERT_EQ(r({"FLUSHALL"}), "+OK");
    ASSERT_EQ(r({"CONFIG", "SET", "maxmemory", "0"}), "+OK");
    ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", policy}), "+OK");
    set_big("a");
    set_big("b");
    EXPECT_EQ(squeeze(), "+OK");
    EXPECT_EQ(r({"EXISTS", "a", "b"}), ":2") << policy;
    EXPECT_EQ(r({"SET", "c", "v"}), "-OOM command not allowed when used memory > 'maxmemory'.") << policy;
    EXPECT_EQ(r({"GET", "c"}), "nil") << policy;  // reads still work
    EXPECT_EQ(r({"DEL", "a"}), ":1") << policy;   // and deletes
  }
  EXPECT_EQ(evicted(), 0);
}

TEST_F(Eviction, AllkeysLfuKeepsFrequentlyUsedKeys) {
  ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"}), "+OK");
  ASSERT_EQ(r({"CONFIG", "SET", "lfu-log-factor", "0"}), "+OK");  // every access counts
  for (const char* k : {"hot", "warm", "cold"}) set_big(k);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(r({"TOUCH", "hot"}), ":1");
  for (int i = 0; i < 5; ++i) ASSERT_EQ(r({"TOUCH", "warm"}), ":1");
  const int64_t hot = c_->command({"OBJECT", "FREQ", "hot"})->integer;
  const int64_t warm = c_->command({"OBJECT", "FREQ", "warm"})->integer;
  const int64_t cold = c_->command({"OBJECT", "FREQ", "cold"})->integer;
  EXPECT_GT(hot, warm);
  EXPECT_GT(warm, cold);
  EXPECT_EQ(r({"OBJECT", "IDLETIME", "hot"}),
            "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between "
            "policies at runtime LRU and LFU data will take some time to adjust.");
  EXPECT_EQ(squeeze(), "+OK");
  EXPECT_EQ(r({"EXISTS", "cold"}), ":0");
  EXPECT_EQ(r({"EXISTS", "hot", "warm"}), ":2");
}

TEST_F(Eviction, AllkeysRandomEvictsAnyKey) {
  ASSERT_EQ(r({"CONFIG", "SET", "maxmemory-policy", "allkeys-random"}), "+OK");
  for (const char* k : {"a", "b", "c"}) set_big(k);
  EXPECT_EQ(squeeze(), "+OK");
  EXPECT_EQ(r({"EXISTS", "a", "b", "c"}), ":2");
  EXPECT_EQ(r({"SET", "d", "v"}), "+OK");
}

#endif  // CONDUIT_KV_COMMANDS_RDMA

}  // namespace
}  // namespace conduit::kv
