// Family: shutdown -- SHUT_WR gives the peer EOF after the data and keeps reading; SHUT_RD.
#include "family.h"

using namespace family;

int main() {
  int port = 0;
  pid_t srv = fork_server(
      [](int lfd) {
        int c = accept(lfd, nullptr, nullptr);
        CHECK(c >= 0);
        char buf[64];
        size_t n = read_full(c, buf, sizeof buf);  // until the client's EOF
        CHECK(n == 12);
        write_full(c, "reply after your EOF", 20);
        errno = 0;
        CHECK(shutdown(c, SHUT_WR) == 0);
        CHECK(read(c, buf, 1) == 0);
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  write_full(fd, "twelve bytes", 12);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  errno = 0;
  say("write after SHUT_WR -> %s", result(send(fd, "x", 1, MSG_NOSIGNAL)).c_str());
  char buf[64] = {};
  size_t n = read_full(fd, buf, sizeof buf);
  say("client: read %zu bytes: %.*s, then EOF", n, static_cast<int>(n), buf);
  say("read at EOF -> %s", result(read(fd, buf, 1)).c_str());
  errno = 0;
  say("SHUT_RD once both directions are closed -> %s", result(shutdown(fd, SHUT_RD)).c_str());
  say("read after -> %s", result(read(fd, buf, 1)).c_str());
  errno = 0;
  say("shutdown bad how -> %s", result(shutdown(fd, 7)).c_str());
  close(fd);
  wait_child(srv);
  return 0;
}
