// Family: an epoll instance inside another -- the outer one reports the inner one readable
// when a connection in the inner one has data; epoll_wait on the inner one then names it.
#include <sys/epoll.h>

#include "family.h"

using namespace family;

int main() {
  int port = 0;
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t srv = fork_server(
      [&](int lfd) {
        int c = accept(lfd, nullptr, nullptr);
        CHECK(c >= 0);
        char b;
        CHECK(read(go[0], &b, 1) == 1);
        write_full(c, "n", 1);
        CHECK(read(go[0], &b, 1) == 1);
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  int inner = epoll_create1(0), outer = epoll_create1(0);
  CHECK(inner >= 0 && outer >= 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  CHECK(epoll_ctl(inner, EPOLL_CTL_ADD, fd, &ev) == 0);
  ev.data.u64 = 2;
  CHECK(epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev) == 0);
  epoll_event out[4];
  say("outer idle -> %d", epoll_wait(outer, out, 4, 50));
  write_full(go[1], "g", 1);
  int n = epoll_wait(outer, out, 4, 5000);
  say("outer -> %d data %llu", n, n > 0 ? static_cast<unsigned long long>(out[0].data.u64) : 0ull);
  n = epoll_wait(inner, out, 4, 0);
  say("inner -> %d data %llu", n, n > 0 ? static_cast<unsigned long long>(out[0].data.u64) : 0ull);
  pollfd p{outer, POLLIN, 0};
  say("poll on outer -> %d", poll(&p, 1, 1000));
  char b;
  CHECK(read(fd, &b, 1) == 1);
  say("read %c; outer after -> %d", b, epoll_wait(outer, out, 4, 50));
  write_full(go[1], "q", 1);
  close(fd);
  close(inner);
  close(outer);
  wait_child(srv);
  return 0;
}
