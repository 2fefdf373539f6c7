// Property: any sequence of commands the server accepted leaves an append-only file that
// loads to the same dataset (issue 9, item 1).  Random sequences over every type, random
// choices (SPOP), relative and absolute expiries, INCRBYFLOAT, XADD *, SELECT, SORT ... STORE, commands
// that fail (wrong type, bad arguments), and a BGREWRITEAOF in the middle of some runs.
// Values up to 1.3 MB are written under proto-max-bulk-len 4mb and the server restarts
// with 1mb.  The dataset is dumped canonically (per database: keys sorted, type, expiry,
// contents) before shutdown and after the restart, and the dumps must be equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

using Cmd = std::vector<std::string>;

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  Cmd next() {
    const std::string k = key();
    switch (pick(35)) {
      case 0: return {"SET", k, value()};
      case 1: return {"SET", k, value(), "EX", std::to_string(1000 + pick(100000))};
      case 2: return {"SET", k, value(), "PXAT", "1"};  // in the past: the key goes away
      case 3: return {"SET", k, value(), pick(2) ? "NX" : "XX", "GET"};
      case 4: return {"APPEND", k, value()};
      case 5: return {"INCRBY", k, std::to_string(static_cast<int64_t>(pick(2001)) - 1000)};
      case 6: return {"INCRBYFLOAT", k, std::to_string(pick(1000)) + "." + std::to_string(pick(1000))};
      case 7: return {"MSET", k, value(), key(), value()};
      case 8: return {"DEL", k, key()};
      case 9: return {"EXPIRE", k, std::to_string(1000 + pick(100000))};
      case 10: return {"PEXPIREAT", k, pick(4) == 0 ? "9223372036854775807" : std::to_string(4'000'000'000'000ull + pick(1000000))};
      case 11: return {"PERSIST", k};
      case 12: return {"RENAME", k, key()};
      case 13: return {"LPUSH", k, value(), value()};
      case 14: return {"RPUSH", k, value()};
      case 15: return {pick(2) ? "LPOP" : "RPOP", k, std::to_string(pick(3))};
      case 16: return {"LTRIM", k, std::to_string(pick(3)), std::to_string(static_cast<int>(pick(6)) - 3)};
      case 17: return {"HSET", k, field(), value(), field(), value()};
      case 18: return {"HDEL", k, field()};
      case 19: return {"HINCRBY", k, field(), std::to_string(pick(100))};
      case 20: return {"SADD", k, field(), field(), field()};
      case 21: return {"SREM", k, field()};
      case 22: return {"SPOP", k, std::to_string(pick(4))};
      case 23: return {"SPOP", k};
      case 24: return {"ZADD", k, score(), field(), score(), field()};
      case 25: return {"ZINCRBY", k, score(), field()};
      case 26: return {"ZREM", k, field()};
      case 27: return {pick(2) ? "ZPOPMIN" : "ZPOPMAX", k, std::to_string(pick(3))};
      case 28: return {"XADD", k, "*", field(), value()};
      case 29: return {"XADD", k, "MAXLEN", std::to_string(pick(4)), "*", field(), value()};
      case 30: return {"SELECT", std::to_string(pick(3))};
      case 31: return {"GETDEL", k};
      case 32: return {"SETEX", k, std::to_string(1000 + pick(1000)), value()};
      case 33: return sort_store(k);
      default: return {pick(64) == 0 ? "FLUSHDB" : "GETSET", k, value()};
    }
  }

 private:
  // SORT ... STORE is logged as sent and sorts again at load: its result must not depend on
  // a hash table's order (sets, sorted sets), also where every element ties.
  Cmd sort_store(const std::string& k) {
    switch (pick(4)) {
      case 0: return {"SORT", k, "BY", "w*", "ALPHA", "STORE", key()};  // no weights: all tie
      case 1: return {"SORT", k, "BY", "nosort", pick(2) ? "ASC" : "DESC", "LIMIT", "1", std::to_string(pick(5)), "STORE", key()};
      case 2: return {"SORT", k, "ALPHA", "DESC", "GET", "#", "GET", "k*", "STORE", key()};
      default: return {"SORT", k, "BY", "k*->" + field(), "STORE", key()};  // numeric: often an error
    }
  }
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  std::string key() { return "k" + std::to_string(pick(24)); }
  std::string field() { return "f" + std::to_string(pick(12)); }
  std::string score() { return std::to_string(static_cast<int>(pick(200)) - 100) + "." + std::to_string(pick(4) * 25); }
  std::string value() {
    if (pick(500) == 0) return std::string((1 << 20) + pick(300000), 'B');  // above the restart's bulk limit
    switch (pick(10)) {
      case 0: return std::string(pick(20000), static_cast<char>('a' + pick(26)));  // a few big ones
      case 1: return std::to_string(static_cast<int64_t>(pick(1000)) - 500);       // counters
      case 2: {
        std::string b(pick(16), '\0');  // binary, CR/LF included
        for (char& c : b) c = static_cast<char>(pick(256));
        return b;
      }
      default: return "v" + std::to_string(pick(1000));
    }
  }
  std::mt19937_64 rng_;
};

