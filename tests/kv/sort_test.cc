// SORT and SORT_RO (src/kv/commands_sort.cc): every form, Redis 7.0.15's replies and errors
// (checked against redis-server 7.0.15), STORE as a write (WATCH, maxmemory), and the AOF
// replay of a stored result.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

class Sort : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.port = 0;
    server_ = new ServerThread(o);
    ASSERT_TRUE(server_->ok()) << server_->status().to_string();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    c_ = connect();
    ASSERT_EQ(r({"FLUSHALL"}), "+OK");
  }
  static std::unique_ptr<Client> connect() {
    auto c = Client::connect(server_->url("tcp"));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  std::string r(std::initializer_list<std::string_view> args) { return fmt(c_->command(args)); }
  std::string r(const std::vector<std::string>& args) { return fmt(c_->command(args)); }

  static ServerThread* server_;
  std::unique_ptr<Client> c_;
};
ServerThread* Sort::server_ = nullptr;

TEST_F(Sort, NumericAlphaAndDesc) {
  EXPECT_EQ(r({"RPUSH", "l", "10", "2", "3.5", "-1", "1e2"}), ":5");
  EXPECT_EQ(r({"SORT", "l"}), "[\"-1\", \"2\", \"3.5\", \"10\", \"1e2\"]");
  EXPECT_EQ(r({"SORT", "l", "DESC"}), "[\"1e2\", \"10\", \"3.5\", \"2\", \"-1\"]");
  EXPECT_EQ(r({"SORT", "l", "desc", "ASC"}), "[\"-1\", \"2\", \"3.5\", \"10\", \"1e2\"]");  // the last one wins
  EXPECT_EQ(r({"SORT", "l", "ALPHA"}), "[\"-1\", \"10\", \"1e2\", \"2\", \"3.5\"]");
  // strtod's forms: blanks before, hex, inf; an empty string is 0.  Equal scores: by bytes.
  EXPECT_EQ(r({"RPUSH", "n", " 5", "0x10", "-inf", "", "5", "inf", "+5"}), ":7");
  EXPECT_EQ(r({"SORT", "n"}), "[\"-inf\", \"\", \" 5\", \"+5\", \"5\", \"0x10\", \"inf\"]");
  EXPECT_EQ(r({"SORT", "n", "DESC"}), "[\"inf\", \"0x10\", \"5\", \"+5\", \" 5\", \"\", \"-inf\"]");
  // A set and a sorted set sort by their members.
  EXPECT_EQ(r({"SADD", "s", "3", "1", "2"}), ":3");
  EXPECT_EQ(r({"SORT", "s"}), "[\"1\", \"2\", \"3\"]");
  EXPECT_EQ(r({"ZADD", "z", "1", "a", "5", "b", "2", "c"}), ":3");
  EXPECT_EQ(r({"SORT", "z", "ALPHA", "DESC"}), "[\"c\", \"b\", \"a\"]");
  EXPECT_EQ(r({"SORT", "missing"}), "[]");
  EXPECT_EQ(r({"SORT_RO", "l", "LIMIT", "1", "2"}), "[\"2\", \"3.5\"]");
}

TEST_F(Sort, AlphaComparesAsStrcollInTheCLocaleAndStoreComparesBytes) {
  // strcoll stops at a NUL: "a\0b", "a\0a" and "a" are equal and keep their order (stable,
  // also under DESC); STORE compares all the bytes.
  const std::vector<std::string> push = {"RPUSH", "l", std::string("a\0b", 3), std::string("a\0a", 3), "b", "a"};
  EXPECT_EQ(r(push), ":4");
  auto got = c_->command({"SORT", "l", "ALPHA"});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->elements.size(), 4u);
  EXPECT_EQ(got->elements[0].str, std::string("a\0b", 3));
  EXPECT_EQ(got->elements[1].str, std::string("a\0a", 3));
  EXPECT_EQ(got->elements[2].str, "a");
  EXPECT_EQ(got->elements[3].str, "b");
  EXPECT_EQ(r({"SORT", "l", "ALPHA", "STORE", "d"}), ":4");
  got = c_->command({"LRANGE", "d", "0", "-1"});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->elements.size(), 4u);
  EXPECT_EQ(got->elements[0].str, "a");
  EXPECT_EQ(got->elements[1].str, std::string("a\0a", 3));
  EXPECT_EQ(got->elements[2].str, std::string("a\0b", 3));
  EXPECT_EQ(got->elements[3].str, "b");
}

