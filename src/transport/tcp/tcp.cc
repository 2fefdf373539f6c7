#include "tcp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "conduit/base/fd.h"
#include "conduit/base/log.h"

namespace conduit::transport {
namespace {

struct TcpOptions {
  bool nodelay = true;
  int backlog = 511;
  int sndbuf = 0;
  int rcvbuf = 0;
  uint64_t connect_timeout_ms = 10000;
  bool reuseport = false;
};

Result<TcpOptions> parse_options(const Endpoint& ep) {
  OptionReader r(ep);
  TcpOptions o;
  CONDUIT_ASSIGN_OR_RETURN(o.nodelay, r.get_bool("nodelay", true));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t backlog, r.get_u64("backlog", 511, 1, 65535));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t sndbuf, r.get_bytes("sndbuf", 0, 0, 1u << 30));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t rcvbuf, r.get_bytes("rcvbuf", 0, 0, 1u << 30));
  CONDUIT_ASSIGN_OR_RETURN(o.connect_timeout_ms, r.get_u64("connect_timeout_ms", 10000, 1, 3600000));
  CONDUIT_ASSIGN_OR_RETURN(o.reuseport, r.get_bool("reuseport", false));
  CONDUIT_RETURN_IF_ERROR(r.finish());
  o.backlog = static_cast<int>(backlog);
  o.sndbuf = static_cast<int>(sndbuf);
  o.rcvbuf = static_cast<int>(rcvbuf);
  return o;
}

std::string sockaddr_string(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

std::string local_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_string(ss);
}

std::string peer_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_string(ss);
}

void apply_socket_options(int fd, const TcpOptions& o) {
  const int one = 1;
  if (o.nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (o.sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o.sndbuf, sizeof o.sndbuf);
  if (o.rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.rcvbuf, sizeof o.rcvbuf);
}

Result<addrinfo*> resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  const bool any = host == "*" || host == "0.0.0.0" || host.empty();
  if (int rc = getaddrinfo(any ? (host == "0.0.0.0" ? "0.0.0.0" : nullptr) : host.c_str(), p.c_str(), &hints, &res);
      rc != 0)
    return Status(Code::kNotFound, "tcp: cannot resolve '" + host + "': " + gai_strerror(rc));
  return res;
}

// ---------------------------------------------------------------------------------------

class TcpConnection final : public Connection, public reactor::FdHandler {
 public:
  TcpConnection(reactor::EventLoop& loop, UniqueFd fd, ConnState state, TcpOptions options)
      : loop_(loop), fd_(std::move(fd)), state_(state), options_(options) {}

  ~TcpConnection() override { close(); }

  Status start(uint32_t events) { return loop_.add(fd_.get(), events, this); }

  void begin_connect(ConnectCallback cb) {
    on_connect_ = std::move(cb);
    connect_timer_ = loop_.run_after(options_.connect_timeout_ms * 1'000'000ull, [this] {
      connect_timer_ = 0;
      finish_connect(Status(Code::kTimedOut, "tcp connect timed out after " +
                                                 std::to_string(options_.connect_timeout_ms) + " ms"));
    });
  }

  // Connection ---------------------------------------------------------------------------
  ConnState state() const override { return state_; }
  const Status& error() const override { return error_; }

