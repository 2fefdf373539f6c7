// Family: epoll -- level and edge triggered, EPOLLONESHOT and EPOLL_CTL_MOD, EPOLLRDHUP,
// EPOLLOUT, DEL, ADD twice, a connection next to a pipe, maxevents 1.
#include <sys/epoll.h>

#include "family.h"

using namespace family;

static int wait_one(int ep, int timeout, uint32_t* events) {
  epoll_event ev[4];
  int n = epoll_wait(ep, ev, 4, timeout);
  *events = n > 0 ? ev[0].events : 0;
  return n;
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
        for (;;) {
          CHECK(read(go[0], &b, 1) == 1);
          if (b == 'q') break;
          if (b == 'w') shutdown(c, SHUT_WR);
          else write_full(c, &b, 1);
        }
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  set_nonblock(fd, true);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  uint32_t e = 0;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0x1234;
  say("add -> %s", result(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)).c_str());
  say("add again -> %s", result(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)).c_str());
  say("idle -> %d", wait_one(ep, 50, &e));
  write_full(go[1], "a", 1);
  epoll_event out[4];
  int n = epoll_wait(ep, out, 4, 5000);
  say("LT data -> %d IN %d data %llx", n, (out[0].events & EPOLLIN) != 0, static_cast<unsigned long long>(out[0].data.u64));
  say("LT again -> %d", wait_one(ep, 0, &e));
  char b;
  CHECK(read(fd, &b, 1) == 1);
  say("LT drained -> %d", wait_one(ep, 50, &e));

  ev.events = EPOLLIN | EPOLLET;
  say("mod ET -> %s", result(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev)).c_str());
  write_full(go[1], "b", 1);
  say("ET data -> %d", wait_one(ep, 5000, &e));
  say("ET again (not read) -> %d", wait_one(ep, 50, &e));
  CHECK(read(fd, &b, 1) == 1);
  errno = 0;
  say("ET read to EAGAIN -> %s", result(read(fd, &b, 1)).c_str());
  write_full(go[1], "c", 1);
  say("ET new data -> %d", wait_one(ep, 5000, &e));
  CHECK(read(fd, &b, 1) == 1);

  ev.events = EPOLLIN | EPOLLONESHOT;
  say("mod ONESHOT -> %s", result(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev)).c_str());
  write_full(go[1], "d", 1);
  say("ONESHOT data -> %d", wait_one(ep, 5000, &e));
  say("ONESHOT disabled -> %d", wait_one(ep, 50, &e));
  say("mod re-arm -> %s", result(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev)).c_str());
  say("ONESHOT re-armed -> %d", wait_one(ep, 5000, &e));
  CHECK(read(fd, &b, 1) == 1);

  ev.events = EPOLLOUT;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
  n = wait_one(ep, 1000, &e);
  say("OUT -> %d OUT %d", n, (e & EPOLLOUT) != 0);

  // A pipe in the same set, maxevents 1: both are reported in turn.
  int pp[2];
  CHECK(pipe(pp) == 0);
  epoll_event pev{};
  pev.events = EPOLLIN;
  pev.data.u64 = 0x77;
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &pev) == 0);
  write_full(pp[1], "p", 1);
  bool saw_pipe = false, saw_conn = false;
  for (int i = 0; i < 4; ++i) {
    epoll_event one;
    if (epoll_wait(ep, &one, 1, 1000) == 1) (one.data.u64 == 0x77 ? saw_pipe : saw_conn) = true;
  }
  say("maxevents 1: pipe %d conn %d", saw_pipe, saw_conn);
  CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, pp[0], nullptr) == 0);

  ev.events = EPOLLIN | EPOLLRDHUP;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
  write_full(go[1], "w", 1);
  n = wait_one(ep, 5000, &e);
  say("peer shutdown -> %d IN %d RDHUP %d", n, (e & EPOLLIN) != 0, (e & EPOLLRDHUP) != 0);
  say("read at EOF -> %s", result(read(fd, &b, 1)).c_str());
  say("del -> %s", result(epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr)).c_str());
  say("del again -> %s", result(epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr)).c_str());
  say("after del -> %d", wait_one(ep, 50, &e));
  write_full(go[1], "q", 1);
  close(fd);
  close(ep);
  wait_child(srv);
  return 0;
}