TEST_F(Sort, LimitIsClampedAsRedisDoes) {
  EXPECT_EQ(r({"RPUSH", "l", "3", "1", "2"}), ":3");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "0", "2"}), "[\"1\", \"2\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "-5", "2"}), "[\"1\", \"2\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "1", "-1"}), "[\"2\", \"3\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "2", "100"}), "[\"3\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "3", "1"}), "[]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "0", "0"}), "[]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "2", "9223372036854775807"}), "[\"3\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "9223372036854775807", "9223372036854775807"}), "[]");
  EXPECT_EQ(r({"SORT_RO", "l", "BY", "a", "LIMIT", "2", "9223372036854775807"}), "[\"2\"]");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "1", "x"}), "-ERR value is not an integer or out of range");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "1"}), "-ERR syntax error");
}

TEST_F(Sort, ByKeysAndHashFields) {
  EXPECT_EQ(r({"RPUSH", "l", "a", "b", "c", "d"}), ":4");
  EXPECT_EQ(r({"MSET", "w_a", "3", "w_b", "1", "w_c", "2"}), "+OK");  // w_d missing: 0
  EXPECT_EQ(r({"SORT", "l", "BY", "w_*"}), "[\"d\", \"b\", \"c\", \"a\"]");
  EXPECT_EQ(r({"SORT", "l", "BY", "w_*", "DESC", "LIMIT", "0", "2"}), "[\"a\", \"c\"]");
  EXPECT_EQ(r({"HSET", "h_a", "f", "1"}), ":1");
  EXPECT_EQ(r({"HSET", "h_b", "f", "0.5"}), ":1");
  EXPECT_EQ(r({"HSET", "h_c", "g", "9"}), ":1");  // no field f: 0
  EXPECT_EQ(r({"SORT", "l", "BY", "h_*->f"}), "[\"c\", \"d\", \"b\", \"a\"]");
  // ALPHA BY: a missing value first, equal values in input order (also under DESC).
  EXPECT_EQ(r({"MSET", "v_a", "x", "v_c", "x", "v_d", "m"}), "+OK");
  EXPECT_EQ(r({"SORT", "l", "BY", "v_*", "ALPHA"}), "[\"b\", \"d\", \"a\", \"c\"]");
  EXPECT_EQ(r({"SORT", "l", "BY", "v_*", "ALPHA", "DESC"}), "[\"a\", \"c\", \"d\", \"b\"]");
  // A value of the wrong type counts as missing; "->" at the very end is part of the key.
  EXPECT_EQ(r({"SADD", "w_d", "x"}), ":1");
  EXPECT_EQ(r({"SORT", "l", "BY", "w_*"}), "[\"d\", \"b\", \"c\", \"a\"]");
  EXPECT_EQ(r({"SET", "x:a->", "100"}), "+OK");
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "GET", "x:*->", "LIMIT", "0", "1"}), "[\"100\"]");
}

TEST_F(Sort, NosortKeepsTheCollectionsOrderAndLimitPicksItsRange) {
  EXPECT_EQ(r({"LPUSH", "l", "2", "1", "4", "3", "5"}), ":5");
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort"}), "[\"5\", \"3\", \"4\", \"1\", \"2\"]");
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "DESC"}), "[\"2\", \"1\", \"4\", \"3\", \"5\"]");
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"}), "[\"1\", \"4\"]");
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "LIMIT", "1", "2"}), "[\"3\", \"4\"]");
  // One BY without '*' is enough, whatever comes after it.
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "BY", "w_*"}), "[\"5\", \"3\", \"4\", \"1\", \"2\"]");
  EXPECT_EQ(r({"ZADD", "z", "1", "a", "5", "b", "2", "c", "10", "d", "3", "e"}), ":5");
  EXPECT_EQ(r({"SORT", "z", "BY", "nosort"}), "[\"a\", \"c\", \"e\", \"b\", \"d\"]");
  EXPECT_EQ(r({"SORT", "z", "BY", "nosort", "DESC"}), "[\"d\", \"b\", \"e\", \"c\", \"a\"]");
  EXPECT_EQ(r({"SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"}), "[\"b\", \"e\"]");
  EXPECT_EQ(r({"SORT", "z", "BY", "nosort", "LIMIT", "3", "10"}), "[\"b\", \"d\"]");
  EXPECT_EQ(r({"SORT", "z", "BY", "nosort", "LIMIT", "5", "10"}), "[]");
  // A set stored with nosort is sorted ALPHA (its own order is its hash table's).
  EXPECT_EQ(r({"SADD", "s", "b", "aa", "c", "a"}), ":4");
  EXPECT_EQ(r({"SORT", "s", "BY", "_", "STORE", "d"}), ":4");
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), "[\"a\", \"aa\", \"b\", \"c\"]");
}

