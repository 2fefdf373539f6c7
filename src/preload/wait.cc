#include "wait.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <map>
#include <vector>

#include "conduit/base/adaptive_spin.h"
#include "conduit/base/clock.h"
#include "engine.h"
#include "epoll.h"
#include "fast_io.h"
#include "process.h"
#include "signals.h"

namespace conduit::preload {
namespace {

timespec to_timespec(int ms) {
  timespec ts{};
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = static_cast<long>(ms % 1000) * 1'000'000;
  return ts;
}

int kernel_poll(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* mask) {
  if (mask == nullptr) return sys().poll(fds, n, timeout_ms);
  timespec ts = to_timespec(timeout_ms < 0 ? 0 : timeout_ms);
  return sys().ppoll(fds, n, timeout_ms < 0 ? nullptr : &ts, mask);
}

// A wait for one condition of ours; the kernel part is the backend fd (and optionally one
// kernel fd).
class CondSet final : public WaitSet {
 public:
  CondSet(const std::shared_ptr<Socket>& s, uint32_t events) : s_(s), events_(events) {}
  CondSet(int fd, short events) : kfd_(fd), kevents_(events) {}
  int collect() override {
    if (!s_) return 0;
    if (s_->closed()) return 1;
    if (events_ == 0) return negotiating(s_->phase) || s_->tcp_connect_pending ? 0 : 1;
    if (s_->phase != Phase::kFast && s_->phase != Phase::kForked) return negotiating(s_->phase) ? 0 : 1;
    return (readiness(*s_) & (events_ | EPOLLERR | EPOLLHUP)) != 0 ? 1 : 0;
  }
  int kernel_wait(int backend, int bell, int timeout_ms, const sigset_t* mask, bool* backend_ready) override {
    pollfd p[3];
    nfds_t n = 0;
    if (kfd_ >= 0) p[n++] = {kfd_, kevents_, 0};
    const nfds_t b = n;
    if (backend >= 0) p[n++] = {backend, POLLIN, 0};
    if (bell >= 0) p[n++] = {bell, POLLIN, 0};
    // Nothing to look at without blocking (ours are ready and there is no kernel fd): no
    // system call, so a blocking read or write whose data is ready makes none.
    if (n == 0 && timeout_ms == 0 && mask == nullptr) return 0;
    const int r = kernel_poll(p, n, timeout_ms, mask);
    if (r < 0) return -1;
    for (nfds_t i = b; i < n; ++i)
      if (p[i].revents != 0) *backend_ready = true;
    return kfd_ >= 0 && p[0].revents != 0 ? 1 : 0;
  }

