// Small incompatibilities with Redis 7.0 found by hostile testing (issue 9, item 11):
// SCAN's cursor, CLIENT KILL's filters, CLIENT NO-EVICT's values, CONFIG SET with a
// duplicated (or any refused) parameter, one validation for the command line and CONFIG
// SET, and INCRBYFLOAT's long double arithmetic.  Expected texts are Redis 7.0's.
#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;

class Compat : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    server_ = std::make_unique<ServerThread>(o);
    ASSERT_TRUE(server_->ok()) << server_->status().to_string();
    auto c = Client::connect(server_->url("tcp"));
    ASSERT_TRUE(c.ok());
    c_ = std::move(c).value();
  }
  std::string r(std::initializer_list<std::string_view> args) { return fmt(c_->command(args)); }
  std::unique_ptr<Client> other() { return std::move(Client::connect(server_->url("tcp"))).value(); }
  int64_t id_of(Client& c) { return c.command({"CLIENT", "ID"})->integer; }

  std::unique_ptr<ServerThread> server_;
  std::unique_ptr<Client> c_;
};

TEST_F(Compat, ScanCursorIsReadLikeStrtoull) {
  for (int i = 0; i < 20; ++i) ASSERT_EQ(r({"SET", "k" + std::to_string(i), "v"}), "+OK");
  // Redis parses the cursor with strtoull: "-1" is 2^64-1, a valid (if odd) cursor.
  auto s = c_->command({"SCAN", "-1"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->type, ReplyType::kArray) << fmt(*s);
  EXPECT_EQ(s->elements.size(), 2u);
  EXPECT_EQ(r({"SCAN", "18446744073709551616"}), "-ERR invalid cursor");  // ERANGE
  EXPECT_EQ(r({"SCAN", " 1"}), "-ERR invalid cursor");
  EXPECT_EQ(r({"SCAN", "1x"}), "-ERR invalid cursor");
  EXPECT_EQ(r({"SCAN", "+0", "COUNT", "100"}).substr(0, 5), "[\"0\",");
}

TEST_F(Compat, ClientKillFilters) {
  EXPECT_EQ(r({"CLIENT", "KILL"}), "-ERR wrong number of arguments for 'client|kill' command");
  EXPECT_EQ(r({"CLIENT", "KILL", "NOSUCH", "x"}), "-ERR syntax error");
  EXPECT_EQ(r({"CLIENT", "KILL", "ID"}), "-ERR No such client");  // old form: an address
  EXPECT_EQ(r({"CLIENT", "KILL", "ID", "1", "SKIPME"}), "-ERR syntax error");
  EXPECT_EQ(r({"CLIENT", "KILL", "SKIPME", "maybe"}), "-ERR syntax error");
  EXPECT_EQ(r({"CLIENT", "KILL", "ID", "0"}), "-ERR client-id should be greater than 0");
  EXPECT_EQ(r({"CLIENT", "KILL", "TYPE", "bogus"}), "-ERR Unknown client type 'bogus'");
  EXPECT_EQ(r({"CLIENT", "KILL", "USER", "alice"}), "-ERR No such user 'alice'");
  auto a = other(), b = other();
  const int64_t ida = id_of(*a);
  // Filters combine with AND: a's id with b's address matches nobody.
  auto binfo = b->command({"CLIENT", "INFO"})->str;
  const std::string baddr = binfo.substr(binfo.find("addr=") + 5, binfo.find(' ', binfo.find("addr=")) - binfo.find("addr=") - 5);
  EXPECT_EQ(r({"CLIENT", "KILL", "ID", std::to_string(ida), "ADDR", baddr}), ":0");
  EXPECT_EQ(r({"CLIENT", "KILL", "TYPE", "pubsub"}), ":0");
  // SKIPME yes (the default) spares the caller: every other normal client goes.
  EXPECT_EQ(r({"CLIENT", "KILL", "TYPE", "normal"}), ":2");
  EXPECT_EQ(r({"PING"}), "+PONG");
  EXPECT_FALSE(a->command({"PING"}).ok());
  EXPECT_FALSE(b->command({"PING"}).ok());
  // SKIPME no: the caller too (its reply goes out first).
  EXPECT_EQ(r({"CLIENT", "KILL", "ID", std::to_string(id_of(*c_)), "SKIPME", "no"}), ":1");
  EXPECT_FALSE(c_->command({"PING"}).ok());
}

TEST_F(Compat, ClientNoEvictTakesOnOrOff) {
  EXPECT_EQ(r({"CLIENT", "NO-EVICT", "on"}), "+OK");
  EXPECT_EQ(r({"CLIENT", "NO-EVICT", "OFF"}), "+OK");
  EXPECT_EQ(r({"CLIENT", "NO-EVICT", "maybe"}), "-ERR syntax error");
}

TEST_F(Compat, ConfigSetIsAllOrNothing) {
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "1mb", "maxmemory", "2mb"}),
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter");
  EXPECT_EQ(r({"CONFIG", "SET", "timeout", "5", "hz", "0"}),
            "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 1 and 500 inclusive");
  EXPECT_EQ(r({"CONFIG", "GET", "timeout"}), "[\"timeout\", \"0\"]");  // not half applied
  EXPECT_EQ(r({"CONFIG", "SET", "timeout", "5", "databases", "4"}),
            "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config");
  // Redis changes port at run time; conduit-kv refuses a change clearly (docs/KV.md).
  EXPECT_EQ(r({"CONFIG", "SET", "timeout", "5", "port", "1"}),
            "-ERR CONFIG SET failed (possibly related to argument 'port') - conduit-kv cannot change 'port' while it "
            "runs (restart it with --port)");
  EXPECT_EQ(r({"CONFIG", "GET", "timeout"}), "[\"timeout\", \"0\"]");  // not half applied
  EXPECT_EQ(r({"CONFIG", "SET", "timeout", "5", "hz", "20"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "GET", "timeout"}), "[\"timeout\", \"5\"]");
  EXPECT_EQ(r({"CONFIG", "GET", "hz"}), "[\"hz\", \"20\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "maxclients", "0"}),
            "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 1000000 "
            "inclusive");
}

