// The negotiation: a client announces the 4-tuple it will connect from over a fast channel
// to the server's rendezvous, then connects the TCP socket; the server, when the program
// accepts that TCP connection, finds the announce and decides.  See wire.h for the messages
// and README.md ("Negotiation") for why this order keeps a plain peer's stream untouched.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "engine.h"
#include "epoll.h"

namespace conduit::preload {
namespace {

std::string rendezvous_name(uint16_t port) { return "cdpl-" + std::to_string(port); }

std::string with_options(std::string url, const std::string& opts) {
  if (!opts.empty()) url += "?" + opts;
  return url;
}

// "127.0.0.1" or "[::1]": the host part of a URL.
std::string url_host(uint8_t family, const uint8_t addr[16]) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, buf, sizeof buf);
  return family == 4 ? std::string(buf) : "[" + std::string(buf) + "]";
}

uint16_t port_of(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

void set_port(sockaddr_storage* ss, uint16_t port) {
  if (ss->ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(ss)->sin_port = htons(port);
  else reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = htons(port);
}

bool is_wildcard(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  return false;
}

// The address the kernel would send from to reach `dest`: the local address of a UDP socket
// connected to it (no packet is sent).
bool route_source(const sockaddr* dest, socklen_t len, int family, sockaddr_storage* out) {
  const Libc& c = sys();
  int u = c.socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (u < 0) return false;
  bool ok = false;
  if (c.connect(u, dest, len) == 0) {
    socklen_t l = sizeof *out;
    ok = c.getsockname(u, reinterpret_cast<sockaddr*>(out), &l) == 0;
  }
  c.close(u);
  return ok;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

// --- client ----------------------------------------------------------------------------------

bool Engine::is_local_address(const sockaddr* sa) {
  uint8_t family = 0, addr[16];
  uint16_t port = 0;
  if (!normalise_address(sa, &family, addr, &port)) return false;
  if (family == 4 && addr[0] == 127) return true;
  static const uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (family == 6 && std::memcmp(addr, kLoop6, 16) == 0) return true;
  if (!local_addrs_loaded_) {
    local_addrs_loaded_ = true;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        std::vector<uint8_t> a(17);
        uint16_t p = 0;
        if (normalise_address(i->ifa_addr, &a[0], a.data() + 1, &p)) local_addrs_.push_back(a);
      }
      freeifaddrs(list);
    }
  }
  for (const auto& a : local_addrs_)
    if (a[0] == family && std::memcmp(a.data() + 1, addr, 16) == 0) return true;
  return false;
}

bool Engine::start_client(Socket& s, const sockaddr* dest, socklen_t len) {
  const Options& o = options();
  Process& p = process();
  s.role = Role::kClient;
  if (o.mode == Policy::kTcp) return s.reason = "mode=tcp", false;
  if (p.io_uring_seen) return s.reason = "the program uses io_uring, whose submissions would bypass the preload", false;
  if (dest == nullptr || (dest->sa_family != AF_INET && dest->sa_family != AF_INET6) ||
      len < (dest->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)))
    return s.reason = "not an IP destination", false;
  const uint16_t port = port_of(dest);
  if (!o.port_selected(port)) return s.reason = "port " + std::to_string(port) + " is not in ports=", false;
  if (!o.addr_selected(dest)) return s.reason = "the server's address is not in addrs=", false;
  const bool local = is_local_address(dest);
  Mode mode = Mode::kNone;
  switch (o.mode) {
    case Policy::kAuto: mode = local ? Mode::kShm : Mode::kRdma; break;
    case Policy::kShm:
      if (!local) return s.reason = "the server is on another host (mode=shm)", false;
      mode = Mode::kShm;
      break;
    case Policy::kRdma: mode = Mode::kRdma; break;
    case Policy::kTcp: break;
  }
  // The announce names the 4-tuple before connect(2), so bind the local end now (to the
  // address the kernel would choose anyway) unless the program did.
  const int fd = s.fds.front();
  const Libc& c = sys();
  sockaddr_storage local_sa{};
  socklen_t ll = sizeof local_sa;
  if (c.getsockname(fd, reinterpret_cast<sockaddr*>(&local_sa), &ll) != 0)
    return s.reason = "getsockname: " + errno_text(errno), false;
  sockaddr_storage src{};
  if (!route_source(dest, len, s.family, &src)) return s.reason = "no route to the server's address", false;
  if (port_of(reinterpret_cast<sockaddr*>(&local_sa)) == 0) {
    set_port(&src, 0);
    if (c.bind(fd, reinterpret_cast<sockaddr*>(&src), src.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)) != 0)
      return s.reason = "bind before announce: " + errno_text(errno), false;
    ll = sizeof local_sa;
    if (c.getsockname(fd, reinterpret_cast<sockaddr*>(&local_sa), &ll) != 0)
      return s.reason = "getsockname: " + errno_text(errno), false;
  } else if (is_wildcard(reinterpret_cast<sockaddr*>(&local_sa))) {
    const uint16_t bound_port = port_of(reinterpret_cast<sockaddr*>(&local_sa));
    local_sa = src;
    set_port(&local_sa, bound_port);
  }
  s.tuple = FourTuple::from(reinterpret_cast<sockaddr*>(&local_sa), dest);
  std::memcpy(&s.dest, dest, len);
  s.dest_len = len;

  const std::string url =
      mode == Mode::kShm
          ? with_options("shm://" + rendezvous_name(port), o.shm_options)
          : with_options("rdma://" + url_host(s.tuple.family, s.tuple.server) + ":" + std::to_string(port), o.rdma_options);
  Socket* sp = &s;
  auto conn = transport::connect(*loop_, url, [this, sp](transport::Connection&, Status st) { fast_connected(*sp, st); });
  if (!conn.ok()) return s.reason = std::string(mode_name(mode)) + ": " + conn.status().to_string(), false;
  s.conn = std::move(conn).value();
  if (mode == Mode::kRdma) count_rdma(+1);
  s.mode = mode;
  const Phase old = s.phase;
  s.phase = Phase::kFastConnecting;
  count_negotiation(+1);
  s.deadline = loop_->run_after(o.timeout_ms * 1'000'000, [this, sp] { on_deadline(*sp); });
  phase_changed(s, old);
  return true;
}

