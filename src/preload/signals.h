// Which of the program's signal handlers have run on this thread: what lets a busy wait poll
// without holding signals back.
//
// A wait that polls must not lose a signal: without the preload the program's epoll_wait,
// poll or blocking read would return EINTR after the handler ran.  Holding signals back
// (blocking them while the wait polls, wait.cc) costs two rt_sigprocmask calls per wait that
// polls -- on a host where a system call costs ~1.4 us, half of what a request/response
// exchange through the preload spends in the kernel.  Instead, the preload interposes the
// calls that install handlers (sigaction, signal, bsd_signal, sysv_signal, sigset) and installs
// each of the program's handlers behind one trampoline that counts, per thread, then calls
// the program's handler with the same arguments, mask and flags.  A wait notes the count when
// it starts polling and returns EINTR when it moved.  sigaction() still reports the program's
// own handler and flags.
//
// Not tracked, and then waits hold signals back as before: handlers installed by a raw
// rt_sigaction system call through syscall(2) (seen: tracking stops for the process), or
// through a path the preload cannot see (an inline system call); the fault signals (SIGSEGV,
// SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) are never wrapped (a wait never holds them).
//
// Thread-safe; the counter is async-signal-safe (a thread-local integer).  Cost: one TLS
// load per poll round; one table update per handler change.
#pragma once

#include <cstdint>

namespace conduit::preload {

// Handlers of the program that have run on the calling thread so far.
uint64_t signals_handled_here();
// True while every handler of the program (asynchronous signals) runs through the trampoline:
// a wait may poll without holding signals back and watch signals_handled_here() instead.
bool signals_tracked();
// From the library's constructor: puts the trampoline in front of handlers installed before
// the preload ran (another library's constructor).
void wrap_existing_handlers();
// A raw rt_sigaction went past the interposers (syscall(2)): tracking stops for good.
void signals_untracked();

}  // namespace conduit::preload
