// Helpers for the per-family preload test programs.  Each program uses only libc socket
// calls (it must behave the same with and without libconduit-preload.so) and prints a
// transcript of what it observed; run_family.sh runs it plain and preloaded and compares.
// Anything that differs between runs for reasons other than the preload (ports, timings)
// stays out of the transcript.  A failed CHECK prints to stderr and exits 1.
//
// Under the preload with CONDUIT_TEST_EXPECT_FAST=1, expect_fast() also checks (through
// conduit_preload_describe, looked up with dlsym) that a connection really went fast.
#pragma once

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#define CHECK(cond)                                                                                        \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d: %s)\n", __FILE__, __LINE__, #cond, errno,  \
                   std::strerror(errno));                                                                  \
      std::fflush(stderr);                                                                                 \
      _exit(1);                                                                                            \
    }                                                                                                      \
  } while (0)

namespace family {

inline void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
  std::fflush(stdout);
}

inline const char* errname(int e) {
  switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EINTR: return "EINTR";
    case EINPROGRESS: return "EINPROGRESS";
    case EALREADY: return "EALREADY";
    case EISCONN: return "EISCONN";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case EPIPE: return "EPIPE";
    case ENOTCONN: return "ENOTCONN";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "E?";
  }
}

// "ok n" / "-1 EAGAIN": a call's observable result.
inline std::string result(ssize_t r) {
  return r >= 0 ? "ok " + std::to_string(r) : std::string("-1 ") + errname(errno);
}

inline std::string describe(int fd) {
  using Fn = int (*)(int, char*, size_t);
  static Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "conduit_preload_describe"));
  if (fn == nullptr) return "";
  char buf[512];
  if (fn(fd, buf, sizeof buf) != 0) return "untracked";
  return buf;
}
inline bool preloaded() { return dlsym(RTLD_DEFAULT, "conduit_preload_describe") != nullptr; }
inline bool expecting_fast() {
  const char* e = std::getenv("CONDUIT_TEST_EXPECT_FAST");
  return preloaded() && e != nullptr && std::strcmp(e, "1") == 0;
}
// True if fd is an accelerated connection (only ever under the preload).
inline bool is_fast(int fd) { return describe(fd).rfind("fast", 0) == 0; }

inline void expect_fast(int fd, const char* what) {
  if (!expecting_fast()) return;
  const std::string d = describe(fd);
  if (d.rfind("fast", 0) != 0) {
    std::fprintf(stderr, "%s: fd %d is not fast: %s\n", what, fd, d.c_str());
    _exit(1);
  }
}
inline void expect_tcp(int fd, const char* what) {
  if (!preloaded()) return;
  const std::string d = describe(fd);
  if (d.rfind("tcp", 0) != 0) {
    std::fprintf(stderr, "%s: fd %d is not plain TCP: %s\n", what, fd, d.c_str());
    _exit(1);
  }
}

// The address the tests listen on and connect to: 127.0.0.1, or $CONDUIT_PRELOAD_TEST_ADDR
// (the guest's rxe address for the rdma runs: Soft-RoCE does not serve the loopback device).
inline in_addr_t test_addr() {
  static const in_addr_t a = [] {
    const char* e = std::getenv("CONDUIT_PRELOAD_TEST_ADDR");
    in_addr x{};
    if (e == nullptr || *e == 0) return htonl(INADDR_LOOPBACK);
    CHECK(inet_pton(AF_INET, e, &x) == 1);
    return x.s_addr;
  }();
  return a;
}

inline int listen_any(int* port, int flags = 0) {
  int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
  CHECK(fd >= 0);
  int one = 1;
  CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = test_addr();
  CHECK(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  CHECK(listen(fd, 64) == 0);
  socklen_t l = sizeof a;
  CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

inline sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = test_addr();
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

inline int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  sockaddr_in a = loopback(port);
  CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

inline void write_full(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    CHECK(w > 0);
    c += w;
    n -= static_cast<size_t>(w);
  }
}
inline size_t read_full(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, c + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r >= 0);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// Forks a server: the child listens on test_addr() (port 0), hands the port to the parent and
// runs body(listen_fd); it exits 0 (through exit(), so atexit handlers run) when body returns.  Returns the child's pid.
inline pid_t fork_server(const std::function<void(int)>& body, int* port) {
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    int prt = 0;
    int lfd = listen_any(&prt);
    CHECK(write(p[1], &prt, sizeof prt) == sizeof prt);
    close(p[1]);
    body(lfd);
    std::fflush(stdout);
    std::exit(0);  // not _exit: the preload's exit handler closes the rendezvous cleanly
  }
  close(p[1]);
  CHECK(read(p[0], port, sizeof *port) == sizeof *port);
  close(p[0]);
  return pid;
}

inline void wait_child(pid_t pid, const char* what = "child") {
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "%s %d failed: status %d\n", what, static_cast<int>(pid), st);
    _exit(1);
  }
}

inline void set_nonblock(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL);
  CHECK(fl >= 0);
  CHECK(fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) == 0);
}

// An echo server body: accepts `n` connections one after the other and echoes each to EOF.
inline void echo_server(int lfd, int n) {
  for (int i = 0; i < n; ++i) {
    int c = accept(lfd, nullptr, nullptr);
    CHECK(c >= 0);
    char buf[65536];
    for (;;) {
      ssize_t r = read(c, buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      write_full(c, buf, static_cast<size_t>(r));
    }
    close(c);
  }
}

}  // namespace family
