// Commands whose effect outlives their request: the blocking family, WATCH, pub/sub,
// MONITOR, CLIENT PAUSE and CLIENT TRACKING -- each with one io thread and with four, where the waiter and
// the client that wakes it are on different threads whenever the kernel's spread allows
// (other_thread() looks for such a connection).  Waits are bounded; "still blocked" is
// checked through INFO's blocked_clients plus a short quiet period, never a sleep alone.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kv_test_util.h"
#include "resp_conn.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::RespConn;
using testing::ServerThread;
using Clock = std::chrono::steady_clock;

std::string f(const std::optional<Reply>& r) { return r ? fmt(*r) : "(none)"; }

class Stateful : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.io_threads = static_cast<uint32_t>(GetParam());
    server_ = std::make_unique<ServerThread>(o);
    ASSERT_TRUE(server_->ok()) << server_->status().to_string();
    const std::string url = server_->url("tcp");
    port_ = std::stoi(url.substr(url.rfind(':') + 1));
    control_ = conn();
  }

  std::unique_ptr<RespConn> conn() {
    auto c = std::make_unique<RespConn>(port_);
    EXPECT_TRUE(c->ok());
    return c;
  }
  static int thread_of(RespConn& c) {
    auto r = c.call({"CLIENT", "INFO"});
    if (!r) return -1;
    const size_t at = r->str.find("io-thread=");
    return at == std::string::npos ? -1 : std::stoi(r->str.substr(at + 10));
  }
  // A connection served by another io thread than `of`'s (any one with a single thread).
  std::unique_ptr<RespConn> other_thread(RespConn& of) {
    const int t = thread_of(of);
    auto c = conn();
    for (int i = 0; i < 64 && GetParam() > 1 && thread_of(*c) == t; ++i) c = conn();
    if (GetParam() > 1) {
      EXPECT_NE(thread_of(*c), t) << "no connection landed on another io thread";
    }
    return c;
  }
  int64_t info_field(const std::string& section, const std::string& key) {
    auto r = control_->call({"INFO", section});
    if (!r) return -1;
    const size_t at = r->str.find(key + ":");
    return at == std::string::npos ? -1 : std::stoll(r->str.substr(at + key.size() + 1));
  }
  // Polls pred every 2 ms for up to 10 s.
  static bool eventually(const std::function<bool()>& pred) {
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pred();
  }
  bool blocked_clients_are(int64_t n) {
    return eventually([&] { return info_field("clients", "blocked_clients") == n; });
  }

  std::unique_ptr<ServerThread> server_;
  int port_ = 0;
  std::unique_ptr<RespConn> control_;
};

// --- blocking commands --------------------------------------------------------------------

TEST_P(Stateful, BlockingTimeoutsReplyNullAfterTheirTime) {
  auto c = conn();
  const auto t0 = Clock::now();
  EXPECT_EQ(f(c->call({"BLPOP", "empty", "0.2"})), "nil");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 5000);
  EXPECT_EQ(f(c->call({"BLMOVE", "empty", "dst", "LEFT", "RIGHT", "0.05"})), "nil");
  EXPECT_EQ(f(c->call({"BZPOPMIN", "empty", "0.05"})), "nil");
  EXPECT_EQ(f(c->call({"BLMPOP", "0.05", "1", "empty", "LEFT"})), "nil");
  EXPECT_EQ(f(c->call({"RPUSH", "after", "x"})), ":1") << "the connection serves again after a timeout";
  EXPECT_EQ(f(c->call({"BLPOP", "empty", "-1"})), "-ERR timeout is negative");
  EXPECT_EQ(f(c->call({"BLPOP", "empty", "abc"})), "-ERR timeout is not a float or out of range");
  EXPECT_EQ(blocked_clients_are(0), true);
}

TEST_P(Stateful, WaitersAreServedInArrivalOrderAcrossThreads) {
  std::vector<std::unique_ptr<RespConn>> waiters;
  waiters.push_back(conn());
  auto pusher = other_thread(*waiters[0]);
  for (int i = 0; i < 4; ++i) {
    if (i > 0) waiters.push_back(conn());
    ASSERT_TRUE(waiters.back()->send({"BLPOP", "q", "0"}));
    ASSERT_TRUE(blocked_clients_are(i + 1));  // queued in this order
  }
  EXPECT_EQ(f(pusher->call({"RPUSH", "q", "a", "b"})), ":2");
  EXPECT_EQ(f(waiters[0]->read()), "[\"q\", \"a\"]");
  EXPECT_EQ(f(waiters[1]->read()), "[\"q\", \"b\"]");
  EXPECT_TRUE(blocked_clients_are(2));
  EXPECT_EQ(f(pusher->call({"LPUSH", "q", "c"})), ":1");
  EXPECT_EQ(f(waiters[2]->read()), "[\"q\", \"c\"]");
  EXPECT_TRUE(waiters[3]->quiet_for(50));
  EXPECT_EQ(f(pusher->call({"LLEN", "q"})), ":0") << "a served push leaves nothing behind";
  // A waiter that disconnects loses its place; the next one is served.
  auto gone = conn();
  ASSERT_TRUE(gone->send({"BRPOP", "q2", "0"}));
  ASSERT_TRUE(blocked_clients_are(2));
  auto next = conn();
  ASSERT_TRUE(next->send({"BRPOP", "q2", "0"}));
  ASSERT_TRUE(blocked_clients_are(3));
  gone.reset();
  ASSERT_TRUE(blocked_clients_are(2));
  EXPECT_EQ(f(pusher->call({"RPUSH", "q2", "z"})), ":1");
  EXPECT_EQ(f(next->read()), "[\"q2\", \"z\"]");
  EXPECT_EQ(f(pusher->call({"RPUSH", "q", "d"})), ":1");
  EXPECT_EQ(f(waiters[3]->read()), "[\"q\", \"d\"]");
}

