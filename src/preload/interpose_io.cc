// The data calls: read/write and every recv/send form, the fortified variants, sendfile and
// splice.  Plain fds go straight to libc after one tag load.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "conduit/base/log.h"
#include "engine.h"
#include "fast_io.h"
#include "process.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace conduit::preload {
namespace {

inline bool ours(int fd) { return !t_in_preload && (fd_tag(fd) & kTagData) != 0; }

// Runs a recv-like call on a socket of ours; `forward` is the libc call for when the socket
// is (or just became) plain TCP.
template <class Forward>
ssize_t do_recv(int fd, const iovec* iov, int n, int flags, Forward forward) {
  IoError e;
  ssize_t r;
  {
    EngineLock lk;
    std::shared_ptr<Socket> s = find_socket(fd);
    if (!s || !(fd_tag(fd) & kTagData)) {
      lk.unlock();
      return forward();
    }
    r = sock_recv(lk, s, iov, n, flags, &e);
  }
  if (r == kForwardToLibc) return forward();
  if (r < 0) errno = e.err;
  return r;
}

template <class Forward>
ssize_t do_send(int fd, const iovec* iov, int n, int flags, Forward forward) {
  IoError e;
  ssize_t r;
  {
    EngineLock lk;
    std::shared_ptr<Socket> s = find_socket(fd);
    if (!s || !(fd_tag(fd) & kTagData)) {
      lk.unlock();
      return forward();
    }
    r = sock_send(lk, s, iov, n, flags, &e);
  }
  if (r == kForwardToLibc) return forward();
  if (r < 0) {
    if (e.sigpipe) raise(SIGPIPE);  // as the kernel does for a write to a closed stream
    errno = e.err;
  }
  return r;
}

// A message header's gather list, minus what a TCP socket ignores: no address comes back
// (the kernel reports msg_namelen 0 for TCP) and no control data is produced.
void clear_msg_outputs(msghdr* m) {
  if (m == nullptr) return;
  m->msg_namelen = 0;
  m->msg_controllen = 0;
  m->msg_flags = 0;
}

// sendmsg on a UNIX socket carrying fds of ours (SCM_RIGHTS): the receiver gets the
// placeholder -- an unconnected socket, ENOTCONN on use -- not the connection.  Say so.
void warn_if_passing_ours(const msghdr* m) {
  if (m == nullptr || m->msg_control == nullptr || m->msg_controllen == 0) return;
  for (cmsghdr* c = CMSG_FIRSTHDR(const_cast<msghdr*>(m)); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(m), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const int* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
    for (size_t i = 0; i < n; ++i)
      if (fd_tag(fds[i]) & kTagData)
        CONDUIT_LOG(kWarn) << "conduit-preload[" << process().pid << "]: fd " << fds[i]
                           << " is an accelerated connection; the process it is passed to gets an unconnected "
                              "socket (ENOTCONN), not the connection (see docs/PRELOAD.md)";
  }
}

// sendfile/splice into a fast socket: read from the source, send what was read.  Bytes read
// from a source that cannot seek back must all go out, so that chunk is sent blocking.
ssize_t copy_into(int out_fd, size_t count, const std::function<ssize_t(void*, size_t)>& read_src,
                  const std::function<bool(size_t)>& unread_src) {
  constexpr size_t kChunk = 64 * 1024;
  std::vector<uint8_t> buf(std::min(count, kChunk));
  size_t total = 0;
  while (total < count) {
    const ssize_t n = read_src(buf.data(), std::min(buf.size(), count - total));
    if (n < 0) return total > 0 ? static_cast<ssize_t>(total) : -1;
    if (n == 0) break;
    size_t sent = 0;
    bool forced = false;
    while (sent < static_cast<size_t>(n)) {
      iovec v{buf.data() + sent, static_cast<size_t>(n) - sent};
      const ssize_t w = do_send(out_fd, &v, 1, 0, [&] { return sys().write(out_fd, v.iov_base, v.iov_len); });
      if (w < 0) {
        if (errno == EAGAIN && !forced && unread_src(static_cast<size_t>(n) - sent)) {
          total += sent;
          return total > 0 ? static_cast<ssize_t>(total) : (errno = EAGAIN, -1);
        }
        if (errno == EAGAIN) {
          // Cannot give the bytes back: wait for room (this chunk only).
          forced = true;
          pollfd p{out_fd, POLLOUT, 0};
          poll(&p, 1, -1);
          continue;
        }
        total += sent;
        return total > 0 ? static_cast<ssize_t>(total) : -1;
      }
      sent += static_cast<size_t>(w);
    }
    total += sent;
  }
  return static_cast<ssize_t>(total);
}

}  // namespace
}  // namespace conduit::preload

