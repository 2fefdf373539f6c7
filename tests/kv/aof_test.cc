// The append-only file: replay of every type, absolute expiry, fsync policies, torn last
// record, corruption refusal, and BGREWRITEAOF while serving.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

ServerOptions aof_options(const TempDir& dir, AppendFsync f = AppendFsync::kAlways) {
  ServerOptions o;
  o.port = 0;
  o.appendonly = true;
  o.appendfsync = f;
  o.dir = dir.path();
  return o;
}

using testing::read_file;
void append_file(const std::string& p, const std::string& bytes) { testing::write_file(p, bytes, true); }

std::string aof_path(const TempDir& d) { return d.path() + "/appendonly.aof"; }

TEST(Aof, EveryTypeSurvivesARestart) {
  TempDir dir;
  {
    ServerThread s(aof_options(dir));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    auto& k = **c;
    EXPECT_EQ(fmt(k.command({"SET", "s", "v"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SET", "ttl", "v", "EX", "1000"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SET", "gone", "v", "PX", "1"})), "+OK");
    EXPECT_EQ(fmt(k.command({"INCRBY", "n", "41"})), ":41");
    EXPECT_EQ(fmt(k.command({"INCR", "n"})), ":42");
    EXPECT_EQ(fmt(k.command({"RPUSH", "l", "a", "b", "c"})), ":3");
    EXPECT_EQ(fmt(k.command({"LPOP", "l"})), "\"a\"");
    EXPECT_EQ(fmt(k.command({"HSET", "h", "f", "v", "g", "w"})), ":2");
    EXPECT_EQ(fmt(k.command({"SADD", "set", "x", "y", "z"})), ":3");
    EXPECT_EQ(k.command({"SPOP", "set"})->type, ReplyType::kBulk);
    EXPECT_EQ(fmt(k.command({"ZADD", "z", "1.5", "a", "2", "b"})), ":2");
    EXPECT_EQ(fmt(k.command({"XADD", "st", "5-1", "f", "v"})), "\"5-1\"");
    EXPECT_EQ(k.command({"XADD", "st", "*", "f", "v"})->type, ReplyType::kBulk);
    EXPECT_EQ(fmt(k.command({"SELECT", "5"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SET", "in5", "five"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SELECT", "0"})), "+OK");
    EXPECT_EQ(fmt(k.command({"DEL", "nothing"})), ":0");
    EXPECT_EQ(fmt(k.command({"SET", "del", "x"})), "+OK");
    EXPECT_EQ(fmt(k.command({"DEL", "del"})), ":1");
    EXPECT_EQ(fmt(k.command({"EXPIRE", "s", "500"})), ":1");
  }
  const std::string content = read_file(aof_path(dir));
  // Relative expiries are logged as absolute times; random choices as their outcome.
  EXPECT_NE(content.find("PXAT"), std::string::npos);
  EXPECT_NE(content.find("PEXPIREAT"), std::string::npos);
  EXPECT_NE(content.find("SREM"), std::string::npos);
  EXPECT_EQ(content.find("SPOP"), std::string::npos);
  EXPECT_EQ(content.find("$4\r\nGET\r\n"), std::string::npos);

  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"GET", "s"})), "\"v\"");
  EXPECT_EQ(fmt(k.command({"TTL", "s"})), ":500");
  auto ttl = k.command({"TTL", "ttl"});
  EXPECT_GT(ttl->integer, 990);
  EXPECT_EQ(fmt(k.command({"GET", "gone"})), "nil");
  EXPECT_EQ(fmt(k.command({"GET", "n"})), "\"42\"");
  EXPECT_EQ(fmt(k.command({"LRANGE", "l", "0", "-1"})), "[\"b\", \"c\"]");
  EXPECT_EQ(fmt(k.command({"HGET", "h", "g"})), "\"w\"");
  EXPECT_EQ(fmt(k.command({"SCARD", "set"})), ":2");
  EXPECT_EQ(fmt(k.command({"ZSCORE", "z", "a"})), "\"1.5\"");
  EXPECT_EQ(fmt(k.command({"XLEN", "st"})), ":2");
  EXPECT_EQ(fmt(k.command({"EXISTS", "del"})), ":0");
  EXPECT_EQ(fmt(k.command({"SELECT", "5"})), "+OK");
  EXPECT_EQ(fmt(k.command({"GET", "in5"})), "\"five\"");
}