void Engine::fast_connected(Socket& s, Status st) {
  ++handler_runs_;
  if (s.phase != Phase::kFastConnecting) return;
  if (!st.ok()) {
    const uint16_t port = s.tuple.server_port;
    if (s.mode == Mode::kShm && st.code() == Code::kNotFound)
      return fallback(s, "no preloaded listener for port " + std::to_string(port) + " on this host for this user");
    if (s.mode == Mode::kShm && st.code() == Code::kUnavailable)
      return fallback(s, "the rendezvous for port " + std::to_string(port) + " is stale (its process is gone)");
    return fallback(s, std::string(mode_name(s.mode)) + " rendezvous: " + st.to_string());
  }
  Msg m;
  m.type = MsgType::kAnnounce;
  m.tuple = s.tuple;
  m.pid = static_cast<uint32_t>(process().pid);
  if (!send_msg(s, m)) return fallback(s, "could not send the announce");
  s.phase = Phase::kAnnouncing;
  Socket* sp = &s;
  s.conn->set_read_handler([this, sp](transport::Connection&) { on_client_readable(*sp); });
}

bool Engine::send_msg(Socket& s, const Msg& m) {
  uint8_t buf[kWireSize];
  encode(m, buf);
  // A fresh channel always has room for 64 bytes; anything less is a failure (and a partial
  // message followed by a close is read as a failure by the peer too, so both end on TCP).
  Result<size_t> r = s.conn->write(std::span<const uint8_t>(buf, kWireSize));
  return r.ok() && *r == kWireSize;
}

// Reads one whole message into s.msg_in; false while it is incomplete.  Never reads past it:
// application bytes may follow a COMMIT.
static Result<bool> read_msg(transport::Connection& c, uint8_t* buf, size_t* len) {
  while (*len < kWireSize) {
    Result<size_t> r = c.read(std::span<uint8_t>(buf + *len, kWireSize - *len));
    if (!r.ok()) {
      if (r.status().would_block()) return false;
      return r.status();
    }
    if (*r == 0) return Status(Code::kClosed, "the peer closed the channel");
    *len += *r;
  }
  *len = 0;
  return true;
}

