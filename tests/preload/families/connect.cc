// Family: connect -- blocking and non-blocking (EINPROGRESS, poll for POLLOUT, SO_ERROR),
// a refused connect both ways, connect on a connected socket, the addresses it reports.
#include "family.h"

using namespace family;

int main() {
  int port = 0;
  pid_t srv = fork_server([](int lfd) { echo_server(lfd, 2); }, &port);

  // Blocking.
  int a = connect_to(port);
  expect_fast(a, "blocking connect");
  write_full(a, "ping", 4);
  char buf[8] = {};
  CHECK(read_full(a, buf, 4) == 4);
  say("blocking: echo %.4s", buf);
  sockaddr_in peer{}, self{};
  socklen_t pl = sizeof peer, sl = sizeof self;
  CHECK(getpeername(a, reinterpret_cast<sockaddr*>(&peer), &pl) == 0);
  CHECK(getsockname(a, reinterpret_cast<sockaddr*>(&self), &sl) == 0);
  say("blocking: peer port matches %d, local is the test address %d, local port set %d", ntohs(peer.sin_port) == port,
      self.sin_addr.s_addr == test_addr(), self.sin_port != 0);
  sockaddr_in dst = loopback(port);
  errno = 0;
  say("blocking: connect again -> %s", result(connect(a, reinterpret_cast<sockaddr*>(&dst), sizeof dst)).c_str());
  close(a);

  // Non-blocking.
  int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(b >= 0);
  int r = connect(b, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
  say("nonblocking: connect -> %s", r == 0 ? "ok 0 (done at once)" : (errno == EINPROGRESS ? "-1 EINPROGRESS" : result(r).c_str()));
  if (r != 0) {
    errno = 0;
    const int again = connect(b, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
    // EALREADY while in progress, EISCONN if already done: both are what Linux says.
    say("nonblocking: connect again -> %s", again == 0 || errno == EISCONN || errno == EALREADY ? "in progress or done" : result(again).c_str());
  }
  pollfd p{b, POLLOUT, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  say("nonblocking: poll -> POLLOUT %d POLLERR %d", (p.revents & POLLOUT) != 0, (p.revents & POLLERR) != 0);
  int err = -1;
  socklen_t el = sizeof err;
  CHECK(getsockopt(b, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
  say("nonblocking: SO_ERROR %s", errname(err));
  expect_fast(b, "non-blocking connect");
  write_full(b, "pong", 4);
  p = {b, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  CHECK(read(b, buf, 4) == 4);
  say("nonblocking: echo %.4s", buf);
  close(b);
  wait_child(srv);

  // Refused: a port nobody listens on (the server's, now closed).
  int c = socket(AF_INET, SOCK_STREAM, 0);
  errno = 0;
  r = connect(c, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
  say("refused blocking: %s", result(r).c_str());
  close(c);
  int d = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  r = connect(d, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
  if (r != 0 && errno == EINPROGRESS) {
    p = {d, POLLOUT, 0};
    CHECK(poll(&p, 1, 5000) == 1);
    el = sizeof err;
    CHECK(getsockopt(d, SOL_SOCKET, SO_ERROR, &err, &el) == 0);
    say("refused nonblocking: SO_ERROR %s", errname(err));
  } else {
    say("refused nonblocking: SO_ERROR %s", errname(r == 0 ? 0 : errno));
  }
  close(d);
  return 0;
}