// maxmemory-clients takes a memory value or Redis' "N%" form, with Redis' errors; client
// eviction is not implemented, so only its default (0, or 0%) is accepted.  A refused value
// rolls back the whole CONFIG SET (Redis' "CONFIG SET rollback on set error").
TEST_F(Compat, MaxmemoryClientsTakesPercentForm) {
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "10000002"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "10000001", "maxmemory-clients", "200%", "client-query-buffer-limit",
               "invalid"}),
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - percentage argument must be "
            "less or equal to 100");
  EXPECT_EQ(r({"CONFIG", "GET", "maxmemory"}), "[\"maxmemory\", \"10000002\"]");
  EXPECT_EQ(r({"CONFIG", "GET", "maxmemory-clients"}), "[\"maxmemory-clients\", \"0\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory-clients", "x%"}),
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - argument must be a memory or "
            "percent value");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory-clients", "-1%"}),
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - argument must be a memory or "
            "percent value");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory-clients", "0%"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "GET", "maxmemory-clients"}), "[\"maxmemory-clients\", \"0\"]");
  const std::string refused = r({"CONFIG", "SET", "maxmemory-clients", "50%"});
  EXPECT_NE(refused.find("does not implement what 'maxmemory-clients' switches on"), std::string::npos) << refused;
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory-clients", "0kb"}), "+OK");
}

