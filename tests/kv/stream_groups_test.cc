// Stream consumer groups and XREAD (src/kv/commands_stream_groups.cc): each command's forms
// and Redis 7.0.15's errors, BLOCK served by another client's XADD, NOACK, the idle rules
// of XCLAIM / XAUTOCLAIM, COPY as a deep copy, and AOF restarts (the log as written and
// after BGREWRITEAOF) that keep groups, consumers and pending entries.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

::testing::AssertionResult StartsWith(const std::string& s, const std::string& prefix) {
  if (s.starts_with(prefix)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << s << "\" does not start with \"" << prefix << "\"";
}

class StreamGroups : public ::testing::Test {
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
  // Three entries 1-1 2-1 3-1 in s and a group g at 0.
  void fill() {
    ASSERT_EQ(r({"XADD", "s", "1-1", "f", "a"}), "\"1-1\"");
    ASSERT_EQ(r({"XADD", "s", "2-1", "f", "b"}), "\"2-1\"");
    ASSERT_EQ(r({"XADD", "s", "3-1", "f", "c"}), "\"3-1\"");
    ASSERT_EQ(r({"XGROUP", "CREATE", "s", "g", "0"}), "+OK");
  }

  static ServerThread* server_;
  std::unique_ptr<Client> c_;
};
ServerThread* StreamGroups::server_ = nullptr;

TEST_F(StreamGroups, XgroupFormsAndErrors) {
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "g", "$"}),
            "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the "
            "MKSTREAM option to create an empty stream automatically.");
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"}), "+OK");
  EXPECT_EQ(r({"TYPE", "s"}), "+stream");
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "g", "$"}), "-BUSYGROUP Consumer Group name already exists");
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "h", "bad"}), "-ERR Invalid stream ID specified as stream command argument");
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "-2"}),
            "-ERR value for ENTRIESREAD must be positive or -1");
  EXPECT_EQ(r({"XGROUP", "CREATE", "s", "h", "0", "BOGUS"}),
            "-ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP.");
  EXPECT_EQ(r({"XGROUP", "SETID", "s", "nog", "0"}), "-NOGROUP No such consumer group 'nog' for key name 's'");
  EXPECT_EQ(r({"XGROUP", "CREATECONSUMER", "s", "g", "alice"}), ":1");
  EXPECT_EQ(r({"XGROUP", "CREATECONSUMER", "s", "g", "alice"}), ":0");
  EXPECT_EQ(r({"XGROUP", "DELCONSUMER", "s", "g", "bob"}), ":0");
  EXPECT_EQ(r({"XGROUP", "DELCONSUMER", "s", "g", "alice"}), ":0");
  EXPECT_EQ(r({"XGROUP", "SETID", "s", "g", "5-0", "ENTRIESREAD", "3"}), "+OK");
  EXPECT_EQ(r({"XINFO", "GROUPS", "s"}),
            "[[\"name\", \"g\", \"consumers\", :0, \"pending\", :0, \"last-delivered-id\", \"5-0\", \"entries-read\", "
            ":3, \"lag\", :0]]");  // an empty, never written stream: lag 0
  EXPECT_EQ(r({"XGROUP", "DESTROY", "s", "g"}), ":1");
  EXPECT_EQ(r({"XGROUP", "DESTROY", "s", "g"}), ":0");
  EXPECT_EQ(r({"SET", "str", "x"}), "+OK");
  EXPECT_EQ(r({"XGROUP", "CREATE", "str", "g", "$"}), "-WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_TRUE(StartsWith(r({"XGROUP", "NOPE", "s", "g"}), "-ERR unknown subcommand 'NOPE'"));
}