std::string quote(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') o += static_cast<char>(c);
    else o += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
  }
  return o;
}

// Everything in databases 0..2, canonically.
std::string dump(Client& c) {
  std::string out;
  for (int db = 0; db < 3; ++db) {
    EXPECT_EQ(fmt(c.command({"SELECT", std::to_string(db)})), "+OK");
    auto keys = c.command({"KEYS", "*"});
    EXPECT_TRUE(keys.ok());
    std::vector<std::string> names;
    for (const Reply& k : keys->elements) names.push_back(k.str);
    std::sort(names.begin(), names.end());
    for (const std::string& k : names) {
      const std::string type = c.command({"TYPE", k})->str;
      out += std::to_string(db) + " " + quote(k) + " " + type + " exp=" + fmt(c.command({"PEXPIRETIME", k})) + " ";
      std::vector<std::string> items;
      if (type == "string") {
        out += quote(c.command({"GET", k})->str);
      } else if (type == "list") {
        out += quote(fmt(c.command({"LRANGE", k, "0", "-1"})));
      } else if (type == "hash") {
        auto r = c.command({"HGETALL", k});
        for (size_t i = 0; i + 1 < r->elements.size(); i += 2) items.push_back(r->elements[i].str + "=" + r->elements[i + 1].str);
      } else if (type == "set") {
        auto r = c.command({"SMEMBERS", k});
        for (const Reply& m : r->elements) items.push_back(m.str);
      } else if (type == "zset") {
        out += quote(fmt(c.command({"ZRANGE", k, "0", "-1", "WITHSCORES"})));
      } else if (type == "stream") {
        out += quote(fmt(c.command({"XRANGE", k, "-", "+"})));
      }
      std::sort(items.begin(), items.end());
      for (const std::string& i : items) out += quote(i) + ",";
      out += "\n";
    }
  }
  EXPECT_EQ(fmt(c.command({"SELECT", "0"})), "+OK");
  return out;
}

void wait_for_rewrite(ServerThread& s) {
  for (int i = 0; i < 1000; ++i) {
    const std::string info = s.info("persistence");
    if (info.find("aof_rewrite_in_progress:0") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "rewrite did not finish";
}

class AofProperty : public ::testing::TestWithParam<uint64_t> {};

TEST_P(AofProperty, AcceptedCommandsReloadToTheSameDataset) {
  const uint64_t seed = GetParam();
  TempDir dir;
  ServerOptions o;
  o.port = 0;
  o.appendonly = true;
  o.appendfsync = AppendFsync::kNo;
  o.dir = dir.path();
  o.limits.max_bulk_len = 4 << 20;
  Generator gen(seed);
  std::string before;
  size_t accepted = 0;
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    constexpr int kBatches = 30, kPerBatch = 100;
    for (int b = 0; b < kBatches; ++b) {
      std::vector<Cmd> batch;
      for (int i = 0; i < kPerBatch; ++i) batch.push_back(gen.next());
      auto replies = (*c)->pipeline(batch);
      ASSERT_TRUE(replies.ok()) << replies.status().to_string();
      for (const Reply& r : *replies) accepted += r.is_error() ? 0 : 1;
      // Some runs rewrite the file half way, with the writes still coming.
      if (b == kBatches / 2 && seed % 2 == 1) {
        ASSERT_EQ(fmt((*c)->command({"BGREWRITEAOF"})), "+Background append only file rewriting started");
      }
    }
    if (seed % 2 == 1) wait_for_rewrite(s);
    before = dump(**c);
  }
  EXPECT_GT(accepted, 1000u);
  o.limits.max_bulk_len = 1 << 20;  // restarted with a smaller limit than the values written
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  const std::string after = dump(**c);
  EXPECT_EQ(after, before) << "seed " << seed;
  EXPECT_GT(std::count(before.begin(), before.end(), '\n'), 10) << before;
}

INSTANTIATE_TEST_SUITE_P(Seeds, AofProperty, ::testing::Values(1, 2, 3, 4, 5, 6));

}  // namespace
}  // namespace conduit::kv
