// Helpers shared by the shm:// test files: a private socket directory, fd and mapping
// counters, a blocking run_until with a watchdog, the ShmTest fixture, raw UNIX sockets.
#pragma once

#include <gtest/gtest.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "shm/shm.h"
#include "shm/shm_wire.h"
#include "transport/ring_test_util.h"
#include "verbs/child_process.h"

namespace conduit::transport {

using conduit::testing::ByteStream;
using conduit::testing::ChildProcess;
using conduit::testing::kSanitized;
using conduit::testing::Rng;
using reactor::EventLoop;

inline std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

inline int count_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream itself
}


// A private directory for this test process's socket files (also XDG_RUNTIME_DIR).
inline const std::string& test_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/conduit-shm-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d != nullptr ? d : "/tmp");
  }();
  return dir;
}


// Shared regions mapped in this process (each connection end maps one).  A region is
// mapped mirrored, in three VMAs (shm_region.h); exactly one of them starts at file offset
// 0, so that is the one counted.
inline int count_shm_mappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  int n = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != nullptr) {
    if (std::strstr(line, "conduit-shm") == nullptr) continue;
    char range[128], perms[8];
    unsigned long long offset = 1;
    if (std::sscanf(line, "%127s %7s %llx", range, perms, &offset) == 3 && offset == 0) ++n;
  }
  fclose(f);
  return n;
}

inline std::string unique_name(const std::string& tag) {
  static std::atomic<int> counter{0};
  return tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Drives a loop with blocking waits (so a lost wakeup really blocks) until pred holds; a
// watchdog timer bounds the wait.  False on timeout.  Written the way an application would
// (`while (!done) run_once(-1)`): handlers that run in the transport's before-sleep hook
// must not leave the loop blocked with `done` already true.
inline bool run_until(EventLoop& loop, const std::function<bool()>& pred, int timeout_ms = 20000) {
  bool expired = false;
  const reactor::TimerId watchdog = loop.run_after(uint64_t(timeout_ms) * 1'000'000, [&] { expired = true; });
  while (!pred() && !expired) {
    if (!loop.run_once(-1).ok()) break;
  }
  loop.cancel(watchdog);
  // Satisfied only because the watchdog woke the loop counts as a failure: that is what a
  // lost wakeup looks like.
  return !expired && pred();
}

class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("XDG_RUNTIME_DIR", test_dir().c_str(), 1);
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop = std::move(l).value();
  }
  void TearDown() override {
    for (auto& c : accepted) c->close();
    accepted.clear();
  }

  // Listens on `url` collecting accepted connections; then connects to it and runs the loop
  // until both ends are up.
  std::unique_ptr<Connection> connect_pair(const std::string& listen_url, const std::string& connect_url = "") {
    if (!listener) {
      auto l = listen(*loop, listen_url, [this](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
      EXPECT_TRUE(l.ok()) << l.status().to_string();
      if (!l.ok()) return nullptr;
      listener = std::move(l).value();
    }
    const size_t before = accepted.size();
    Status connect_status = Status(Code::kInProgress, "");
    auto c = connect(*loop, connect_url.empty() ? listener->url() : connect_url,
                     [&](Connection&, Status s) { connect_status = s; });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) return nullptr;
    EXPECT_TRUE(run_until(*loop, [&] { return !connect_status.in_progress() && accepted.size() > before; }));
    EXPECT_TRUE(connect_status.ok()) << connect_status.to_string();
    return std::move(c).value();
  }

  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<Listener> listener;
  std::vector<std::unique_ptr<Connection>> accepted;
};

// Reads everything available into `out`; returns the last non-data outcome.
inline Status drain(Connection& c, std::string* out) {
  uint8_t buf[4096];
  for (;;) {
    auto r = c.read(buf);
    if (!r.ok()) return r.status();
    if (*r == 0) return Status(Code::kClosed, "eof");
    out->append(reinterpret_cast<char*>(buf), *r);
  }
}

inline mode_t file_mode(const std::string& path) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode;
}


inline int raw_connect(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return -1;
  }
  return s;
}

inline int raw_listen(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  unlink(path.c_str());
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 8) != 0) {
    close(s);
    return -1;
  }
  return s;
}

inline bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}


// A fake server at a fresh path: accepts the client's connection, reads its hello and lets
// `answer(sock, hello)` reply (it may close the socket and set it to -1); then runs the
// loop until the client's connect callback.  Returns what the client reported.
inline Status against_fake_server(EventLoop& loop, const std::function<void(int& sock, const shm::Hello&)>& answer,
                                  const std::string& query = "") {
  const std::string path = test_dir() + "/" + unique_name("fake") + ".sock";
  const int ls = raw_listen(path);
  if (ls < 0) return Status(Code::kInternal, "raw listen");
  Status st = Status(Code::kInProgress, "");
  auto c = connect(loop, "shm://" + path + query, [&](Connection&, Status s) { st = s; });
  if (!c.ok()) {
    close(ls);
    return c.status();
  }
  int s = accept(ls, nullptr, nullptr);
  shm::Hello h;
  if (recv(s, &h, sizeof h, MSG_WAITALL) != ssize_t(sizeof h)) st = Status(Code::kInternal, "no client hello");
  answer(s, h);
  if (st.in_progress()) (void)run_until(loop, [&] { return !st.in_progress(); }, 10000);
  if (s >= 0) close(s);
  close(ls);
  unlink(path.c_str());
  EXPECT_EQ((*c)->state(), st.ok() ? ConnState::kConnected : ConnState::kError);
  return st;
}

}  // namespace conduit::transport