TEST_P(Stateful, DeleteAndTypeChangeLeaveWaitersBlockedAsRedis70) {
  auto waiter = conn();
  auto other = other_thread(*waiter);
  ASSERT_TRUE(waiter->send({"BLPOP", "k", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(other->call({"DEL", "k"})), ":0");
  EXPECT_EQ(f(other->call({"SET", "k", "string"})), "+OK");
  // In one transaction: a list that becomes a string before EXEC ends serves nobody.
  EXPECT_EQ(f(other->call({"DEL", "k"})), ":1");
  EXPECT_EQ(f(other->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(other->call({"LPUSH", "k", "x"})), "+QUEUED");
  EXPECT_EQ(f(other->call({"DEL", "k"})), "+QUEUED");
  EXPECT_EQ(f(other->call({"SET", "k", "s"})), "+QUEUED");
  EXPECT_EQ(f(other->call({"EXEC"})), "[:1, :1, +OK]");
  EXPECT_TRUE(waiter->quiet_for(50));
  EXPECT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(other->call({"GET", "k"})), "\"s\"");
  // Back to a list: served.
  EXPECT_EQ(f(other->call({"DEL", "k"})), ":1");
  EXPECT_EQ(f(other->call({"RPUSH", "k", "y"})), ":1");
  EXPECT_EQ(f(waiter->read()), "[\"k\", \"y\"]");
  // A sorted-set waiter is not served by a list of the same name.
  auto zwaiter = conn();
  ASSERT_TRUE(zwaiter->send({"BZPOPMAX", "z", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(other->call({"RPUSH", "z", "notaset"})), ":1");
  EXPECT_TRUE(zwaiter->quiet_for(50));
  EXPECT_EQ(f(other->call({"DEL", "z"})), ":1");
  EXPECT_EQ(f(other->call({"ZADD", "z", "1", "a", "2", "b"})), ":2");
  EXPECT_EQ(f(zwaiter->read()), "[\"z\", \"b\", \"2\"]");
}

TEST_P(Stateful, BlockingInsideMultiAndWakingFromExec) {
  auto c = conn();
  // Inside MULTI a blocking command never blocks: it answers as if timed out.
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"BLPOP", "none", "0"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"BZPOPMIN", "none", "0"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "[nil, nil]");
  // A waiter is served after the whole EXEC: a push popped again inside it leaves nothing.
  auto waiter = conn();
  auto writer = other_thread(*waiter);
  ASSERT_TRUE(waiter->send({"BLPOP", "t", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(writer->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(writer->call({"LPUSH", "t", "a"})), "+QUEUED");
  EXPECT_EQ(f(writer->call({"LPOP", "t"})), "+QUEUED");
  EXPECT_EQ(f(writer->call({"EXEC"})), "[:1, \"a\"]");
  EXPECT_TRUE(waiter->quiet_for(50));
  EXPECT_EQ(f(writer->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(writer->call({"RPUSH", "t", "b", "c"})), "+QUEUED");
  EXPECT_EQ(f(writer->call({"RPUSH", "t", "d"})), "+QUEUED");
  EXPECT_EQ(f(writer->call({"EXEC"})), "[:2, :3]");
  EXPECT_EQ(f(waiter->read()), "[\"t\", \"b\"]");
  EXPECT_EQ(f(writer->call({"LRANGE", "t", "0", "-1"})), "[\"c\", \"d\"]");
  // BLMOVE's push wakes a waiter on its destination in the same step.
  ASSERT_TRUE(waiter->send({"BLPOP", "dst", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(writer->call({"BLMOVE", "t", "dst", "LEFT", "RIGHT", "0"})), "\"c\"");
  EXPECT_EQ(f(waiter->read()), "[\"dst\", \"c\"]");
}

TEST_P(Stateful, ClientUnblockEndsAWaitFromAnotherThread) {
  auto waiter = conn();
  auto other = other_thread(*waiter);
  auto id = waiter->call({"CLIENT", "ID"});
  ASSERT_TRUE(id);
  ASSERT_TRUE(waiter->send({"BLPOP", "u", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(other->call({"CLIENT", "UNBLOCK", std::to_string(id->integer)})), ":1");
  EXPECT_EQ(f(waiter->read()), "nil");
  ASSERT_TRUE(waiter->send({"BLPOP", "u", "0"}));
  ASSERT_TRUE(blocked_clients_are(1));
  EXPECT_EQ(f(other->call({"CLIENT", "UNBLOCK", std::to_string(id->integer), "ERROR"})), ":1");
  EXPECT_EQ(f(waiter->read()), "-UNBLOCKED client unblocked via CLIENT UNBLOCK");
}

// --- WATCH ---------------------------------------------------------------------------------

TEST_P(Stateful, WatchIsInvalidatedByWritesFromAnyThread) {
  auto c = conn();
  auto other = other_thread(*c);
  EXPECT_EQ(f(c->call({"SET", "w", "1"})), "+OK");
  EXPECT_EQ(f(c->call({"WATCH", "w"})), "+OK");
  EXPECT_EQ(f(other->call({"SET", "w", "1"})), "+OK");  // the same value is still a write
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"INCR", "w"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "nil");
  EXPECT_EQ(f(c->call({"GET", "w"})), "\"1\"");
  // A write to another key, or a read of the watched one, does not abort.
  EXPECT_EQ(f(c->call({"WATCH", "w"})), "+OK");
  EXPECT_EQ(f(other->call({"SET", "unrelated", "1"})), "+OK");
  EXPECT_EQ(f(other->call({"GET", "w"})), "\"1\"");
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"INCR", "w"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "[:2]");
  // Every kind of write counts: EXPIRE, DEL, a list pop that empties it, RENAME onto it.
  for (const std::vector<std::string>& write :
       {std::vector<std::string>{"EXPIRE", "w", "100"}, {"DEL", "w"}, {"RENAME", "src", "w"}}) {
    EXPECT_EQ(f(other->call({"SET", "w", "v"})), "+OK");
    EXPECT_EQ(f(other->call({"SET", "src", "v"})), "+OK");
    EXPECT_EQ(f(c->call({"WATCH", "w"})), "+OK");
    EXPECT_NE(f(other->call(write)).substr(0, 1), "-") << write[0];
    EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
    EXPECT_EQ(f(c->call({"PING"})), "+QUEUED");
    EXPECT_EQ(f(c->call({"EXEC"})), "nil") << write[0];
  }
  // UNWATCH (and a finished EXEC) forget the key.
  EXPECT_EQ(f(c->call({"WATCH", "w"})), "+OK");
  EXPECT_EQ(f(c->call({"UNWATCH"})), "+OK");
  EXPECT_EQ(f(other->call({"SET", "w", "2"})), "+OK");
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"PING"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "[+PONG]");
}

TEST_P(Stateful, WatchIsInvalidatedByExpiryFlushdbAndSwapdb) {
  auto c = conn();
  auto other = other_thread(*c);
  // Active expiry removes the watched key while nobody touches it.
  EXPECT_EQ(f(c->call({"SET", "e", "v", "PX", "100"})), "+OK");
  EXPECT_EQ(f(c->call({"WATCH", "e"})), "+OK");
  ASSERT_TRUE(eventually([&] { return f(other->call({"DBSIZE"})) == ":0"; }));
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"PING"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "nil");
  // FLUSHDB and FLUSHALL from another thread.
  for (const char* flush : {"FLUSHDB", "FLUSHALL"}) {
    EXPECT_EQ(f(c->call({"SET", "x", "v"})), "+OK");
    EXPECT_EQ(f(c->call({"WATCH", "x"})), "+OK");
    EXPECT_EQ(f(other->call({flush})), "+OK");
    EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
    EXPECT_EQ(f(c->call({"PING"})), "+QUEUED");
    EXPECT_EQ(f(c->call({"EXEC"})), "nil") << flush;
  }
  // FLUSHDB of an empty database, or of another one, leaves a watch on a missing key alone.
  EXPECT_EQ(f(c->call({"WATCH", "x"})), "+OK");
  EXPECT_EQ(f(other->call({"SELECT", "3"})), "+OK");
  EXPECT_EQ(f(other->call({"SET", "x", "db3"})), "+OK");
  EXPECT_EQ(f(other->call({"FLUSHDB"})), "+OK");
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"PING"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "[+PONG]");
  // SWAPDB that brings a key in under a watched name.
  EXPECT_EQ(f(other->call({"SET", "x", "db3"})), "+OK");
  EXPECT_EQ(f(c->call({"WATCH", "x"})), "+OK");
  EXPECT_EQ(f(other->call({"SWAPDB", "0", "3"})), "+OK");
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"GET", "x"})), "+QUEUED");
  EXPECT_EQ(f(c->call({"EXEC"})), "nil");
}

// --- pub/sub -------------------------------------------------------------------------------

TEST_P(Stateful, PubSubResp2MessagesFromAnotherThread) {
  auto sub = conn();
  EXPECT_EQ(f(sub->call({"SUBSCRIBE", "news", "sport"})), "[\"subscribe\", \"news\", :1]");
  EXPECT_EQ(f(sub->read()), "[\"subscribe\", \"sport\", :2]");
  EXPECT_EQ(f(sub->call({"PSUBSCRIBE", "n*"})), "[\"psubscribe\", \"n*\", :3]");
  // RESP2: only the subscription commands and PING while subscribed.
  EXPECT_EQ(f(sub->call({"GET", "x"})),
            "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in "
            "this context");
  EXPECT_EQ(f(sub->call({"PING", "hi"})), "[\"pong\", \"hi\"]");
  auto pub = other_thread(*sub);
  EXPECT_EQ(f(pub->call({"PUBLISH", "news", "m1"})), ":2");  // the channel and the pattern
  EXPECT_EQ(f(sub->read()), "[\"message\", \"news\", \"m1\"]");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"n*\", \"news\", \"m1\"]");
  EXPECT_EQ(f(pub->call({"PUBLISH", "sport", "m2"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"message\", \"sport\", \"m2\"]");
  EXPECT_EQ(f(pub->call({"PUBLISH", "nobody", "m3"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"n*\", \"nobody\", \"m3\"]");
  EXPECT_EQ(f(pub->call({"PUBSUB", "NUMSUB", "news", "none"})), "[\"news\", :1, \"none\", :0]");
  EXPECT_EQ(f(pub->call({"PUBSUB", "NUMPAT"})), ":1");
  // 100 messages in one pipeline arrive complete and in order.
  std::string batch;
  for (int i = 0; i < 100; ++i) {
    const std::string n = std::to_string(i);
    batch += "*3\r\n$7\r\nPUBLISH\r\n$4\r\nnews\r\n$" + std::to_string(n.size()) + "\r\n" + n + "\r\n";
  }
  RespConn& p = *pub;
  ASSERT_TRUE(::send(p.fd(), batch.data(), batch.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(batch.size()));
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(f(p.read()), ":2");
    EXPECT_EQ(f(sub->read()), "[\"message\", \"news\", \"" + std::to_string(i) + "\"]");
    EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"n*\", \"news\", \"" + std::to_string(i) + "\"]");
  }
  EXPECT_EQ(f(sub->call({"UNSUBSCRIBE"})), "[\"unsubscribe\", \"news\", :2]");
  EXPECT_EQ(f(sub->read()), "[\"unsubscribe\", \"sport\", :1]");
  EXPECT_EQ(f(sub->call({"PUNSUBSCRIBE"})), "[\"punsubscribe\", \"n*\", :0]");
  EXPECT_EQ(f(sub->call({"GET", "x"})), "nil") << "a normal client again";
  EXPECT_EQ(f(pub->call({"PUBLISH", "news", "late"})), ":0");
}

TEST_P(Stateful, PubSubResp3PushesBesideReplies) {
  auto sub = conn();
  auto hello = sub->call({"HELLO", "3"});
  ASSERT_TRUE(hello && hello->type == ReplyType::kMap) << f(hello);
  auto r = sub->call({"SUBSCRIBE", "c"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, ReplyType::kPush);
  EXPECT_EQ(fmt(*r), "[\"subscribe\", \"c\", :1]");
  // RESP3 clients may run any command while subscribed.
  EXPECT_EQ(f(sub->call({"SET", "k", "v"})), "+OK");
  auto pub = other_thread(*sub);
  EXPECT_EQ(f(pub->call({"PUBLISH", "c", "hello"})), ":1");
  auto m = sub->read();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->type, ReplyType::kPush);
  EXPECT_EQ(fmt(*m), "[\"message\", \"c\", \"hello\"]");
  EXPECT_EQ(f(sub->call({"GET", "k"})), "\"v\"");
  auto u = sub->call({"UNSUBSCRIBE", "c"});
  ASSERT_TRUE(u);
  EXPECT_EQ(u->type, ReplyType::kPush);
  EXPECT_EQ(fmt(*u), "[\"unsubscribe\", \"c\", :0]");
}

TEST_P(Stateful, SlowSubscriberIsDisconnectedByThePubsubClass) {
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 128kb 60"})), "+OK");
  auto slow = conn();
  EXPECT_EQ(f(slow->call({"SUBSCRIBE", "flood"})), "[\"subscribe\", \"flood\", :1]");
  auto reader = conn();  // a subscriber that reads keeps up and stays
  EXPECT_EQ(f(reader->call({"SUBSCRIBE", "flood"})), "[\"subscribe\", \"flood\", :1]");
  auto pub = other_thread(*slow);
  const std::string payload(64 << 10, 'x');
  // At most 64 MiB published (the kernel's socket buffers hold a few MiB of it).
  bool dropped = false;
  for (int i = 0; i < 1024 && !dropped; ++i) {
    auto n = pub->call({"PUBLISH", "flood", payload});
    ASSERT_TRUE(n) << i;
    auto m = reader->read();
    ASSERT_TRUE(m) << i;
    ASSERT_EQ(m->elements.size(), 3u);
    EXPECT_EQ(m->elements[2].str.size(), payload.size());
    dropped = n->integer == 1;
  }
  EXPECT_TRUE(dropped) << "the subscriber that never reads was never disconnected";
  EXPECT_TRUE(slow->wait_closed(10000));
  EXPECT_EQ(f(pub->call({"PUBSUB", "NUMSUB", "flood"})), "[\"flood\", :1]");
  EXPECT_EQ(f(pub->call({"PUBLISH", "flood", "small"})), ":1");
  EXPECT_EQ(f(reader->read()), "[\"message\", \"flood\", \"small\"]");
}

// --- MONITOR -------------------------------------------------------------------------------

TEST_P(Stateful, MonitorShowsOtherThreadsCommandsInOrder) {
  auto c = conn();
  auto mon = other_thread(*c);
  EXPECT_EQ(f(mon->call({"MONITOR"})), "+OK");
  EXPECT_EQ(f(c->call({"SET", "key with space", "v\"q"})), "+OK");
  EXPECT_EQ(f(c->call({"SELECT", "2"})), "+OK");
  EXPECT_EQ(f(c->call({"GET", "k"})), "nil");
  auto l1 = mon->read(), l2 = mon->read(), l3 = mon->read();
  ASSERT_TRUE(l1 && l2 && l3);
  EXPECT_EQ(l1->type, ReplyType::kSimple);
  // "<unix seconds>.<micros> [<db> 127.0.0.1:<port>] "args"..."
  EXPECT_NE(l1->str.find(" [0 127.0.0.1:"), std::string::npos) << l1->str;
  EXPECT_NE(l1->str.find("] \"SET\" \"key with space\" \"v\\\"q\""), std::string::npos) << l1->str;
  EXPECT_NE(l2->str.find("] \"SELECT\" \"2\""), std::string::npos) << l2->str;
  EXPECT_NE(l3->str.find(" [2 127.0.0.1:"), std::string::npos) << l3->str;
  EXPECT_NE(l3->str.find("] \"GET\" \"k\""), std::string::npos) << l3->str;
  // AUTH's password is never shown (Redis shows nothing of AUTH at all).
  EXPECT_EQ(f(c->call({"AUTH", "secret"})).substr(0, 1), "-");
  EXPECT_EQ(f(c->call({"PING"})), "+PONG");
  auto l4 = mon->read();
  ASSERT_TRUE(l4);
  EXPECT_NE(l4->str.find("\"PING\""), std::string::npos) << l4->str;
  // A monitor that goes away is forgotten.
  mon.reset();
  EXPECT_EQ(f(c->call({"PING"})), "+PONG");
}

// --- CLIENT PAUSE --------------------------------------------------------------------------

TEST_P(Stateful, ClientPauseHoldsWritesOrAllUntilUnpause) {
  auto c = conn();
  auto other = other_thread(*c);
  EXPECT_EQ(f(other->call({"CLIENT", "PAUSE", "100000", "WRITE"})), "+OK");
  EXPECT_EQ(f(c->call({"GET", "p"})), "nil") << "reads go on under WRITE";
  ASSERT_TRUE(c->send({"SET", "p", "1"}));
  EXPECT_TRUE(c->quiet_for(100));
  EXPECT_EQ(f(other->call({"GET", "p"})), "nil") << "the held write has not run";
  EXPECT_EQ(f(other->call({"CLIENT", "UNPAUSE"})), "+OK");
  EXPECT_EQ(f(c->read()), "+OK");
  EXPECT_EQ(f(other->call({"GET", "p"})), "\"1\"");
  // ALL holds every command; a timed pause ends by itself.
  EXPECT_EQ(f(other->call({"CLIENT", "PAUSE", "300", "ALL"})), "+OK");
  const auto t0 = Clock::now();
  ASSERT_TRUE(c->send({"PING"}));
  EXPECT_EQ(f(c->read()), "+PONG");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 5000);
  // A write queued in MULTI is held at EXEC under WRITE.
  EXPECT_EQ(f(c->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(c->call({"INCR", "p"})), "+QUEUED");
  EXPECT_EQ(f(other->call({"CLIENT", "PAUSE", "100000", "WRITE"})), "+OK");
  ASSERT_TRUE(c->send({"EXEC"}));
  EXPECT_TRUE(c->quiet_for(100));
  EXPECT_EQ(f(other->call({"CLIENT", "UNPAUSE"})), "+OK");
  EXPECT_EQ(f(c->read()), "[:2]");
}

// --- keyspace notifications -------------------------------------------------------------------

// The next keyevent message of a subscriber to __keyevent@*: "<db> <event> <key>".
std::string next_keyevent(RespConn& sub) {
  auto m = sub.read();
  if (!m || m->elements.size() != 4) return "(none) " + f(m);
  const std::string& ch = m->elements[2].str;  // __keyevent@<db>__:<event>
  const size_t at = ch.find('@'), end = ch.find("__:");
  if (at == std::string::npos || end == std::string::npos) return "(bad channel) " + ch;
  return ch.substr(at + 1, end - at - 1) + " " + ch.substr(end + 3) + " " + m->elements[3].str;
}

TEST_P(Stateful, NotifyKeyspaceEventsTakesRedisLettersAndPrintsTheirCanonicalText) {
  auto get = [&] {
    auto r = control_->call({"CONFIG", "GET", "notify-keyspace-events"});
    return r && r->elements.size() == 2 ? r->elements[1].str : "(none)";
  };
  EXPECT_EQ(get(), "");
  const std::pair<const char*, const char*> cases[] = {
      {"KEA", "AKE"}, {"gKE", "gKE"}, {"$lshzxeKE", "$lshzxeKE"}, {"EA", "AE"}, {"Kxm", "xKm"},
      {"AgKn", "AK"},  // as Redis: n is not part of A, and the text shows A, K only
      {"tdnE", "tdnE"}, {"", ""}};
  for (const auto& [in, out] : cases) {
    EXPECT_EQ(f(control_->call({"CONFIG", "SET", "notify-keyspace-events", in})), "+OK") << in;
    EXPECT_EQ(get(), out) << in;
  }
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "notify-keyspace-events", "KEq"})),
            "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class "
            "character. Use 'Ag$lshzxeKEtmdn'.");
  EXPECT_EQ(get(), "") << "a refused value changes nothing";
  ServerOptions o;
  EXPECT_EQ(set_server_option(&o, "notify-keyspace-events", "Elg"), "");
  EXPECT_EQ(o.notify_keyspace_events, kNotifyKeyevent | kNotifyList | kNotifyGeneric);
  EXPECT_NE(set_server_option(&o, "notify-keyspace-events", "Z"), "");
}

TEST_P(Stateful, KeyspaceAndKeyeventChannelsReachSubscribersOnOtherThreads) {
  auto sub = conn();
  EXPECT_EQ(f(sub->call({"PSUBSCRIBE", "__key*"})), "[\"psubscribe\", \"__key*\", :1]");
  EXPECT_EQ(f(sub->call({"SUBSCRIBE", "marker"})), "[\"subscribe\", \"marker\", :2]");
  auto w = other_thread(*sub);
  // Off (the default): a write publishes nothing, the marker comes first.
  EXPECT_EQ(f(w->call({"SET", "foo", "bar"})), "+OK");
  EXPECT_EQ(f(w->call({"PUBLISH", "marker", "1"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"message\", \"marker\", \"1\"]");
  EXPECT_EQ(f(w->call({"CONFIG", "SET", "notify-keyspace-events", "KEA"})), "+OK");
  EXPECT_EQ(f(w->call({"SET", "foo", "baz"})), "+OK");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"__key*\", \"__keyspace@0__:foo\", \"set\"]");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"__key*\", \"__keyevent@0__:set\", \"foo\"]");
  EXPECT_EQ(f(w->call({"SELECT", "3"})), "+OK");
  EXPECT_EQ(f(w->call({"LPUSH", "l", "a"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"__key*\", \"__keyspace@3__:l\", \"lpush\"]");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"__key*\", \"__keyevent@3__:lpush\", \"l\"]");
  // K alone: only the keyspace channel; l alone: only list events.
  EXPECT_EQ(f(w->call({"CONFIG", "SET", "notify-keyspace-events", "Kl"})), "+OK");
  EXPECT_EQ(f(w->call({"SET", "s", "v"})), "+OK");
  EXPECT_EQ(f(w->call({"RPUSH", "l", "b"})), ":2");
  EXPECT_EQ(f(w->call({"PUBLISH", "marker", "2"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"pmessage\", \"__key*\", \"__keyspace@3__:l\", \"rpush\"]");
  EXPECT_EQ(f(sub->read()), "[\"message\", \"marker\", \"2\"]");
  // A class without K or E publishes nothing.
  EXPECT_EQ(f(w->call({"CONFIG", "SET", "notify-keyspace-events", "A"})), "+OK");
  EXPECT_EQ(f(w->call({"RPUSH", "l", "c"})), ":3");
  EXPECT_EQ(f(w->call({"PUBLISH", "marker", "3"})), ":1");
  EXPECT_EQ(f(sub->read()), "[\"message\", \"marker\", \"3\"]");
}

TEST_P(Stateful, CommandsNotifyWithRedisEventNamesInOrder) {
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "notify-keyspace-events", "EA"})), "+OK");
  auto sub = conn();
  EXPECT_EQ(f(sub->call({"PSUBSCRIBE", "__keyevent@*"})), "[\"psubscribe\", \"__keyevent@*\", :1]");
  auto w = other_thread(*sub);
  struct Step {
    std::vector<std::string> cmd;
    std::vector<std::string> events;  // "<db> <event> <key>"
  };
  const Step steps[] = {
      {{"SET", "s", "1", "EX", "100"}, {"0 set s", "0 expire s"}},
      {{"INCRBY", "s", "5"}, {"0 incrby s"}},
      {{"INCRBYFLOAT", "s", "0.5"}, {"0 incrbyfloat s"}},
      {{"APPEND", "s", "x"}, {"0 append s"}},
      {{"SETRANGE", "s", "0", "9"}, {"0 setrange s"}},
      {{"PERSIST", "s"}, {"0 persist s"}},
      {{"RENAME", "s", "t"}, {"0 rename_from s", "0 rename_to t"}},
      {{"COPY", "t", "u", "DB", "2"}, {"2 copy_to u"}},
      {{"MOVE", "t", "1"}, {"0 move_from t", "1 move_to t"}},
      {{"MSET", "m1", "a", "m2", "b"}, {"0 set m1", "0 set m2"}},
      {{"GETEX", "m1", "PX", "100000"}, {"0 expire m1"}},
      {{"BITOP", "OR", "bo", "m1"}, {"0 set bo"}},
      {{"SETBIT", "b", "3", "1"}, {"0 setbit b"}},
      {{"RPUSH", "l", "a", "b"}, {"0 rpush l"}},
      {{"LPUSH", "l", "c"}, {"0 lpush l"}},
      {{"SORT", "l", "ALPHA", "STORE", "ls"}, {"0 sortstore ls"}},
      {{"SORT", "missing", "STORE", "ls"}, {"0 del ls"}},
      {{"SORT", "missing", "STORE", "ls"}, {}},  // nothing to delete
      {{"LSET", "l", "0", "z"}, {"0 lset l"}},
      {{"LINSERT", "l", "BEFORE", "z", "y"}, {"0 linsert l"}},
      {{"LREM", "l", "0", "y"}, {"0 lrem l"}},
      {{"LMOVE", "l", "l2", "LEFT", "RIGHT"}, {"0 rpush l2", "0 lpop l"}},
      {{"LTRIM", "l", "1", "0"}, {"0 ltrim l", "0 del l"}},
      {{"RPOP", "l2"}, {"0 rpop l2", "0 del l2"}},
      {{"HSET", "h", "f", "1"}, {"0 hset h"}},
      {{"HINCRBY", "h", "f", "2"}, {"0 hincrby h"}},
      {{"HINCRBYFLOAT", "h", "f", "0.5"}, {"0 hincrbyfloat h"}},
      {{"HDEL", "h", "f"}, {"0 hdel h", "0 del h"}},
      {{"SADD", "st", "a", "b"}, {"0 sadd st"}},
      {{"SADD", "st", "a"}, {}},  // nothing added, nothing said
      {{"SREM", "st", "a"}, {"0 srem st"}},
      {{"SMOVE", "st", "st2", "b"}, {"0 srem st", "0 del st", "0 sadd st2"}},
      {{"SUNIONSTORE", "st3", "st2"}, {"0 sunionstore st3"}},
      {{"SPOP", "st3"}, {"0 spop st3", "0 del st3"}},
      {{"ZADD", "z", "1", "a", "2", "b"}, {"0 zadd z"}},
      {{"ZINCRBY", "z", "1", "a"}, {"0 zincr z"}},
      {{"ZREM", "z", "a"}, {"0 zrem z"}},
      {{"ZRANGESTORE", "z2", "z", "0", "-1"}, {"0 zrangestore z2"}},
      {{"ZPOPMIN", "z2"}, {"0 zpopmin z2", "0 del z2"}},
      {{"ZREMRANGEBYSCORE", "z", "-inf", "+inf"}, {"0 zremrangebyscore z", "0 del z"}},
      {{"XADD", "x", "1-1", "f", "v"}, {"0 xadd x"}},
      {{"EXPIRE", "x", "0"}, {"0 del x"}},
      {{"DEL", "st2", "b", "missing"}, {"0 del st2", "0 del b"}},
      {{"GET", "missing"}, {}},  // keymiss is not part of A
  };
  for (const Step& st : steps) {
    auto r = w->call(st.cmd);
    ASSERT_TRUE(r) << st.cmd[0];
    EXPECT_NE(r->type, ReplyType::kError) << st.cmd[0] << ": " << f(r);
    // A sentinel after each command: every event before it, and nothing more.
    EXPECT_EQ(f(w->call({"PUBLISH", "__keyevent@9__:end", "."})), ":1");
    std::vector<std::string> got;
    for (std::string e = next_keyevent(*sub); e != "9 end ." && got.size() < 8; e = next_keyevent(*sub)) got.push_back(e);
    EXPECT_EQ(::testing::PrintToString(got), ::testing::PrintToString(st.events)) << st.cmd[0];
  }
}

TEST_P(Stateful, ExpiryEvictionNewKeysKeymissAndExecNotify) {
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "notify-keyspace-events", "E$gxenm"})), "+OK");
  auto sub = conn();
  auto hello = sub->call({"HELLO", "3"});
  ASSERT_TRUE(hello && hello->type == ReplyType::kMap) << f(hello);
  EXPECT_EQ(f(sub->call({"PSUBSCRIBE", "__keyevent@0__:*"})), "[\"psubscribe\", \"__keyevent@0__:*\", :1]");
  auto w = other_thread(*sub);
  auto expect_events = [&](std::initializer_list<const char*> want) {
    for (const char* e : want) {
      auto m = sub->read();
      ASSERT_TRUE(m) << "no event for " << e;
      EXPECT_EQ(m->type, ReplyType::kPush) << "RESP3 subscribers get pushes";
      ASSERT_EQ(m->elements.size(), 4u) << f(m);
      EXPECT_EQ(m->elements[2].str.substr(15) + " " + m->elements[3].str, e);
    }
  };
  EXPECT_EQ(f(w->call({"SET", "a", "1"})), "+OK");
  expect_events({"new a", "set a"});
  EXPECT_EQ(f(w->call({"SET", "a", "2"})), "+OK");  // not new
  expect_events({"set a"});
  EXPECT_EQ(f(w->call({"GET", "nokey"})), "nil");
  expect_events({"keymiss nokey"});
  // Expiry: whichever finds it first (the active cycle or this GET) says "expired" once.
  EXPECT_EQ(f(w->call({"SET", "e", "1", "PX", "30"})), "+OK");
  expect_events({"new e", "set e", "expire e"});
  EXPECT_TRUE(eventually([&] { return f(w->call({"GET", "e"})) == "nil"; }));
  expect_events({"expired e", "keymiss e"});
  // EXEC: every queued command's events, in order.
  EXPECT_EQ(f(w->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(w->call({"SET", "a", "3"})), "+QUEUED");
  EXPECT_EQ(f(w->call({"INCR", "a"})), "+QUEUED");
  EXPECT_EQ(f(w->call({"DEL", "a"})), "+QUEUED");
  EXPECT_EQ(f(w->call({"EXEC"})), "[+OK, :4, :1]");
  expect_events({"set a", "incrby a", "del a"});
  // Eviction: lowering maxmemory evicts at once (Redis' CONFIG SET maxmemory).
  EXPECT_EQ(f(w->call({"SET", "victim", "v"})), "+OK");
  expect_events({"new victim", "set victim"});
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"})), "+OK");
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory", "1"})), "+OK");
  expect_events({"evicted victim"});
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory", "0"})), "+OK");
}

// --- client-side caching (CLIENT TRACKING) ---------------------------------------------------

// A RESP3 client: HELLO 3 and CLIENT TRACKING with `opts`.
std::unique_ptr<RespConn> tracker_of(std::unique_ptr<RespConn> c, std::vector<std::string> opts) {
  auto hello = c->call({"HELLO", "3"});
  EXPECT_TRUE(hello && hello->type == ReplyType::kMap) << f(hello);
  std::vector<std::string> argv{"CLIENT", "TRACKING", "ON"};
  argv.insert(argv.end(), opts.begin(), opts.end());
  EXPECT_EQ(f(c->call(argv)), "+OK");
  return c;
}

// The next message of c, which must be a RESP3 push.
std::string push_of(RespConn& c) {
  auto m = c.read();
  if (!m) return "(none)";
  return (m->type == ReplyType::kPush ? ">" : "not a push: ") + fmt(*m);
}

TEST_P(Stateful, TrackingResp3PushesInvalidationsOfKeysRead) {
  auto t = tracker_of(conn(), {});
  auto w = other_thread(*t);
  EXPECT_EQ(f(w->call({"MSET", "k", "1", "unread", "1"})), "+OK");
  EXPECT_EQ(f(t->call({"GET", "k"})), "\"1\"");
  EXPECT_EQ(info_field("clients", "tracking_clients"), 1);
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 1);
  EXPECT_EQ(info_field("stats", "tracking_total_items"), 1);
  EXPECT_EQ(f(w->call({"INCR", "unread"})), ":2");
  EXPECT_EQ(f(w->call({"INCR", "k"})), ":2");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"k\"]]") << "only the key read, from another thread";
  EXPECT_TRUE(t->quiet_for(50));
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 0) << "an invalidated key is forgotten";
  EXPECT_EQ(f(w->call({"INCR", "k"})), ":3");
  EXPECT_TRUE(t->quiet_for(50)) << "one invalidation per read";
  // Its own write: the invalidation follows the reply (and EXEC's reply as a whole).
  EXPECT_EQ(f(t->call({"GET", "k"})), "\"3\"");
  EXPECT_EQ(f(t->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(t->call({"INCR", "k"})), "+QUEUED");
  EXPECT_EQ(f(t->call({"GET", "k"})), "+QUEUED");
  EXPECT_EQ(f(t->call({"EXEC"})), "[:4, \"4\"]");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"k\"]]");
  // Expiry invalidates too.
  EXPECT_EQ(f(t->call({"SET", "e", "v", "PX", "30"})), "+OK");
  EXPECT_EQ(f(t->call({"GET", "e"})), "\"v\"");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"e\"]]");
  auto list = t->call({"CLIENT", "INFO"});
  ASSERT_TRUE(list);
  EXPECT_NE(list->str.find(" flags=t "), std::string::npos) << list->str;
  EXPECT_NE(list->str.find(" redir=0 "), std::string::npos) << list->str;
}