TEST(Aof, AlwaysMeansOnDiskBeforeTheReply) {
  TempDir dir;
  ServerThread s(aof_options(dir, AppendFsync::kAlways));
  auto c = Client::connect(s.url("tcp"));
  for (int i = 0; i < 20; ++i) {
    const std::string v = "value-" + std::to_string(i);
    EXPECT_EQ(fmt((*c)->command({"SET", "k", v})), "+OK");
    // The reply came: the record is in the file already.
    EXPECT_NE(read_file(aof_path(dir)).find(v), std::string::npos) << i;
  }
  EXPECT_NE(s.info("persistence").find("aof_fsync_policy:always"), std::string::npos);
}

TEST(Aof, TornLastRecordIsDroppedWithAWarning) {
  TempDir dir;
  {
    ServerThread s(aof_options(dir));
    auto c = Client::connect(s.url("tcp"));
    EXPECT_EQ(fmt((*c)->command({"SET", "a", "1"})), "+OK");
    EXPECT_EQ(fmt((*c)->command({"SET", "b", "2"})), "+OK");
  }
  const uint64_t good = read_file(aof_path(dir)).size();
  append_file(aof_path(dir), "*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$10\r\nonly-half");  // crash mid-write
  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  EXPECT_EQ(fmt((*c)->command({"GET", "a"})), "\"1\"");
  EXPECT_EQ(fmt((*c)->command({"GET", "b"})), "\"2\"");
  EXPECT_EQ(fmt((*c)->command({"GET", "c"})), "nil");
  // The torn bytes were cut off, and new writes append after the last good record.
  EXPECT_EQ(fmt((*c)->command({"SET", "d", "4"})), "+OK");
  const std::string content = read_file(aof_path(dir));
  EXPECT_EQ(content.find("only-half"), std::string::npos);
  EXPECT_GT(content.size(), good);
}

TEST(Aof, TornTailRefusedWhenTruncationIsOff) {
  TempDir dir;
  append_file(aof_path(dir), "*2\r\n$3\r\nGET\r\n$1");
  ServerOptions o = aof_options(dir);
  o.aof_load_truncated = false;
  ServerThread s(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().to_string().find("incomplete command"), std::string::npos) << s.status().to_string();
}