TEST_F(StreamGroups, XreadgroupNewHistoryAndAck) {
  fill();
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"}),
            "[[\"s\", [[\"1-1\", [\"f\", \"a\"]], [\"2-1\", [\"f\", \"b\"]]]]]");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"}), "[[\"s\", [[\"3-1\", [\"f\", \"c\"]]]]]");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"}), "nil");
  // Alice's history from 0, then after 1-1.
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"}),
            "[[\"s\", [[\"1-1\", [\"f\", \"a\"]], [\"2-1\", [\"f\", \"b\"]]]]]");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "1-1"}), "[[\"s\", [[\"2-1\", [\"f\", \"b\"]]]]]");
  // A deleted entry still pending shows as [id, nil].
  EXPECT_EQ(r({"XDEL", "s", "2-1"}), ":1");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"}),
            "[[\"s\", [[\"1-1\", [\"f\", \"a\"]], [\"2-1\", nil]]]]");
  EXPECT_EQ(r({"XACK", "s", "g", "1-1", "2-1", "9-9"}), ":2");
  EXPECT_EQ(r({"XACK", "s", "g", "1-1"}), ":0");
  EXPECT_EQ(r({"XACK", "s", "nog", "1-1"}), ":0");
  EXPECT_EQ(r({"XACK", "s", "g", "bad"}), "-ERR Invalid stream ID specified as stream command argument");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"}), "[[\"s\", []]]");
  // Errors.
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"}),
            "-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"}).substr(0, 50),
            "-ERR The $ ID is meaningless in the context of XRE");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">"}),
            "-ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.");
  EXPECT_EQ(r({"XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">"}), "-ERR Missing GROUP option for XREADGROUP");
  EXPECT_EQ(r({"XREAD", "STREAMS", "s", ">"}),
            "-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
  EXPECT_EQ(r({"XREAD", "NOACK", "STREAMS", "s", "0"}),
            "-ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
}

TEST_F(StreamGroups, NoackLeavesNothingPending) {
  fill();
  EXPECT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">"}), "[[\"s\", [[\"1-"));
  EXPECT_EQ(r({"XPENDING", "s", "g"}), "[:0, nil, nil, nil]");
  EXPECT_TRUE(StartsWith(r({"XINFO", "CONSUMERS", "s", "g"}), "[[\"name\", \"c\", \"pending\", :0, \"id"));
  EXPECT_EQ(r({"XINFO", "GROUPS", "s"}),
            "[[\"name\", \"g\", \"consumers\", :1, \"pending\", :0, \"last-delivered-id\", \"3-1\", \"entries-read\", "
            ":3, \"lag\", :0]]");
}

