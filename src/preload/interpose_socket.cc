// The socket-level calls: socket, listen, accept, connect, close, dup, fcntl, ioctl,
// getsockopt/setsockopt, getsockname/getpeername, shutdown.  Every one forwards to libc at
// once unless its fd is ours (one TLS load and one tag load).
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "conduit/base/log.h"
#include "engine.h"
#include "epoll.h"
#include "fast_io.h"
#include "process.h"
#include "wait.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace conduit::preload {
namespace {

bool tracked(int fd) { return !t_in_preload && (fd_tag(fd) & kTagTracked) != 0; }

bool is_tcp(int domain, int type, int protocol) {
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  return (domain == AF_INET || domain == AF_INET6) && base == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP);
}

// A TCP socket the preload did not see created (inherited across exec, or made by a raw
// syscall): adopt it, so that its connect or listen goes through the rules.
std::shared_ptr<Socket> adopt_socket(int fd) {
  if (fd < 0 || fd >= kMaxTrackedFd) return nullptr;
  int domain = 0, type = 0, proto = 0;
  socklen_t l = sizeof domain;
  const Libc& c = sys();
  if (c.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0) return nullptr;
  l = sizeof type;
  if (c.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0) return nullptr;
  l = sizeof proto;
  if (c.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0) return nullptr;
  if (!is_tcp(domain, type, proto)) return nullptr;
  auto s = new_socket(fd, domain);
  const int fl = c.fcntl(fd, F_GETFL);
  s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
  return s;
}

void copy_addr(const sockaddr_storage& from, socklen_t from_len, sockaddr* to, socklen_t* to_len) {
  if (to == nullptr || to_len == nullptr) return;
  std::memcpy(to, &from, std::min(*to_len, from_len));
  *to_len = from_len;
}

// Another name for fd `old` (dup and friends).
void name_again(int old, int fresh) {
  if (fresh < 0 || fresh >= kMaxTrackedFd) return;
  if (find_fd(fresh) != nullptr) forget_fd(fresh);
  FdObject* o = find_fd(old);
  if (o == nullptr) return;
  if (o->sock) {
    name_socket(fresh, o->sock);
  } else if (o->epoll) {
    std::shared_ptr<Epoll> e = o->epoll;
    process().fds[fresh] = FdObject{nullptr, e};
    e->names.push_back(fresh);
    set_tag(fresh, fd_tag(old));
  }
}

int finish_blocking_connect(EngineLock& lk, const std::shared_ptr<Socket>& s) {
  const int w = wait_socket(lk, s, 0, s->sndtimeo_ms);
  if (w < 0) return -1;  // EINTR: the connection goes on in the background, as the kernel's does
  if (w == 0) return errno = EINPROGRESS, -1;
  if (s->closed()) return errno = EBADF, -1;
  if (s->phase == Phase::kTcp && s->so_error != 0) {
    errno = s->so_error;
    s->so_error = 0;
    return -1;
  }
  return 0;
}

int dup_common(int old, int fresh, int flags, bool is_dup3) {
  const Libc& c = sys();
  if (!tracked(old) && !tracked(fresh)) return is_dup3 ? c.dup3(old, fresh, flags) : c.dup2(old, fresh);
  EngineLock lk;
  const int r = is_dup3 ? c.dup3(old, fresh, flags) : c.dup2(old, fresh);
  if (r < 0 || old == fresh) return r;
  if (find_fd(fresh) != nullptr) forget_fd(fresh);  // the kernel closed what `fresh` was
  name_again(old, fresh);
  return r;
}