TEST(Aof, CorruptionBeforeTheEndRefusesToStart) {
  TempDir dir;
  {
    ServerThread s(aof_options(dir));
    auto c = Client::connect(s.url("tcp"));
    for (int i = 0; i < 10; ++i) EXPECT_EQ(fmt((*c)->command({"SET", "k" + std::to_string(i), "v"})), "+OK");
  }
  std::string content = read_file(aof_path(dir));
  const size_t at = content.find("*3", content.size() / 2);
  ASSERT_NE(at, std::string::npos);
  content[at] = '#';  // garbage in the middle
  {
    std::ofstream f(aof_path(dir), std::ios::binary | std::ios::trunc);
    f << content;
  }
  ServerThread s(aof_options(dir));
  ASSERT_FALSE(s.ok());
  const std::string msg = s.status().to_string();
  EXPECT_NE(msg.find("damaged at offset " + std::to_string(at)), std::string::npos) << msg;
  EXPECT_NE(msg.find("Refusing"), std::string::npos) << msg;
  // Unknown commands and failing commands count as corruption too.
  TempDir dir2;
  append_file(aof_path(dir2), "*1\r\n$7\r\nNOTACMD\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
  ServerThread s2(aof_options(dir2));
  EXPECT_FALSE(s2.ok());
  EXPECT_NE(s2.status().to_string().find("at offset 0"), std::string::npos) << s2.status().to_string();
}

TEST(Aof, BgrewriteaofCompactsWhileServing) {
  TempDir dir;
  ServerOptions o = aof_options(dir, AppendFsync::kEverysec);
  {
    ServerThread s(o);
    auto c = Client::connect(s.url("tcp"));
    auto& k = **c;
    std::vector<std::vector<std::string>> cmds;
    for (int i = 0; i < 5000; ++i) cmds.push_back({"SET", "hot", std::to_string(i)});
    for (int i = 0; i < 300; ++i) cmds.push_back({"RPUSH", "list", std::to_string(i)});
    for (int i = 0; i < 100; ++i) cmds.push_back({"HSET", "h", "f" + std::to_string(i), "v"});
    for (int i = 0; i < 100; ++i) cmds.push_back({"ZADD", "z", std::to_string(i) + ".25", "m" + std::to_string(i)});
    cmds.push_back({"SET", "exp", "v", "EX", "1000"});
    ASSERT_TRUE(k.pipeline(cmds).ok());
    const size_t before = read_file(aof_path(dir)).size();
    EXPECT_EQ(fmt(k.command({"BGREWRITEAOF"})), "+Background append only file rewriting started");
    // Writes during the rewrite must survive it.
    for (int i = 0; i < 200; ++i) ASSERT_EQ(fmt(k.command({"INCR", "during"})), ":" + std::to_string(i + 1));
    std::string info;
    for (int i = 0; i < 500; ++i) {
      info = s.info("persistence");
      if (info.find("aof_rewrite_in_progress:0") != std::string::npos && info.find("aof_rewrites:1") != std::string::npos)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_NE(info.find("aof_rewrites:1"), std::string::npos) << info;
    EXPECT_NE(info.find("aof_last_bgrewrite_status:ok"), std::string::npos) << info;
    EXPECT_EQ(fmt(k.command({"INCR", "during"})), ":201");
    const size_t after = read_file(aof_path(dir)).size();
    EXPECT_LT(after, before / 3) << before << " -> " << after;
  }
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"GET", "hot"})), "\"4999\"");
  EXPECT_EQ(fmt(k.command({"LLEN", "list"})), ":300");
  EXPECT_EQ(fmt(k.command({"LINDEX", "list", "299"})), "\"299\"");
  EXPECT_EQ(fmt(k.command({"HLEN", "h"})), ":100");
  EXPECT_EQ(fmt(k.command({"ZSCORE", "z", "m3"})), "\"3.25\"");
  EXPECT_EQ(fmt(k.command({"GET", "during"})), "\"201\"");
  EXPECT_GT(k.command({"TTL", "exp"})->integer, 990);
}

// Issue 9 item 10: a rewrite's temporary file left by a killed server is removed at the
// next start; one of a process that still runs (another server in the same directory,
// mid-rewrite) is kept, and so is anything else.
TEST(Aof, StaleRewriteFilesAreRemovedAtStart) {
  TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  int st;
  ASSERT_EQ(::waitpid(dead, &st, 0), dead);
  const std::string stale = dir.path() + "/temp-rewriteaof-bg-" + std::to_string(dead) + ".aof";
  const std::string live = dir.path() + "/temp-rewriteaof-bg-" + std::to_string(::getpid()) + ".aof";
  const std::string other = dir.path() + "/temp-rewriteaof-bg-notapid.aof";
  for (const auto& p : {stale, live, other}) append_file(p, "*1\r\n$4\r\nPING\r\n");
  ServerThread s(aof_options(dir, AppendFsync::kNo));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  struct stat sb{};
  EXPECT_NE(::stat(stale.c_str(), &sb), 0) << stale << " was left";
  EXPECT_EQ(::stat(live.c_str(), &sb), 0);
  EXPECT_EQ(::stat(other.c_str(), &sb), 0);
}

TEST(Aof, NoFileMeansEmptyAndIsCreated) {
  TempDir dir;
  ServerThread s(aof_options(dir, AppendFsync::kNo));
  ASSERT_TRUE(s.ok());
  auto c = Client::connect(s.url("tcp"));
  EXPECT_EQ(fmt((*c)->command({"DBSIZE"})), ":0");
  EXPECT_EQ(fmt((*c)->command({"SET", "a", "b"})), "+OK");
  struct stat st{};
  EXPECT_EQ(::stat(aof_path(dir).c_str(), &st), 0);
}