TEST_F(Sort, GetPatterns) {
  EXPECT_EQ(r({"RPUSH", "l", "2", "1"}), ":2");
  EXPECT_EQ(r({"MSET", "o_1", "one", "o_2", "two"}), "+OK");
  EXPECT_EQ(r({"HSET", "h_2", "f", "deux"}), ":1");
  EXPECT_EQ(r({"SORT", "l", "GET", "#", "GET", "o_*", "GET", "h_*->f", "GET", "const"}),
            "[\"1\", \"one\", nil, nil, \"2\", \"two\", \"deux\", nil]");
  EXPECT_EQ(r({"SORT", "l", "GET", "#", "GET", "h_*->f", "STORE", "d"}), ":4");
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), "[\"1\", \"\", \"2\", \"deux\"]");  // missing: ""
  EXPECT_EQ(r({"SORT", "l", "BY", "nosort", "GET", "o_*", "DESC"}), "[\"one\", \"two\"]");
}

TEST_F(Sort, Errors) {
  EXPECT_EQ(r({"SET", "str", "x"}), "+OK");
  EXPECT_EQ(r({"SORT", "str"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(r({"SORT", "str", "bad"}), "-ERR syntax error");  // options first
  EXPECT_EQ(r({"SORT"}), "-ERR wrong number of arguments for 'sort' command");
  EXPECT_EQ(r({"SORT_RO"}), "-ERR wrong number of arguments for 'sort_ro' command");
  EXPECT_EQ(r({"SORT_RO", "l", "STORE", "d"}), "-ERR syntax error");
  EXPECT_EQ(r({"SORT", "l", "STORE"}), "-ERR syntax error");
  EXPECT_EQ(r({"SORT", "l", "GET"}), "-ERR syntax error");
  EXPECT_EQ(r({"SORT", "l", "BY"}), "-ERR syntax error");
  const std::string bad = "-ERR One or more scores can't be converted into double";
  for (const char* v : {"1x", "3 ", "nan", "1e400", "1e-400", "0x"}) {
    EXPECT_EQ(r({"DEL", "n"}).substr(0, 1), ":");
    EXPECT_EQ(r({"RPUSH", "n", "1", v}), ":2");
    EXPECT_EQ(r({"SORT", "n"}), bad) << v;
    EXPECT_EQ(r({"SORT", "n", "STORE", "d"}), bad) << v;
    EXPECT_EQ(r({"EXISTS", "d"}), ":0") << "an error stores nothing";
  }
  EXPECT_EQ(r({"SORT", "n", "ALPHA"}), "[\"0x\", \"1\"]");
  EXPECT_EQ(r({"SORT", "n", "BY", "nosort"}), "[\"1\", \"0x\"]");  // nothing parsed
  EXPECT_EQ(r({"MSET", "w_1", "1", "w_0x", "bad"}), "+OK");
  EXPECT_EQ(r({"SORT", "n", "BY", "w_*"}), bad);
}

TEST_F(Sort, StoreReplacesDeletesAndCounts) {
  EXPECT_EQ(r({"RPUSH", "l", "3", "1", "2"}), ":3");
  EXPECT_EQ(r({"SET", "d", "x", "EX", "100"}), "+OK");
  EXPECT_EQ(r({"SORT", "l", "STORE", "d"}), ":3");
  EXPECT_EQ(r({"TYPE", "d"}), "+list");
  EXPECT_EQ(r({"TTL", "d"}), ":-1");
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), "[\"1\", \"2\", \"3\"]");
  EXPECT_EQ(r({"SORT", "l", "DESC", "STORE", "l"}), ":3");  // the source itself
  EXPECT_EQ(r({"LRANGE", "l", "0", "-1"}), "[\"3\", \"2\", \"1\"]");
  EXPECT_EQ(r({"SORT", "l", "STORE", "x", "STORE", "y"}), ":3");  // the last STORE
  EXPECT_EQ(r({"EXISTS", "x"}), ":0");
  EXPECT_EQ(r({"LLEN", "y"}), ":3");
  EXPECT_EQ(r({"SORT", "l", "LIMIT", "10", "10", "STORE", "z"}), ":0");
  EXPECT_EQ(r({"EXISTS", "z"}), ":0");
  EXPECT_EQ(r({"SORT", "missing", "STORE", "d"}), ":0");
  EXPECT_EQ(r({"EXISTS", "d"}), ":0");
  EXPECT_EQ(r({"COMMAND", "GETKEYS", "SORT", "abc", "STORE", "invalid", "STORE", "stillbad", "STORE", "def"}),
            "[\"abc\", \"def\"]");
  EXPECT_EQ(r({"COMMAND", "GETKEYS", "SORT", "abc", "LIMIT", "STORE", "x", "GET", "STORE"}), "[\"abc\"]");
  EXPECT_EQ(r({"COMMAND", "GETKEYS", "SORT_RO", "abc"}), "[\"abc\"]");
  EXPECT_EQ(r({"COMMAND", "INFO", "SORT", "SORT_RO"}),
            "[[\"sort\", :-2, [+write, +denyoom], :1, :1, :1, [], [], [], []], "
            "[\"sort_ro\", :-2, [+readonly], :1, :1, :1, [], [], [], []]]");
}

// What the AOF replay relies on, checked directly: in-process restarts share the hash seed,
// so SortAof below cannot see a result that follows a hash table's order.
TEST_F(Sort, StoredTiesDoNotFollowHashOrder) {
  std::vector<std::string> sadd = {"SADD", "s"}, zadd = {"ZADD", "z"}, members;
  for (int i = 0; i < 64; ++i) {
    members.push_back("m" + std::to_string(i * 37 % 64));
    sadd.push_back(members.back());
    zadd.push_back(std::to_string(i % 3));
    zadd.push_back(members.back());
  }
  EXPECT_EQ(r(sadd), ":64");
  EXPECT_EQ(r(zadd), ":64");
  std::sort(members.begin(), members.end());
  std::string bytes = "[";
  for (const auto& m : members) bytes += (bytes.size() > 1 ? ", \"" : "\"") + m + "\"";
  bytes += "]";
  EXPECT_EQ(r({"SORT", "s", "BY", "nokey_*", "ALPHA", "STORE", "d"}), ":64");  // every element ties
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), bytes) << "a set's ties: byte order";
  EXPECT_EQ(r({"SORT", "s", "BY", "nosort", "STORE", "d"}), ":64");
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), bytes) << "a set with nosort: ALPHA";
  EXPECT_EQ(r({"SORT", "z", "BY", "nokey_*", "ALPHA", "STORE", "d"}), ":64");
  EXPECT_EQ(r({"LRANGE", "d", "0", "-1"}), r({"ZRANGE", "z", "0", "-1"})) << "a sorted set's ties: score order";
}

