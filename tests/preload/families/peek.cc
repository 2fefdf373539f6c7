// Family: MSG_PEEK, FIONREAD, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC, recvmsg/sendmsg,
// readv/writev, recvfrom's address.
#include <sys/ioctl.h>
#include <sys/uio.h>

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
        write_full(c, "0123456789", 10);
        CHECK(read(go[0], &b, 1) == 1);
        write_full(c, "abcdef", 6);
        CHECK(read(go[0], &b, 1) == 1);
        iovec v[2] = {{const_cast<char*>("gather-"), 7}, {const_cast<char*>("list"), 4}};
        msghdr m{};
        m.msg_iov = v;
        m.msg_iovlen = 2;
        CHECK(sendmsg(c, &m, 0) == 11);
        char in[16];
        CHECK(read_full(c, in, 5) == 5);
        write_full(c, in, 5);
        CHECK(read(c, in, 1) == 0);
        close(c);
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  char buf[32] = {};
  int avail = -1;
  CHECK(ioctl(fd, FIONREAD, &avail) == 0);
  say("FIONREAD idle -> %d", avail);
  errno = 0;
  say("MSG_DONTWAIT idle -> %s", result(recv(fd, buf, sizeof buf, MSG_DONTWAIT)).c_str());
  write_full(go[1], "g", 1);
  pollfd p{fd, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  usleep(50'000);  // all ten bytes are there (one write on the other side)
  CHECK(ioctl(fd, FIONREAD, &avail) == 0);
  say("FIONREAD -> %d", avail);
  ssize_t n = recv(fd, buf, 4, MSG_PEEK);
  say("peek 4 -> %zd %.4s", n, buf);
  n = recv(fd, buf, 6, MSG_PEEK);
  say("peek 6 -> %zd %.6s", n, buf);
  n = recv(fd, buf, 3, 0);
  say("recv 3 -> %zd %.3s", n, buf);
  CHECK(ioctl(fd, FIONREAD, &avail) == 0);
  say("FIONREAD after -> %d", avail);
  n = recv(fd, buf, 2, MSG_TRUNC);
  say("recv 2 MSG_TRUNC -> %zd", n);
  char a[3] = {}, c[10] = {};
  iovec rv[2] = {{a, 3}, {c, 10}};
  n = readv(fd, rv, 2);
  say("readv -> %zd %.3s|%.2s", n, a, c);
  write_full(go[1], "g", 1);
  std::memset(buf, 0, sizeof buf);
  n = recv(fd, buf, 6, MSG_WAITALL);
  say("MSG_WAITALL 6 -> %zd %.6s", n, buf);
  write_full(go[1], "g", 1);
  char m1[7] = {}, m2[4] = {};
  iovec mv[2] = {{m1, 7}, {m2, 4}};
  msghdr m{};
  sockaddr_in from{};
  m.msg_name = &from;
  m.msg_namelen = sizeof from;
  m.msg_iov = mv;
  m.msg_iovlen = 2;
  n = recvmsg(fd, &m, MSG_WAITALL);
  say("recvmsg -> %zd %.7s%.4s namelen %u controllen %zu", n, m1, m2, m.msg_namelen, m.msg_controllen);
  iovec wv[2] = {{const_cast<char*>("wri"), 3}, {const_cast<char*>("te"), 2}};
  CHECK(writev(fd, wv, 2) == 5);
  socklen_t fl = sizeof from;
  n = recvfrom(fd, buf, 5, MSG_WAITALL, reinterpret_cast<sockaddr*>(&from), &fl);
  say("recvfrom -> %zd %.5s addrlen %u", n, buf, fl);
  errno = 0;
  say("recv MSG_OOB -> %s", result(recv(fd, buf, 1, MSG_OOB)).c_str());
  close(fd);
  wait_child(srv);
  return 0;
}