// CONFIG SET appendonly yes|no at run time (Redis 7.0's startAppendOnly / stopAppendOnly).
std::string wait_first_rewrite(ServerThread& s) {
  std::string info;
  for (int i = 0; i < 1000; ++i) {
    info = s.info("persistence");
    if (info.find("aof_rewrite_in_progress:0") != std::string::npos && info.find("aof_rewrites:1") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return info;
}

TEST(Aof, SwitchedOnAtRunTimeWritesTheDatasetThenAppends) {
  TempDir dir;
  // A file left by an earlier run with the AOF on: replaced, never appended to.
  append_file(aof_path(dir), "*3\r\n$3\r\nSET\r\n$5\r\nstale\r\n$1\r\nx\r\n");
  ServerOptions off = aof_options(dir);
  off.appendonly = false;
  off.io_threads = 2;
  {
    ServerThread s(off);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    auto& k = **c;
    EXPECT_EQ(fmt(k.command({"SET", "before", "1"})), "+OK");
    EXPECT_EQ(fmt(k.command({"RPUSH", "l", "a", "b"})), ":2");
    EXPECT_EQ(fmt(k.command({"SET", "ttl", "v", "EX", "1000"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SELECT", "3"})), "+OK");
    EXPECT_EQ(fmt(k.command({"HSET", "h3", "f", "v"})), ":1");
    EXPECT_EQ(fmt(k.command({"SELECT", "0"})), "+OK");
    EXPECT_NE(s.info("persistence").find("aof_enabled:0"), std::string::npos);
    EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "yes"})), "+OK");
    EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "appendonly"})), "[\"appendonly\", \"yes\"]");
    // Writes while the first rewrite runs are kept for it.
    for (int i = 0; i < 100; ++i) ASSERT_EQ(fmt(k.command({"INCR", "during"})), ":" + std::to_string(i + 1));
    const std::string info = wait_first_rewrite(s);
    EXPECT_NE(info.find("aof_enabled:1"), std::string::npos) << info;
    EXPECT_NE(info.find("aof_rewrites:1"), std::string::npos) << info;
    EXPECT_NE(info.find("aof_last_bgrewrite_status:ok"), std::string::npos) << info;
    EXPECT_EQ(fmt(k.command({"SET", "after", "2"})), "+OK");
    EXPECT_EQ(fmt(k.command({"RPUSH", "l", "c"})), ":3");
  }
  EXPECT_EQ(read_file(aof_path(dir)).find("stale"), std::string::npos);
  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"GET", "before"})), "\"1\"");
  EXPECT_EQ(fmt(k.command({"GET", "after"})), "\"2\"");
  EXPECT_EQ(fmt(k.command({"GET", "during"})), "\"100\"");
  EXPECT_EQ(fmt(k.command({"LRANGE", "l", "0", "-1"})), "[\"a\", \"b\", \"c\"]");
  EXPECT_GT(k.command({"TTL", "ttl"})->integer, 990);
  EXPECT_EQ(fmt(k.command({"EXISTS", "stale"})), ":0");
  EXPECT_EQ(fmt(k.command({"SELECT", "3"})), "+OK");
  EXPECT_EQ(fmt(k.command({"HGET", "h3", "f"})), "\"v\"");
}