TEST_F(Sort, StoreFailsTheWatchOfItsDestinationOnly) {
  auto other = connect();
  ASSERT_NE(other, nullptr);
  const auto watch_then = [&](std::initializer_list<std::string_view> watched,
                              std::initializer_list<std::string_view> write) {
    std::vector<std::string_view> w = {"WATCH"};
    w.insert(w.end(), watched.begin(), watched.end());
    EXPECT_EQ(fmt(c_->command(w)), "+OK");
    (void)other->command(write);
    EXPECT_EQ(r({"MULTI"}), "+OK");
    EXPECT_EQ(r({"PING"}), "+QUEUED");
    return r({"EXEC"});
  };
  EXPECT_EQ(r({"RPUSH", "src", "b", "a"}), ":2");
  EXPECT_EQ(watch_then({"dst"}, {"SORT", "src", "ALPHA", "STORE", "dst"}), "nil");
  EXPECT_EQ(watch_then({"src"}, {"SORT", "src", "ALPHA", "STORE", "dst"}), "[+PONG]") << "the source is only read";
  EXPECT_EQ(watch_then({"dst"}, {"SORT", "src", "ALPHA"}), "[+PONG]");
  EXPECT_EQ(watch_then({"dst"}, {"SORT_RO", "src", "ALPHA"}), "[+PONG]");
  // An empty result deletes an existing destination: a change.  A missing one: none.
  EXPECT_EQ(watch_then({"dst"}, {"SORT", "empty", "STORE", "dst"}), "nil");
  EXPECT_EQ(r({"EXISTS", "dst"}), ":0");
  EXPECT_EQ(watch_then({"dst"}, {"SORT", "empty", "STORE", "dst"}), "[+PONG]");
  // A client blocked on the destination gets the stored list.  A blocking Client belongs
  // to the thread that made it (its loop asserts so in debug builds): made in the thread.
  Result<Reply> popped = Status();
  std::thread t([&] {
    auto waiter = connect();
    if (waiter != nullptr) popped = waiter->command({"BLPOP", "dst", "10"});
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (r({"INFO", "clients"}).find("blocked_clients:1") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(r({"SORT", "src", "ALPHA", "STORE", "dst"}), ":2");
  t.join();
  EXPECT_EQ(fmt(popped), "[\"dst\", \"a\"]");
}

TEST_F(Sort, AboveMaxmemorySortIsRefusedAndSortRoIsNot) {
  EXPECT_EQ(r({"RPUSH", "l", "2", "1"}), ":2");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "1"}), "+OK");
  EXPECT_EQ(r({"SORT", "l", "STORE", "d"}), "-OOM command not allowed when used memory > 'maxmemory'.");
  EXPECT_EQ(r({"SORT", "l"}), "-OOM command not allowed when used memory > 'maxmemory'.");  // Redis: denyoom
  EXPECT_EQ(r({"SORT_RO", "l"}), "[\"1\", \"2\"]");
  EXPECT_EQ(r({"CONFIG", "SET", "maxmemory", "0"}), "+OK");
  EXPECT_EQ(r({"SORT", "l"}), "[\"1\", \"2\"]");
}