void Engine::on_client_readable(Socket& s) {
  ++handler_runs_;
  if (!negotiating(s.phase) || !s.conn) return;
  Result<bool> got = read_msg(*s.conn, s.msg_in, &s.msg_in_len);
  if (!got.ok()) {
    if (got.status().code() == Code::kClosed) return fallback(s, "the server closed the channel before deciding");
    return fallback(s, "channel failed: " + got.status().to_string());
  }
  if (!*got) return;
  Result<Msg> m = decode(s.msg_in);
  if (!m.ok()) return fallback(s, m.status().to_string());
  if (m->type == MsgType::kReject) return fallback(s, "the server declined: " + std::string(reject_name(m->reason)));
  if (m->tuple != s.tuple) return fallback(s, "the server answered for another connection");
  switch (s.phase) {
    case Phase::kAnnouncing:
      if (m->type != MsgType::kAck) break;
      s.phase = Phase::kTcpConnecting;
      issue_tcp_connect(s);
      return;
    case Phase::kTcpConnecting:
      // The server accepted before our connect(2) completion reached the loop: it is up.
      if (m->type != MsgType::kAccept) break;
      on_tcp_connected(s);
      if (s.phase != Phase::kAwaitDecision) return;
      [[fallthrough]];
    case Phase::kAwaitDecision: {
      if (m->type != MsgType::kAccept) break;
      // The placeholder first: once COMMIT is sent there is no way back to TCP.
      const Libc& c = sys();
      s.placeholder = c.socket(s.family, SOCK_STREAM | SOCK_CLOEXEC | (s.nonblock ? SOCK_NONBLOCK : 0), 0);
      if (s.placeholder < 0) return fallback(s, "no descriptor left for the placeholder socket");
      Msg commit;
      commit.type = MsgType::kCommit;
      commit.tuple = s.tuple;
      commit.pid = static_cast<uint32_t>(process().pid);
      if (!send_msg(s, commit)) return fallback(s, "could not send the commit");
      go_fast(s);
      return;
    }
    default: break;
  }
  fallback(s, "unexpected " + std::string(msg_type_name(m->type)) + " while " + std::string(phase_name(s.phase)));
}

void Engine::issue_tcp_connect(Socket& s) {
  const Libc& c = sys();
  const int fd = s.fds.front();
  if (!s.nonblock && !s.cleared_nonblock) {
    const int fl = c.fcntl(fd, F_GETFL);
    if (fl >= 0 && c.fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0) s.cleared_nonblock = true;
  }
  const int rc = c.connect(fd, reinterpret_cast<sockaddr*>(&s.dest), s.dest_len);
  if (rc == 0) {
    on_tcp_connected(s);
    return;
  }
  if (errno == EINPROGRESS || errno == EINTR) {
    if (s.phase == Phase::kTcpConnecting || s.cleared_nonblock) {
      s.watch.fd = fd;
      if (Status st = loop_->add(fd, reactor::kWritable, &s.watch); !st.ok())
        CONDUIT_LOG(kWarn) << "conduit-preload: watching connect(2): " << st.to_string();
    }
    return;
  }
  const int err = errno;
  s.so_error = err;
  if (s.phase == Phase::kTcpConnecting) return fallback(s, "connect(2) failed: " + errno_text(err));
  s.tcp_connect_pending = false;
  if (s.cleared_nonblock) {
    const int fl = c.fcntl(fd, F_GETFL);
    if (fl >= 0) c.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    s.cleared_nonblock = false;
  }
}

void TcpWatch::on_events(uint32_t) {
  if (Engine* e = process().engine) e->on_tcp_connected(*s);
}