using namespace conduit::preload;

CONDUIT_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  if (!ours(fd)) return sys().read(fd, buf, n);
  iovec v{buf, n};
  return do_recv(fd, &v, 1, 0, [&] { return sys().read(fd, buf, n); });
}

CONDUIT_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (!ours(fd) || n > buflen) return sys().__read_chk(fd, buf, n, buflen);
  iovec v{buf, n};
  return do_recv(fd, &v, 1, 0, [&] { return sys().read(fd, buf, n); });
}

CONDUIT_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  if (!ours(fd)) return sys().write(fd, buf, n);
  iovec v{const_cast<void*>(buf), n};
  return do_send(fd, &v, 1, 0, [&] { return sys().write(fd, buf, n); });
}

CONDUIT_EXPORT ssize_t readv(int fd, const iovec* iov, int n) {
  if (!ours(fd)) return sys().readv(fd, iov, n);
  return do_recv(fd, iov, n, 0, [&] { return sys().readv(fd, iov, n); });
}

CONDUIT_EXPORT ssize_t writev(int fd, const iovec* iov, int n) {
  if (!ours(fd)) return sys().writev(fd, iov, n);
  return do_send(fd, iov, n, 0, [&] { return sys().writev(fd, iov, n); });
}

CONDUIT_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if (!ours(fd)) return sys().recv(fd, buf, n, flags);
  iovec v{buf, n};
  return do_recv(fd, &v, 1, flags, [&] { return sys().recv(fd, buf, n, flags); });
}

CONDUIT_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (!ours(fd) || n > buflen) return sys().__recv_chk(fd, buf, n, buflen, flags);
  iovec v{buf, n};
  return do_recv(fd, &v, 1, flags, [&] { return sys().recv(fd, buf, n, flags); });
}

CONDUIT_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  if (!ours(fd)) return sys().send(fd, buf, n, flags);
  iovec v{const_cast<void*>(buf), n};
  return do_send(fd, &v, 1, flags, [&] { return sys().send(fd, buf, n, flags); });
}

CONDUIT_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* fromlen) {
  if (!ours(fd)) return sys().recvfrom(fd, buf, n, flags, from, fromlen);
  iovec v{buf, n};
  const ssize_t r = do_recv(fd, &v, 1, flags, [&] { return sys().recvfrom(fd, buf, n, flags, from, fromlen); });
  if (r >= 0 && from != nullptr && fromlen != nullptr) *fromlen = 0;  // TCP returns no address
  return r;
}

CONDUIT_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* from,
                                      socklen_t* fromlen) {
  if (!ours(fd) || n > buflen) return sys().__recvfrom_chk(fd, buf, n, buflen, flags, from, fromlen);
  return recvfrom(fd, buf, n, flags, from, fromlen);
}

CONDUIT_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t tolen) {
  if (!ours(fd)) return sys().sendto(fd, buf, n, flags, to, tolen);
  iovec v{const_cast<void*>(buf), n};
  return do_send(fd, &v, 1, flags, [&] { return sys().sendto(fd, buf, n, flags, to, tolen); });
}

CONDUIT_EXPORT ssize_t recvmsg(int fd, msghdr* m, int flags) {
  if (!ours(fd)) return sys().recvmsg(fd, m, flags);
  if (m == nullptr) return errno = EFAULT, -1;
  const ssize_t r =
      do_recv(fd, m->msg_iov, static_cast<int>(m->msg_iovlen), flags, [&] { return sys().recvmsg(fd, m, flags); });
  if (r >= 0 && (fd_tag(fd) & kTagData)) clear_msg_outputs(m);
  return r;
}

CONDUIT_EXPORT ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  if (!ours(fd)) {
    if (!t_in_preload) warn_if_passing_ours(m);
    return sys().sendmsg(fd, m, flags);
  }
  if (m == nullptr) return errno = EFAULT, -1;
  return do_send(fd, m->msg_iov, static_cast<int>(m->msg_iovlen), flags, [&] { return sys().sendmsg(fd, m, flags); });
}