int fcntl_common(int fd, int cmd, void* arg, bool is64) {
  const Libc& c = sys();
  auto real = [&]() { return is64 ? c.fcntl64(fd, cmd, arg) : c.fcntl(fd, cmd, arg); };
  if (!tracked(fd)) return real();
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      EngineLock lk;
      const int r = real();
      if (r >= 0) name_again(fd, r);
      return r;
    }
    case F_SETFL: {
      EngineLock lk;
      std::shared_ptr<Socket> s = find_socket(fd);
      const long fl = reinterpret_cast<long>(arg);
      if (s && s->cleared_nonblock) {  // our own connect(2) keeps it non-blocking until done
        const int r = c.fcntl(fd, F_SETFL, static_cast<int>(fl | O_NONBLOCK));
        if (r == 0) {
          s->nonblock = (fl & O_NONBLOCK) != 0;
          if (s->nonblock) s->cleared_nonblock = false;
        }
        return r;
      }
      const int r = real();
      if (r == 0 && s) s->nonblock = (fl & O_NONBLOCK) != 0;
      return r;
    }
    case F_GETFL: {
      EngineLock lk;
      std::shared_ptr<Socket> s = find_socket(fd);
      int r = real();
      if (r >= 0 && s && s->cleared_nonblock && !s->nonblock) r &= ~O_NONBLOCK;
      return r;
    }
    default: return real();
  }
}

}  // namespace
}  // namespace conduit::preload

using namespace conduit::preload;

CONDUIT_EXPORT int socket(int domain, int type, int protocol) noexcept {
  const int fd = sys().socket(domain, type, protocol);
  if (fd < 0 || t_in_preload || fd >= kMaxTrackedFd || !is_tcp(domain, type, protocol)) return fd;
  EngineLock lk;
  if (find_fd(fd) != nullptr) forget_fd(fd);  // a number whose close we did not see
  auto s = new_socket(fd, domain);
  s->nonblock = (type & SOCK_NONBLOCK) != 0;
  return fd;
}

// A socket already bound to its port gets its rendezvous before the kernel listens, so a
// client that finds the TCP port open also finds the rendezvous: otherwise a client that
// connects the moment the server starts could look in between and stay on TCP for good.
// (Bound to port 0 or not at all, the port is known only after listen(): attached then.)
CONDUIT_EXPORT int listen(int fd, int backlog) noexcept {
  const Libc& c = sys();
  if (t_in_preload) return c.listen(fd, backlog);
  const int err = errno;
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (!s && !(fd_tag(fd) & kTagTracked)) s = adopt_socket(fd);
  if (!s || s->phase != Phase::kSocket) return c.listen(fd, backlog);
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  const bool bound = c.getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl) == 0 &&
                     (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
                     reinterpret_cast<sockaddr_in*>(&ss)->sin_port != 0;  // same offset in sockaddr_in6
  Engine* e = bound ? Engine::get() : nullptr;
  if (e != nullptr) e->attach_listener(*s);
  if (c.listen(fd, backlog) != 0) {
    const int lerr = errno;
    if (e != nullptr) e->detach_listener(*s);
    errno = lerr;
    return -1;
  }
  s->phase = Phase::kListening;
  s->role = Role::kListener;
  if (e == nullptr && (e = Engine::get()) != nullptr) e->attach_listener(*s);
  phase_changed(*s, Phase::kSocket);
  errno = err;
  return 0;
}

static int accept_common(int fd, sockaddr* addr, socklen_t* len, int flags) {
  const Libc& c = sys();
  if (t_in_preload) return c.accept4(fd, addr, len, flags);
  {
    EngineLock lk;
    std::shared_ptr<Socket> l = find_socket(fd);
    if (!l && !(fd_tag(fd) & kTagTracked)) {
      int acc = 0;
      socklen_t al = sizeof acc;
      if (c.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc != 0) {
        l = adopt_socket(fd);  // a listener made before exec (socket activation, say)
        if (l) {
          l->phase = Phase::kListening;
          if (Engine* e = Engine::get()) e->attach_listener(*l);
          phase_changed(*l, Phase::kSocket);
        }
      }
    }
    if (!l || l->phase != Phase::kListening) {
      lk.unlock();
      return c.accept4(fd, addr, len, flags);
    }
    // A blocking listener: wait here, so the engine (and this listener's rendezvous) keeps
    // moving while nobody connects.  Another thread may take the connection first; then the
    // accept below blocks in the kernel, as it would without the preload.
    if (!l->nonblock && wait_kernel_fd(lk, fd, POLLIN, l->rcvtimeo_ms) < 0) return -1;
  }
  const int nfd = c.accept4(fd, addr, len, flags);
  if (nfd < 0 || nfd >= kMaxTrackedFd) return nfd;
  const int err = errno;
  EngineLock lk;
  if (find_fd(nfd) != nullptr) forget_fd(nfd);
  std::shared_ptr<Socket> l = find_socket(fd);
  auto s = new_socket(nfd, l ? l->family : AF_INET);
  s->nonblock = (flags & SOCK_NONBLOCK) != 0;
  if (l && l->phase == Phase::kListening) {
    if (Engine* e = Engine::get()) {
      e->classify_accepted(*l, *s);
    } else {
      s->phase = Phase::kTcp;
      s->reason = "no event loop";
      note_decision(*s);
    }
  } else {
    s->phase = Phase::kTcp;
    s->role = Role::kServer;
    s->reason = "its listener is not ours";
    note_decision(*s);
  }
  errno = err;
  return nfd;
}

