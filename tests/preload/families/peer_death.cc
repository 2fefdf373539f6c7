// Family: a peer killed mid-transfer (SIGKILL) -- the other side's reads end with EOF or
// ECONNRESET, its writes fail with EPIPE or ECONNRESET, and nothing hangs.
#include "family.h"

using namespace family;

int main() {
  signal(SIGPIPE, SIG_IGN);
  int port = 0;
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t srv = fork_server(
      [&](int lfd) {
        int c = accept(lfd, nullptr, nullptr);
        CHECK(c >= 0);
        char buf[4096] = {};
        write_full(c, buf, sizeof buf);
        CHECK(write(ready[1], "r", 1) == 1);
        for (;;) pause();  // killed here
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  char b;
  CHECK(read(ready[0], &b, 1) == 1);
  CHECK(kill(srv, SIGKILL) == 0);
  int st = 0;
  CHECK(waitpid(srv, &st, 0) == srv);
  size_t got = 0;
  char buf[8192];
  ssize_t r;
  for (;;) {
    r = read(fd, buf, sizeof buf);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  CHECK(r == 0 || errno == ECONNRESET);  // TCP gives EOF here (no unread data); a dead shm peer, ECONNRESET
  say("reader: got the %zu bytes sent before the kill, then EOF or ECONNRESET", got);
  ssize_t w = 0;
  for (int i = 0; i < 100 && w >= 0; ++i) w = write(fd, buf, sizeof buf);
  say("writer: fails with EPIPE or ECONNRESET: %d", w < 0 && (errno == EPIPE || errno == ECONNRESET));
  close(fd);
  return 0;
}
