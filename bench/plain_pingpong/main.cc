// conduit-plain-pingpong: a blocking ping-pong (bench/preload.sh), calling the socket
// API the plainest way a program can -- socket(AF_INET, SOCK_STREAM, 0) with no type flags,
// blocking connect/accept/read/write, nothing else -- so that every preload library can
// accelerate it.  (Python's socket module always adds SOCK_CLOEXEC to the type, which
// rsocket's preload does not take for a stream socket: a Python ping-pong stays on TCP.)
// No Conduit library is linked: it is the unmodified program of bench/preload.sh.
//
//   conduit-plain-pingpong serve ADDR PORT          echoes each message until the client closes
//   conduit-plain-pingpong ping ADDR PORT N SIZE    N round trips of SIZE bytes; prints
//                                                   "pingpong: N SIZE p50_us avg_us min_us max_us"
// The first 4 bytes the client sends are SIZE (big-endian).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "conduit-plain-pingpong: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

bool read_exact(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      die("read");
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void write_all(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      die("write");
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

sockaddr_in address(const char* addr, const char* port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  char* end = nullptr;
  const long p = std::strtol(port, &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) {
    std::fprintf(stderr, "conduit-plain-pingpong: bad port %s\n", port);
    std::exit(2);
  }
  sa.sin_port = htons(static_cast<uint16_t>(p));
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
    std::fprintf(stderr, "conduit-plain-pingpong: bad IPv4 address %s\n", addr);
    std::exit(2);
  }
  return sa;
}

long number(const char* s, long lo, long hi, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "conduit-plain-pingpong: %s must be %ld..%ld, not %s\n", what, lo, hi, s);
    std::exit(2);
  }
  return v;
}

void nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int serve(const sockaddr_in& sa) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) die("bind");
  if (listen(ls, 1) != 0) die("listen");
  const int c = accept(ls, nullptr, nullptr);
  if (c < 0) die("accept");
  nodelay(c);
  uint32_t be = 0;
  if (!read_exact(c, &be, sizeof be)) return 1;
  const uint32_t size = ntohl(be);
  if (size == 0 || size > (64u << 20)) {
    std::fprintf(stderr, "conduit-plain-pingpong: message size %u out of range\n", size);
    return 1;
  }
  std::vector<char> m(size);
  while (read_exact(c, m.data(), size)) write_all(c, m.data(), size);
  close(c);
  close(ls);
  return 0;
}

int ping(const sockaddr_in& sa, long n, long size) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  int s = -1;
  for (;;) {
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) die("socket");
    if (connect(s, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) break;
    if (errno != ECONNREFUSED || Clock::now() > deadline) die("connect");
    close(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  nodelay(s);
  const uint32_t be = htonl(static_cast<uint32_t>(size));
  write_all(s, &be, sizeof be);
  std::vector<char> msg(static_cast<size_t>(size), 'x'), echo(static_cast<size_t>(size));
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    write_all(s, msg.data(), msg.size());
    if (!read_exact(s, echo.data(), echo.size())) {
      std::fprintf(stderr, "conduit-plain-pingpong: the server closed after %ld round trips\n", i);
      return 1;
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (echo != msg) {
      std::fprintf(stderr, "conduit-plain-pingpong: the echo differs\n");
      return 1;
    }
  }
  close(s);
  double sum = 0;
  for (double v : us) sum += v;
  std::sort(us.begin(), us.end());
  std::printf("pingpong: %ld %ld %.1f %.1f %.1f %.1f\n", n, size, us[us.size() / 2], sum / static_cast<double>(n), us.front(),
              us.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "serve") == 0) return serve(address(argv[2], argv[3]));
  if (argc == 6 && std::strcmp(argv[1], "ping") == 0)
    return ping(address(argv[2], argv[3]), number(argv[4], 1, 100'000'000, "N"), number(argv[5], 1, 64 << 20, "SIZE"));
  std::fprintf(stderr,
               "usage: conduit-plain-pingpong serve ADDR PORT\n"
               "       conduit-plain-pingpong ping ADDR PORT N SIZE\n");
  return 2;
}