void Engine::on_tcp_connected(Socket& s) {
  ++handler_runs_;
  const Libc& c = sys();
  const int fd = s.fds.front();
  if (s.watch.fd >= 0 && loop_->watching(s.watch.fd)) (void)loop_->remove(s.watch.fd);
  s.watch.fd = -1;
  int err = 0;
  socklen_t el = sizeof err;
  if (c.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
  if (s.phase == Phase::kTcpConnecting) {
    if (err != 0) {
      s.so_error = err;
      return fallback(s, "connect(2) failed: " + errno_text(err));
    }
    s.phase = Phase::kAwaitDecision;
    return;
  }
  // A fallback's own connect(2) finished: the program's blocking mode comes back.
  if (s.phase == Phase::kTcp) {
    s.so_error = err;
    s.tcp_connect_pending = false;
    if (s.cleared_nonblock) {
      const int fl = c.fcntl(fd, F_GETFL);
      if (fl >= 0) c.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
      s.cleared_nonblock = false;
    }
  }
}

void Engine::on_deadline(Socket& s) {
  ++handler_runs_;
  s.deadline = 0;
  if (!negotiating(s.phase)) return;
  fallback(s, "no decision from the server within " + std::to_string(options().timeout_ms) + " ms");
}

// Ends a negotiation on plain TCP.  Before the TCP connect was issued (the client never got
// as far), it is issued now; after it, the socket is used as it is.
void Engine::fallback(Socket& s, std::string reason) {
  const Phase old = s.phase;
  if (!negotiating(old)) return;
  if (s.deadline != 0) loop_->cancel(s.deadline);
  s.deadline = 0;
  count_negotiation(-1);
  retire(std::move(s.conn));
  if (s.placeholder >= 0) sys().close(s.placeholder);
  s.placeholder = -1;
  s.phase = Phase::kTcp;
  s.reason = std::move(reason);
  ++process().total_fallback;
  const Libc& c = sys();
  const int fd = s.fds.front();
  if (old == Phase::kFastConnecting || old == Phase::kAnnouncing) {
    issue_tcp_connect(s);  // as kTcp: watched only if the program's blocking mode must come back
  } else if (old != Phase::kTcpConnecting && s.cleared_nonblock) {
    const int fl = c.fcntl(fd, F_GETFL);
    if (fl >= 0) c.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    s.cleared_nonblock = false;
  }
  // A connect(2) still in progress is watched only to give a blocking socket its mode back
  // (on_tcp_connected); a non-blocking program watches it itself, through the kernel.
  if (s.watch.fd >= 0 && !s.cleared_nonblock && loop_->watching(s.watch.fd)) {
    (void)loop_->remove(s.watch.fd);
    s.watch.fd = -1;
  }
  s.tcp_connect_pending = s.watch.fd >= 0;
  phase_changed(s, old);
  note_decision(s);
}

// Both ends, once COMMIT is sent (client) or read (server).  The program's fd numbers are
// re-pointed at the placeholder -- an unconnected TCP socket -- and the TCP connection is
// closed: from now on a call the preload does not see (a child after exec, an io_uring
// submission) gets ENOTCONN instead of reading a stream nobody writes.
bool Engine::go_fast(Socket& s) {
  const Libc& c = sys();
  const int fd0 = s.fds.front();
  s.local_len = sizeof s.local;
  c.getsockname(fd0, reinterpret_cast<sockaddr*>(&s.local), &s.local_len);
  s.peer_len = sizeof s.peer;
  c.getpeername(fd0, reinterpret_cast<sockaddr*>(&s.peer), &s.peer_len);
  for (int fd : s.fds) {
    const int fdflags = c.fcntl(fd, F_GETFD);
    if (c.dup3(s.placeholder, fd, (fdflags >= 0 && (fdflags & FD_CLOEXEC)) ? O_CLOEXEC : 0) < 0)
      CONDUIT_LOG(kWarn) << "conduit-preload: dup3(placeholder, " << fd << "): " << errno_text(errno);
  }
  c.close(s.placeholder);
  s.placeholder = -1;
  if (s.watch.fd >= 0 && loop_->watching(s.watch.fd)) (void)loop_->remove(s.watch.fd);
  s.watch.fd = -1;
  if (s.deadline != 0) loop_->cancel(s.deadline);
  s.deadline = 0;
  count_negotiation(-1);
  const Phase old = s.phase;
  s.phase = Phase::kFast;
  s.cleared_nonblock = false;
  s.reason.clear();
  s.tx_ready = true;
  ++s.tx_gen;
  s.rx_ready = false;
  s.conn->set_read_handler(nullptr);
  want_rx(s);
  phase_changed(s, old);
  note_decision(s);
  // shutdown(SHUT_WR) maps onto the transport's half-close.  rdma:// has it only when both
  // ends negotiated it (its feature bit 3; a Conduit peer with features=none or without the
  // bit does not): say once per process, here where it is known, that such a connection's
  // peer reads EOF only at close (docs/PRELOAD.md).
  if (!s.conn->caps().half_close) {
    static bool warned = false;
    const int fd = s.fds.empty() ? -1 : s.fds.front();
    const std::string what = "conduit-preload: fd " + std::to_string(fd) + " (" +
                             std::string(s.conn->caps().transport) +
                             "): the peer did not negotiate half-close; shutdown(SHUT_WR) will give it EOF only at close";
    if (!warned)
      CONDUIT_LOG(kWarn) << what;
    else
      CONDUIT_LOG(kDebug) << what;
    warned = true;
  }
  return true;
}

// --- server ----------------------------------------------------------------------------------

std::shared_ptr<Rendezvous> Engine::rendezvous_for(Socket& l) {
  if (auto it = rendezvous_.find(l.port); it != rendezvous_.end())
    if (auto r = it->second.lock()) return r;
  const Options& o = options();
  auto r = std::make_shared<Rendezvous>();
  r->port = l.port;
  std::string why;
  const uint16_t port = l.port;
  if (o.mode == Policy::kAuto || o.mode == Policy::kShm) {
    auto lis = transport::listen(*loop_, with_options("shm://" + rendezvous_name(port), o.shm_options),
                                 [this, port](std::unique_ptr<transport::Connection> c) {
                                   on_rendezvous_accept(port, Mode::kShm, std::move(c));
                                 });
    if (lis.ok()) r->shm = std::move(lis).value();
    else why += "shm: " + lis.status().to_string();
  }
  if (o.mode == Policy::kAuto || o.mode == Policy::kRdma) {
    uint8_t family = 4, addr[16] = {};
    uint16_t p = 0;
    const sockaddr* b = reinterpret_cast<const sockaddr*>(&l.bound);
    std::string host = "0.0.0.0";
    if (!is_wildcard(b) && normalise_address(b, &family, addr, &p)) host = url_host(family, addr);
    auto lis = transport::listen(*loop_, with_options("rdma://" + host + ":" + std::to_string(port), o.rdma_options),
                                 [this, port](std::unique_ptr<transport::Connection> c) {
                                   on_rendezvous_accept(port, Mode::kRdma, std::move(c));
                                 });
    if (lis.ok()) r->rdma = std::move(lis).value();
    else why += std::string(why.empty() ? "" : "; ") + "rdma: " + lis.status().to_string();
  }
  r->offers = r->shm && r->rdma ? "shm,rdma" : r->shm ? "shm" : r->rdma ? "rdma" : "";
  if (!r->shm && !r->rdma) {
    l.reason = "no rendezvous (" + why + ")";
    return nullptr;
  }
  if (!why.empty()) CONDUIT_LOG(kInfo) << "conduit-preload: port " << port << " offers " << r->offers << " only: " << why;
  rendezvous_[port] = r;
  return r;
}

void Engine::attach_listener(Socket& l) {
  const Options& o = options();
  l.role = Role::kListener;
  const Libc& c = sys();
  socklen_t bl = sizeof l.bound;
  if (c.getsockname(l.fds.front(), reinterpret_cast<sockaddr*>(&l.bound), &bl) != 0) return;
  l.port = port_of(reinterpret_cast<sockaddr*>(&l.bound));
  if (o.mode == Policy::kTcp) return void(l.reason = "mode=tcp");
  if (!o.port_selected(l.port)) return void(l.reason = "port " + std::to_string(l.port) + " is not in ports=");
  auto r = rendezvous_for(l);
  if (!r) return;
  l.rendezvous = std::move(r);
  ++l.rendezvous->users;
  l.reason = "offers " + l.rendezvous->offers;
  const Phase old = l.phase;
  phase_changed(l, old);  // the tag now asks for the engine: waits on it include the backend fd
  status_changed();
}

bool Engine::accepts_address(uint16_t port, const FourTuple& t) {
  for (const auto& w : process().sockets) {
    std::shared_ptr<Socket> l = w.lock();
    if (!l || l->phase != Phase::kListening || !l->rendezvous || l->port != port) continue;
    const sockaddr* b = reinterpret_cast<const sockaddr*>(&l->bound);
    if (is_wildcard(b)) return true;
    uint8_t f = 0, a[16];
    uint16_t p = 0;
    if (normalise_address(b, &f, a, &p) && f == t.family && std::memcmp(a, t.server, 16) == 0) return true;
  }
  return false;
}

void Engine::on_rendezvous_accept(uint16_t port, Mode mode, std::unique_ptr<transport::Connection> c) {
  ++handler_runs_;
  auto a = std::make_unique<Announce>();
  a->id = next_announce_id_++;
  a->mode = mode;
  a->port = port;
  a->conn = std::move(c);
  if (mode == Mode::kRdma) count_rdma(+1);
  const uint64_t id = a->id;
  a->conn->set_read_handler([this, id](transport::Connection&) {
    auto it = announces_.find(id);
    if (it != announces_.end()) on_announce_readable(*it->second);
  });
  // A client that neither connects nor closes does not hold the channel forever.
  a->expiry = loop_->run_after((2 * options().timeout_ms + 1000) * 1'000'000, [this, id] {
    auto it = announces_.find(id);
    if (it != announces_.end()) it->second->expiry = 0;
    drop_announce(id);
  });
  announces_[id] = std::move(a);
}

void Engine::drop_announce(uint64_t id) {
  auto it = announces_.find(id);
  if (it == announces_.end()) return;
  Announce& a = *it->second;
  if (a.registered) registered_.erase(a.tuple);
  if (a.expiry != 0) loop_->cancel(a.expiry);
  retire(std::move(a.conn));
  announces_.erase(it);
}

void Engine::on_announce_readable(Announce& a) {
  ++handler_runs_;
  const uint64_t id = a.id;
  if (a.registered) {
    // Nothing may come before our decision: only the close of a client that gave up.
    uint8_t b;
    Result<size_t> r = a.conn->read(std::span<uint8_t>(&b, 1));
    if (!r.ok() && r.status().would_block()) return;
    return drop_announce(id);
  }
  Result<bool> got = read_msg(*a.conn, a.in, &a.in_len);
  if (!got.ok()) return drop_announce(id);
  if (!*got) return;
  Result<Msg> m = decode(a.in);
  if (!m.ok() || m->type != MsgType::kAnnounce) {
    CONDUIT_LOG(kInfo) << "conduit-preload: rendezvous " << a.port << ": "
                       << (m.ok() ? "expected an announce" : m.status().to_string());
    return drop_announce(id);
  }
  Reject why = Reject::kNone;
  sockaddr_storage client{};
  {
    // The client's address as a sockaddr, for the rules.
    if (m->tuple.family == 4) {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&client);
      s4->sin_family = AF_INET;
      std::memcpy(&s4->sin_addr, m->tuple.client, 4);
    } else {
      auto* s6 = reinterpret_cast<sockaddr_in6*>(&client);
      s6->sin6_family = AF_INET6;
      std::memcpy(&s6->sin6_addr, m->tuple.client, 16);
    }
  }
  if (m->tuple.server_port != a.port || !accepts_address(a.port, m->tuple)) {
    why = Reject::kNotListening;
  } else if (a.mode == Mode::kRdma &&
             a.conn->peer_address().rfind(url_host(m->tuple.family, m->tuple.client) + ":", 0) != 0) {
    // Over rdma the channel's source address is the peer's identity, as a TCP source address
    // is: an announce for another address could steal that address' connection.
    why = Reject::kAddressMismatch;
  } else if (!options().addr_selected(reinterpret_cast<sockaddr*>(&client))) {
    why = Reject::kPolicy;
  } else if (registered_.count(m->tuple) != 0) {
    why = Reject::kDuplicate;
  }
  Msg reply;
  reply.tuple = m->tuple;
  reply.pid = static_cast<uint32_t>(process().pid);
  uint8_t buf[kWireSize];
  if (why != Reject::kNone) {
    reply.type = MsgType::kReject;
    reply.reason = why;
    encode(reply, buf);
    (void)a.conn->write(std::span<const uint8_t>(buf, kWireSize));  // delivered before the close
    return drop_announce(id);
  }
  a.tuple = m->tuple;
  a.pid = m->pid;
  reply.type = MsgType::kAck;
  encode(reply, buf);
  Result<size_t> w = a.conn->write(std::span<const uint8_t>(buf, kWireSize));
  if (!w.ok() || *w != kWireSize) return drop_announce(id);
  a.registered = true;
  registered_[a.tuple] = id;
}

