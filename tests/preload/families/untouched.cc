// Family: what the preload must leave alone -- files, pipes, UDP, a UNIX socket pair, and TCP
// to a peer that does not run the preload (it falls back, and the fallback is listed).
// The plain server is started with LD_PRELOAD removed from its environment.
#include <sys/un.h>

#include "family.h"

using namespace family;

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--plain-server") == 0) {
    // The exec'd plain server: echo one connection; its port goes to fd 3.
    int port = 0;
    int lfd = listen_any(&port);
    CHECK(write(3, &port, sizeof port) == sizeof port);
    echo_server(lfd, 1);
    return 0;
  }
  char path[] = "/tmp/conduit-preload-untouched-XXXXXX";
  int f = mkstemp(path);
  CHECK(f >= 0);
  write_full(f, "file data", 9);
  CHECK(lseek(f, 0, SEEK_SET) == 0);
  char buf[64] = {};
  CHECK(read(f, buf, sizeof buf) == 9);
  say("file: %s", buf);
  close(f);
  unlink(path);
  int pp[2];
  CHECK(pipe(pp) == 0);
  write_full(pp[1], "pipe", 4);
  CHECK(read(pp[0], buf, 4) == 4);
  say("pipe: %.4s", buf);
  int sp[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
  write_full(sp[0], "unix", 4);
  CHECK(recv(sp[1], buf, 4, 0) == 4);
  say("socketpair: %.4s", buf);
  int u1 = socket(AF_INET, SOCK_DGRAM, 0), u2 = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a = loopback(0);
  CHECK(bind(u2, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t al = sizeof a;
  CHECK(getsockname(u2, reinterpret_cast<sockaddr*>(&a), &al) == 0);
  CHECK(sendto(u1, "udp", 3, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 3);
  sockaddr_in from{};
  socklen_t fl = sizeof from;
  CHECK(recvfrom(u2, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &fl) == 3);
  say("udp: %.3s from loopback %d", buf, from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));

  // TCP to a server without the preload.
  int portpipe[2];
  CHECK(pipe(portpipe) == 0);
  pid_t srv = fork();
  CHECK(srv >= 0);
  if (srv == 0) {
    unsetenv("LD_PRELOAD");
    dup2(portpipe[1], 3);
    execl("/proc/self/exe", argv[0], "--plain-server", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(portpipe[1]);
  int port = 0;
  CHECK(read(portpipe[0], &port, sizeof port) == sizeof port);
  int fd = connect_to(port);
  expect_tcp(fd, "connection to a plain server");
  if (preloaded()) {
    const std::string d = describe(fd);
    CHECK(d.find("no preloaded listener") != std::string::npos);  // the reason is recorded
  }
  write_full(fd, "plain tcp", 9);
  CHECK(read_full(fd, buf, 9) == 9);
  say("tcp to a plain server: %.9s", buf);
  close(fd);
  wait_child(srv);
  return 0;
}
