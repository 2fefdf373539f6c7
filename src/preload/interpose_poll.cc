// poll, select and epoll.  A wait with no fd of ours that needs the engine goes to libc as is.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <cerrno>

#include "epoll.h"
#include "process.h"
#include "wait.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace conduit::preload {
namespace {

bool any_engine_fd(const pollfd* fds, nfds_t n) {
  if (t_in_preload) return false;
  for (nfds_t i = 0; i < n; ++i)
    if (fds[i].fd >= 0 && (fd_tag(fds[i].fd) & kTagEngine)) return true;
  return false;
}

bool any_engine_fd(int nfds, const fd_set* r, const fd_set* w, const fd_set* x) {
  if (t_in_preload || nfds < 0 || nfds > FD_SETSIZE) return false;
  for (int fd = 0; fd < nfds; ++fd)
    if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))) && (fd_tag(fd) & kTagEngine))
      return true;
  return false;
}

bool engine_epoll(int epfd) { return !t_in_preload && (fd_tag(epfd) & kTagEngine) != 0; }

}  // namespace
}  // namespace conduit::preload

using namespace conduit::preload;

// glibc declares poll and ppoll with access(write_only, 1, 2), but they read fd and events
// from the array; GCC (in unoptimised builds) then warns that reading them here uses
// uninitialised memory.  The program initialised them, as poll(2) requires.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

CONDUIT_EXPORT int poll(pollfd* fds, nfds_t n, int timeout) {
  if (!any_engine_fd(fds, n)) return sys().poll(fds, n, timeout);
  return preload_poll(fds, n, timeout, nullptr);
}

CONDUIT_EXPORT int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (!any_engine_fd(fds, n) || fdslen / sizeof(pollfd) < n) return sys().__poll_chk(fds, n, timeout, fdslen);
  return preload_poll(fds, n, timeout, nullptr);
}

CONDUIT_EXPORT int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
  if (!any_engine_fd(fds, n)) return sys().ppoll(fds, n, ts, mask);
  return preload_poll(fds, n, timeout_from(ts), mask);
}

CONDUIT_EXPORT int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask, size_t fdslen) {
  if (!any_engine_fd(fds, n) || fdslen / sizeof(pollfd) < n) return sys().__ppoll_chk(fds, n, ts, mask, fdslen);
  return preload_poll(fds, n, timeout_from(ts), mask);
}

#pragma GCC diagnostic pop

CONDUIT_EXPORT int select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv) {
  if (!any_engine_fd(nfds, r, w, x)) return sys().select(nfds, r, w, x, tv);
  return preload_select(nfds, r, w, x, tv, nullptr, nullptr);
}

CONDUIT_EXPORT int pselect(int nfds, fd_set* r, fd_set* w, fd_set* x, const timespec* ts, const sigset_t* mask) {
  if (!any_engine_fd(nfds, r, w, x)) return sys().pselect(nfds, r, w, x, ts, mask);
  return preload_select(nfds, r, w, x, nullptr, ts, mask);
}

CONDUIT_EXPORT int epoll_create(int size) noexcept {
  const int fd = sys().epoll_create(size);
  if (fd < 0 || t_in_preload || fd >= kMaxTrackedFd) return fd;
  EngineLock lk;
  if (find_fd(fd) != nullptr) forget_fd(fd);
  new_epoll(fd);
  return fd;
}

CONDUIT_EXPORT int epoll_create1(int flags) noexcept {
  const int fd = sys().epoll_create1(flags);
  if (fd < 0 || t_in_preload || fd >= kMaxTrackedFd) return fd;
  EngineLock lk;
  if (find_fd(fd) != nullptr) forget_fd(fd);
  new_epoll(fd);
  return fd;
}

CONDUIT_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* ev) noexcept {
  if (t_in_preload || (!(fd_tag(epfd) & kTagTracked) && !(fd_tag(fd) & kTagTracked)))
    return sys().epoll_ctl(epfd, op, fd, ev);
  return preload_epoll_ctl(epfd, op, fd, ev);
}

CONDUIT_EXPORT int epoll_wait(int epfd, epoll_event* ev, int max, int timeout) {
  if (!engine_epoll(epfd)) return sys().epoll_wait(epfd, ev, max, timeout);
  return preload_epoll_wait(epfd, ev, max, timeout, nullptr);
}

CONDUIT_EXPORT int epoll_pwait(int epfd, epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  if (!engine_epoll(epfd)) return sys().epoll_pwait(epfd, ev, max, timeout, mask);
  return preload_epoll_wait(epfd, ev, max, timeout, mask);
}

CONDUIT_EXPORT int epoll_pwait2(int epfd, epoll_event* ev, int max, const timespec* ts, const sigset_t* mask) {
  if (!engine_epoll(epfd)) return sys().epoll_pwait2(epfd, ev, max, ts, mask);
  return preload_epoll_wait(epfd, ev, max, timeout_from(ts), mask);
}
