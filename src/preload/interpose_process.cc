// fork (pthread_atfork in process.cc does the work), exec (a note on what an exec'd program
// will find), io_uring (new connections stay TCP), close_range/closefrom/fclose (fds that go
// away without close()), and the exit handler.
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <thread>
#include <vector>

#include "conduit/base/log.h"
#include "engine.h"
#include "process.h"
#include "signals.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace conduit::preload {
namespace {

// An accelerated fd that survives exec points at the placeholder (an unconnected socket):
// the new program gets ENOTCONN from it, never a stale stream.  Say so before it happens.
void note_exec(const char* what) {
  if (t_in_preload) return;
  EngineLock lk;
  for (const auto& w : process().sockets) {
    std::shared_ptr<Socket> s = w.lock();
    if (!s || !(s->phase == Phase::kFast || negotiating(s->phase))) continue;
    for (int fd : s->fds) {
      const int fl = sys().fcntl(fd, F_GETFD);
      if (fl >= 0 && !(fl & FD_CLOEXEC))
        CONDUIT_LOG(kWarn) << "conduit-preload[" << process().pid << "]: " << what << ": fd " << fd
                           << " is an accelerated connection without FD_CLOEXEC; the new program will find an "
                              "unconnected socket there (ENOTCONN), not the connection";
    }
  }
}

void note_io_uring() {
  if (t_in_preload) return;
  EngineLock lk;
  Process& p = process();
  if (!p.io_uring_seen)
    CONDUIT_LOG(kWarn) << "conduit-preload[" << p.pid
                       << "]: the program set up an io_uring; its submissions bypass the preload, so new connections "
                          "stay on TCP (accelerated ones fail io_uring operations with ENOTCONN)";
  p.io_uring_seen = true;
  if (p.engine) p.engine->status_changed();
}

void forget_range(unsigned first, unsigned last) {
  if (t_in_preload) return;
  EngineLock lk;
  std::vector<int> fds;
  for (const auto& [fd, obj] : process().fds)
    if (static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last) fds.push_back(fd);
  for (int fd : fds) forget_fd(fd);
}

std::vector<char*> collect_args(const char* arg0, va_list ap, char*** envp) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(arg0));
  while (argv.back() != nullptr) argv.push_back(va_arg(ap, char*));
  if (envp != nullptr) *envp = va_arg(ap, char**);
  return argv;
}

template <class F>
F next_symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void at_exit() {
  Process& p = process();
  Engine* e = p.engine;
  if (e == nullptr || getpid() != p.pid) return;
  e->stop_progress_thread();
  // Another thread may hold the lock for a moment; never hang the exit on it.
  std::unique_lock<std::mutex> lk(p.mu, std::defer_lock);
  for (int i = 0; i < 100 && !lk.try_lock(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!lk.owns_lock()) return;
  InPreload in;
  e->loop().adopt_current_thread();
  e->shutdown_at_exit();
}

}  // namespace

void register_exit_handler() {
  static bool done = false;
  if (!done) std::atexit(at_exit);
  done = true;
}

}  // namespace conduit::preload

using namespace conduit::preload;

CONDUIT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  note_exec("execve");
  return sys().execve(path, argv, envp);
}
CONDUIT_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  note_exec("execv");
  return sys().execv(path, argv);
}
CONDUIT_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  note_exec("execvp");
  return sys().execvp(file, argv);
}
CONDUIT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  note_exec("execvpe");
  return sys().execvpe(file, argv, envp);
}
CONDUIT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  note_exec("fexecve");
  return sys().fexecve(fd, argv, envp);
}
CONDUIT_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> argv = collect_args(arg, ap, nullptr);
  va_end(ap);
  note_exec("execl");
  return sys().execv(path, argv.data());
}
CONDUIT_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> argv = collect_args(arg, ap, nullptr);
  va_end(ap);
  note_exec("execlp");
  return sys().execvp(file, argv.data());
}
CONDUIT_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  char** envp = nullptr;
  std::vector<char*> argv = collect_args(arg, ap, &envp);
  va_end(ap);
  note_exec("execle");
  return sys().execve(path, argv.data(), envp);
}
CONDUIT_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                               const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  note_exec("posix_spawn");
  return sys().posix_spawn(pid, path, fa, attr, argv, envp);
}
CONDUIT_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  note_exec("posix_spawnp");
  return sys().posix_spawnp(pid, file, fa, attr, argv, envp);
}

CONDUIT_EXPORT long syscall(long number, ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a) x = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_io_uring_setup) note_io_uring();
  if (number == SYS_rt_sigaction && a[1] != 0) signals_untracked();  // a handler we cannot see
  return sys().syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

// liburing 2.x makes its system calls itself (inline), so its setup entry points are where
// an io_uring shows up.
CONDUIT_EXPORT int io_uring_queue_init(unsigned entries, void* ring, unsigned flags) {
  note_io_uring();
  static auto real = next_symbol<int (*)(unsigned, void*, unsigned)>("io_uring_queue_init");
  return real ? real(entries, ring, flags) : -ENOSYS;
}
CONDUIT_EXPORT int io_uring_queue_init_params(unsigned entries, void* ring, void* params) {
  note_io_uring();
  static auto real = next_symbol<int (*)(unsigned, void*, void*)>("io_uring_queue_init_params");
  return real ? real(entries, ring, params) : -ENOSYS;
}
CONDUIT_EXPORT int io_uring_setup(unsigned entries, void* params) {
  note_io_uring();
  static auto real = next_symbol<int (*)(unsigned, void*)>("io_uring_setup");
  return real ? real(entries, params) : -ENOSYS;
}

CONDUIT_EXPORT int close_range(unsigned int first, unsigned int last, int flags) noexcept {
  if (!(flags & CLOSE_RANGE_CLOEXEC)) forget_range(first, last);
  return sys().close_range(first, last, flags);
}
CONDUIT_EXPORT void closefrom(int lowfd) noexcept {
  if (lowfd >= 0) forget_range(static_cast<unsigned>(lowfd), ~0u);
  sys().closefrom(lowfd);
}
CONDUIT_EXPORT int fclose(FILE* f) {
  if (f != nullptr && !t_in_preload) {
    const int fd = fileno(f);
    if (fd >= 0 && (fd_tag(fd) & kTagTracked)) {
      EngineLock lk;
      forget_fd(fd);
    }
  }
  return sys().fclose(f);
}
