// Family: exec with a connection open.  Documented behaviour (docs/PRELOAD.md): over TCP the
// new program can use an inherited socket; an accelerated connection cannot follow it (its
// rings and QPs belong to the old image), so the fd it inherits is an unconnected socket:
// reads fail with ENOTCONN, writes with EPIPE (and SIGPIPE, as on a closed connection) --
// never a stale stream.  With FD_CLOEXEC it is simply closed.
#include "family.h"

using namespace family;

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--child") == 0) {
    const int fd = std::atoi(argv[2]);
    const bool was_fast = argc > 3 && std::strcmp(argv[3], "fast") == 0;
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    const ssize_t w = write(fd, "e", 1);
    if (was_fast) {
      CHECK(w == -1 && errno == EPIPE);
      char b;
      CHECK(read(fd, &b, 1) == -1 && errno == ENOTCONN);
    } else {
      CHECK(w == 1);
      char b;
      CHECK(read(fd, &b, 1) == 1 && b == 'e');
    }
    std::printf("exec'd program: behaved as documented\n");
    return 0;
  }
  int port = 0;
  pid_t srv = fork_server([](int lfd) { echo_server(lfd, 1); }, &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");
  const bool fast = is_fast(fd);
  std::fflush(stdout);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    char num[16];
    std::snprintf(num, sizeof num, "%d", fd);
    execl("/proc/self/exe", argv[0], "--child", num, fast ? "fast" : "tcp", static_cast<char*>(nullptr));
    _exit(127);
  }
  wait_child(child, "exec'd child");
  // The parent's connection still works.
  write_full(fd, "p", 1);
  char b;
  CHECK(read(fd, &b, 1) == 1);
  say("parent after the exec'd child: echo %c", b);
  close(fd);
  wait_child(srv);
  return 0;
}