void Engine::classify_accepted(Socket& l, Socket& s) {
  s.role = Role::kServer;
  s.port = l.port;
  const Libc& c = sys();
  const int fd = s.fds.front();
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  c.getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll);
  c.getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl);
  s.tuple = FourTuple::from(reinterpret_cast<sockaddr*>(&peer), reinterpret_cast<sockaddr*>(&local));
  const Phase old = s.phase;
  auto decide_tcp = [&](std::string why) {
    s.phase = Phase::kTcp;
    s.reason = std::move(why);
    phase_changed(s, old);
    note_decision(s);
  };
  if (!l.rendezvous) return decide_tcp("listener: " + l.reason);
  auto it = registered_.find(s.tuple);
  if (it == registered_.end())
    return decide_tcp("the client did not announce itself (no preload there, its rules, or another host without rdma)");
  const uint64_t id = it->second;
  Announce& a = *announces_.at(id);
  registered_.erase(it);
  a.registered = false;
  s.placeholder = c.socket(s.family, SOCK_STREAM | SOCK_CLOEXEC | (s.nonblock ? SOCK_NONBLOCK : 0), 0);
  Msg reply;
  reply.tuple = s.tuple;
  reply.pid = static_cast<uint32_t>(process().pid);
  if (s.placeholder < 0) {
    reply.type = MsgType::kReject;
    reply.reason = Reject::kInternal;
    uint8_t buf[kWireSize];
    encode(reply, buf);
    (void)a.conn->write(std::span<const uint8_t>(buf, kWireSize));
    drop_announce(id);
    return decide_tcp("no descriptor left for the placeholder socket");
  }
  s.conn = std::move(a.conn);
  s.mode = a.mode;
  drop_announce(id);  // its channel now belongs to s
  reply.type = MsgType::kAccept;
  if (!send_msg(s, reply)) {
    retire(std::move(s.conn));
    c.close(s.placeholder);
    s.placeholder = -1;
    return decide_tcp("could not send the decision");
  }
  s.phase = Phase::kAwaitCommit;
  count_negotiation(+1);
  Socket* sp = &s;
  s.conn->set_read_handler([this, sp](transport::Connection&) { on_server_readable(*sp); });
  phase_changed(s, old);
}

void Engine::on_server_readable(Socket& s) {
  ++handler_runs_;
  if (s.phase != Phase::kAwaitCommit || !s.conn) return;
  Result<bool> got = read_msg(*s.conn, s.msg_in, &s.msg_in_len);
  if (!got.ok()) {
    if (got.status().code() == Code::kClosed)
      return fallback(s, "the client gave up waiting for the decision and stays on TCP");
    return fallback(s, "channel failed: " + got.status().to_string());
  }
  if (!*got) return;
  Result<Msg> m = decode(s.msg_in);
  if (!m.ok()) return fallback(s, m.status().to_string());
  if (m->type != MsgType::kCommit || m->tuple != s.tuple)
    return fallback(s, "expected the client's commit, got " + std::string(msg_type_name(m->type)));
  go_fast(s);
}

}  // namespace conduit::preload
