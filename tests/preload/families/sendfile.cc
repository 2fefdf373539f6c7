// Family: sendfile and splice on a connection -- from a file (with and without an offset),
// pipe -> socket, socket -> pipe.
#include <sys/sendfile.h>

#include "family.h"

using namespace family;

int main() {
  char path[] = "/tmp/conduit-preload-sendfile-XXXXXX";
  int file = mkstemp(path);
  CHECK(file >= 0);
  unlink(path);
  std::string content;
  for (int i = 0; i < 20000; ++i) content += static_cast<char>('a' + i % 26);
  write_full(file, content.data(), content.size());
  int port = 0;
  pid_t srv = fork_server([](int lfd) { echo_server(lfd, 1); }, &port);
  int fd = connect_to(port);
  expect_fast(fd, "client");

  off_t off = 100;
  ssize_t n = sendfile(fd, file, &off, 5000);
  say("sendfile with offset -> %zd, offset now %lld", n, static_cast<long long>(off));
  std::string back(5000, '\0');
  CHECK(read_full(fd, back.data(), back.size()) == back.size());
  say("echo matches %d", back == content.substr(100, 5000));
  CHECK(lseek(file, 50, SEEK_SET) == 50);
  n = sendfile(fd, file, nullptr, 3000);
  say("sendfile from the position -> %zd, position now %lld", n, static_cast<long long>(lseek(file, 0, SEEK_CUR)));
  back.assign(3000, '\0');
  CHECK(read_full(fd, back.data(), back.size()) == back.size());
  say("echo matches %d", back == content.substr(50, 3000));

  int in[2], out[2];
  CHECK(pipe(in) == 0 && pipe(out) == 0);
  write_full(in[1], "spliced!", 8);
  n = splice(in[0], nullptr, fd, nullptr, 8, 0);
  say("splice pipe -> socket -> %zd", n);
  pollfd p{fd, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  usleep(20'000);
  n = splice(fd, nullptr, out[1], nullptr, 8, 0);
  say("splice socket -> pipe -> %zd", n);
  char buf[16] = {};
  CHECK(read(out[0], buf, sizeof buf) == n);
  say("pipe holds %.8s", buf);
  errno = 0;
  loff_t o = 0;
  say("splice with an offset on the socket -> %s", result(splice(in[0], nullptr, fd, &o, 8, 0)).c_str());
  close(fd);
  wait_child(srv);
  close(file);
  return 0;
}
