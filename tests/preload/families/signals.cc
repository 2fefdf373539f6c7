// Family: signals and timeouts in waits -- a signal interrupts epoll_wait, poll and a blocking
// read (EINTR, with the handler run); epoll_pwait's mask holds a signal off until the wait;
// timeouts are honoured.  However the handler was installed (sigaction, signal(), SA_SIGINFO,
// SA_RESETHAND), the program sees its own handler in sigaction's answer.
#include <sys/epoll.h>
#include <sys/time.h>
#include <time.h>

#include "family.h"

using namespace family;

static volatile sig_atomic_t g_hits = 0;
static void on_signal(int) { g_hits = g_hits + 1; }
static volatile sig_atomic_t g_info_signo = 0;
static void on_info(int, siginfo_t* si, void*) {
  g_info_signo = si->si_signo;
  g_hits = g_hits + 1;
}

static void arm_timer(int ms) {
  itimerval it{};
  it.it_value.tv_sec = ms / 1000;
  it.it_value.tv_usec = (ms % 1000) * 1000;
  CHECK(setitimer(ITIMER_REAL, &it, nullptr) == 0);
}

static long ms_since(const timespec& t0) {
  timespec t1{};
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1'000'000;
}

int main() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;  // no SA_RESTART: waits must come back with EINTR
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGALRM, &sa, nullptr) == 0);
  CHECK(sigaction(SIGUSR1, &sa, nullptr) == 0);
  int port = 0;
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t srv = fork_server(
      [&](int lfd) {
        int c = accept(lfd, nullptr, nullptr);
        CHECK(c >= 0);
        char b;
        CHECK(read(go[0], &b, 1) == 1);
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
  epoll_event out[2];

  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int timed = epoll_wait(ep, out, 2, 120);  // before ms_since: argument order is unspecified
  say("epoll_wait 120 ms timeout -> %d, waited >= 110 ms: %d", timed, ms_since(t0) >= 110);
  arm_timer(100);
  errno = 0;
  int n = epoll_wait(ep, out, 2, 10000);
  say("epoll_wait + SIGALRM -> %d %s, handler ran %d", n, errname(errno), g_hits == 1);
  arm_timer(100);
  pollfd p{fd, POLLIN, 0};
  errno = 0;
  n = poll(&p, 1, 10000);
  say("poll + SIGALRM -> %d %s, handler ran %d", n, errname(errno), g_hits == 2);
  arm_timer(100);
  char b;
  errno = 0;
  ssize_t r = read(fd, &b, 1);
  say("blocking read + SIGALRM -> %zd %s, handler ran %d", r, errname(errno), g_hits == 3);

  // The same with a signal 2 ms into the wait: under the preload that is while a wait may
  // still be polling the rings (poll_us / spin_us) -- the signal must end it just the same.
  arm_timer(2);
  errno = 0;
  n = epoll_wait(ep, out, 2, 10000);
  say("epoll_wait + early SIGALRM -> %d %s, handler ran %d", n, errname(errno), g_hits == 4);
  arm_timer(2);
  errno = 0;
  n = poll(&p, 1, 10000);
  say("poll + early SIGALRM -> %d %s, handler ran %d", n, errname(errno), g_hits == 5);
  arm_timer(2);
  errno = 0;
  r = read(fd, &b, 1);
  say("blocking read + early SIGALRM -> %zd %s, handler ran %d", r, errname(errno), g_hits == 6);

  // epoll_pwait: SIGUSR1 is blocked in the program and let through only during the wait.
  sigset_t block, during;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  CHECK(sigprocmask(SIG_BLOCK, &block, nullptr) == 0);
  CHECK(kill(getpid(), SIGUSR1) == 0);
  say("SIGUSR1 pending while blocked: handler runs so far %d", static_cast<int>(g_hits));
  sigemptyset(&during);
  errno = 0;
  n = epoll_pwait(ep, out, 2, 10000, &during);
  say("epoll_pwait with an open mask -> %d %s, handler runs %d", n, errname(errno), static_cast<int>(g_hits));
  CHECK(sigprocmask(SIG_UNBLOCK, &block, nullptr) == 0);
  // A signal whose handler restarts (SA_RESTART) still ends an epoll_wait: Linux never
  // restarts epoll_wait.
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGALRM, &sa, nullptr) == 0);
  arm_timer(100);
  errno = 0;
  n = epoll_wait(ep, out, 2, 10000);
  say("epoll_wait + SA_RESTART signal -> %d %s", n, errname(errno));
  // What sigaction reports is the program's own handler and flags.
  struct sigaction q{};
  CHECK(sigaction(SIGALRM, nullptr, &q) == 0);
  say("sigaction reports the handler: %d, SA_RESTART %d, SA_SIGINFO %d", q.sa_handler == on_signal,
      (q.sa_flags & SA_RESTART) != 0, (q.sa_flags & SA_SIGINFO) != 0);
  // A handler installed with signal() (BSD semantics) ends a wait just the same.
  say("signal() returns the previous handler: %d", signal(SIGALRM, on_signal) == on_signal);
  arm_timer(2);
  errno = 0;
  n = epoll_wait(ep, out, 2, 10000);
  say("epoll_wait + early SIGALRM (signal()) -> %d %s, handler runs %d", n, errname(errno), static_cast<int>(g_hits));
  // An SA_SIGINFO handler gets its siginfo; SA_RESETHAND puts SIG_DFL back after one run.
  struct sigaction si{};
  si.sa_sigaction = on_info;
  si.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&si.sa_mask);
  struct sigaction prev{};
  CHECK(sigaction(SIGALRM, &si, &prev) == 0);
  say("previous handler reported: %d", prev.sa_handler == on_signal);
  CHECK(sigaction(SIGALRM, nullptr, &q) == 0);
  say("SA_SIGINFO handler reported: %d, flags kept %d", q.sa_sigaction == on_info,
      (q.sa_flags & (SA_SIGINFO | SA_RESETHAND)) == (SA_SIGINFO | SA_RESETHAND));
  arm_timer(2);
  errno = 0;
  n = epoll_wait(ep, out, 2, 10000);
  say("epoll_wait + early SIGALRM (SA_SIGINFO) -> %d %s, si_signo SIGALRM %d, handler runs %d", n, errname(errno),
      g_info_signo == SIGALRM, static_cast<int>(g_hits));
  CHECK(sigaction(SIGALRM, nullptr, &q) == 0);
  say("after SA_RESETHAND: SIG_DFL %d", q.sa_handler == SIG_DFL);
  write_full(go[1], "q", 1);
  n = epoll_wait(ep, out, 2, 5000);
  say("peer closed -> %d, read %s", n, result(read(fd, &b, 1)).c_str());
  close(ep);
  close(fd);
  wait_child(srv);
  return 0;
}
