// A full disk under the append-only file: the real conduit-kv binary runs with a file-size
// limit (RLIMIT_FSIZE, SIGXFSZ ignored), so its AOF writes start failing like they would on
// a full disk.  Nothing acknowledged may be lost, the failure must be reported (MISCONF for
// later writes, as Redis does), reads must go on, and the file must still load afterwards.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kv_process.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerProcess;
using testing::TempDir;

std::string value_of(int i) { return "v" + std::to_string(i) + ":" + std::string(1000, static_cast<char>('a' + i % 26)); }

TEST(DiskFull, AofWriteErrorsLoseNothingAcknowledged) {
  TempDir dir;
  const std::vector<std::string> args = {"--port", "0", "--appendonly", "yes", "--appendfsync", "always",
                                         "--dir", dir.path(), "--loglevel", "warning"};
  constexpr uint64_t kLimit = 64 * 1024;
  int acked = 0;
  {
    ServerProcess server(args, kLimit);
    ASSERT_FALSE(server.url().empty()) << server.log();
    ClientOptions co;
    co.timeout_ms = 5000;
    auto c = Client::connect(server.url(), co);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    bool refused = false;
    for (int i = 0; i < 1000; ++i) {
      auto r = (*c)->command({"SET", "k" + std::to_string(i), value_of(i)});
      if (!r.ok() || fmt(*r) != "+OK") {
        refused = true;  // under `always` the failed write's reply is withheld: connection closed
        break;
      }
      ++acked;
    }
    ASSERT_TRUE(refused) << "1000 KiB of writes went into a 64 KiB file limit";
    ASSERT_GT(acked, 10);

    // The server lives on: reads work, further writes are refused with a clear error.
    auto c2 = Client::connect(server.url(), co);
    ASSERT_TRUE(c2.ok()) << c2.status().to_string() << "\n" << server.log();
    auto w = (*c2)->command({"SET", "after", "x"});
    ASSERT_TRUE(w.ok()) << w.status().to_string() << "\n" << server.log();
    EXPECT_EQ(fmt(*w).rfind("-MISCONF", 0), 0u) << fmt(*w);
    auto g = (*c2)->command({"GET", "k0"});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(fmt(*g), "\"" + value_of(0) + "\"");
    // The failure is logged (stderr is drained by a thread: give it a moment).
    for (int i = 0; i < 200 && server.log().find("aof: write") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_NE(server.log().find("File too large"), std::string::npos) << server.log();

    // Room again (the limit lifted from outside): the cron's retry writes the held records
    // and writes are accepted again.
    const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    ASSERT_EQ(::prlimit(server.pid(), RLIMIT_FSIZE, &unlimited, nullptr), 0) << std::strerror(errno);
    std::string last;
    for (int i = 0; i < 300; ++i) {
      auto again = (*c2)->command({"SET", "after", "x"});
      ASSERT_TRUE(again.ok()) << again.status().to_string();
      last = fmt(*again);
      if (last == "+OK") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(last, "+OK") << "writes stay refused after the disk has room again";
    server.kill(SIGKILL);
  }

  // Restarted with room: every acknowledged write is there and the file needed no repair.
  ServerProcess again(args);
  ASSERT_FALSE(again.url().empty()) << again.log();
  EXPECT_EQ(again.log().find("truncated"), std::string::npos) << again.log();
  auto c = Client::connect(again.url());
  ASSERT_TRUE(c.ok());
  std::vector<std::vector<std::string>> gets;
  for (int i = 0; i < acked; ++i) gets.push_back({"GET", "k" + std::to_string(i)});
  auto r = (*c)->pipeline(gets);
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < acked; ++i) ASSERT_EQ(fmt((*r)[static_cast<size_t>(i)]), "\"" + value_of(i) + "\"") << i;
  auto after = (*c)->command({"GET", "after"});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(fmt(*after), "\"x\"") << "the write acknowledged after recovery";
  auto w = (*c)->command({"SET", "after-restart", "y"});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(fmt(*w), "+OK");
  std::printf("disk full: %d acknowledged 1 KiB SETs before the 64 KiB limit, all present after restart\n", acked);
}

}  // namespace
}  // namespace conduit::kv
