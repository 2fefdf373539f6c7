// The AOF loader reads everything the writer can write (issue 9, item 1): commands with
// more arguments than a client may send, values longer than the proto-max-bulk-len the
// server restarts with, and it tells damage in the middle from a torn tail without ever
// allocating what a corrupt length claims.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "conduit/kv/resp.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

using testing::read_file;
using testing::write_file;

std::string record(const std::vector<std::string>& args) {
  ByteBuffer b;
  std::vector<std::string_view> v(args.begin(), args.end());
  append_command(&b, v);
  return std::string(b.data(), b.size());
}

ServerOptions aof_options(const TempDir& dir) {
  ServerOptions o;
  o.port = 0;
  o.appendonly = true;
  o.appendfsync = AppendFsync::kNo;
  o.dir = dir.path();
  return o;
}

std::string aof_path(const TempDir& d) { return d.path() + "/appendonly.aof"; }

// Every record of the file parses with the client limits: the writer never writes what a
// client could not have sent; SPOP's SREMs come in batches of 1024 members.
void expect_within_client_limits(const std::string& content, const ProtocolLimits& limits) {
  RequestParser p(limits);
  size_t off = 0, max_srem = 0;
  while (off < content.size()) {
    size_t consumed = 0;
    const auto o = p.parse(content.data() + off, content.size() - off, &consumed);
    ASSERT_NE(o, RequestParser::Outcome::kError) << p.error() << " at " << off;
    ASSERT_NE(o, RequestParser::Outcome::kNeedMore) << "incomplete record at " << off;
    if (o == RequestParser::Outcome::kCommand && p.args()[0] == "SREM") max_srem = std::max(max_srem, p.args().size());
    off += consumed;
  }
  EXPECT_EQ(max_srem, 1026u);  // SREM key + 1024 members
}

// The case is SPOP of 1.1M members against the 1,048,576-argument limit; the same
// happens at any scale, so the client limit is lowered to 10,000 arguments here (fast
// also under ASan).  SPOP of 25,000 used to be logged as one SREM of 25,002 arguments,
// which the loader then refused.
TEST(AofLoad, SpopCountLargerThanTheArgumentLimitSurvivesARestart) {
  TempDir dir;
  ServerOptions o = aof_options(dir);
  o.limits.max_multibulk_len = 10'000;
  constexpr int kMembers = 30'000, kPopped = 25'000;
  std::vector<std::string> left;
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    std::vector<std::vector<std::string>> batch;
    for (int i = 0; i < kMembers; i += 5'000) {
      std::vector<std::string> cmd = {"SADD", "s"};
      for (int j = i; j < i + 5'000; ++j) cmd.push_back("m" + std::to_string(j));
      batch.push_back(std::move(cmd));
    }
    ASSERT_TRUE((*c)->pipeline(batch).ok());
    auto popped = (*c)->command({"SPOP", "s", std::to_string(kPopped)});
    ASSERT_TRUE(popped.ok()) << popped.status().to_string();
    EXPECT_EQ(popped->elements.size(), static_cast<size_t>(kPopped));
    auto rest = (*c)->command({"SMEMBERS", "s"});
    ASSERT_TRUE(rest.ok());
    for (const Reply& m : rest->elements) left.push_back(m.str);
    std::sort(left.begin(), left.end());
    ASSERT_EQ(left.size(), static_cast<size_t>(kMembers - kPopped));
  }
  expect_within_client_limits(read_file(aof_path(dir)), o.limits);
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto rest = (*c)->command({"SMEMBERS", "s"});
  ASSERT_TRUE(rest.ok());
  std::vector<std::string> after;
  for (const Reply& m : rest->elements) after.push_back(m.str);
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, left);
  // Popping the rest propagates one DEL.
  EXPECT_EQ((*c)->command({"SPOP", "s", "100000000"})->elements.size(), left.size());
  EXPECT_EQ(fmt((*c)->command({"EXISTS", "s"})), ":0");
  EXPECT_NE(read_file(aof_path(dir)).find("*2\r\n$3\r\nDEL\r\n$1\r\ns\r\n"), std::string::npos);
}

TEST(AofLoad, AFileWithOneHugeCommandLoads) {
  // An older writer logged SPOP COUNT as one SREM with every member: such files must load
  // under the default client limit of 1,048,576 arguments (the 1.1M case).
  TempDir dir;
  constexpr int kMembers = 1'100'000;
  std::vector<std::string> sadd = {"SADD", "s"}, srem = {"SREM", "s"};
  for (int i = 0; i < kMembers; ++i) sadd.push_back(std::to_string(i));
  for (int i = 0; i < kMembers - 3; ++i) srem.push_back(std::to_string(i));
  write_file(aof_path(dir), record({"SELECT", "0"}) + record(sadd) + record(srem) + record({"SET", "after", "yes"}));
  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  EXPECT_EQ(fmt((*c)->command({"SCARD", "s"})), ":3");
  EXPECT_EQ(fmt((*c)->command({"GET", "after"})), "\"yes\"");
}