TEST_P(Stateful, TrackingRedirectsToAResp2SubscriberAndReportsItsLoss) {
  auto redir = conn();
  auto id = redir->call({"CLIENT", "ID"});
  ASSERT_TRUE(id);
  const std::string rid = std::to_string(id->integer);
  EXPECT_EQ(f(redir->call({"SUBSCRIBE", "__redis__:invalidate"})), "[\"subscribe\", \"__redis__:invalidate\", :1]");
  auto t = other_thread(*redir);  // RESP2: it can be told only through the redirect
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "REDIRECT", "999999"})),
            "-ERR The client ID you want redirect to does not exist");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "REDIRECT", rid, "REDIRECT", rid})),
            "-ERR A client can only redirect to a single other client");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "REDIRECT", rid})), "+OK");
  EXPECT_EQ(f(t->call({"CLIENT", "GETREDIR"})), ":" + rid);
  auto info = t->call({"CLIENT", "INFO"});
  ASSERT_TRUE(info);
  EXPECT_NE(info->str.find(" redir=" + rid + " "), std::string::npos) << info->str;
  EXPECT_EQ(f(t->call({"MGET", "a", "b"})), "[nil, nil]");
  auto w = conn();
  EXPECT_EQ(f(w->call({"SET", "a", "1"})), "+OK");
  EXPECT_EQ(f(redir->read()), "[\"message\", \"__redis__:invalidate\", [\"a\"]]");
  EXPECT_EQ(f(w->call({"FLUSHALL"})), "+OK");
  EXPECT_EQ(f(redir->read()), "[\"message\", \"__redis__:invalidate\", nil]") << "a flush invalidates everything";
  // The redirect client goes: a RESP3 tracker is told at its next invalidation.
  redir.reset();
  EXPECT_TRUE(eventually([&] { return info_field("clients", "connected_clients") == 3; }));
  auto hello = t->call({"HELLO", "3"});
  ASSERT_TRUE(hello && hello->type == ReplyType::kMap) << f(hello);
  EXPECT_EQ(f(t->call({"GET", "a"})), "nil");
  EXPECT_EQ(f(w->call({"SET", "a", "2"})), "+OK");
  EXPECT_EQ(push_of(*t), ">[\"tracking-redir-broken\", :" + rid + "]");
  auto ti = t->call({"CLIENT", "TRACKINGINFO"});
  EXPECT_EQ(f(ti), "{\"flags\": [\"on\", \"broken_redirect\"], \"redirect\": :" + rid + ", \"prefixes\": []}");
  info = t->call({"CLIENT", "INFO"});
  ASSERT_TRUE(info);
  EXPECT_NE(info->str.find(" flags=tR "), std::string::npos) << info->str;
}