 private:
  std::shared_ptr<Socket> s_;
  uint32_t events_ = 0;
  int kfd_ = -1;
  short kevents_ = 0;
};

// poll(2) with fds of ours: those are taken out of the kernel's array (fd -1) and answered
// from their readiness; the backend fd is appended.
class PollSet final : public WaitSet {
 public:
  // Per call, not per thread: a signal handler may poll() while this one waits.
  PollSet(pollfd* fds, nfds_t n) : app_(fds), n_(n), kernel_(fds, fds + n), ours_(n) {
    kernel_.push_back({-1, POLLIN, 0});  // the backend
    kernel_.push_back({-1, POLLIN, 0});  // the bell
    for (nfds_t i = 0; i < n; ++i) {
      const int fd = fds[i].fd;
      if (fd < 0 || !(fd_tag(fd) & kTagEngine)) continue;
      FdObject* o = find_fd(fd);
      if (o != nullptr && o->epoll) {
        epolls_.emplace_back(i, o->epoll);  // the kernel answers for its kernel members, we for ours
        continue;
      }
      std::shared_ptr<Socket> s = o ? o->sock : nullptr;
      if (!s || !user_ready_phase(s->phase)) continue;  // a listener: the kernel answers
      ours_[i] = std::move(s);
      kernel_[i].fd = -1;
    }
    for (nfds_t i = 0; i < n; ++i) kernel_fds_ += kernel_[i].fd >= 0 ? 1 : 0;
  }
  int collect() override {
    int ready = 0;
    for (nfds_t i = 0; i < n_; ++i) {
      Socket* s = ours_[i].get();
      if (s == nullptr) continue;
      if (!user_ready_phase(s->phase) && !s->closed()) {
        // Decided plain TCP during this wait: from now on the kernel answers for it.
        kernel_[i].fd = app_[i].fd;
        kernel_[i].revents = 0;
        ours_[i].reset();
        ++kernel_fds_;
        continue;
      }
      const short want = app_[i].events;
      uint32_t r = readiness(*s, (want & POLLRDHUP) != 0);
      // poll reports HUP and ERR whether asked or not; the rest only when asked.
      short rev = static_cast<short>(r & (static_cast<uint32_t>(want) | POLLERR | POLLHUP));
      if (s->closed()) rev = POLLNVAL;
      kernel_[i].revents = rev;
      if (rev != 0) ++ready;
    }
    for (auto& [i, e] : epolls_) {
      const bool r = (app_[i].events & POLLIN) && epoll_user_ready(*e);
      user_in_[i] = r;
      if (r) ++ready;
    }
    return ready;
  }
  int kernel_wait(int backend, int bell, int timeout_ms, const sigset_t* mask, bool* backend_ready) override {
    // Only fds of ours and nothing to wait for: no system call (as CondSet).
    if (kernel_fds_ == 0 && backend < 0 && bell < 0 && timeout_ms == 0 && mask == nullptr) return 0;
    std::vector<pollfd>& k = kernel_;
    k[n_].fd = backend;
    k[n_ + 1].fd = bell;
    // Entries of ours keep the revents collect() gave them; the kernel zeroes fd -1 entries.
    std::vector<short> saved(n_);
    for (nfds_t i = 0; i < n_; ++i) saved[i] = ours_[i] ? k[i].revents : 0;
    const int r = kernel_poll(k.data(), n_ + 2, timeout_ms, mask);
    if (r < 0) return -1;
    *backend_ready = (backend >= 0 && k[n_].revents != 0) || (bell >= 0 && k[n_ + 1].revents != 0);
    int ready = 0;
    for (nfds_t i = 0; i < n_; ++i) {
      if (ours_[i]) k[i].revents = saved[i];
      else if (k[i].revents != 0) ++ready;
    }
    return ready;
  }
  bool backend_usable() const override { return true; }
  // Copies the results out; the count of entries with events.
  int finish() {
    int ready = 0;
    for (nfds_t i = 0; i < n_; ++i) {
      app_[i].revents = static_cast<short>(kernel_[i].revents | (user_in_.count(i) && user_in_[i] ? POLLIN : 0));
      if (app_[i].revents != 0) ++ready;
    }
    for (auto& s : ours_) s.reset();
    return ready;
  }

