// Test helper: a plain blocking TCP socket to 127.0.0.1, for bytes no client library sends.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace conduit::kv::testing {

// Blocking, with 5 s receive and 10 s send timeouts.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    timeval stv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof stv);
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  int fd() const { return fd_; }
  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Everything until the peer closes (or the timeout).
  std::string read_until_close() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed_by_peer() {
    char b;
    const ssize_t n = ::recv(fd_, &b, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace conduit::kv::testing