// SORT ... STORE goes to the AOF as sent; loading runs it again over the same data and must
// store the same list -- also where Redis' own order would come from a hash table (ties
// under ALPHA BY over a set, a set stored with nosort; both servers here share the
// process's hash seed, so StoredTiesDoNotFollowHashOrder checks that part directly).
TEST(SortAof, StoredResultsSurviveARestart) {
  TempDir dir;
  ServerOptions o;
  o.port = 0;
  o.appendonly = true;
  o.appendfsync = AppendFsync::kAlways;
  o.dir = dir.path();
  const std::vector<std::vector<std::string>> stores = {
      {"SORT", "l", "STORE", "d1"},
      {"SORT", "l", "BY", "w_*", "GET", "#", "GET", "h_*->f", "DESC", "STORE", "d2"},
      {"SORT", "s", "BY", "v_*", "ALPHA", "STORE", "d3"},
      {"SORT", "s", "BY", "nosort", "LIMIT", "1", "40", "STORE", "d4"},
      {"SORT", "z", "BY", "nosort", "DESC", "STORE", "d5"},
      {"SORT", "z", "BY", "v_*", "ALPHA", "STORE", "d6"},
      {"SORT", "l", "BY", "w_*", "STORE", "d7"},
  };
  std::vector<std::string> before;
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    auto& k = **c;
    for (int i = 0; i < 50; ++i) {
      const std::string m = "m" + std::to_string(i * 7 % 50);
      ASSERT_TRUE(k.command({"RPUSH", "l", std::to_string(i * 13 % 17)}).ok());
      ASSERT_TRUE(k.command({"SADD", "s", m}).ok());
      ASSERT_TRUE(k.command({"ZADD", "z", std::to_string(i % 5), m}).ok());
      // Few distinct values: many ties under ALPHA BY.
      ASSERT_TRUE(k.command({"SET", "v_" + m, std::to_string(i % 3)}).ok());
      ASSERT_TRUE(k.command({"SET", "w_" + std::to_string(i), std::to_string(i % 4)}).ok());
      ASSERT_TRUE(k.command({"HSET", "h_" + std::to_string(i), "f", "x" + std::to_string(i)}).ok());
    }
    ASSERT_EQ(fmt(k.command({"SET", "d7", "old"})), "+OK");
    ASSERT_EQ(fmt(k.command({"SET", "w_3", "9", "PX", "1"})), "+OK");  // expired by SORT's read
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (const auto& cmd : stores) {
      const auto n = k.command(cmd);
      ASSERT_TRUE(n.ok());
      ASSERT_EQ(n->type, ReplyType::kInteger) << fmt(n);
      EXPECT_GT(n->integer, 0) << cmd.back();
      before.push_back(fmt(k.command({"LRANGE", cmd.back(), "0", "-1"})));
    }
    ASSERT_EQ(fmt(k.command({"SORT", "nothing", "STORE", "d1"})), ":0");  // deletes d1
    before[0] = "[]";
  }
  const std::string aof = testing::read_file(dir.path() + "/appendonly.aof");
  EXPECT_NE(aof.find("$4\r\nSORT\r\n"), std::string::npos);
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  for (size_t i = 0; i < stores.size(); ++i)
    EXPECT_EQ(fmt((*c)->command({"LRANGE", stores[i].back(), "0", "-1"})), before[i]) << stores[i].back();
  EXPECT_EQ(fmt((*c)->command({"EXISTS", "w_3"})), ":0");
}

}  // namespace
}  // namespace conduit::kv
