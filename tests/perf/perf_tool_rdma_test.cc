// conduit-perf's latency tests end to end: a server and a client process on the test
// device, as a user runs them.  Checks that every row completes with the iterations asked
// for and that no message found its receive queue empty, in both places send_lat re-posts
// its receives: after the answer went out (the default rx depth) and before it (-r 1, no
// spare receive).  An empty receive queue costs an RNR NAK and a 0.64 ms retry, not an
// error, so it is counted, not timed: Soft-RoCE's RNR counters (hw_counters in sysfs), which
// are exact where latency under TCG is not (two spinning processes sharing a vCPU take
// milliseconds per round trip now and then).  On a device without those counters only the
// completion is checked.
// CONDUIT_PERF overrides the binary under test (default: this build's conduit-perf).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rdma_env.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;

// One child process running conduit-perf with stdout in `out_path`; killed if still alive
// when destroyed.
class Proc {
 public:
  Proc(std::vector<std::string> args, const std::string& out_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Proc() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;
  bool started() const { return pid_ > 0; }
  // Exit status, or -1 if it did not end within `limit` (then it is killed).
  int wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(20ms);
    }
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct PairRun {
  int server_rc = -2, client_rc = -2;
  std::string client_out;
};

// Runs `test` with `extra` flags on both sides; the client's JSON comes back.
PairRun run_pair(const std::string& test, std::vector<std::string> extra, uint16_t port) {
  const std::string dev = conduit::verbs::testing::device_name();
  const std::string addr = conduit::verbs::testing::device_addr();
  const char* bin = std::getenv("CONDUIT_PERF");  // another build of the tool, if set
  std::vector<std::string> common = {bin != nullptr && *bin != '\0' ? bin : CONDUIT_PERF_BIN, test, "--json", "--timeout", "60", "-p", std::to_string(port)};
  if (!dev.empty()) common.insert(common.end(), {"-d", dev});
  common.insert(common.end(), extra.begin(), extra.end());
  const std::string dir = ::testing::TempDir();
  const std::string tag = test + "-" + std::to_string(port);
  PairRun r;
  Proc server(common, dir + "/" + tag + ".server.json");
  if (!server.started()) return r;
  std::vector<std::string> client_args = common;
  client_args.push_back(addr);
  Proc client(client_args, dir + "/" + tag + ".client.json");  // retries until the server listens
  r.client_rc = client.wait(120s);
  r.server_rc = server.wait(30s);
  r.client_out = slurp(dir + "/" + tag + ".client.json");
  return r;
}

// RNR NAKs the device sent (a message found no receive), or -1 where it does not count them.
long rnr_naks_sent() {
  const std::string dev = conduit::verbs::testing::device_name();
  if (dev.empty()) return -1;
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/send_rnr_err");
  long v = -1;
  if (!(f >> v)) return -1;
  return v;
}

class PerfToolRdma : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    (void)ctx;
    CONDUIT_REQUIRE_ADDR_OR_SKIP(addr);
    (void)addr;
  }
  // Runs the pair and checks it: both exit 0, `rows` rows of `iters` iterations, no RNR NAK.
  static PairRun check(const std::string& test, std::vector<std::string> extra, uint16_t port, int iters,
                       size_t rows = 1) {
    const long rnr_before = rnr_naks_sent();
    PairRun r = run_pair(test, std::move(extra), port);
    const long rnr_after = rnr_naks_sent();
    EXPECT_EQ(r.client_rc, 0) << r.client_out;
    EXPECT_EQ(r.server_rc, 0);
    const std::regex row("\"iterations\": ([0-9]+), \"t_min_us\"");
    size_t n = 0;
    for (auto it = std::sregex_iterator(r.client_out.begin(), r.client_out.end(), row); it != std::sregex_iterator();
         ++it, ++n)
      EXPECT_EQ(std::stoi((*it)[1]), iters) << r.client_out;
    EXPECT_EQ(n, rows) << r.client_out;
    if (rnr_before >= 0 && rnr_after >= 0)
      EXPECT_EQ(rnr_after - rnr_before, 0) << "messages found the receive queue empty (RNR NAKs)";
    else
      std::printf("note: %s has no RNR counter; checked completion only\n",
                  conduit::verbs::testing::device_name().c_str());
    return r;
  }
};

TEST_F(PerfToolRdma, SendLatRepostsAfterTheAnswer) { check("send_lat", {"-s", "64", "-n", "400", "-I", "0"}, 19731, 400); }

// rx depth 1: no spare receive, so each side must re-post before it answers; re-posting
// after the answer would let every message race its receive.
TEST_F(PerfToolRdma, SendLatWithOneReceive) {
  check("send_lat", {"-s", "64", "-n", "400", "-r", "1", "-I", "0"}, 19732, 400);
}

// Row after row (-a: 23 sizes, 2 B .. 8 MiB): the receives each row consumed must all be
// back before the next row; with rx depth 2, one lost per row would empty the queue.
TEST_F(PerfToolRdma, SendLatRowsAfterRows) {
  const PairRun r = check("send_lat", {"-a", "-n", "5", "-r", "2"}, 19733, 5, 23);
  EXPECT_NE(r.client_out.find("\"bytes\": 8388608"), std::string::npos) << r.client_out;
}

TEST_F(PerfToolRdma, WriteLat) { check("write_lat", {"-s", "64", "-n", "400", "-I", "0"}, 19734, 400); }

TEST_F(PerfToolRdma, AtomicLat) { check("atomic_lat", {"-n", "400"}, 19735, 400); }

}  // namespace
