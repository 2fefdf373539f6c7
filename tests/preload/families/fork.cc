// Family: fork with a connection open.  Documented behaviour (docs/PRELOAD.md): over TCP both
// processes may use the socket; an accelerated connection belongs to the process that made
// it, and in a forked child every use fails with ENOTCONN -- the child can never interleave
// with the parent on the ring or the QP -- while its close() does not affect the parent.
// This program checks the behaviour that applies and prints the same transcript for both.
#include "family.h"

using namespace family;

int main() {
  int port = 0;
  pid_t srv = fork_server([](int lfd) { echo_server(lfd, 1); }, &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  const bool fast = is_fast(fd);
  write_full(fd, "1", 1);
  char b;
  CHECK(read(fd, &b, 1) == 1);

  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    errno = 0;
    const ssize_t w = write(fd, "2", 1);
    if (fast) {
      CHECK(w == -1 && errno == ENOTCONN);
      errno = 0;
      CHECK(read(fd, &b, 1) == -1 && errno == ENOTCONN);
      pollfd p{fd, POLLIN, 0};
      CHECK(poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)));  // it says so instead of hanging
    } else {
      CHECK(w == 1);
      CHECK(read(fd, &b, 1) == 1 && b == '2');  // over TCP the child may use it
    }
    CHECK(close(fd) == 0);
    std::exit(0);
  }
  wait_child(child, "forked child");
  say("child: behaved as documented and closed its copy");
  // The parent's connection is untouched by the child's attempt and close.
  write_full(fd, "3", 1);
  CHECK(read(fd, &b, 1) == 1);
  say("parent after fork: echo %c", b);

  // A child that exits without touching it changes nothing either.
  child = fork();
  CHECK(child >= 0);
  if (child == 0) _exit(0);
  wait_child(child);
  write_full(fd, "4", 1);
  CHECK(read(fd, &b, 1) == 1);
  say("parent after an idle child: echo %c", b);
  // The child may make connections of its own.
  child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int p2 = 0;
    pid_t s2 = fork_server([](int lfd) { echo_server(lfd, 1); }, &p2);
    int c = connect_to(p2);
    expect_fast(c, "child's own connection");
    write_full(c, "5", 1);
    CHECK(read(c, &b, 1) == 1 && b == '5');
    close(c);
    wait_child(s2);
    std::exit(0);
  }
  wait_child(child, "child with its own connection");
  say("child: its own connection works");
  close(fd);
  wait_child(srv);
  return 0;
}
