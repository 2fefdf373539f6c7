// Waiting: one loop for every wait the preload does -- the program's poll/select/epoll_wait
// when an fd of ours is involved, and the blocking calls on fds of ours (read, connect,
// accept...).  Each round drives the engine, collects the readiness of our fds, and only if
// nothing is ready blocks in the kernel on the program's own fds plus the engine's backend
// fd, with the program's timeout and signal mask.  So a signal interrupts the wait as it
// would without the preload (EINTR), timeouts hold, and a fast channel's data wakes it.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/select.h>

#include <cstdint>
#include <memory>

#include "process.h"

namespace conduit::preload {

class WaitSet {
 public:
  virtual ~WaitSet() = default;
  // Under the lock, after the engine ran: how many entries of ours are ready now (recorded
  // in the set's own output).
  virtual int collect() = 0;
  // Without the lock: the kernel wait on the program's fds plus the engine's `backend` and
  // `bell` fds (-1: none) for at most timeout_ms (-1: forever) under `mask` (null: the
  // thread's).  Returns how many of the program's fds are ready (ours not counted), or -1
  // with errno; sets *backend_ready if the backend or the bell was.
  virtual int kernel_wait(int backend, int bell, int timeout_ms, const sigset_t* mask, bool* backend_ready) = 0;
  // False for an epoll instance inherited across fork (no backend fd of ours in it): then
  // the wait sleeps in 1 ms slices and looks again.
  virtual bool backend_usable() const { return true; }
  // True if the set's kernel object holds the bell itself (an epoll instance of ours, where
  // it is edge-triggered), so the `bell` argument is ignored.
  virtual bool holds_bell() const { return false; }
  // When ours are ready: should the wait also look at the program's kernel fds (a
  // non-blocking kernel_wait) before it returns?  An epoll instance answers yes only every
  // few calls, and not twice in one call (see EpollSet): a program whose accelerated fds
  // are ready at every call would otherwise pay a system call per call for nothing.
  virtual bool kernel_due_when_ready() const { return true; }
};

// lk is held on entry and on return.  Returns the number of ready entries (ours + kernel),
// 0 on timeout, -1 with errno (EINTR).
int wait_for(EngineLock& lk, WaitSet& ws, int timeout_ms, const sigset_t* mask);

// Waits until `s` has one of `events` (EPOLLIN / EPOLLOUT; errors and hangups always count)
// -- or, with events == 0, until it leaves its negotiating phase (and any connect(2) the
// engine issued for it is done).  1 = ready, 0 = timeout, -1 with errno.
int wait_socket(EngineLock& lk, const std::shared_ptr<Socket>& s, uint32_t events, int64_t timeout_ms);
// Waits until the kernel fd `fd` polls `events` (blocking accept on a listener of ours),
// driving the engine meanwhile.  Same results.
int wait_kernel_fd(EngineLock& lk, int fd, short events, int64_t timeout_ms);

// poll/ppoll with fds of ours among the program's.  mask: ppoll's (null for poll).
int preload_poll(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* mask);
// select/pselect.  tv (select) is updated with the time left, as Linux does; ts (pselect) is not.
int preload_select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv, const timespec* ts, const sigset_t* mask);

// Milliseconds from a timespec/timeval (rounded up; null = -1 = forever).
int timeout_from(const timespec* ts);
int timeout_from(const timeval* tv);

}  // namespace conduit::preload
