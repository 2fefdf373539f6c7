// Family: accept/accept4 -- flags on the accepted fd, the peer address it reports, EAGAIN on
// an idle non-blocking listener, a blocking accept that waits.
#include "family.h"

using namespace family;

int main() {
  int port = 0;
  int lfd = listen_any(&port, SOCK_NONBLOCK);
  errno = 0;
  say("idle nonblocking accept -> %s", result(accept(lfd, nullptr, nullptr)).c_str());
  pid_t cli = fork();
  CHECK(cli >= 0);
  if (cli == 0) {
    for (int i = 0; i < 2; ++i) {
      int c = connect_to(port);
      expect_fast(c, "client");
      write_full(c, "x", 1);
      char b;
      CHECK(read(c, &b, 1) == 0);  // the server closes
      close(c);
    }
    _exit(0);
  }
  pollfd p{lfd, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  sockaddr_in peer{};
  socklen_t pl = sizeof peer;
  int a = accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
  CHECK(a >= 0);
  say("accept4: nonblock %d cloexec %d peer family %d test address %d", (fcntl(a, F_GETFL) & O_NONBLOCK) != 0,
      (fcntl(a, F_GETFD) & FD_CLOEXEC) != 0, peer.sin_family, peer.sin_addr.s_addr == test_addr());
  p = {a, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  char b;
  CHECK(read(a, &b, 1) == 1);
  expect_fast(a, "accepted");
  close(a);
  // A blocking accept on the same listener, now blocking.
  set_nonblock(lfd, false);
  int a2 = accept(lfd, nullptr, nullptr);
  CHECK(a2 >= 0);
  say("blocking accept: nonblock %d cloexec %d", (fcntl(a2, F_GETFL) & O_NONBLOCK) != 0, (fcntl(a2, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(read(a2, &b, 1) == 1);
  say("blocking accept: read %c", b);
  close(a2);
  wait_child(cli);
  close(lfd);
  return 0;
}