CONDUIT_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) { return accept_common(fd, addr, len, 0); }
CONDUIT_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return accept_common(fd, addr, len, flags);
}

CONDUIT_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
  const Libc& c = sys();
  if (t_in_preload) return c.connect(fd, addr, len);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (!s && !(fd_tag(fd) & kTagTracked)) {
    int acc = 1;
    socklen_t al = sizeof acc;
    if (c.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc == 0) {
      sockaddr_storage peer{};
      socklen_t pl = sizeof peer;
      if (c.getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 && errno == ENOTCONN) s = adopt_socket(fd);
    }
  }
  if (!s) {
    lk.unlock();
    return c.connect(fd, addr, len);
  }
  switch (s->phase) {
    case Phase::kSocket: {
      Engine* e = Engine::get();
      if (e == nullptr || !e->start_client(*s, addr, len)) {
        if (e == nullptr) s->reason = "no event loop";
        s->role = Role::kClient;
        s->phase = Phase::kTcp;
        phase_changed(*s, Phase::kSocket);
        note_decision(*s);
        lk.unlock();
        return c.connect(fd, addr, len);
      }
      if (s->nonblock) return errno = EINPROGRESS, -1;
      return finish_blocking_connect(lk, s);
    }
    case Phase::kFastConnecting:
    case Phase::kAnnouncing:
    case Phase::kTcpConnecting:
    case Phase::kAwaitDecision:
      if (s->nonblock) return errno = EALREADY, -1;
      return finish_blocking_connect(lk, s);
    case Phase::kFast:
    case Phase::kForked: return errno = EISCONN, -1;
    case Phase::kTcp:
      if (s->so_error != 0) {  // the failure of a connect(2) the engine made for it
        errno = s->so_error;
        s->so_error = 0;
        return -1;
      }
      [[fallthrough]];
    default: lk.unlock(); return c.connect(fd, addr, len);
  }
}

CONDUIT_EXPORT int close(int fd) {
  const Libc& c = sys();
  if (!tracked(fd)) return c.close(fd);
  EngineLock lk;
  forget_fd(fd);
  return c.close(fd);
}

CONDUIT_EXPORT int dup(int fd) noexcept {
  const Libc& c = sys();
  if (!tracked(fd)) return c.dup(fd);
  EngineLock lk;
  const int r = c.dup(fd);
  if (r >= 0) name_again(fd, r);
  return r;
}
CONDUIT_EXPORT int dup2(int old, int fresh) noexcept { return dup_common(old, fresh, 0, false); }
CONDUIT_EXPORT int dup3(int old, int fresh, int flags) noexcept { return dup_common(old, fresh, flags, true); }

CONDUIT_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_common(fd, cmd, arg, false);
}
CONDUIT_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_common(fd, cmd, arg, true);
}