TEST_F(StreamGroups, XreadAndXreadgroupBlockUntilAnotherClientAdds) {
  ASSERT_EQ(r({"XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"}), "+OK");
  std::string group_reply, read_reply;
  std::thread waiter([&] {
    auto w = connect();
    group_reply = fmt(w->command({"XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"}));
  });
  std::thread reader([&] {
    auto w = connect();
    read_reply = fmt(w->command({"XREAD", "BLOCK", "5000", "STREAMS", "s", "$"}));
  });
  for (int i = 0; i < 500 && server_->info("clients").find("blocked_clients:2") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(r({"XADD", "s", "7-1", "k", "v"}), "\"7-1\"");
  waiter.join();
  reader.join();
  EXPECT_EQ(group_reply, "[[\"s\", [[\"7-1\", [\"k\", \"v\"]]]]]");
  EXPECT_EQ(read_reply, "[[\"s\", [[\"7-1\", [\"k\", \"v\"]]]]]");
  EXPECT_EQ(r({"XPENDING", "s", "g"}), "[:1, \"7-1\", \"7-1\", [[\"c\", \"1\"]]]");
  // A timeout answers nil; inside MULTI nothing blocks.
  EXPECT_EQ(r({"XREAD", "BLOCK", "20", "STREAMS", "s", "$"}), "nil");
  EXPECT_EQ(r({"XREAD", "BLOCK", "-1", "STREAMS", "s", "$"}), "-ERR timeout is negative");
  EXPECT_EQ(r({"MULTI"}), "+OK");
  EXPECT_EQ(r({"XREAD", "BLOCK", "0", "STREAMS", "s", "$"}), "+QUEUED");
  EXPECT_EQ(r({"XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"}), "+QUEUED");
  EXPECT_EQ(r({"EXEC"}), "[nil, nil]");
  // A blocked XREADGROUP whose key is deleted is answered.
  std::thread gone([&] {
    auto w = connect();
    group_reply = fmt(w->command({"XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"}));
  });
  for (int i = 0; i < 500 && server_->info("clients").find("blocked_clients:1") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(r({"DEL", "s"}), ":1");
  gone.join();
  EXPECT_EQ(group_reply, "-UNBLOCKED the stream key no longer exists");
}

TEST_F(StreamGroups, XpendingForms) {
  fill();
  EXPECT_EQ(r({"XPENDING", "s", "nog"}), "-NOGROUP No such key 's' or consumer group 'nog'");
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"}), "[[\""));
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"}), "[[\""));
  EXPECT_EQ(r({"XPENDING", "s", "g"}), "[:3, \"1-1\", \"3-1\", [[\"alice\", \"2\"], [\"bob\", \"1\"]]]");
  const std::string all = r({"XPENDING", "s", "g", "-", "+", "10"});
  EXPECT_TRUE(StartsWith(all, "[[\"1-1\", \"alice\", :"));
  EXPECT_NE(all.find("[\"3-1\", \"bob\", :"), std::string::npos);
  EXPECT_TRUE(StartsWith(r({"XPENDING", "s", "g", "-", "+", "10", "bob"}), "[[\"3-1\", \"bob\", :"));
  EXPECT_EQ(r({"XPENDING", "s", "g", "-", "+", "10", "nobody"}), "[]");
  EXPECT_TRUE(StartsWith(r({"XPENDING", "s", "g", "(1-1", "+", "1"}), "[[\"2-1\", \"alice\", :"));
  EXPECT_EQ(r({"XPENDING", "s", "g", "IDLE", "100000", "-", "+", "10"}), "[]");
  EXPECT_EQ(r({"XPENDING", "s", "g", "IDLE", "100"}), "-ERR syntax error");
  EXPECT_EQ(r({"XPENDING", "s", "g", "-", "+"}), "-ERR syntax error");
  EXPECT_EQ(r({"XPENDING", "s", "g", "-", "+", "x"}), "-ERR value is not an integer or out of range");
}

TEST_F(StreamGroups, XclaimIdleRulesAndOptions) {
  fill();
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"}), "[[\""));
  EXPECT_EQ(r({"XCLAIM", "s", "nog", "bob", "0", "1-1"}), "-NOGROUP No such key 's' or consumer group 'nog'");
  // Delivered just now: a min-idle-time of an hour claims nothing.
  EXPECT_EQ(r({"XCLAIM", "s", "g", "bob", "3600000", "1-1"}), "[]");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "bob", "0", "1-1"}), "[[\"1-1\", [\"f\", \"a\"]]]");
  EXPECT_TRUE(StartsWith(r({"XPENDING", "s", "g", "-", "+", "1"}), "[[\"1-1\", \"bob\", :"));
  EXPECT_TRUE(r({"XPENDING", "s", "g", "-", "+", "1"}).ends_with(":2]]"));  // delivered twice
  // IDLE makes it look old; JUSTID does not count a delivery; RETRYCOUNT sets it.
  EXPECT_EQ(r({"XCLAIM", "s", "g", "carol", "0", "2-1", "IDLE", "500000", "JUSTID"}), "[\"2-1\"]");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "dave", "400000", "2-1", "JUSTID", "RETRYCOUNT", "7"}), "[\"2-1\"]");
  const std::string p = r({"XPENDING", "s", "g", "2-1", "2-1", "1"});
  EXPECT_TRUE(StartsWith(p, "[[\"2-1\", \"dave\", :"));
  EXPECT_TRUE(p.ends_with(":7]]")) << p;
  // FORCE creates a pending entry for an existing entry; LASTID moves the group.
  ASSERT_EQ(r({"XADD", "s", "4-1", "f", "d"}), "\"4-1\"");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "erin", "0", "4-1", "JUSTID"}), "[]");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "erin", "0", "4-1", "FORCE", "JUSTID", "LASTID", "4-1"}), "[\"4-1\"]");
  EXPECT_EQ(r({"XINFO", "GROUPS", "s"}).find("\"last-delivered-id\", \"4-1\"") != std::string::npos, true);
  EXPECT_EQ(r({"XCLAIM", "s", "g", "erin", "0", "4-1", "BOGUS"}), "-ERR Unrecognized XCLAIM option 'BOGUS'");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "erin", "x", "4-1"}), "-ERR Invalid min-idle-time argument for XCLAIM");
  // A claimed entry that was deleted leaves the PEL.
  EXPECT_EQ(r({"XDEL", "s", "3-1"}), ":1");
  EXPECT_EQ(r({"XCLAIM", "s", "g", "bob", "0", "3-1"}), "[]");
  EXPECT_EQ(r({"XPENDING", "s", "g", "3-1", "3-1", "1"}), "[]");
}