// Redis' hidden debugging configs: an exact CONFIG GET returns them, a pattern never does.
TEST_F(Compat, HiddenConfigsOnlyByExactName) {
  EXPECT_EQ(r({"CONFIG", "GET", "key-load-delay"}), "[\"key-load-delay\", \"0\"]");
  EXPECT_EQ(r({"CONFIG", "GET", "KEY-LOAD-DELAY"}), "[\"key-load-delay\", \"0\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "key-load-delay", "10"}), "+OK");
  EXPECT_EQ(r({"CONFIG", "GET", "key-load-delay"}), "[\"key-load-delay\", \"10\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "key-load-delay", "soon"}),
            "-ERR CONFIG SET failed (possibly related to argument 'key-load-delay') - argument couldn't be parsed into "
            "an integer");
  EXPECT_EQ(r({"CONFIG", "SET", "lua-enable-deprecated-api", "yes"}),
            "-ERR CONFIG SET failed (possibly related to argument 'lua-enable-deprecated-api') - can't set immutable "
            "config");
  for (const char* name : {"key-load-delay", "rdb-key-save-delay", "watchdog-period", "use-exit-on-panic",
                           "loading-process-events-interval-bytes", "lua-enable-deprecated-api"}) {
    EXPECT_TRUE(get_server_option(ServerOptions(), name).has_value()) << name;
    const std::string all = r({"CONFIG", "GET", "*"});
    EXPECT_EQ(all.find(std::string("\"") + name + "\""), std::string::npos) << name;
    EXPECT_EQ(r({"CONFIG", "GET", std::string(name).substr(0, 5) + "*"}).find(name), std::string::npos) << name;
  }
  EXPECT_NE(r({"CONFIG", "GET", "*"}).find("\"maxmemory-clients\""), std::string::npos);  // listed ones still are
}

// The command line (set_server_option) and CONFIG SET use one table: for every option
// CONFIG SET may change, both accept and refuse the same values.
TEST_F(Compat, CommandLineAndConfigSetAgree) {
  const char* values[] = {"0",   "1",       "-1",  "nan",  "inf",  "500", "501", "1000000", "1000001", "yes",
                          "no",  "1mb",     "1kb", "100",  "",     "x",   "always", "everysec", "normal 0 0 0",
                          "normal 1mb 1mb 1", "normal 1 2", "noeviction", "2147483648"};
  int compared = 0;
  for (const ServerOptionInfo& info : server_option_list()) {
    if (!info.runtime || info.name == "requirepass") continue;  // requirepass would lock us out
    for (const char* v : values) {
      ServerOptions o;
      const bool cli_ok = set_server_option(&o, info.name, v).empty();
      const std::string reply = r({"CONFIG", "SET", info.name, v});
      EXPECT_EQ(cli_ok, reply == "+OK") << info.name << " " << v << ": " << reply;
      ++compared;
    }
    // Restore the default so later values are judged from the same state.
    ASSERT_EQ(r({"CONFIG", "SET", info.name, *get_server_option(ServerOptions(), info.name)}), "+OK") << info.name;
  }
  EXPECT_GT(compared, 300);
}

TEST_F(Compat, IncrbyfloatUsesLongDouble) {
  EXPECT_EQ(r({"SET", "f", "0.1"}), "+OK");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "0.2"}), "\"0.3\"");  // double would give 0.30000000000000004
  EXPECT_EQ(r({"SET", "f", "10.50"}), "+OK");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "0.1"}), "\"10.6\"");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "-5"}), "\"5.6\"");
  EXPECT_EQ(r({"SET", "f", "5.0e3"}), "+OK");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "2.0e2"}), "\"5200\"");
  EXPECT_EQ(r({"INCRBYFLOAT", "g", "-0"}), "\"0\"");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "1e5000"}), "-ERR value is not a valid float");  // overflows long double too
  EXPECT_EQ(r({"INCRBYFLOAT", "f", "inf"}), "-ERR increment would produce NaN or Infinity");
  EXPECT_EQ(r({"INCRBYFLOAT", "f", " 1"}), "-ERR value is not a valid float");
}

}  // namespace
}  // namespace conduit::kv
