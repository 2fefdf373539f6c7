// io_threads > 1: connections spread over the reactor threads, commands stay atomic, the
// AOF still covers every acknowledged write, cross-thread CLIENT KILL / BGREWRITEAOF /
// SHUTDOWN.  Every load here is bounded in count; the waits are bounded in time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;
using testing::TempDir;

constexpr int kThreads = 4;

ServerOptions threaded_options() {
  ServerOptions o;
  o.port = 0;
  o.io_threads = kThreads;
  return o;
}

std::unique_ptr<Client> connect_or_die(const std::string& url) {
  auto c = Client::connect(url);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(c).value() : nullptr;
}

// The io thread serving a connection, from CLIENT INFO.
int io_thread_of(Client& c) {
  auto r = c.command({"CLIENT", "INFO"});
  if (!r.ok()) return -1;
  const size_t at = r->str.find("io-thread=");
  return at == std::string::npos ? -1 : std::stoi(r->str.substr(at + 10));
}

// Field `key` of INFO's io_thread_<i> line ("clients", "reads", ...).
std::map<int, uint64_t> per_thread(const std::string& info, const std::string& key) {
  std::map<int, uint64_t> v;
  for (int i = 0; i < kThreads; ++i) {
    const std::string tag = "io_thread_" + std::to_string(i) + ":";
    const size_t line = info.find(tag);
    if (line == std::string::npos) continue;
    const size_t end = info.find("\r\n", line);
    const size_t at = info.find(key + "=", line);
    if (at == std::string::npos || at > end) continue;
    v[i] = std::stoull(info.substr(at + key.size() + 1));
  }
  return v;
}