TEST_P(Stateful, TrackingBcastSendsOneMessagePerPrefixAfterTheBatch) {
  auto t = conn();
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "PREFIX", "a:"})),
            "-ERR PREFIX option requires BCAST mode to be enabled");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a"})),
            "-ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"})),
            "-ERR OPTIN and OPTOUT are not compatible with BCAST");
  t = tracker_of(std::move(t), {"BCAST", "PREFIX", "a:", "PREFIX", "b:"});
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:x"})),
            "-ERR Prefix 'a:x' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON"})),
            "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling "
            "it with a different mode.");
  EXPECT_EQ(info_field("stats", "tracking_total_prefixes"), 2);
  auto w = other_thread(*t);
  EXPECT_EQ(f(w->call({"MULTI"})), "+OK");
  for (const char* k : {"a:2", "a:1", "b:1", "c:1"}) EXPECT_EQ(f(w->call({"INCR", k})), "+QUEUED");
  EXPECT_EQ(f(w->call({"EXEC"})), "[:1, :1, :1, :1]");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"a:1\", \"a:2\"]]");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"b:1\"]]");
  EXPECT_TRUE(t->quiet_for(50)) << "c:1 is under no prefix";
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKINGINFO"})),
            "{\"flags\": [\"on\", \"bcast\"], \"redirect\": :0, \"prefixes\": [\"a:\", \"b:\"]}");
  auto info = t->call({"CLIENT", "INFO"});
  ASSERT_TRUE(info);
  EXPECT_NE(info->str.find(" flags=tB "), std::string::npos) << info->str;
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "OFF"})), "+OK");
  EXPECT_EQ(info_field("stats", "tracking_total_prefixes"), 0);
}

