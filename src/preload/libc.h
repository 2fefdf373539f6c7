// The real libc functions behind every call the preload intercepts (dlsym(RTLD_NEXT)), and
// the per-thread "inside the preload" mark that sends every intercepted call straight to
// them.  Conduit's own code (the transports, the reactor, the logger) calls read, write,
// socket, epoll_wait... through the same symbols the preload exports, so while a thread is
// inside the preload (EngineLock held, or the progress thread) each interposer must
// forward at once -- that is what t_in_preload is for.
//
// Cost: one TLS load per intercepted call; pointers are resolved once, at load time or on
// the first call, whichever comes first (another library's constructor may call socket()
// before ours ran).  Thread-safe.
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdio>

// name, return type, parameter list.  The variadic ones (fcntl, ioctl, syscall, execl*)
// are declared with their fixed arguments only and called with explicit extra arguments.
#define CONDUIT_PRELOAD_LIBC_FUNCTIONS(X)                                                 \
  X(socket, int, (int, int, int))                                                         \
  X(bind, int, (int, const sockaddr*, socklen_t))                                         \
  X(listen, int, (int, int))                                                              \
  X(accept, int, (int, sockaddr*, socklen_t*))                                            \
  X(accept4, int, (int, sockaddr*, socklen_t*, int))                                      \
  X(connect, int, (int, const sockaddr*, socklen_t))                                      \
  X(read, ssize_t, (int, void*, size_t))                                                  \
  X(write, ssize_t, (int, const void*, size_t))                                           \
  X(readv, ssize_t, (int, const iovec*, int))                                             \
  X(writev, ssize_t, (int, const iovec*, int))                                            \
  X(recv, ssize_t, (int, void*, size_t, int))                                             \
  X(send, ssize_t, (int, const void*, size_t, int))                                       \
  X(recvfrom, ssize_t, (int, void*, size_t, int, sockaddr*, socklen_t*))                  \
  X(sendto, ssize_t, (int, const void*, size_t, int, const sockaddr*, socklen_t))         \
  X(recvmsg, ssize_t, (int, msghdr*, int))                                                \
  X(sendmsg, ssize_t, (int, const msghdr*, int))                                          \
  X(recvmmsg, int, (int, mmsghdr*, unsigned int, int, timespec*))                         \
  X(sendmmsg, int, (int, mmsghdr*, unsigned int, int))                                    \
  X(close, int, (int))                                                                    \
  X(shutdown, int, (int, int))                                                            \
  X(getsockopt, int, (int, int, int, void*, socklen_t*))                                  \
  X(setsockopt, int, (int, int, int, const void*, socklen_t))                             \
  X(getsockname, int, (int, sockaddr*, socklen_t*))                                       \
  X(getpeername, int, (int, sockaddr*, socklen_t*))                                       \
  X(fcntl, int, (int, int, ...))                                                          \
  X(ioctl, int, (int, unsigned long, ...))                                                \
  X(poll, int, (pollfd*, nfds_t, int))                                                    \
  X(ppoll, int, (pollfd*, nfds_t, const timespec*, const sigset_t*))                      \
  X(select, int, (int, fd_set*, fd_set*, fd_set*, timeval*))                              \
  X(pselect, int, (int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*))     \
  X(epoll_create, int, (int))                                                             \
  X(epoll_create1, int, (int))                                                            \
  X(epoll_ctl, int, (int, int, int, epoll_event*))                                        \
  X(epoll_wait, int, (int, epoll_event*, int, int))                                       \
  X(epoll_pwait, int, (int, epoll_event*, int, int, const sigset_t*))                     \
  X(epoll_pwait2, int, (int, epoll_event*, int, const timespec*, const sigset_t*))        \
  X(dup, int, (int))                                                                      \
  X(dup2, int, (int, int))                                                                \
  X(dup3, int, (int, int, int))                                                           \
  X(execve, int, (const char*, char* const*, char* const*))                               \
  X(execv, int, (const char*, char* const*))                                              \
  X(execvp, int, (const char*, char* const*))                                             \
  X(execvpe, int, (const char*, char* const*, char* const*))                              \
  X(fexecve, int, (int, char* const*, char* const*))                                      \
  X(sendfile, ssize_t, (int, int, off_t*, size_t))                                        \
  X(splice, ssize_t, (int, loff_t*, int, loff_t*, size_t, unsigned int))                  \
  X(syscall, long, (long, ...))                                                           \
  X(close_range, int, (unsigned int, unsigned int, int))                                  \
  X(closefrom, void, (int))                                                               \
  X(fclose, int, (FILE*))                                                                 \
  X(sigaction, int, (int, const struct sigaction*, struct sigaction*))                    \
  X(fcntl64, int, (int, int, ...))                                                        \
  X(sendfile64, ssize_t, (int, int, off64_t*, size_t))                                    \
  X(__read_chk, ssize_t, (int, void*, size_t, size_t))                                    \
  X(__recv_chk, ssize_t, (int, void*, size_t, size_t, int))                               \
  X(__recvfrom_chk, ssize_t, (int, void*, size_t, size_t, int, sockaddr*, socklen_t*))    \
  X(__poll_chk, int, (pollfd*, nfds_t, int, size_t))                                      \
  X(__ppoll_chk, int, (pollfd*, nfds_t, const timespec*, const sigset_t*, size_t))        \
  X(posix_spawn, int, (pid_t*, const char*, const posix_spawn_file_actions_t*,            \
                       const posix_spawnattr_t*, char* const*, char* const*))             \
  X(posix_spawnp, int, (pid_t*, const char*, const posix_spawn_file_actions_t*,           \
                        const posix_spawnattr_t*, char* const*, char* const*))

namespace conduit::preload {

struct Libc {
#define CONDUIT_PRELOAD_LIBC_FIELD(name, ret, args) ret(*name) args = nullptr;
  CONDUIT_PRELOAD_LIBC_FUNCTIONS(CONDUIT_PRELOAD_LIBC_FIELD)
#undef CONDUIT_PRELOAD_LIBC_FIELD
};

namespace detail {
extern Libc g_libc;
extern std::atomic<bool> g_libc_ready;
void resolve_libc();
}  // namespace detail

// The real functions.  Never null (a missing symbol resolves to a stub failing with ENOSYS).
inline const Libc& sys() {
  if (!detail::g_libc_ready.load(std::memory_order_acquire)) [[unlikely]]
    detail::resolve_libc();
  return detail::g_libc;
}

// True while this thread runs preload code: every interposer forwards to libc at once.
extern thread_local bool t_in_preload __attribute__((tls_model("initial-exec")));

// Marks the thread as inside the preload for a scope (nests).
class InPreload {
 public:
  InPreload() : was_(t_in_preload) { t_in_preload = true; }
  ~InPreload() { t_in_preload = was_; }
  InPreload(const InPreload&) = delete;
  InPreload& operator=(const InPreload&) = delete;

 private:
  bool was_;
};

}  // namespace conduit::preload
