#include "conduit/verbs/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "conduit/base/big_endian.h"
#include "conduit/base/clock.h"
#include "conduit/verbs/cm.h"

namespace conduit::verbs {
namespace {

constexpr uint8_t kMagic[4] = {'C', 'D', 'Q', 'P'};
constexpr uint8_t kVersion = 1;

using namespace big_endian;  // put16/32/64, get16/32/64

int remaining_ms(uint64_t deadline) {
  const uint64_t now = monotonic_ns();
  return now >= deadline ? 0 : static_cast<int>((deadline - now + 999999) / 1000000);
}

conduit::Status wait_fd(int fd, short events, uint64_t deadline, const char* what) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int rc = ::poll(&pfd, 1, remaining_ms(deadline));
    if (rc > 0) return {};
    if (rc == 0) return conduit::Status(Code::kTimedOut, std::string(what) + ": timed out");
    if (errno != EINTR) return conduit::Status::FromErrno(errno, what);
  }
}

}  // namespace

void encode_bootstrap(const BootstrapInfo& info, uint8_t (&out)[kBootstrapRecordSize]) {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion;
  put16(out + 6, info.endpoint.lid);
  put32(out + 8, info.endpoint.qp_num);
  put32(out + 12, info.endpoint.psn & 0xffffff);
  std::memcpy(out + 16, info.endpoint.gid.data(), 16);
  put64(out + 32, info.addr);
  put32(out + 40, info.rkey);
  put32(out + 44, info.length);
}

Result<BootstrapInfo> decode_bootstrap(const uint8_t (&in)[kBootstrapRecordSize]) {
  if (std::memcmp(in, kMagic, 4) != 0)
    return conduit::Status(Code::kProtocolError, "bootstrap record: bad magic (peer is not a Conduit bootstrap)");
  if (in[4] != kVersion)
    return conduit::Status(Code::kProtocolError, "bootstrap record: unsupported version " + std::to_string(in[4]));
  BootstrapInfo info;
  info.endpoint.lid = get16(in + 6);
  info.endpoint.qp_num = get32(in + 8);
  info.endpoint.psn = get32(in + 12);
  if (info.endpoint.psn > 0xffffff)
    return conduit::Status(Code::kProtocolError, "bootstrap record: PSN wider than 24 bits");
  std::memcpy(info.endpoint.gid.data(), in + 16, 16);
  info.addr = get64(in + 32);
  info.rkey = get32(in + 40);
  info.length = get32(in + 44);
  return info;
}

Result<UniqueFd> tcp_listen(std::string_view host, uint16_t port, int backlog) {
  CONDUIT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::resolve(host, port));
  UniqueFd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return conduit::Status::FromErrnoAuto(errno, "socket");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), addr.get(), addr.length) != 0)
    return conduit::Status::FromErrnoAuto(errno, "bind " + addr.to_string());
  if (::listen(fd.get(), backlog) != 0) return conduit::Status::FromErrnoAuto(errno, "listen");
  return fd;
}

Result<uint16_t> bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
    return conduit::Status::FromErrno(errno, "getsockname");
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

Result<UniqueFd> tcp_accept(int listen_fd, int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  CONDUIT_RETURN_IF_ERROR(wait_fd(listen_fd, POLLIN, deadline, "accept"));
  UniqueFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return conduit::Status::FromErrnoAuto(errno, "accept");
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Result<UniqueFd> tcp_connect(std::string_view host, uint16_t port, int timeout_ms) {
  CONDUIT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::resolve(host, port));
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  for (;;) {
    UniqueFd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return conduit::Status::FromErrnoAuto(errno, "socket");
    if (::connect(fd.get(), addr.get(), addr.length) == 0) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    const int err = errno;
    if (err != ECONNREFUSED && err != EINTR) return conduit::Status::FromErrnoAuto(err, "connect " + addr.to_string());
    if (monotonic_ns() >= deadline)
      return conduit::Status(Code::kTimedOut, "connect " + addr.to_string() + ": refused until the timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Result<BootstrapInfo> exchange_bootstrap(int fd, const BootstrapInfo& local, int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  uint8_t out[kBootstrapRecordSize];
  encode_bootstrap(local, out);
  size_t sent = 0;
  while (sent < sizeof out) {
    CONDUIT_RETURN_IF_ERROR(wait_fd(fd, POLLOUT, deadline, "bootstrap send"));
    const ssize_t n = ::send(fd, out + sent, sizeof out - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return conduit::Status::FromErrnoAuto(errno, "bootstrap send");
    if (n > 0) sent += static_cast<size_t>(n);
  }
  uint8_t in[kBootstrapRecordSize];
  size_t got = 0;
  while (got < sizeof in) {
    CONDUIT_RETURN_IF_ERROR(wait_fd(fd, POLLIN, deadline, "bootstrap receive"));
    const ssize_t n = ::recv(fd, in + got, sizeof in - got, MSG_DONTWAIT);
    if (n == 0)
      return conduit::Status(Code::kClosed, "bootstrap: peer closed after " + std::to_string(got) + " of " +
                                                std::to_string(sizeof in) + " bytes");
    if (n < 0 && errno != EAGAIN && errno != EINTR) return conduit::Status::FromErrnoAuto(errno, "bootstrap receive");
    if (n > 0) got += static_cast<size_t>(n);
  }
  return decode_bootstrap(in);
}

}  // namespace conduit::verbs