TEST_P(Stateful, TrackingOptinAndOptoutFollowClientCaching) {
  auto t = conn();
  EXPECT_EQ(f(t->call({"CLIENT", "CACHING", "YES"})),
            "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode "
            "enabled");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"})), "-ERR You can't use both OPTIN and OPTOUT");
  t = tracker_of(std::move(t), {"OPTIN"});
  EXPECT_EQ(f(t->call({"CLIENT", "CACHING", "NO"})),
            "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
  auto w = other_thread(*t);
  EXPECT_EQ(f(t->call({"GET", "k1"})), "nil");  // not cached without CACHING YES
  EXPECT_EQ(f(t->call({"CLIENT", "CACHING", "YES"})), "+OK");
  EXPECT_EQ(f(t->call({"GET", "k2"})), "nil");
  EXPECT_EQ(f(t->call({"GET", "k3"})), "nil");  // CACHING YES lasted one command
  EXPECT_EQ(f(w->call({"MSET", "k1", "1", "k2", "2", "k3", "3"})), "+OK");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"k2\"]]");
  EXPECT_TRUE(t->quiet_for(50));
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "OPTOUT"})),
            "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling "
            "it with a different mode.");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "OFF"})), "+OK");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "OPTOUT"})), "+OK");
  EXPECT_EQ(f(t->call({"CLIENT", "CACHING", "NO"})), "+OK");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKINGINFO"})),
            "{\"flags\": [\"on\", \"optout\", \"caching-no\"], \"redirect\": :0, \"prefixes\": []}");
  EXPECT_EQ(f(t->call({"GET", "k1"})), "\"1\"");  // not cached: CACHING NO
  EXPECT_EQ(f(t->call({"GET", "k3"})), "\"3\"");
  EXPECT_EQ(f(w->call({"MSET", "k1", "x", "k3", "x"})), "+OK");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"k3\"]]");
  EXPECT_TRUE(t->quiet_for(50));
}

