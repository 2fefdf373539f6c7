// The program's signal handlers behind a counting trampoline (signals.h), and the calls that
// install handlers: sigaction, signal, bsd_signal, sysv_signal, __sysv_signal, sigset.
#include "signals.h"

#include <signal.h>

#include <atomic>
#include <cerrno>

#include "libc.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace conduit::preload {
namespace {

thread_local uint64_t t_handled __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<bool> g_untracked{false};

// The program's disposition of each signal we wrap: its handler (sa_handler or
// sa_sigaction, as `flags` says) and flags.  Written before the kernel's entry changes, read
// by the trampoline (async-signal-safe: lock-free atomics).
struct Slot {
  std::atomic<void*> fn{nullptr};
  std::atomic<int> flags{0};
};
Slot g_slots[NSIG];

bool wrappable(int sig) {
  switch (sig) {
    case SIGKILL: case SIGSTOP:                                           // cannot be caught
    case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP: case SIGSYS:  // faults: never held
      return false;
    default: return sig > 0 && sig < NSIG;
  }
}

bool is_handler(const struct sigaction& a) {
  if (a.sa_flags & SA_SIGINFO) return a.sa_sigaction != nullptr;
  return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

void trampoline(int sig, siginfo_t* info, void* uc) {
  ++t_handled;
  Slot& s = g_slots[sig];
  void* fn = s.fn.load(std::memory_order_acquire);
  const int flags = s.flags.load(std::memory_order_relaxed);
  if (flags & SA_RESETHAND) s.fn.store(nullptr, std::memory_order_release);  // the kernel reset it to SIG_DFL
  if (fn == nullptr) return;  // changed to SIG_DFL/SIG_IGN while this delivery was on its way
  if (flags & SA_SIGINFO)
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(fn)(sig, info, uc);
  else
    reinterpret_cast<void (*)(int)>(fn)(sig);
}

bool is_trampoline(const struct sigaction& a) { return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == &trampoline; }

// Writes the program's handler (fn, flags: a slot's contents) into a, in place of the
// trampoline the kernel holds.
void show_program_handler(void* fn, int flags, struct sigaction* a) {
  a->sa_flags = flags;
  if (fn == nullptr)
    a->sa_handler = SIG_DFL;  // SA_RESETHAND fired
  else if (flags & SA_SIGINFO)
    a->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(fn);
  else
    a->sa_handler = reinterpret_cast<void (*)(int)>(fn);
}

// The program's view of what the kernel holds.
void unwrap(int sig, struct sigaction* a) {
  if (a == nullptr || !is_trampoline(*a)) return;
  const Slot& s = g_slots[sig];
  void* fn = s.fn.load(std::memory_order_acquire);
  show_program_handler(fn, s.flags.load(std::memory_order_relaxed), a);
}

int install(int sig, const struct sigaction* act, struct sigaction* old) {
  if (act == nullptr || !wrappable(sig) || !is_handler(*act)) {
    const int rc = sys().sigaction(sig, act, old);
    if (rc == 0) unwrap(sig, old);
    if (rc == 0 && act != nullptr && wrappable(sig)) g_slots[sig].fn.store(nullptr, std::memory_order_release);
    return rc;
  }
  struct sigaction w = *act;
  w.sa_sigaction = &trampoline;
  w.sa_flags |= SA_SIGINFO;
  Slot& s = g_slots[sig];
  void* const prev_fn = s.fn.load(std::memory_order_acquire);
  const int prev_flags = s.flags.load(std::memory_order_relaxed);
  void* fn = (act->sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(act->sa_sigaction)
                                          : reinterpret_cast<void*>(act->sa_handler);
  s.flags.store(act->sa_flags, std::memory_order_relaxed);
  s.fn.store(fn, std::memory_order_release);
  struct sigaction before{};
  const int rc = sys().sigaction(sig, &w, &before);
  if (rc != 0) {
    const int err = errno;
    s.flags.store(prev_flags, std::memory_order_relaxed);
    s.fn.store(prev_fn, std::memory_order_release);
    errno = err;
    return -1;
  }
  if (old != nullptr) {
    *old = before;
    if (is_trampoline(before)) show_program_handler(prev_fn, prev_flags, old);  // the slot before this call
  }
  return 0;
}

sighandler_t install_simple(int sig, sighandler_t handler, int flags, bool mask_self) {
  struct sigaction a{}, old{};
  a.sa_handler = handler;
  sigemptyset(&a.sa_mask);
  if (mask_self && sig > 0 && sig < NSIG) sigaddset(&a.sa_mask, sig);
  a.sa_flags = flags;
  if (install(sig, &a, &old) != 0) return SIG_ERR;
  return old.sa_handler;  // an SA_SIGINFO handler comes back as its address, as glibc's does
}

}  // namespace

uint64_t signals_handled_here() { return t_handled; }

bool signals_tracked() { return !g_untracked.load(std::memory_order_relaxed); }

void signals_untracked() { g_untracked.store(true, std::memory_order_relaxed); }

void wrap_existing_handlers() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!wrappable(sig)) continue;
    struct sigaction cur{};
    if (sys().sigaction(sig, nullptr, &cur) != 0) continue;  // glibc's own (SIGCANCEL...): EINVAL
    if (!is_handler(cur) || is_trampoline(cur)) continue;
    (void)install(sig, &cur, nullptr);
  }
}

// Handlers installed before the preload was loaded (another library's constructor): after
// libc.cc's resolve_at_load (101).
__attribute__((constructor(102))) void wrap_at_load() { wrap_existing_handlers(); }

}  // namespace conduit::preload

using conduit::preload::install;

CONDUIT_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return conduit::preload::install(sig, act, old);
}

// glibc's signal() has BSD semantics: the handler stays, interrupted calls restart, the
// signal is blocked while its handler runs.
CONDUIT_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  return conduit::preload::install_simple(sig, handler, SA_RESTART, true);
}
CONDUIT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return conduit::preload::install_simple(sig, handler, SA_RESTART, true);
}
CONDUIT_EXPORT sighandler_t ssignal(int sig, sighandler_t handler) noexcept {
  return conduit::preload::install_simple(sig, handler, SA_RESTART, true);
}
// System V semantics: reset to SIG_DFL on delivery, not blocked while the handler runs.
CONDUIT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return conduit::preload::install_simple(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}
CONDUIT_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return conduit::preload::install_simple(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

// sigset(3): SIG_HOLD adds the signal to the thread's mask; any other disposition is installed
// and the signal removed from the mask.  Returns SIG_HOLD if it was blocked before.
CONDUIT_EXPORT sighandler_t sigset(int sig, sighandler_t disp) noexcept {
  if (sig <= 0 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  sigset_t one, before;
  sigemptyset(&one);
  sigaddset(&one, sig);
  struct sigaction old{};
  if (disp == SIG_HOLD) {
    if (install(sig, nullptr, &old) != 0 || sigprocmask(SIG_BLOCK, &one, &before) != 0) return SIG_ERR;
    return sigismember(&before, sig) ? SIG_HOLD : old.sa_handler;
  }
  struct sigaction a{};
  a.sa_handler = disp;
  sigemptyset(&a.sa_mask);
  if (install(sig, &a, &old) != 0 || sigprocmask(SIG_UNBLOCK, &one, &before) != 0) return SIG_ERR;
  return sigismember(&before, sig) ? SIG_HOLD : old.sa_handler;
}