TEST_F(StreamGroups, XautoclaimCursorAndDeletedIds) {
  fill();
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"}), "[[\""));
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "g", "bob", "3600000", "0"}), "[\"0-0\", [], []]");
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "g", "bob", "0", "0", "COUNT", "1"}), "[\"2-1\", [[\"1-1\", [\"f\", \"a\"]]], []]");
  EXPECT_EQ(r({"XDEL", "s", "2-1"}), ":1");
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "g", "bob", "0", "2-1", "JUSTID"}), "[\"0-0\", [\"3-1\"], [\"2-1\"]]");
  EXPECT_EQ(r({"XPENDING", "s", "g"}), "[:2, \"1-1\", \"3-1\", [[\"bob\", \"2\"]]]");
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "g", "bob", "0", "0", "COUNT", "0"}), "-ERR COUNT must be > 0");
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "g", "bob", "0", "0", "BOGUS"}), "-ERR syntax error");
  EXPECT_EQ(r({"XAUTOCLAIM", "s", "nog", "bob", "0", "0"}), "-NOGROUP No such key 's' or consumer group 'nog'");
}

TEST_F(StreamGroups, DelconsumerReturnsPendingAndXinfoStream) {
  fill();
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"}), "[[\""));
  EXPECT_EQ(r({"XGROUP", "DELCONSUMER", "s", "g", "alice"}), ":2");
  EXPECT_EQ(r({"XPENDING", "s", "g"}), "[:0, nil, nil, nil]");
  EXPECT_EQ(r({"XINFO", "STREAM", "s"}),
            "[\"length\", :3, \"radix-tree-keys\", :1, \"radix-tree-nodes\", :2, \"last-generated-id\", \"3-1\", "
            "\"max-deleted-entry-id\", \"0-0\", \"entries-added\", :3, \"recorded-first-entry-id\", \"1-1\", "
            "\"groups\", :1, \"first-entry\", [\"1-1\", [\"f\", \"a\"]], \"last-entry\", [\"3-1\", [\"f\", \"c\"]]]");
  EXPECT_EQ(r({"XINFO", "STREAM", "s", "FULL", "COUNT", "1"}),
            "[\"length\", :3, \"radix-tree-keys\", :1, \"radix-tree-nodes\", :2, \"last-generated-id\", \"3-1\", "
            "\"max-deleted-entry-id\", \"0-0\", \"entries-added\", :3, \"recorded-first-entry-id\", \"1-1\", "
            "\"entries\", [[\"1-1\", [\"f\", \"a\"]]], \"groups\", [[\"name\", \"g\", \"last-delivered-id\", \"2-1\", "
            "\"entries-read\", :2, \"lag\", :1, \"pel-count\", :0, \"pending\", [], \"consumers\", []]]]");
  EXPECT_EQ(r({"XINFO", "STREAM", "s", "FULL", "BOGUS"}),
            "-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.");
  EXPECT_EQ(r({"XINFO", "STREAM", "nokey"}), "-ERR no such key");
  EXPECT_EQ(r({"XINFO", "CONSUMERS", "s", "nog"}), "-NOGROUP No such consumer group 'nog' for key name 's'");
}