TEST_P(Stateful, TrackingNoloopSkipsTheClientsOwnWrites) {
  auto t = tracker_of(conn(), {"NOLOOP"});
  auto w = other_thread(*t);
  EXPECT_EQ(f(t->call({"MGET", "mine", "theirs"})), "[nil, nil]");
  EXPECT_EQ(f(t->call({"SET", "mine", "1"})), "+OK");
  EXPECT_EQ(f(w->call({"SET", "theirs", "1"})), "+OK");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"theirs\"]]");
  EXPECT_TRUE(t->quiet_for(50));
  // BCAST with NOLOOP: the broadcast leaves out what the client changed itself.
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "OFF"})), "+OK");
  EXPECT_EQ(f(t->call({"CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"})), "+OK");
  EXPECT_EQ(f(t->call({"SET", "mine", "2"})), "+OK");
  EXPECT_EQ(f(w->call({"SET", "theirs", "2"})), "+OK");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"theirs\"]]");
  EXPECT_TRUE(t->quiet_for(50));
}

TEST_P(Stateful, TrackingFlushSendsANullInvalidation) {
  auto t = tracker_of(conn(), {});
  auto w = other_thread(*t);
  EXPECT_EQ(f(t->call({"MGET", "a", "b"})), "[nil, nil]");
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 2);
  EXPECT_EQ(f(w->call({"SELECT", "3"})), "+OK");
  EXPECT_EQ(f(w->call({"FLUSHDB"})), "+OK");  // any database: the keys are not per database
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", nil]");
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 0);
  // Its own FLUSHALL inside MULTI: EXEC's reply first.
  EXPECT_EQ(f(t->call({"MULTI"})), "+OK");
  EXPECT_EQ(f(t->call({"FLUSHALL"})), "+QUEUED");
  EXPECT_EQ(f(t->call({"EXEC"})), "[+OK]");
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", nil]");
}

