// Conformance: a peer process dies (SIGKILL) mid-stream.  The surviving side sees EOF or
// an error — never a hang — and, once it closes, holds no file descriptors of the dead
// connection.  The peer is a forked child running its own EventLoop, bounded by its own
// deadline in case the parent goes away.  (The parent never blocks on the child's pipe:
// ChildProcess::receive_value's read() has no deadline of its own.)
//
// The child execs a fresh copy of this binary (main.cc: --conformance-child) instead of
// running in the forked image: verbs state does not survive fork().  A forked child reuses
// the parent's open uverbs device file (librdmacm caches it process-wide), and the kernel
// refuses commands on it from any task whose credentials are not the opener's
// (ib_safe_file_access; a forked child gets its own copy): ibv_post_send fails with EACCES.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "conduit/base/clock.h"
#include "harness.h"
#include "verbs/child_process.h"

namespace conduit::conformance {
namespace {

constexpr uint64_t kChildLifetimeNs = 60'000'000'000ull;
constexpr const char* kChildFlag = "--conformance-child";

// In the child: connect to `url`; then stream `pattern` forever (writer) or never read
// (sink).  Exit codes: 0 deadline reached, 2 loop, 3 connect, 4 I/O error.
int child_peer(const std::string& url, const Pattern& pattern, bool writer) {
  auto made = reactor::EventLoop::create();
  if (!made.ok()) return 2;
  std::unique_ptr<reactor::EventLoop> loop = std::move(made).value();
  bool connected = false, failed = false;
  auto c = transport::connect(*loop, url, [&](Connection&, Status s) {
    connected = s.ok();
    failed = !s.ok();
  });
  if (!c.ok()) return 3;
  std::unique_ptr<Connection> conn = std::move(c).value();
  std::unique_ptr<PatternWriter> w;
  const uint64_t end = monotonic_ns() + kChildLifetimeNs;
  bool started = false;
  while (monotonic_ns() < end) {
    if (!loop->run_once(10).ok()) return 2;
    if (failed) return 3;
    if (connected && !started) {
      started = true;
      if (writer) {
        w = std::make_unique<PatternWriter>(*conn, pattern, 1ull << 50, 1, 256 << 10);
        w->start();
      }
    }
    if (w && w->failed()) return 4;
  }
  return 0;
}

// In the forked child: become a fresh process running child_peer (never returns on success).
int exec_child_peer(const std::string& url, uint64_t pattern_seed, bool writer) {
  const std::string seed = std::to_string(pattern_seed);
  const char* argv[] = {"conformance_test", kChildFlag, url.c_str(), seed.c_str(), writer ? "writer" : "sink", nullptr};
  ::execv("/proc/self/exe", const_cast<char* const*>(argv));
  std::perror("execv /proc/self/exe");
  return 127;
}

TEST_P(Conformance, PeerKilledWhileWritingGivesEofOrErrorAndNoFdLeak) {
  ASSERT_TRUE(warm_up());
  const size_t fds_before = open_fd_count();
  {
    auto queue = std::make_shared<AcceptQueue>();
    std::unique_ptr<Listener> l;
    ASSERT_TRUE(start_listener(&l, queue));
    const std::string url = connect_url(*l);
    Pattern pattern(test_seed() ^ 0x91);
    conduit::testing::ChildProcess child([&](int) { return exec_child_peer(url, test_seed() ^ 0x91, true); });
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(run_until([&] { return !queue->conns.empty(); }, "the child's connection"));
    std::unique_ptr<Connection> s = std::move(queue->conns.front());
    queue->conns.pop_front();
    PatternReader r(*s, pattern, test_seed(), 128 << 10);
    r.start();
    ASSERT_TRUE(run_until([&] { return r.received() >= (4u << 20) || r.ended() || r.corrupt(); },
                          "4 MiB from the child"));
    ASSERT_FALSE(r.ended()) << "stream ended before the kill: " << r.error().to_string();
    ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
    ASSERT_TRUE(run_until([&] { return r.ended() || r.corrupt(); }, "EOF or error after the writer was SIGKILLed"));
    EXPECT_FALSE(r.corrupt()) << "at " << r.corrupt_at();
    EXPECT_EQ(child.wait(10000), -1) << "child was expected to die by the signal";
    r.detach();
    s->close();
    s.reset();
    l.reset();
  }
  ASSERT_TRUE(settle());
  EXPECT_EQ(open_fd_count(), fds_before) << "file descriptors leaked by a connection whose peer was killed";
}

TEST_P(Conformance, PeerKilledWhileWeWriteGivesWriterAnErrorAndNoFdLeak) {
  ASSERT_TRUE(warm_up());
  const size_t fds_before = open_fd_count();
  {
    auto queue = std::make_shared<AcceptQueue>();
    std::unique_ptr<Listener> l;
    ASSERT_TRUE(start_listener(&l, queue));
    const std::string url = connect_url(*l);
    Pattern pattern(test_seed() ^ 0x92);
    conduit::testing::ChildProcess child([&](int) { return exec_child_peer(url, test_seed() ^ 0x92, false); });
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(run_until([&] { return !queue->conns.empty(); }, "the child's connection"));
    std::unique_ptr<Connection> s = std::move(queue->conns.front());
    queue->conns.pop_front();
    // Fill the pipe to the child, which never reads, until the transport pushes back; then
    // the writer waits in its write handler.
    uint64_t filled = 0;
    for (;;) {
      Result<size_t> r = s->write(std::span<const uint8_t>(pattern.at(filled), 64 << 10));
      if (!r.ok()) {
        ASSERT_TRUE(r.status().would_block()) << r.status().to_string();
        break;
      }
      filled += *r;
      ASSERT_LT(filled, 1ull << 30) << "no back-pressure from a peer that never reads";
    }
    PatternWriter w(*s, pattern, 1ull << 50, test_seed(), 256 << 10);
    w.skip_to(filled);
    w.start();
    run_for(10ms);
    ASSERT_FALSE(w.failed()) << w.error().to_string();
    ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
    ASSERT_TRUE(run_until([&] { return w.failed(); }, "writer to fail after the reader was SIGKILLed"));
    EXPECT_TRUE(w.error().is_error()) << w.error().to_string();
    EXPECT_EQ(s->state(), ConnState::kError);
    EXPECT_EQ(child.wait(10000), -1);
    s->close();
    s.reset();
    l.reset();
  }
  ASSERT_TRUE(settle());
  EXPECT_EQ(open_fd_count(), fds_before) << "file descriptors leaked by a connection whose peer was killed";
}

// A listener that cannot accept because the process is out of file descriptors must not
// spin the loop (accept fails with EMFILE while the listening socket stays readable: the
// classic busy loop).  Runs in a child: it lowers its own RLIMIT_NOFILE.
TEST_P(Conformance, ListenerOutOfFdsDoesNotSpinTheLoop) {
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer runtime needs descriptors itself (UBSan's vptr check probes memory through
  // a pipe): with none left it reports false "invalid vptr" errors.
  GTEST_SKIP() << "not meaningful under sanitizers (their runtime needs free descriptors)";
#endif
  const std::string url = listen_url();
  const std::string options = tc().connect_options;
  conduit::testing::ChildProcess child([&](int) -> int {
    auto made = reactor::EventLoop::create();
    if (!made.ok()) return 10;
    reactor::EventLoop& l = **made;
    std::vector<std::unique_ptr<Connection>> accepted, clients;
    auto lis = transport::listen(l, url, [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
    if (!lis.ok()) return 11;
    std::string curl = (*lis)->url();
    if (!options.empty()) curl += (curl.find('?') == std::string::npos ? "?" : "&") + options;
    for (int i = 0; i < 4; ++i) {
      auto c = transport::connect(l, curl, [](Connection&, Status) {});
      if (!c.ok()) return 12;
      clients.push_back(std::move(c).value());
    }
    // Silence the warnings a failing accept may log, then leave no fd number free.
    const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
    const int lowest_free = ::dup(0);
    if (lowest_free < 0) return 13;
    ::close(lowest_free);
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(lowest_free);
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return 14;
    const uint64_t it0 = l.iterations();
    const uint64_t end = monotonic_ns() + 300'000'000ull;
    while (monotonic_ns() < end) (void)l.run_once(10);
    const uint64_t spins = l.iterations() - it0;  // idle: ~30 (10 ms waits)
    return spins < 1000 ? 0 : 41;
  });
  ASSERT_TRUE(child.started());
  const int rc = child.wait(10000);
  EXPECT_EQ(rc, 0) << (rc == 41   ? "the loop spun (>1000 iterations in 300 ms) on a listener that cannot accept"
                       : rc == -1 ? "child hung or crashed"
                                  : "child setup failed, code " + std::to_string(rc));
}

}  // namespace

int child_main(int argc, char** argv) {
  if (argc != 5 || std::string_view(argv[1]) != kChildFlag) {
    std::fprintf(stderr, "usage: %s %s URL PATTERN_SEED writer|sink\n", argv[0], kChildFlag);
    return 2;
  }
  const Pattern pattern(std::strtoull(argv[3], nullptr, 10));
  return child_peer(argv[2], pattern, std::string_view(argv[4]) == "writer");
}

bool is_child_invocation(int argc, char** argv) { return argc >= 2 && std::string_view(argv[1]) == kChildFlag; }

}  // namespace conduit::conformance