TEST(Aof, SwitchedOffAtRunTimeStopsAppending) {
  TempDir dir;
  ServerOptions on = aof_options(dir, AppendFsync::kEverysec);
  on.io_threads = 4;  // CONFIG SET may run on a thread that is not the one watching rewrites
  {
    ServerThread s(on);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    // Several connections: with four io threads some land off the first thread.
    for (int n = 0; n < 4; ++n) {
      auto c = Client::connect(s.url("tcp"));
      ASSERT_TRUE(c.ok());
      auto& k = **c;
      EXPECT_EQ(fmt(k.command({"SET", "kept" + std::to_string(n), "v"})), "+OK");
      EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "no"})), "+OK");
      EXPECT_NE(s.info("persistence").find("aof_enabled:0"), std::string::npos);
      EXPECT_EQ(fmt(k.command({"SET", "lost" + std::to_string(n), "v"})), "+OK");
      EXPECT_EQ(fmt(k.command({"BGREWRITEAOF"})).substr(0, 4), "-ERR");
      if (n == 3) break;
      EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "yes"})), "+OK");
      EXPECT_NE(wait_first_rewrite(s).find("aof_rewrites:1"), std::string::npos);
    }
  }
  const std::string file = read_file(aof_path(dir));
  EXPECT_EQ(file.find("lost3"), std::string::npos);
  ServerThread s(on);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"EXISTS", "kept0", "kept1", "kept2", "kept3", "lost3"})), ":4");
  // Each lost<n> (n < 3) was written while the AOF was off, then the next switch-on's
  // rewrite put it in: what is in memory when the AOF starts is in the file.
  EXPECT_EQ(fmt(k.command({"EXISTS", "lost0", "lost1", "lost2"})), ":3");
}

TEST(Aof, ShutdownWritesTheInitialFileOfAnAofJustSwitchedOn) {
  TempDir dir;
  ServerOptions off = aof_options(dir);
  off.appendonly = false;
  {
    ServerThread s(off);
    auto c = Client::connect(s.url("tcp"));
    auto& k = **c;
    std::vector<std::vector<std::string>> cmds;
    // 40 MB for the child to write: the shutdown comes while it does.
    for (int i = 0; i < 20000; ++i) cmds.push_back({"SET", "k" + std::to_string(i), std::string(2000, 'v')});
    ASSERT_TRUE(k.pipeline(cmds).ok());
    EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "yes"})), "+OK");
    EXPECT_EQ(fmt(k.command({"SET", "last", "x"})), "+OK");
    s.stop();  // at once, most likely while the first rewrite runs
  }
  ServerThread s(aof_options(dir));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"DBSIZE"})), ":20001");
  EXPECT_EQ(k.command({"STRLEN", "k19999"})->integer, 2000);
  EXPECT_EQ(fmt(k.command({"GET", "last"})), "\"x\"");
}

// Redis 7.0: dir is a protected config (enable-protected-configs); conduit-kv moves the
// AOF's directory only while the AOF is off.
TEST(Aof, DirIsProtectedAndChangesOnlyWhileTheAofIsOff) {
  TempDir dir, other;
  ServerOptions o = aof_options(dir);
  {
    ServerThread s(o);
    auto c = Client::connect(s.url("tcp"));
    EXPECT_EQ(fmt((*c)->command({"CONFIG", "SET", "dir", other.path()})),
              "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config");
    EXPECT_EQ(fmt((*c)->command({"CONFIG", "SET", "dbfilename", "x.rdb"})),
              "-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config");
  }
  {
    // local: from a loopback (or shm) client only -- this test's client is one.
    ServerOptions local = o;
    local.redis_compat["enable-protected-configs"] = "local";
    local.appendonly = false;
    ServerThread s(local);
    auto c = Client::connect(s.url("tcp"));
    EXPECT_EQ(fmt((*c)->command({"CONFIG", "SET", "dir", other.path()})), "+OK");
  }
  o.redis_compat["enable-protected-configs"] = "yes";
  ServerThread s(o);
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "dir", other.path()})).substr(0, 81),
            "-ERR CONFIG SET failed (possibly related to argument 'dir') - conduit-kv cannot m");
  EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "no"})), "+OK");
  EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "dir", other.path() + "/nope"})),
            "-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory");
  EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "dir", other.path()})), "+OK");
  EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "dir"})), "[\"dir\", \"" + other.path() + "\"]");
  EXPECT_EQ(fmt(k.command({"SET", "moved", "1"})), "+OK");
  EXPECT_EQ(fmt(k.command({"CONFIG", "SET", "appendonly", "yes"})), "+OK");
  EXPECT_NE(wait_first_rewrite(s).find("aof_rewrites:1"), std::string::npos);
  EXPECT_NE(read_file(other.path() + "/appendonly.aof").find("moved"), std::string::npos);
}

}  // namespace
}  // namespace conduit::kv
