// Test helper: a RESP connection over a plain TCP socket that reads replies and pushes as
// they come (pub/sub messages, MONITOR lines, a blocked command's late reply), with a
// bounded wait -- what the request/reply Client cannot show.
#pragma once

#include <poll.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "conduit/kv/resp.h"
#include "raw_socket.h"

namespace conduit::kv::testing {

class RespConn {
 public:
  explicit RespConn(int port) : sock_(port) {}
  bool ok() const { return sock_.ok(); }
  int fd() const { return sock_.fd(); }

  bool send(const std::vector<std::string>& argv) {
    std::string s = "*" + std::to_string(argv.size()) + "\r\n";
    for (const auto& a : argv) s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return sock_.send_all(s);
  }
  // The next reply or push, or nullopt when none is complete within timeout_ms (or the
  // peer closed, or it is malformed).
  std::optional<Reply> read(int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const int64_t n = scanner_.scan(in_.data(), in_.size());
      if (n < 0) return std::nullopt;
      if (n > 0) {
        Reply r;
        const bool parsed = parse_reply(in_.data(), static_cast<size_t>(n), &r);
        in_.erase(0, static_cast<size_t>(n));
        scanner_.reset();
        if (!parsed) return std::nullopt;
        return r;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{sock_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[65536];
      const ssize_t got = ::recv(sock_.fd(), buf, sizeof buf, 0);
      if (got <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      in_.append(buf, static_cast<size_t>(got));
    }
  }
  // One command and its reply.
  std::optional<Reply> call(const std::vector<std::string>& argv, int timeout_ms = 10000) {
    if (!send(argv)) return std::nullopt;
    return read(timeout_ms);
  }
  // True when nothing at all arrives within ms (a negative check: it can miss a late byte,
  // never invent one).
  bool quiet_for(int ms) {
    if (!in_.empty()) return false;
    pollfd p{sock_.fd(), POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
  }
  // Reads (and drops) everything until the peer closes; false if it stays open for timeout_ms.
  bool wait_closed(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{sock_.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[65536];
      const ssize_t got = ::recv(sock_.fd(), buf, sizeof buf, 0);
      if (got == 0 || (got < 0 && errno == ECONNRESET)) closed_ = true;
    }
    return true;
  }

 private:
  RawSocket sock_;
  std::string in_;
  ReplyScanner scanner_;
  bool closed_ = false;
};

}  // namespace conduit::kv::testing