  Result<size_t> read(std::span<uint8_t> buf) override {
    if (state_ != ConnState::kConnected) return not_connected();
    if (buf.empty()) return size_t{0};
    if (size_t staged = take_staged_in(buf); staged != 0) return staged;  // peek()ed earlier
    for (;;) {
      const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n > 0) {
        stats_.bytes_read += static_cast<uint64_t>(n);
        ++stats_.reads;
        return static_cast<size_t>(n);
      }
      if (n == 0) {
        peer_eof_ = true;
        return size_t{0};
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        ++stats_.read_would_block;
        return Status::WouldBlock();
      }
      return fail(Status::FromErrnoAuto(errno, "tcp recv"));
    }
  }

  Result<size_t> write(std::span<const uint8_t> data) override {
    iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    return writev(std::span<const iovec>(&iov, 1));
  }

  Result<size_t> writev(std::span<const iovec> iov) override {
    if (state_ != ConnState::kConnected) return not_connected();
    if (write_shut_) return Status(Code::kClosed, "tcp: write side was shut down");
    if (has_staged_out()) {
      // Bytes committed through reserve() go first.
      Status s = flush_staged_out();
      if (!s.ok()) {
        update_interest();
        return s;
      }
    }
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov.data());
    msg.msg_iovlen = std::min<size_t>(iov.size(), IOV_MAX);
    size_t total = 0;
    for (size_t i = 0; i < msg.msg_iovlen; ++i) total += iov[i].iov_len;
    if (total == 0) return size_t{0};
    for (;;) {
      // One buffer (the common case) goes through send(): no msghdr/iovec copy-in.
      const ssize_t n = msg.msg_iovlen == 1
                            ? ::send(fd_.get(), iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL)
                            : ::sendmsg(fd_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        stats_.bytes_written += static_cast<uint64_t>(n);
        ++stats_.writes;
        return static_cast<size_t>(n);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ++stats_.write_would_block;
        return Status::WouldBlock();
      }
      return fail(Status::FromErrnoAuto(n < 0 ? errno : EIO, "tcp send"));
    }
  }

  // reserve/commit and peek/consume come from the base class (staged copies: the kernel
  // copies anyway); committed bytes the socket did not take are flushed on writability.
  Status commit(size_t n) override {
    Status s = Connection::commit(n);
    update_interest();
    return s;
  }

  void set_read_handler(Handler h) override {
    read_handler_ = std::move(h);
    update_interest();
    watch_staged_in();
  }
  void set_write_handler(Handler h) override {
    write_handler_ = std::move(h);
    update_interest();
  }

  // A hangup seen while no read handler was installed is delivered when one is; bytes
  // peek() took from the socket are data no fd event announces.
  bool has_pending_data() const override {
    return read_handler_ != nullptr && (hup_pending_ || has_staged_in());
  }
  void process_pending() override {
    if (!has_pending_data()) return;
    hup_pending_ = false;
    Handler h = read_handler_;
    h(*this);
    watch_staged_in();
  }

  Status shutdown_write() override {
    if (state_ != ConnState::kConnected) return not_connected().status();
    if (write_shut_) return {};
    if (::shutdown(fd_.get(), SHUT_WR) != 0) return Status::FromErrnoAuto(errno, "tcp shutdown");
    write_shut_ = true;
    return {};
  }

  void close() override {
    if (!fd_) return;
    if (connect_timer_ != 0) loop_.cancel(connect_timer_);
    connect_timer_ = 0;
    if (loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
    local_ = local_address();
    peer_ = peer_address();
    fd_.reset();
    if (state_ != ConnState::kError) state_ = ConnState::kClosed;
    read_handler_ = nullptr;
    write_handler_ = nullptr;
    watch_staged_in();
  }

  std::string local_address() const override { return fd_ ? local_of(fd_.get()) : local_; }
  std::string peer_address() const override { return fd_ ? peer_of(fd_.get()) : peer_; }
  Caps caps() const override {
    Caps c;
    c.transport = "tcp";
    return c;
  }
  const ConnStats& stats() const override { return stats_; }
  reactor::EventLoop& loop() const override { return loop_; }

  // FdHandler ----------------------------------------------------------------------------
  void on_events(uint32_t events) override {
    if (state_ == ConnState::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == 0 && (events & reactor::kWritable) == 0 && (events & reactor::kHangup) != 0) err = ECONNREFUSED;
      if (err != 0) {
        finish_connect(Status::FromErrnoAuto(err, "tcp connect to " + target_));
      } else {
        state_ = ConnState::kConnected;
        finish_connect(Status());
      }
      return;
    }
    if (state_ != ConnState::kConnected) return;
    // Keep a local copy: a handler may close (and reset) the other handler.
    if ((events & (reactor::kReadable | reactor::kHangup)) != 0) {
      if (read_handler_) {
        Handler h = read_handler_;
        h(*this);
        watch_staged_in();
      } else if ((events & reactor::kHangup) != 0) {
        // Nobody reads now; stop the level-triggered hangup from spinning the loop.
        hup_pending_ = true;
        (void)loop_.modify(fd_.get(), write_handler_ ? reactor::kWritable : 0);
        if (!write_handler_ && loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
      }
    }
    if ((events & reactor::kWritable) != 0 && state_ == ConnState::kConnected && has_staged_out()) {
      if (Status s = flush_staged_out(); s.is_error()) {
        if (read_handler_) {  // the connection failed: a reader learns it by reading
          Handler h = read_handler_;
          h(*this);
        }
        return;
      }
      update_interest();
    }
    if ((events & reactor::kWritable) != 0 && state_ == ConnState::kConnected && write_handler_) {
      Handler h = write_handler_;
      h(*this);
    }
  }

  std::string target_;

 private:
  Result<size_t> not_connected() const {
    if (state_ == ConnState::kError) return error_;
    if (state_ == ConnState::kClosed) return Status(Code::kClosed, "tcp: connection is closed");
    return Status(Code::kInvalidArgument, std::string("tcp: connection is ") + std::string(conn_state_name(state_)));
  }

  Status fail(Status s) {
    error_ = s;
    state_ = ConnState::kError;
    if (loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
    return s;
  }

  void finish_connect(Status s) {
    if (connect_timer_ != 0) loop_.cancel(connect_timer_);
    connect_timer_ = 0;
    if (!s.ok()) {
      error_ = s;
      state_ = ConnState::kError;
      if (fd_ && loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
    } else {
      update_interest();
    }
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    if (cb) cb(*this, s);
  }

  // Level-style reads over peek()'s staging: a read handler that returns while staged bytes
  // remain (it read only part, or stopped after a budget) has nothing left in the socket to
  // wake it, so a before-sleep hook runs it again -- and keeps the loop from sleeping --
  // until the staging is empty or the handler is gone.  Installed only while bytes are
  // staged: connections that never peek pay nothing.
  void watch_staged_in() {
    const bool want = fd_ && state_ == ConnState::kConnected && read_handler_ && has_staged_in();
    if (want && staged_hook_ == 0) {
      staged_hook_ = loop_.add_before_sleep([this] {
        if (fd_ && state_ == ConnState::kConnected && read_handler_ && has_staged_in()) {
          Handler h = read_handler_;
          h(*this);
        }
        watch_staged_in();
        return staged_hook_ != 0;
      });
    } else if (!want && staged_hook_ != 0) {
      loop_.remove_before_sleep(staged_hook_);
      staged_hook_ = 0;
    }
  }

  void update_interest() {
    if (!fd_ || state_ != ConnState::kConnected) return;
    uint32_t ev = 0;
    if (read_handler_) ev |= reactor::kReadable;
    if (write_handler_ || has_staged_out()) ev |= reactor::kWritable;
    if (!loop_.watching(fd_.get())) {
      // Re-adding after a hangup nobody read: the level-triggered hangup fires at once and
      // reaches the new read handler.
      if (ev == 0) return;
      hup_pending_ = false;
      (void)loop_.add(fd_.get(), ev, this);
      return;
    }
    (void)loop_.modify(fd_.get(), ev);
  }

  reactor::EventLoop& loop_;
  UniqueFd fd_;
  ConnState state_;
  TcpOptions options_;
  Status error_;
  Handler read_handler_;
  Handler write_handler_;
  ConnectCallback on_connect_;
  reactor::TimerId connect_timer_ = 0;
  ConnStats stats_;
  bool peer_eof_ = false;
  bool write_shut_ = false;
  bool hup_pending_ = false;
  reactor::EventLoop::HookId staged_hook_ = 0;  // watch_staged_in()'s, while bytes are staged
  std::string local_, peer_;
};

class TcpListener final : public Listener, public reactor::FdHandler {
 public:
  TcpListener(reactor::EventLoop& loop, UniqueFd fd, TcpOptions options, AcceptCallback cb)
      : loop_(loop), fd_(std::move(fd)), options_(options), on_accept_(std::move(cb)) {}
  ~TcpListener() override { close(); }

  Status start() { return loop_.add(fd_.get(), reactor::kReadable, this); }
  std::string url() const override { return "tcp://" + local_of(fd_.get()); }
  void close() override {
    if (resume_timer_ != 0) loop_.cancel(resume_timer_);
    resume_timer_ = 0;
    if (!fd_) return;
    if (loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
    fd_.reset();
  }

  void pause_accepting() {
    if (resume_timer_ != 0 || !fd_) return;
    (void)loop_.modify(fd_.get(), 0);
    resume_timer_ = loop_.run_after(100'000'000ull, [this] {
      resume_timer_ = 0;
      if (fd_) (void)loop_.modify(fd_.get(), reactor::kReadable);
    });
  }

  void on_events(uint32_t) override {
    // Accept a bounded batch per wakeup so one busy listener can't starve the loop.
    for (int i = 0; i < 64 && fd_; ++i) {
      UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!c) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        CONDUIT_LOG(kWarn) << "tcp accept on " << url() << ": " << std::strerror(errno);
        // Out of fds or memory: the pending connection stays queued and the listener stays
        // readable, so back off instead of spinning on it.
        pause_accepting();
        return;
      }
      apply_socket_options(c.get(), options_);
      auto conn = std::make_unique<TcpConnection>(loop_, std::move(c), ConnState::kConnected, options_);
      if (Status s = conn->start(0); !s.ok()) {
        CONDUIT_LOG(kWarn) << "tcp accept: " << s.to_string();
        continue;
      }
      on_accept_(std::move(conn));
    }
  }

 private:
  reactor::EventLoop& loop_;
  UniqueFd fd_;
  TcpOptions options_;
  AcceptCallback on_accept_;
  reactor::TimerId resume_timer_ = 0;
};

class TcpTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "tcp"; }

  Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, const Endpoint& ep,
                                           AcceptCallback on_accept) override {
    if (!on_accept) return Status(Code::kInvalidArgument, "tcp listen: null accept callback");
    CONDUIT_ASSIGN_OR_RETURN(TcpOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto hp, ep.host_port());
    CONDUIT_ASSIGN_OR_RETURN(addrinfo * res, resolve(hp.first, hp.second, true));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "tcp socket");
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Several listeners (one per event loop, same effective uid) share the port; the kernel
    // spreads incoming connections over them by a hash of the 4-tuple.
    if (o.reuseport && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
      return Status::FromErrnoAuto(errno, "tcp setsockopt SO_REUSEPORT " + ep.address);
    if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0)
      return Status::FromErrnoAuto(errno, "tcp bind " + ep.address);
    if (::listen(fd.get(), o.backlog) != 0) return Status::FromErrnoAuto(errno, "tcp listen " + ep.address);
    auto l = std::make_unique<TcpListener>(loop, std::move(fd), o, std::move(on_accept));
    CONDUIT_RETURN_IF_ERROR(l->start());
    return std::unique_ptr<Listener>(std::move(l));
  }

  Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, const Endpoint& ep,
                                              ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(TcpOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto hp, ep.host_port());
    CONDUIT_ASSIGN_OR_RETURN(addrinfo * res, resolve(hp.first, hp.second, false));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "tcp socket");
    apply_socket_options(fd.get(), o);
    const int rc = ::connect(fd.get(), res->ai_addr, res->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) return Status::FromErrnoAuto(errno, "tcp connect " + ep.address);
    auto c = std::make_unique<TcpConnection>(loop, std::move(fd), ConnState::kConnecting, o);
    c->target_ = ep.address;
    c->begin_connect(std::move(on_connect));
    CONDUIT_RETURN_IF_ERROR(c->start(reactor::kWritable));
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

Transport* tcp_transport() {
  static TcpTransport t;
  return &t;
}

}  // namespace conduit::transport