TEST_F(StreamGroups, CopyIsDeepAndXsetid) {
  fill();
  ASSERT_TRUE(StartsWith(r({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"}), "[[\""));
  EXPECT_EQ(r({"COPY", "s", "t"}), ":1");
  const std::string before = r({"XINFO", "STREAM", "t", "FULL"});
  EXPECT_EQ(r({"XACK", "s", "g", "1-1"}), ":1");
  EXPECT_EQ(r({"XGROUP", "DESTROY", "s", "g"}), ":1");
  EXPECT_EQ(r({"XINFO", "STREAM", "t", "FULL"}), before);
  EXPECT_EQ(r({"XPENDING", "t", "g"}), "[:1, \"1-1\", \"1-1\", [[\"alice\", \"1\"]]]");
  EXPECT_EQ(r({"XSETID", "t", "1-0"}), "-ERR The ID specified in XSETID is smaller than the target stream top item");
  EXPECT_EQ(r({"XSETID", "t", "9-0", "ENTRIESADDED", "1"}),
            "-ERR The entries_added specified in XSETID is smaller than the target stream length");
  EXPECT_EQ(r({"XSETID", "t", "9-0", "ENTRIESADDED", "10", "MAXDELETEDID", "5-0"}), "+OK");
  EXPECT_EQ(r({"XSETID", "nokey", "9-0"}), "-ERR no such key");
  EXPECT_EQ(r({"XTRIM", "t", "MAXLEN", "1"}), ":2");
  EXPECT_EQ(r({"XTRIM", "t", "MAXLEN", "1", "LIMIT", "5"}), "-ERR syntax error, LIMIT cannot be used without the special ~ option");
}

// Groups, consumers (also one with nothing pending) and pending entries (owner, delivery
// count) survive a restart: first from the log as written (XREADGROUP and XCLAIM logged as
// XCLAIM ... FORCE JUSTID and XGROUP SETID), then from a rewritten file.
TEST(StreamGroupsAof, GroupsSurviveRestartAndRewrite) {
  TempDir dir;
  ServerOptions o;
  o.port = 0;
  o.appendonly = true;
  o.appendfsync = AppendFsync::kAlways;
  o.dir = dir.path();
  // What must survive: the entries, each group's counters, and each pending entry's id,
  // owner and delivery count (its idle time moves between runs).
  auto snapshot = [](Client& k) {
    std::string out;
    auto pel = k.command({"XPENDING", "s", "g", "-", "+", "10"});
    if (!pel.ok()) return std::string("!") + pel.status().to_string();
    for (const Reply& p : pel->elements)
      if (p.elements.size() == 4) out += p.elements[0].str + "/" + p.elements[1].str + "/" + std::to_string(p.elements[3].integer) + " ";
    return out + "|" + fmt(k.command({"XINFO", "GROUPS", "s"})) + "|" + fmt(k.command({"XRANGE", "s", "-", "+"})) +
           "|" + fmt(k.command({"XINFO", "GROUPS", "e"}));
  };
  std::string want;
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    ASSERT_TRUE(c.ok());
    auto& k = **c;
    for (const char* id : {"1-1", "2-1", "3-1", "4-1"}) ASSERT_EQ(fmt(k.command({"XADD", "s", id, "f", id})), std::string("\"") + id + "\"");
    ASSERT_EQ(fmt(k.command({"XGROUP", "CREATE", "s", "g", "0"})), "+OK");
    ASSERT_EQ(fmt(k.command({"XGROUP", "CREATE", "s", "other", "$"})), "+OK");
    ASSERT_EQ(fmt(k.command({"XGROUP", "CREATECONSUMER", "s", "g", "idle"})), ":1");
    ASSERT_TRUE(StartsWith(fmt(k.command({"XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"})), "[[\""));
    ASSERT_TRUE(StartsWith(fmt(k.command({"XREADGROUP", "GROUP", "g", "bob", "NOACK", "COUNT", "1", "STREAMS", "s", ">"})), "[[\""));
    ASSERT_EQ(fmt(k.command({"XCLAIM", "s", "g", "bob", "0", "2-1", "RETRYCOUNT", "5", "JUSTID"})), "[\"2-1\"]");
    ASSERT_EQ(fmt(k.command({"XGROUP", "CREATE", "e", "g", "$", "MKSTREAM"})), "+OK");
    want = snapshot(k);
    const std::string log = testing::read_file(dir.path() + "/appendonly.aof");
    EXPECT_EQ(log.find("XREADGROUP"), std::string::npos);
    EXPECT_NE(log.find("XCLAIM"), std::string::npos);
  }
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = Client::connect(s.url("tcp"));
    auto& k = **c;
    EXPECT_EQ(snapshot(k), want);
    EXPECT_EQ(fmt(k.command({"XINFO", "CONSUMERS", "s", "g"})).find("\"idle\", :") != std::string::npos, true);
    EXPECT_NE(fmt(k.command({"XINFO", "CONSUMERS", "s", "g"})).find("\"name\", \"idle\""), std::string::npos);
    EXPECT_EQ(fmt(k.command({"BGREWRITEAOF"})), "+Background append only file rewriting started");
    for (int i = 0; i < 500 && s.info("persistence").find("aof_rewrite_in_progress:0") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (int i = 0; i < 500 && s.info("persistence").find("aof_rewrites:1") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_NE(s.info("persistence").find("aof_last_bgrewrite_status:ok"), std::string::npos);
  }
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto c = Client::connect(s.url("tcp"));
  auto& k = **c;
  EXPECT_EQ(snapshot(k), want);
  EXPECT_NE(fmt(k.command({"XINFO", "CONSUMERS", "s", "g"})).find("\"name\", \"idle\""), std::string::npos);
  EXPECT_TRUE(StartsWith(fmt(k.command({"XINFO", "STREAM", "e"})), "[\"length\", :"));
  EXPECT_NE(fmt(k.command({"XINFO", "STREAM", "e"})).find("\"last-generated-id\", \"0-0\""), std::string::npos);
  const std::string log = testing::read_file(dir.path() + "/appendonly.aof");
  EXPECT_NE(log.find("XSETID"), std::string::npos);
}

}  // namespace
}  // namespace conduit::kv
