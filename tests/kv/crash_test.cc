// Durability: SIGKILL the conduit-kv binary under write load with appendfsync always, start
// it again on the same directory, and check that every write that was acknowledged is
// there.  (Unacknowledged writes may or may not be: that is allowed.)  Run with one io
// thread and with four (the writers' connections then land on different threads).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"
#include "kv_process.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerProcess;
using testing::TempDir;

class Crash : public ::testing::TestWithParam<int> {};

TEST_P(Crash, SigkillUnderWriteLoadLosesNoAcknowledgedWrite) {
  TempDir dir;
  const std::vector<std::string> args = {"--port", "0", "--appendonly", "yes", "--appendfsync", "always",
                                         "--dir", dir.path(), "--loglevel", "warning",
                                         "--io-threads", std::to_string(GetParam())};
  constexpr int kWriters = 6;
  std::vector<int64_t> acked_sets(kWriters, 0), acked_incrs(kWriters, 0);
  {
    ServerProcess server(args);
    ASSERT_FALSE(server.url().empty()) << server.log();
    {
      auto probe = Client::connect(server.url());
      ASSERT_TRUE(probe.ok());
      auto info = (*probe)->command({"INFO", "server"});
      ASSERT_TRUE(info.ok());
      EXPECT_NE(info->str.find(GetParam() > 1 ? "io_threads_active:1" : "io_threads_active:0"), std::string::npos);
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t] {
        ClientOptions co;
        co.timeout_ms = 5000;
        auto c = Client::connect(server.url(), co);
        if (!c.ok()) return;
        for (int64_t i = 0; !stop; ++i) {
          // Alternate single commands and small pipelines.
          if (i % 3 == 2) {
            std::vector<std::vector<std::string>> batch;
            for (int j = 0; j < 4; ++j)
              batch.push_back({"SET", "w" + std::to_string(t) + ":" + std::to_string(acked_sets[t] + j), "v" + std::to_string(acked_sets[t] + j)});
            auto r = (*c)->pipeline(batch);
            if (!r.ok()) return;
            for (const Reply& x : *r)
              if (fmt(x) != "+OK") return;
            acked_sets[t] += 4;
          } else {
            auto r = (*c)->command({"SET", "w" + std::to_string(t) + ":" + std::to_string(acked_sets[t]),
                                    "v" + std::to_string(acked_sets[t])});
            if (!r.ok() || fmt(*r) != "+OK") return;
            ++acked_sets[t];
            auto n = (*c)->command({"INCR", "ctr" + std::to_string(t)});
            if (!n.ok() || n->type != ReplyType::kInteger) return;
            acked_incrs[t] = n->integer;
          }
        }
      });
    }
    // Let the load run, then kill -9 in the middle of it.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    server.kill(SIGKILL);
    stop = true;
    for (auto& w : writers) w.join();
  }
  int64_t total = 0;
  for (int t = 0; t < kWriters; ++t) total += acked_sets[t];
  ASSERT_GT(total, 100) << "too little load to mean anything";

  ServerProcess again(args);
  ASSERT_FALSE(again.url().empty()) << again.log();
  auto c = Client::connect(again.url());
  ASSERT_TRUE(c.ok());
  for (int t = 0; t < kWriters; ++t) {
    std::vector<std::vector<std::string>> gets;
    for (int64_t i = 0; i < acked_sets[t]; ++i) gets.push_back({"GET", "w" + std::to_string(t) + ":" + std::to_string(i)});
    auto r = (*c)->pipeline(gets);
    ASSERT_TRUE(r.ok());
    for (int64_t i = 0; i < acked_sets[t]; ++i)
      ASSERT_EQ(fmt((*r)[static_cast<size_t>(i)]), "\"v" + std::to_string(i) + "\"") << "writer " << t << " write " << i;
    auto n = (*c)->command({"GET", "ctr" + std::to_string(t)});
    int64_t v = 0;
    if (n->type == ReplyType::kBulk) v = std::stoll(n->str);
    EXPECT_GE(v, acked_incrs[t]) << "writer " << t;
  }
  std::printf("crash test (%d io threads): %lld acknowledged SETs across %d writers, all present after SIGKILL + restart\n",
              GetParam(), static_cast<long long>(total), kWriters);
}

INSTANTIATE_TEST_SUITE_P(IoThreads, Crash, ::testing::Values(1, 4),
                         [](const auto& p) { return "io_threads_" + std::to_string(p.param); });

}  // namespace
}  // namespace conduit::kv