TEST(IoThreads, InfoReportsThreadsAndConnectionsAreSpread) {
  ServerThread s(threaded_options());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  // 32 connections from 32 source ports: P(all on one of 4 listeners) = 4^-31.
  std::vector<std::unique_ptr<Client>> clients;
  std::set<int> threads_seen;
  for (int i = 0; i < 32; ++i) {
    clients.push_back(connect_or_die(s.url("tcp")));
    ASSERT_NE(clients.back(), nullptr);
    const int t = io_thread_of(*clients.back());
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    threads_seen.insert(t);
  }
  EXPECT_GE(threads_seen.size(), 2u);
  const std::string info = s.info("server threads clients");
  EXPECT_NE(info.find("io_threads_active:1\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("io_threads:4\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("connected_clients:32\r\n"), std::string::npos) << info;
  uint64_t total = 0;
  for (auto [t, n] : per_thread(info, "clients")) total += n;
  EXPECT_EQ(total, 32u) << info;
  EXPECT_EQ(per_thread(info, "clients").size(), static_cast<size_t>(kThreads)) << info;
  // CLIENT LIST sees every thread's clients, oldest first.
  auto list = clients[0]->command({"CLIENT", "LIST"});
  ASSERT_TRUE(list.ok());
  size_t lines = 0;
  for (char ch : list->str) lines += ch == '\n';
  EXPECT_EQ(lines, 32u);
  // CONFIG GET reports the option.
  EXPECT_EQ(fmt(clients[0]->command({"CONFIG", "GET", "io-threads"})), "[\"io-threads\", \"4\"]");

  // One thread: inactive.
  ServerOptions one;
  one.port = 0;
  ServerThread single(one);
  ASSERT_TRUE(single.ok());
  EXPECT_NE(single.info("server").find("io_threads_active:0\r\n"), std::string::npos);
}

TEST(IoThreads, RefusesZeroThreads) {
  ServerOptions o = threaded_options();
  o.io_threads = 0;
  ServerThread s(o);
  EXPECT_FALSE(s.ok());
}

// Many connections on all threads INCR the same counters: no increment is lost.
TEST(IoThreads, ConcurrentIncrsGiveTheExactTotal) {
  ServerThread s(threaded_options());
  ASSERT_TRUE(s.ok());
  constexpr int kClients = 16, kBatches = 20, kPerBatch = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto c = Client::connect(s.url("tcp"));
      if (!c.ok()) return (void)++failures;
      for (int b = 0; b < kBatches; ++b) {
        // Pipelined, and mixed with single commands: both paths through the server.
        std::vector<std::vector<std::string>> batch(kPerBatch, {"INCR", "counter"});
        batch.push_back({"INCRBY", "per:" + std::to_string(t), "2"});
        auto r = (*c)->pipeline(batch);
        if (!r.ok() || r->size() != batch.size()) return (void)++failures;
        for (const Reply& x : *r)
          if (x.type != ReplyType::kInteger) ++failures;
        if (!(*c)->command({"INCR", "counter"}).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  auto c = connect_or_die(s.url("tcp"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fmt(c->command({"GET", "counter"})), "\"" + std::to_string(kClients * kBatches * (kPerBatch + 1)) + "\"");
  for (int t = 0; t < kClients; ++t)
    EXPECT_EQ(fmt(c->command({"GET", "per:" + std::to_string(t)})), "\"" + std::to_string(2 * kBatches) + "\"");
  // Every increment was counted once in the stats too.
  const std::string info = s.info("stats threads");
  uint64_t reads = 0;
  for (auto [t, n] : per_thread(info, "reads")) reads += n;
  EXPECT_GT(reads, 0u);
}

// Writers MSET a group of keys to one value; readers MGET the group: a reader never sees a
// half-applied MSET, whatever threads the two connections are on.
TEST(IoThreads, MsetIsAtomicForMget) {
  ServerThread s(threaded_options());
  ASSERT_TRUE(s.ok());
  constexpr int kKeys = 16, kWriters = 4, kReaders = 4, kRounds = 300;
  {
    auto c = connect_or_die(s.url("tcp"));
    std::vector<std::string> init = {"MSET"};
    for (int k = 0; k < kKeys; ++k) init.insert(init.end(), {"g" + std::to_string(k), "init"});
    ASSERT_EQ(fmt(c->command(init)), "+OK");
  }
  std::atomic<int> torn{0}, failures{0};
  std::atomic<int> writers_left{kWriters};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto c = Client::connect(s.url("tcp"));
      if (!c.ok()) return (void)++failures;
      for (int i = 0; i < kRounds; ++i) {
        std::vector<std::string> args = {"MSET"};
        const std::string v = "w" + std::to_string(w) + "-" + std::to_string(i);
        for (int k = 0; k < kKeys; ++k) args.insert(args.end(), {"g" + std::to_string(k), v});
        if (fmt((*c)->command(args)) != "+OK") ++failures;
      }
      --writers_left;
    });
  }
  std::atomic<uint64_t> reads{0};
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      auto c = Client::connect(s.url("tcp"));
      if (!c.ok()) return (void)++failures;
      std::vector<std::string> args = {"MGET"};
      for (int k = 0; k < kKeys; ++k) args.push_back("g" + std::to_string(k));
      // Until the writers finish, and at most 20000 reads.
      for (int i = 0; i < 20000 && writers_left.load() > 0; ++i) {
        auto x = (*c)->command(args);
        if (!x.ok() || x->elements.size() != kKeys) return (void)++failures;
        for (const Reply& e : x->elements)
          if (e.str != x->elements[0].str) {
            ++torn;
            break;
          }
        ++reads;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(torn.load(), 0) << "an MGET saw a half-applied MSET";
  EXPECT_GT(reads.load(), 0u);
}

// Connections on different threads: CLIENT KILL of a client served by another thread.
TEST(IoThreads, ClientKillAcrossThreads) {
  ServerThread s(threaded_options());
  ASSERT_TRUE(s.ok());
  auto killer = connect_or_die(s.url("tcp"));
  ASSERT_NE(killer, nullptr);
  const int killer_thread = io_thread_of(*killer);
  std::unique_ptr<Client> victim;
  std::vector<std::unique_ptr<Client>> others;
  for (int i = 0; i < 64 && victim == nullptr; ++i) {
    auto c = connect_or_die(s.url("tcp"));
    ASSERT_NE(c, nullptr);
    if (io_thread_of(*c) != killer_thread) victim = std::move(c);
    else others.push_back(std::move(c));
  }
  ASSERT_NE(victim, nullptr) << "64 connections all on thread " << killer_thread;
  auto id = victim->command({"CLIENT", "ID"});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(fmt(killer->command({"CLIENT", "KILL", "ID", std::to_string(id->integer)})), ":1");
  // Gone from CLIENT LIST at once, and a second kill finds nothing.
  auto list = killer->command({"CLIENT", "LIST"});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->str.find("id=" + std::to_string(id->integer) + " "), std::string::npos);
  EXPECT_EQ(fmt(killer->command({"CLIENT", "KILL", "ID", std::to_string(id->integer)})), ":0");
  // Its own thread closed it.
  EXPECT_FALSE(victim->command({"PING"}).ok());
  EXPECT_EQ(fmt(killer->command({"PING"})), "+PONG");
}

// appendfsync always with 4 threads: every acknowledged write is in the AOF; a
// BGREWRITEAOF started from a connection on a thread other than the first compacts it
// while writes go on; a restart loads everything.
TEST(IoThreads, AofAlwaysAndRewriteFromAnyThread) {
  TempDir dir;
  ServerOptions o = threaded_options();
  o.appendonly = true;
  o.appendfsync = AppendFsync::kAlways;
  o.dir = dir.path();
  constexpr int kWriters = 8, kPerWriter = 200;
  {
    ServerThread s(o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    std::atomic<bool> rewrite_started{false};
    for (int t = 0; t < kWriters; ++t) {
      threads.emplace_back([&, t] {
        auto c = Client::connect(s.url("tcp"));
        if (!c.ok()) return (void)++failures;
        for (int i = 0; i < kPerWriter; ++i) {
          if (fmt((*c)->command({"SET", "k" + std::to_string(t) + ":" + std::to_string(i), std::to_string(i)})) != "+OK")
            ++failures;
          if (fmt((*c)->command({"RPUSH", "list", std::to_string(t)})).rfind(":", 0) != 0) ++failures;
        }
      });
    }
    // BGREWRITEAOF from a connection that is not on thread 0, in the middle of the load.
    std::unique_ptr<Client> admin;
    std::vector<std::unique_ptr<Client>> spare;
    for (int i = 0; i < 64 && admin == nullptr; ++i) {
      auto c = connect_or_die(s.url("tcp"));
      ASSERT_NE(c, nullptr);
      if (io_thread_of(*c) != 0) admin = std::move(c);
      else spare.push_back(std::move(c));
    }
    ASSERT_NE(admin, nullptr);
    auto r = admin->command({"BGREWRITEAOF"});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->type, ReplyType::kSimple) << fmt(*r);
    rewrite_started = true;
    for (auto& th : threads) th.join();
    ASSERT_EQ(failures.load(), 0);
    // The rewrite finishes (bounded wait) and is counted.
    std::string info;
    for (int i = 0; i < 500; ++i) {
      info = fmt(admin->command({"INFO", "persistence"}));
      if (info.find("aof_rewrite_in_progress:0") != std::string::npos && info.find("aof_rewrites:1") != std::string::npos)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_NE(info.find("aof_rewrites:1"), std::string::npos) << info;
    EXPECT_NE(info.find("aof_last_bgrewrite_status:ok"), std::string::npos) << info;
  }
  ServerThread again(o);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  auto c = connect_or_die(again.url("tcp"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(fmt(c->command({"DBSIZE"})), ":" + std::to_string(kWriters * kPerWriter + 1));
  EXPECT_EQ(fmt(c->command({"LLEN", "list"})), ":" + std::to_string(kWriters * kPerWriter));
  for (int t = 0; t < kWriters; ++t)
    EXPECT_EQ(fmt(c->command({"GET", "k" + std::to_string(t) + ":" + std::to_string(kPerWriter - 1)})),
              "\"" + std::to_string(kPerWriter - 1) + "\"");
}

// SHUTDOWN from a connection on another thread stops the server through its handler.
TEST(IoThreads, ShutdownFromAnyThread) {
  ServerThread s(threaded_options());
  ASSERT_TRUE(s.ok());
  std::unique_ptr<Client> c;
  std::vector<std::unique_ptr<Client>> spare;
  for (int i = 0; i < 64 && c == nullptr; ++i) {
    auto x = connect_or_die(s.url("tcp"));
    ASSERT_NE(x, nullptr);
    if (io_thread_of(*x) != 0) c = std::move(x);
    else spare.push_back(std::move(x));
  }
  ASSERT_NE(c, nullptr);
  (void)c->command({"SHUTDOWN", "NOSAVE"});
  for (int i = 0; i < 250 && !s.shutdown_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(s.shutdown_requested());
  s.stop();
}

}  // namespace
}  // namespace conduit::kv
