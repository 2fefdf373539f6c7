// Family: dup, dup2, dup3, fcntl(F_DUPFD) on a connection, and dup2 over one.
#include "family.h"

using namespace family;

int main() {
  int port = 0;
  pid_t srv = fork_server([](int lfd) { echo_server(lfd, 2); }, &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  int d = dup(fd);
  CHECK(d >= 0);
  write_full(d, "a", 1);
  char b;
  CHECK(read(fd, &b, 1) == 1);
  say("write on dup, read on original: %c", b);
  close(fd);
  write_full(d, "b", 1);
  CHECK(read(d, &b, 1) == 1);
  say("original closed, dup still works: %c", b);
  int d3 = dup3(d, 100, O_CLOEXEC);
  say("dup3 -> %d cloexec %d", d3, (fcntl(d3, F_GETFD) & FD_CLOEXEC) != 0);
  int f = fcntl(d3, F_DUPFD_CLOEXEC, 200);
  say("F_DUPFD_CLOEXEC -> %d", f);
  close(d);
  close(d3);
  write_full(f, "c", 1);
  CHECK(read(f, &b, 1) == 1);
  say("last name works: %c", b);

  // dup2 over a connection: the fd now names a pipe, and the connection (its last name
  // gone) is closed -- the server sees EOF and moves on to the next.
  int pp[2];
  CHECK(pipe(pp) == 0);
  CHECK(dup2(pp[0], f) == f);
  write_full(pp[1], "z", 1);
  CHECK(read(f, &b, 1) == 1);
  say("dup2 over the connection: fd reads the pipe: %c", b);
  close(f);
  int g = connect_to(port);
  expect_fast(g, "second");
  CHECK(dup2(g, 1000) == 1000);
  close(g);
  write_full(1000, "y", 1);
  CHECK(read(1000, &b, 1) == 1);
  say("dup2 onto a free number: %c", b);
  close(1000);
  wait_child(srv);
  say("server saw both connections end");
  return 0;
}