CONDUIT_EXPORT int recvmmsg(int fd, mmsghdr* v, unsigned int n, int flags, timespec* timeout) {
  if (!ours(fd)) return sys().recvmmsg(fd, v, n, flags, timeout);
  // A stream has no message boundaries: fill the first header, then the others only with
  // what is already there.
  unsigned int i = 0;
  for (; i < n; ++i) {
    const ssize_t r = recvmsg(fd, &v[i].msg_hdr, i == 0 ? (flags & ~MSG_WAITFORONE) : (flags | MSG_DONTWAIT));
    if (r < 0) {
      if (i == 0) return -1;
      break;
    }
    v[i].msg_len = static_cast<unsigned int>(r);
    if (r == 0) {
      ++i;
      break;
    }
  }
  return static_cast<int>(i);
}

CONDUIT_EXPORT int sendmmsg(int fd, mmsghdr* v, unsigned int n, int flags) {
  if (!ours(fd)) return sys().sendmmsg(fd, v, n, flags);
  unsigned int i = 0;
  for (; i < n; ++i) {
    const ssize_t r = sendmsg(fd, &v[i].msg_hdr, flags);
    if (r < 0) {
      if (i == 0) return -1;
      break;
    }
    v[i].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(i);
}

static ssize_t sendfile_common(int out_fd, int in_fd, off64_t* offset, size_t count, bool is64) {
  if (!ours(out_fd))
    return is64 ? sys().sendfile64(out_fd, in_fd, offset, count)
                : sys().sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(offset), count);
  struct stat st{};
  const bool seekable = fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode);
  off64_t pos = offset ? *offset : 0;
  const ssize_t r = copy_into(
      out_fd, count,
      [&](void* b, size_t n) -> ssize_t {
        const ssize_t k = offset ? pread64(in_fd, b, n, pos) : sys().read(in_fd, b, n);
        if (k > 0) pos += k;
        return k;
      },
      [&](size_t back) {
        if (offset) return pos -= static_cast<off64_t>(back), true;
        return seekable && lseek64(in_fd, -static_cast<off64_t>(back), SEEK_CUR) >= 0;
      });
  if (offset && r >= 0) *offset = pos;
  return r;
}

CONDUIT_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) noexcept {
  return sendfile_common(out_fd, in_fd, reinterpret_cast<off64_t*>(offset), count, false);
}
CONDUIT_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) noexcept {
  return sendfile_common(out_fd, in_fd, offset, count, true);
}

CONDUIT_EXPORT ssize_t splice(int in_fd, loff_t* in_off, int out_fd, loff_t* out_off, size_t len, unsigned int flags) {
  const bool in_ours = ours(in_fd), out_ours = ours(out_fd);
  if (!in_ours && !out_ours) return sys().splice(in_fd, in_off, out_fd, out_off, len, flags);
  if (in_ours && out_ours) return errno = EINVAL, -1;  // splice needs a pipe on one side
  if ((in_ours && in_off != nullptr) || (out_ours && out_off != nullptr)) return errno = EINVAL, -1;  // as for a socket
  if (out_ours) {
    // pipe -> fast socket.  A pipe cannot take bytes back, so each chunk goes out whole.
    return copy_into(
        out_fd, len, [&](void* b, size_t n) { return sys().read(in_fd, b, n); }, [](size_t) { return false; });
  }
  // fast socket -> pipe: what the pipe does not take goes back to the front of the socket's
  // staging buffer, to be read next.
  std::vector<uint8_t> buf(std::min<size_t>(len, 64 * 1024));
  const int rflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
  const ssize_t n = recv(in_fd, buf.data(), buf.size(), rflags);
  if (n <= 0) return n;
  const ssize_t w = sys().write(out_fd, buf.data(), static_cast<size_t>(n));
  const int err = errno;
  const size_t taken = w > 0 ? static_cast<size_t>(w) : 0;
  if (taken < static_cast<size_t>(n)) {
    EngineLock lk;
    if (std::shared_ptr<Socket> s = find_socket(in_fd)) {
      std::vector<uint8_t> back(buf.begin() + static_cast<long>(taken), buf.begin() + n);
      back.insert(back.end(), s->staging.begin() + static_cast<long>(s->staging_off), s->staging.end());
      s->staging = std::move(back);
      s->staging_off = 0;
    }
  }
  if (w < 0) return errno = err, -1;
  return w;
}