CONDUIT_EXPORT int ioctl(int fd, unsigned long req, ...) noexcept {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  const Libc& c = sys();
  if (!tracked(fd)) return c.ioctl(fd, req, arg);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (s && req == FIONBIO && arg != nullptr) {
    const int r = c.ioctl(fd, req, arg);
    if (r == 0) s->nonblock = *static_cast<int*>(arg) != 0;
    return r;
  }
  if (!s || !(fd_tag(fd) & kTagData)) return c.ioctl(fd, req, arg);
  switch (req) {
    case FIONREAD:  // == SIOCINQ
      if (s->phase == Phase::kForked) return errno = ENOTCONN, -1;
      *static_cast<int*>(arg) = s->phase == Phase::kFast ? readable_bytes(*s) : 0;
      return 0;
    case SIOCOUTQ:
    case SIOCOUTQNSD:
      // Bytes a fast channel accepted are in the peer's receive ring (shm) or on their way
      // in registered memory (rdma): nothing waits in a send queue of ours.
      if (s->phase == Phase::kForked) return errno = ENOTCONN, -1;
      *static_cast<int*>(arg) = 0;
      return 0;
    default: return c.ioctl(fd, req, arg);
  }
}

CONDUIT_EXPORT int shutdown(int fd, int how) noexcept {
  const Libc& c = sys();
  if (!tracked(fd) || !(fd_tag(fd) & kTagData)) return c.shutdown(fd, how);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (!s) return c.shutdown(fd, how);
  // Mid-negotiation the outcome decides where the FIN goes: wait for it (the decision is
  // bounded by timeout_ms, and a server's by its client's answer).
  while (negotiating(s->phase))
    if (wait_socket(lk, s, 0, -1) < 0) return -1;
  if (s->phase == Phase::kTcp) {
    lk.unlock();
    return c.shutdown(fd, how);
  }
  int err = 0;
  const int r = sock_shutdown(*s, how, &err);
  if (r != 0) errno = err;
  return r;
}

CONDUIT_EXPORT int getsockopt(int fd, int level, int name, void* val, socklen_t* len) noexcept {
  const Libc& c = sys();
  if (!tracked(fd)) return c.getsockopt(fd, level, name, val, len);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (s && level == SOL_SOCKET && name == SO_ERROR && val != nullptr && len != nullptr && *len >= sizeof(int)) {
    if (s->so_error != 0) {
      *static_cast<int*>(val) = s->so_error;
      s->so_error = 0;
      *len = sizeof(int);
      return 0;
    }
    if (user_ready_phase(s->phase)) {
      *static_cast<int*>(val) = 0;
      *len = sizeof(int);
      return 0;
    }
  }
  return c.getsockopt(fd, level, name, val, len);
}

CONDUIT_EXPORT int setsockopt(int fd, int level, int name, const void* val, socklen_t len) noexcept {
  const Libc& c = sys();
  if (!tracked(fd)) return c.setsockopt(fd, level, name, val, len);
  EngineLock lk;
  const int r = c.setsockopt(fd, level, name, val, len);
  std::shared_ptr<Socket> s = find_socket(fd);
  if (r == 0 && s && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(timeval)) {
    const auto* tv = static_cast<const timeval*>(val);
    const int64_t ms = (tv->tv_sec == 0 && tv->tv_usec == 0) ? -1 : timeout_from(tv);
    (name == SO_RCVTIMEO ? s->rcvtimeo_ms : s->sndtimeo_ms) = ms;
  }
  return r;
}

CONDUIT_EXPORT int getsockname(int fd, sockaddr* addr, socklen_t* len) noexcept {
  const Libc& c = sys();
  if (!tracked(fd)) return c.getsockname(fd, addr, len);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (s && (s->phase == Phase::kFast || s->phase == Phase::kForked) && s->local_len != 0) {
    if (addr == nullptr || len == nullptr) return errno = EFAULT, -1;
    copy_addr(s->local, s->local_len, addr, len);
    return 0;
  }
  return c.getsockname(fd, addr, len);
}

CONDUIT_EXPORT int getpeername(int fd, sockaddr* addr, socklen_t* len) noexcept {
  const Libc& c = sys();
  if (!tracked(fd)) return c.getpeername(fd, addr, len);
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (s && (s->phase == Phase::kFast || s->phase == Phase::kForked) && s->peer_len != 0) {
    if (addr == nullptr || len == nullptr) return errno = EFAULT, -1;
    copy_addr(s->peer, s->peer_len, addr, len);
    return 0;
  }
  return c.getpeername(fd, addr, len);
}