TEST_P(Stateful, TrackingTableIsBoundedByTrackingTableMaxKeys) {
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "tracking-table-max-keys", "10"})), "+OK");
  auto t = tracker_of(conn(), {});
  std::vector<std::string> mget{"MGET"};
  for (int i = 0; i < 50; ++i) mget.push_back("key" + std::to_string(i));
  auto r = t->call(mget);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->elements.size(), 50u);
  // The 40 keys over the bound are forgotten, each with its invalidation.
  std::set<std::string> told;
  for (int i = 0; i < 40; ++i) {
    auto m = t->read();
    ASSERT_TRUE(m && m->type == ReplyType::kPush && m->elements.size() == 2) << f(m);
    ASSERT_EQ(m->elements[1].elements.size(), 1u);
    told.insert(m->elements[1].elements[0].str);
  }
  EXPECT_EQ(told.size(), 40u);
  EXPECT_TRUE(t->quiet_for(50));
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 10);
  EXPECT_EQ(f(control_->call({"CONFIG", "GET", "tracking-table-max-keys"})), "[\"tracking-table-max-keys\", \"10\"]");
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "tracking-table-max-keys", "4"})), "+OK");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(push_of(*t).substr(0, 15), ">[\"invalidate\",");
  EXPECT_TRUE(eventually([&] { return info_field("stats", "tracking_total_keys") == 4; }));
  EXPECT_TRUE(t->quiet_for(50));
  // A key read by a stream of short-lived clients keeps no id of those that left.
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "tracking-table-max-keys", "1000000"})), "+OK");
  for (int i = 0; i < 20; ++i) {
    auto once = tracker_of(conn(), {});
    EXPECT_EQ(f(once->call({"GET", "shared"})), "nil");
  }
  EXPECT_TRUE(eventually([&] { return info_field("clients", "tracking_clients") == 1; }));
  EXPECT_EQ(f(t->call({"GET", "shared"})), "nil");
  EXPECT_EQ(info_field("stats", "tracking_total_keys"), 5);
  EXPECT_EQ(info_field("stats", "tracking_total_items"), 5);
}

