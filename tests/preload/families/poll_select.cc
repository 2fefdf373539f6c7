// Family: poll, ppoll, select, pselect -- level readiness, timeouts, writability, a mix of a
// connection and a pipe in one set.
#include <sys/select.h>
#include <time.h>

#include "family.h"

using namespace family;

static long ms_since(const timespec& t0) {
  timespec t1{};
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1'000'000;
}

int main() {
  int port = 0;
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t srv = fork_server(
      [&](int lfd) {
        int c = accept(lfd, nullptr, nullptr);
        CHECK(c >= 0);
        char b;
        CHECK(read(go[0], &b, 1) == 1);  // the client says when to send
        write_full(c, "hello", 5);
        CHECK(read(go[0], &b, 1) == 1);
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  int pp[2];
  CHECK(pipe(pp) == 0);

  pollfd p[2] = {{fd, POLLIN, 0}, {pp[0], POLLIN, 0}};
  say("poll idle, 0 ms -> %d", poll(p, 2, 0));
  timespec t0{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int r = poll(p, 2, 150);
  say("poll idle, 150 ms -> %d, waited >= 140 ms: %d", r, ms_since(t0) >= 140);
  p[0].events = POLLOUT;
  say("poll POLLOUT -> %d revents POLLOUT %d", poll(p, 1, 1000), (p[0].revents & POLLOUT) != 0);
  p[0].events = POLLIN;
  write_full(pp[1], "p", 1);
  say("poll pipe ready -> %d (conn %d pipe %d)", poll(p, 2, 1000), p[0].revents != 0, p[1].revents != 0);
  char b;
  CHECK(read(pp[0], &b, 1) == 1);
  write_full(go[1], "g", 1);
  say("poll conn ready -> %d (conn IN %d pipe %d)", poll(p, 2, 5000), (p[0].revents & POLLIN) != 0, p[1].revents != 0);
  say("poll again (level) -> %d", poll(p, 1, 0));
  timespec ts{1, 0};
  sigset_t none;
  sigemptyset(&none);
  say("ppoll -> %d IN %d", ppoll(p, 1, &ts, &none), (p[0].revents & POLLIN) != 0);

  fd_set rs, ws;
  FD_ZERO(&rs);
  FD_SET(fd, &rs);
  FD_SET(pp[0], &rs);
  timeval tv{1, 0};
  const int nfds = std::max(fd, pp[0]) + 1;
  int n = select(nfds, &rs, nullptr, nullptr, &tv);
  say("select -> %d conn %d pipe %d", n, FD_ISSET(fd, &rs) != 0, FD_ISSET(pp[0], &rs) != 0);
  FD_ZERO(&ws);
  FD_SET(fd, &ws);
  tv = {1, 0};
  say("select write -> %d", select(fd + 1, nullptr, &ws, nullptr, &tv));
  char buf[8] = {};
  CHECK(read_full(fd, buf, 5) == 5);
  say("read %.5s", buf);
  FD_ZERO(&rs);
  FD_SET(fd, &rs);
  timespec pts{0, 100'000'000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  n = pselect(fd + 1, &rs, nullptr, nullptr, &pts, &none);
  say("pselect drained -> %d, waited >= 90 ms: %d", n, ms_since(t0) >= 90);
  write_full(go[1], "g", 1);
  p[0] = {fd, POLLIN | POLLRDHUP, 0};
  CHECK(poll(p, 1, 5000) == 1);
  say("peer closed: POLLIN %d POLLRDHUP %d", (p[0].revents & POLLIN) != 0, (p[0].revents & POLLRDHUP) != 0);
  say("read at EOF -> %s", result(read(fd, buf, sizeof buf)).c_str());
  close(fd);
  wait_child(srv);
  return 0;
}