 private:
  pollfd* app_;
  nfds_t n_;
  std::vector<pollfd> kernel_;
  std::vector<std::shared_ptr<Socket>> ours_;
  std::vector<std::pair<nfds_t, std::shared_ptr<Epoll>>> epolls_;  // epoll instances of ours in the set
  std::map<nfds_t, bool> user_in_;  // ...readable through members of ours
  size_t kernel_fds_ = 0;           // entries the kernel answers for (fd >= 0 in kernel_)
};

}  // namespace

int timeout_from(const timespec* ts) {
  if (ts == nullptr) return -1;
  if (ts->tv_sec < 0 || ts->tv_nsec < 0) return 0;
  const long long ms = static_cast<long long>(ts->tv_sec) * 1000 + (ts->tv_nsec + 999'999) / 1'000'000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

int timeout_from(const timeval* tv) {
  if (tv == nullptr) return -1;
  if (tv->tv_sec < 0 || tv->tv_usec < 0) return 0;
  const long long ms = static_cast<long long>(tv->tv_sec) * 1000 + (tv->tv_usec + 999) / 1000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

namespace {

// The thread's polling policy (conduit/base/adaptive_spin.h): what its waits learnt.
AdaptiveSpin& thread_spin() {
  thread_local AdaptiveSpin spin = options().spin_us != 0 ? AdaptiveSpin::fixed(options().spin_us * 1000)
                                                          : AdaptiveSpin::adaptive(options().poll_us * 1000);
  return spin;
}

// What a poll holds back: every signal a program catches asynchronously.  Faults stay
// deliverable (a crash handler must still run); glibc keeps its own internal signals out.
const sigset_t& held_signals() {
  static const sigset_t set = [] {
    sigset_t s;
    sigfillset(&s);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&s, sig);
    return s;
  }();
  return set;
}

// One wait's poll window.  A signal whose handler runs while the wait polls must end the wait
// with EINTR, as it would without the preload.  Two ways:
// - Watched (the usual case: the program's handlers all run through signals.cc's counting
//   trampoline, and the call has no mask of its own): the poll leaves signals alone and
//   looks at the thread's count of handler runs every round and once more right before the
//   kernel wait (interrupted()).  No system call.
// - Held (epoll_pwait/ppoll/pselect with a mask, or a handler the preload could not wrap):
//   while it polls, the thread's signals are held back (blocked), so a signal that comes
//   meanwhile is not lost in a handler run between two polls: the poll sees it pending and
//   stops, and the kernel wait that follows -- under the program's own mask, atomically --
//   delivers it and returns EINTR.  The mask is put back (release()) only without the engine
//   lock: a handler may call in.  Two rt_sigprocmask calls per wait that polls.
class PollWindow {
 public:
  PollWindow(const sigset_t* mask, int timeout_ms)
      : spin_(thread_spin()),
        mask_(mask),
        enabled_(spin_.enabled() && timeout_ms != 0),
        watched_(mask == nullptr && signals_tracked()),
        handled_(signals_handled_here()) {}
  ~PollWindow() { release(); }
  PollWindow(const PollWindow&) = delete;
  PollWindow& operator=(const PollWindow&) = delete;

  // Nothing was ready at `now`: may the wait poll again rather than sleep?  Starts the gap
  // (and holds the signals back) on its first call.
  bool poll_more(uint64_t now) {
    if (!enabled_ || stopped_) return false;
    spin_.on_idle(now);
    // A round far longer than the usual one lost the CPU (contention): stop polling for a
    // while (AdaptiveSpin::on_round).
    if (last_ != 0) spin_.on_round(now - last_, now);
    last_ = now;
    if (now >= spin_.deadline()) return stop();
    if (watched_) {
      ++rounds_;
      return !interrupted() || stop();
    }
    if (!held_) {
      if (pthread_sigmask(SIG_BLOCK, &held_signals(), &saved_) != 0) return stop();
      held_ = true;
    }
    if ((++rounds_ % 8) == 0 && signal_waiting()) return stop();
    return true;
  }
  // Watched: a handler of the program ran on this thread since the wait began -- the wait
  // returns EINTR now (the kernel would have).  Always false when held (the kernel wait
  // delivers the signal and says EINTR itself).
  bool interrupted() const { return watched_ && signals_handled_here() != handled_; }
  // Every eighth round also looks at the program's kernel fds; the fourth in between yields
  // the core.
  bool kernel_round() const { return rounds_ % 8 == 0; }
  bool yield_round() const { return rounds_ % 8 == 4; }
  // The mask the kernel wait must use: the program's (its call's, or its thread's as it
  // was before the poll held signals back).
  const sigset_t* wait_mask() const { return held_ && mask_ == nullptr ? &saved_ : mask_; }
  void on_sleep() {
    stopped_ = true;
    if (enabled_) spin_.on_sleep();
  }
  // The wait ends (work, a timeout, a signal): the gap it measured.
  void on_end() {
    if (enabled_ && spin_.deadline() != UINT64_MAX) spin_.on_work(monotonic_ns());
    enabled_ = false;
  }
  // Puts the thread's mask back (call without the engine lock).
  void release() {
    if (!held_) return;
    held_ = false;
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }

 private:
  bool stop() {
    stopped_ = true;
    return false;
  }
  // A signal the wait's own mask lets through is pending.
  bool signal_waiting() const {
    sigset_t pending;
    if (sigpending(&pending) != 0) return true;
    const sigset_t* m = mask_ != nullptr ? mask_ : &saved_;
    for (int sig = 1; sig < NSIG; ++sig)
      if (sigismember(&pending, sig) == 1 && sigismember(m, sig) != 1) return true;
    return false;
  }

  AdaptiveSpin& spin_;
  const sigset_t* mask_;
  bool enabled_;
  bool stopped_ = false;  // polled, or may not: sleep from now on
  const bool watched_;    // signals.cc counts the handlers: nothing to hold back
  const uint64_t handled_;  // signals_handled_here() when the wait began
  bool held_ = false;
  unsigned rounds_ = 0;
  uint64_t last_ = 0;
  sigset_t saved_{};
};

}  // namespace

int wait_for(EngineLock& lk, WaitSet& ws, int timeout_ms, const sigset_t* mask) {
  const uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  // poll_us / spin_us: poll ours (and, every few rounds, the program's kernel fds without
  // blocking) before sleeping; see PollWindow for signals.
  PollWindow window(mask, timeout_ms);
  // Returns with the mask put back, not holding the lock meanwhile.
  auto finish = [&](int r) {
    window.on_end();
    const int err = errno;
    lk.unlock();
    window.release();
    lk.lock();
    errno = err;
    return r;
  };
  for (;;) {
    Engine* e = Engine::get();
    // The engine's loop: its hooks poll the rings and CQs every round; its fd events are
    // asked for every few rounds (Engine::drive), and a sleep below includes them.
    if (e != nullptr) e->drive(true);
    int ready = ws.collect();
    if (ready > 0) {
      // Ours are ready: look at the program's own fds without blocking (when the set says it
      // is their turn), then return both.
      bool b = false;
      lk.unlock();
      window.release();
      const int k = ws.kernel_due_when_ready() ? ws.kernel_wait(-1, -1, 0, mask, &b) : 0;
      lk.lock();
      window.on_end();
      return ready + (k > 0 ? k : 0);
    }
    const uint64_t now = e != nullptr ? e->loop_now_ns() : monotonic_ns();  // the drive just read it
    if (now < deadline && window.poll_more(now)) {
      bool b = false;
      lk.unlock();
      // A peer on this core needs it to answer: yield every few polls (a no-op when nothing
      // else wants the core; a system call all the same, so not at every round).
      int k = 0;
      if (window.kernel_round())
        k = ws.kernel_wait(-1, -1, 0, window.wait_mask(), &b);
      else if (window.yield_round())
        sched_yield();
      else
        cpu_relax();
      const int err = errno;
      lk.lock();
      if (k < 0) {
        errno = err;
        return finish(-1);
      }
      if (k > 0) return finish(k + ws.collect());
      continue;  // drive and collect again
    }
    if (window.interrupted()) {
      errno = EINTR;
      return finish(-1);
    }
    int t = timeout_ms < 0 ? -1 : (now >= deadline ? 0 : static_cast<int>((deadline - now + 999'999) / 1'000'000));
    int backend = -1, bell = -1;
    uint64_t gen = 0;
    if (e != nullptr) {
      backend = e->backend_fd();
      bell = e->bell_fd();
      const int pt = e->poll_timeout_ms();
      if (pt >= 0 && (t < 0 || pt < t)) t = pt;
      if (e->bell_stale() && !ws.holds_bell()) {
        bell = -1;
        if (t < 0 || t > 1) t = 1;
      }
      if (!ws.backend_usable() && (t < 0 || t > 1)) t = 1;
      gen = e->begin_wait();
    }
    window.on_sleep();
    bool backend_ready = false;
    lk.unlock();
    const int k = ws.kernel_wait(backend, bell, t, window.wait_mask(), &backend_ready);
    const int err = errno;
    window.release();
    lk.lock();
    if (e != nullptr && process().engine == e) e->end_wait(gen);
    if (k < 0) {
      window.on_end();
      errno = err;
      return -1;
    }
    if (k > 0) {
      if (backend_ready && (e = Engine::get()) != nullptr) {
        e->drive();
        ready = ws.collect();
      }
      window.on_end();
      return k + ready;
    }
    if (timeout_ms == 0 || (timeout_ms > 0 && monotonic_ns() >= deadline)) {
      window.on_end();
      if (e != nullptr && backend_ready) {
        e->drive();
        return ws.collect();
      }
      return 0;
    }
  }
}

int wait_socket(EngineLock& lk, const std::shared_ptr<Socket>& s, uint32_t events, int64_t timeout_ms) {
  CondSet set(s, events);
  const int t = timeout_ms < 0 ? -1 : static_cast<int>(std::min<int64_t>(timeout_ms, INT_MAX));
  return wait_for(lk, set, t, nullptr);
}

int wait_kernel_fd(EngineLock& lk, int fd, short events, int64_t timeout_ms) {
  CondSet set(fd, events);
  const int t = timeout_ms < 0 ? -1 : static_cast<int>(std::min<int64_t>(timeout_ms, INT_MAX));
  return wait_for(lk, set, t, nullptr);
}

int preload_poll(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* mask) {
  EngineLock lk;
  PollSet set(fds, n);
  const int r = wait_for(lk, set, timeout_ms, mask);
  if (r < 0) {
    const int err = errno;
    set.finish();
    errno = err;
    return -1;
  }
  return set.finish();
}

int preload_select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv, const timespec* ts,
                   const sigset_t* mask) {
  if (nfds < 0 || nfds > FD_SETSIZE) {
    errno = EINVAL;
    return -1;
  }
  std::vector<pollfd> p;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (r && FD_ISSET(fd, r)) ev |= POLLIN;
    if (w && FD_ISSET(fd, w)) ev |= POLLOUT;
    if (x && FD_ISSET(fd, x)) ev |= POLLPRI;
    if (ev != 0) p.push_back({fd, ev, 0});
  }
  const int timeout = tv ? timeout_from(tv) : timeout_from(ts);
  const uint64_t start = monotonic_ns();
  const int rc = preload_poll(p.data(), p.size(), timeout, mask);
  if (tv != nullptr && timeout > 0) {
    const uint64_t spent_us = (monotonic_ns() - start) / 1000;
    const uint64_t total_us = static_cast<uint64_t>(tv->tv_sec) * 1'000'000 + static_cast<uint64_t>(tv->tv_usec);
    const uint64_t left = spent_us >= total_us ? 0 : total_us - spent_us;
    tv->tv_sec = static_cast<time_t>(left / 1'000'000);
    tv->tv_usec = static_cast<suseconds_t>(left % 1'000'000);
  }
  if (rc < 0) return -1;
  // select's answer: POLLNVAL is EBADF for the whole call; HUP and ERR count as readable
  // (and writable when asked), as the kernel's select does.
  for (const pollfd& q : p)
    if (q.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
  if (r) FD_ZERO(r);
  if (w) FD_ZERO(w);
  if (x) FD_ZERO(x);
  int count = 0;
  for (const pollfd& q : p) {
    if (r && (q.events & POLLIN) && (q.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(q.fd, r), ++count;
    if (w && (q.events & POLLOUT) && (q.revents & (POLLOUT | POLLERR))) FD_SET(q.fd, w), ++count;
    if (x && (q.events & POLLPRI) && (q.revents & POLLPRI)) FD_SET(q.fd, x), ++count;
  }
  return count;
}

}  // namespace conduit::preload