TEST_P(Stateful, TrackingEvictionBeforeACommandIsReportedBeforeItsReply) {
  auto t = tracker_of(conn(), {});
  auto w = other_thread(*t);
  EXPECT_EQ(f(t->call({"SET", "v", "x", "EX", "10000"})), "+OK");
  EXPECT_EQ(f(t->call({"GET", "v"})), "\"x\"");
  const int64_t used = info_field("memory", "used_memory");
  ASSERT_GT(used, 0);
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory-policy", "volatile-random"})), "+OK");
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory", std::to_string(used + (512 << 10))})), "+OK");
  EXPECT_EQ(f(w->call({"SETBIT", "big", "16000000", "1"})), ":0");  // 2 MB past the limit
  // The memory figure is cached for a coarse clock tick: the next command after it evicts.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_TRUE(t->send({"PING"}));
  EXPECT_EQ(push_of(*t), ">[\"invalidate\", [\"v\"]]") << "the eviction before PING, reported before its reply";
  EXPECT_EQ(f(t->read()), "+PONG");
  EXPECT_EQ(f(control_->call({"CONFIG", "SET", "maxmemory", "0"})), "+OK");
  EXPECT_EQ(f(control_->call({"DEL", "big"})), ":1");
}

TEST_P(Stateful, ResetTurnsTrackingOff) {
  auto t = tracker_of(conn(), {"BCAST", "PREFIX", "p"});
  EXPECT_EQ(info_field("clients", "tracking_clients"), 1);
  EXPECT_EQ(f(t->call({"RESET"})), "+RESET");
  auto info = t->call({"CLIENT", "INFO"});
  ASSERT_TRUE(info);
  EXPECT_NE(info->str.find(" flags=N "), std::string::npos) << info->str;
  EXPECT_NE(info->str.find(" redir=-1 "), std::string::npos) << info->str;
  EXPECT_EQ(f(t->call({"CLIENT", "GETREDIR"})), ":-1");
  EXPECT_EQ(info_field("clients", "tracking_clients"), 0);
  EXPECT_EQ(info_field("stats", "tracking_total_prefixes"), 0);
  auto w = other_thread(*t);
  EXPECT_EQ(f(w->call({"SET", "p1", "v"})), "+OK");
  EXPECT_TRUE(t->quiet_for(50));
}

INSTANTIATE_TEST_SUITE_P(IoThreads, Stateful, ::testing::Values(1, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return "threads" + std::to_string(p.param); });

}  // namespace
}  // namespace conduit::kv