TEST(AofLoad, ValueLongerThanTheStartupBulkLimitLoads) {
  TempDir dir;
  ServerOptions o = aof_options(dir);
  o.limits.max_bulk_len = 1 << 20;  // --proto-max-bulk-len 1mb
  const std::string big(3 << 20, 'v');
  {
    ServerThread s(o);
    auto c = Client::connect(s.url("tcp"));
    EXPECT_EQ(fmt((*c)->command({"CONFIG", "SET", "proto-max-bulk-len", "8mb"})), "+OK");
    EXPECT_EQ(fmt((*c)->command({"SET", "big", big})), "+OK");
    EXPECT_EQ(fmt((*c)->command({"APPEND", "big", std::string(1 << 20, 'w')})), ":" + std::to_string(4 << 20));
  }
  ServerThread s(o);  // restarted with the 1mb limit
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  EXPECT_EQ(fmt((*c)->command({"STRLEN", "big"})), ":" + std::to_string(4 << 20));
  // Clients still get the limit they were given.
  EXPECT_EQ(fmt((*c)->command({"APPEND", "big", "x"})), "-ERR string exceeds maximum allowed size (proto-max-bulk-len)");
}

// A corrupt length in the middle must not pass for a torn tail (which would drop every
// command after it), nor allocate what it claims.
TEST(AofLoad, CorruptLengthInTheMiddleIsRefusedNamingTheRangeToCut) {
  const std::string before = record({"SET", "a", "1"}) + record({"SET", "b", "2"});
  const std::string after = record({"SET", "c", "3"}) + record({"RPUSH", "l", "x", "y"});
  for (const std::string& bad : {std::string("*2\r\n$3\r\nDEL\r\n$999999999999\r\nab\r\n"), std::string("*999999999999\r\n"),
                                  std::string("*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$40000000\r\nshort\r\n")}) {
    TempDir dir;
    const std::string content = before + bad + after;
    write_file(aof_path(dir), content);
    ServerOptions o = aof_options(dir);
    o.aof_load_truncated = true;
    {
      ServerThread s(o);
      ASSERT_FALSE(s.ok()) << bad;
      const std::string msg = s.status().to_string();
      const std::string x = std::to_string(before.size()), y = std::to_string(before.size() + bad.size());
      EXPECT_NE(msg.find("damaged at offset " + x), std::string::npos) << msg;
      EXPECT_NE(msg.find("next readable command starts at offset " + y), std::string::npos) << msg;
      EXPECT_NE(msg.find("head -c " + x), std::string::npos) << msg;
      EXPECT_NE(msg.find("tail -c +" + std::to_string(before.size() + bad.size() + 1)), std::string::npos) << msg;
      EXPECT_EQ(msg.find("truncate the file"), std::string::npos) << msg;
    }
    EXPECT_EQ(read_file(aof_path(dir)), content);  // left as it is
    // The advice keeps every command but the damaged one.
    write_file(aof_path(dir), content.substr(0, before.size()) + content.substr(before.size() + bad.size()));
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    EXPECT_EQ(fmt((*c)->command({"MGET", "a", "b", "c"})), "[\"1\", \"2\", \"3\"]");
    EXPECT_EQ(fmt((*c)->command({"LRANGE", "l", "0", "-1"})), "[\"x\", \"y\"]");
  }
}

TEST(AofLoad, TornTailWithAHugeDeclaredLengthIsDroppedWithoutAllocatingIt) {
  TempDir dir;
  const std::string good = record({"SET", "a", "1"});
  write_file(aof_path(dir), good + "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$999999999999\r\nthe-start-of-it");
  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  EXPECT_EQ(fmt((*c)->command({"GET", "a"})), "\"1\"");
  EXPECT_EQ(fmt((*c)->command({"EXISTS", "b"})), ":0");
  EXPECT_EQ(read_file(aof_path(dir)), good);
}

TEST(AofLoad, TornTailWithTruncationOffNamesTheOption) {
  TempDir dir;
  write_file(aof_path(dir), record({"SET", "a", "1"}) + "*2\r\n$3\r\nDEL\r\n$5\r\nab");
  ServerOptions o = aof_options(dir);
  o.aof_load_truncated = false;
  ServerThread s(o);
  ASSERT_FALSE(s.ok());
  const std::string msg = s.status().to_string();
  EXPECT_NE(msg.find("incomplete command at offset 27"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--aof-load-truncated yes"), std::string::npos) << msg;
}

TEST(AofLoad, DamageWithNothingReadableAfterItSaysSo) {
  TempDir dir;
  write_file(aof_path(dir), record({"SET", "a", "1"}) + "*2\r\n#garbage that is no command at all\r\n");
  ServerThread s(aof_options(dir));
  ASSERT_FALSE(s.ok());
  const std::string msg = s.status().to_string();
  EXPECT_NE(msg.find("damaged at offset 27"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No complete command follows the damage"), std::string::npos) << msg;
}

}  // namespace
}  // namespace conduit::kv
