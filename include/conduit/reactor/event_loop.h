// EventLoop: one epoll loop per thread, with timers, cross-thread post(), before-sleep
// hooks and optional bounded busy polling.
//
// Threading: an EventLoop is driven by exactly one thread (the one that calls run() or
// run_once()).  Everything except post(), stop() and wake() must be called on that thread
// (asserted in debug builds).  Handlers run on the loop thread and must not block.
//
// Lifetime: an FdHandler must stay alive while registered; remove() it before destroying
// it.  remove() may be called from inside any handler, including for an fd whose event is
// already in the current batch: that event is then dropped, never delivered to a dead
// handler.
//
// Cost: one epoll_wait per iteration; no allocation per event.  Timers are a binary heap
// (O(log n) add, lazy cancel).  post() takes a mutex and writes the eventfd only when the
// queue was empty, so bursts cost one wakeup.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "conduit/base/adaptive_spin.h"
#include "conduit/base/clock.h"
#include "conduit/base/fd.h"
#include "conduit/base/status.h"

struct epoll_event;

namespace conduit::reactor {

// Readiness bits passed to FdHandler::on_events and used in add()/modify().
inline constexpr uint32_t kReadable = 1u << 0;
inline constexpr uint32_t kWritable = 1u << 1;
inline constexpr uint32_t kHangup = 1u << 2;  // peer closed or error (EPOLLHUP/EPOLLERR/EPOLLRDHUP)
// add()/modify() only: report each new readiness once (EPOLLET) instead of while it lasts.
// For an eventfd every write is a new edge, so a doorbell need not be read to re-arm.
inline constexpr uint32_t kEdgeTriggered = 1u << 3;

class FdHandler {
 public:
  virtual ~FdHandler() = default;
  virtual void on_events(uint32_t events) = 0;
};

struct LoopOptions {
  // Spin (epoll_wait with zero timeout) for up to this long before blocking when there is
  // nothing to do.  0 = always block.  Trades a core for wakeup latency.  Fixed: for
  // dedicated cores; wins over poll_us.
  uint32_t busy_poll_us = 0;
  // Adaptive spinning (conduit/base/adaptive_spin.h): spin on epoll_wait(0) for a window of
  // at most this long before blocking, tuned from the idle gaps the loop sees -- it polls
  // while traffic is dense (a request/response exchange then costs no wakeup on either
  // side) and stops for idle or contended loops (a spin that loses its CPU backs off).
  // 0 = off (block at once).  Cost: up to one window of CPU per idle transition.
  uint32_t poll_us = 0;
  int max_events = 256;  // epoll events fetched per iteration
};

using TimerId = uint64_t;

class EventLoop {
 public:
  static Result<std::unique_ptr<EventLoop>> create(const LoopOptions& options = {});
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // --- file descriptors (loop thread) -------------------------------------------------
  // Level-triggered unless kEdgeTriggered.  kHangup is always reported; ask for
  // kReadable/kWritable.
  Status add(int fd, uint32_t events, FdHandler* handler);
  Status modify(int fd, uint32_t events);
  Status remove(int fd);
  bool watching(int fd) const { return fds_.count(fd) != 0; }

  // --- timers (loop thread) -----------------------------------------------------------
  // fn runs once after `delay_ns` (>= 0).  Returns an id for cancel().
  TimerId run_after(uint64_t delay_ns, std::function<void()> fn);
  // fn runs every `period_ns` (> 0), first after one period, until cancelled.
  TimerId run_every(uint64_t period_ns, std::function<void()> fn);
  // Cancels a pending timer; unknown or fired ids are ignored.  Safe inside timer callbacks
  // (a periodic timer may cancel itself).
  void cancel(TimerId id);

  // --- cross-thread -------------------------------------------------------------------
  // Runs fn on the loop thread soon (FIFO order).  Thread-safe; callable before run().
  void post(std::function<void()> fn);
  // Makes a sleeping loop return from epoll_wait.  Thread-safe.
  void wake();
  // Makes run() return after the current iteration.  Thread-safe.
  void stop();

  // --- before-sleep hooks (loop thread) -----------------------------------------------
  // Called every iteration before the loop would sleep (Redis' beforeSleep).  A hook
  // returns true if it still has work pending; then the loop does not sleep this round.
  using HookId = uint64_t;
  HookId add_before_sleep(std::function<bool()> hook);
  void remove_before_sleep(HookId id);

  // --- teardown (loop thread) ---------------------------------------------------------
  // fn runs once from ~EventLoop, before anything of the loop is torn down, in the order
  // added.  For state a transport keeps beyond its users' objects (an RDMA connection
  // finishing a graceful close after its owner destroyed it): the loop is going away, so
  // such state must be released now.  fn may still call remove()/cancel(), nothing else.
  HookId add_teardown(std::function<void()> fn);
  void remove_teardown(HookId id);

  // --- per-loop state of the layers above (loop thread) --------------------------------
  // One pointer per key, where the key is the address of something the owning layer
  // defines once (e.g. a static in the rdma transport, for its per-loop context).  The loop
  // neither owns nor frees what a slot points to: the owner releases it, typically from a
  // teardown function.  Lookup is a scan of a handful of entries: no allocation, no lock.
  void* slot(const void* key) const;
  void set_slot(const void* key, void* value);  // nullptr clears the slot

  // --- driving ------------------------------------------------------------------------
  // Runs until stop().  Binds the loop to the calling thread.
  Status run();
  // One iteration: hooks, wait at most timeout_ms (-1 = until an event or timer), dispatch.
  Status run_once(int timeout_ms);
  // run_once(0) without asking the kernel: posted work, the before-sleep hooks and due
  // timers; fd events wait for the next run_once().  For an embedder that polls in a tight
  // loop (the preload's busy waits) and asks the kernel only every few rounds: no system
  // call unless a hook or timer makes one.  Loop thread; O(hooks).
  Status poll_once();

  bool in_loop_thread() const;

  // --- embedding in another wait (loop thread) ------------------------------------------
  // For an embedder that waits for this loop inside its own poll/select/epoll call (the
  // preload library waits inside the application's epoll_wait): call run_once(0), then wait
  // on backend_fd() together with the embedder's own fds for at most poll_timeout_ms(), then
  // call run_once(0) again.  That is exactly what run_once(-1) does, with the wait moved out.
  //
  // backend_fd(): the loop's epoll fd; it polls readable while an fd event awaits dispatch.
  // Never read or close it; add it to the embedder's poll set (or its epoll set) only.
  int backend_fd() const { return epfd_.get(); }
  // How long the embedder may wait on backend_fd() before calling run_once() again: 0 when
  // the last iteration left work (a hook reported work -- e.g. a busy-polling transport still
  // inside its spin window --, fd events or timers were dispatched, whose handlers may need
  // the before-sleep hooks to run again, or work was posted since); else the time to the next
  // timer, -1 if there is none.  O(1).  The overload takes the time now (monotonic ns) from
  // a caller that has just read it (e.g. now_ns() right after run_once(0)), saving a clock
  // read.
  int poll_timeout_ms();
  int poll_timeout_ms(uint64_t now);
  // The last iteration left work (a hook reported work -- e.g. a polling transport inside
  // its spin window --, or handlers or timers ran): its hooks will look again by themselves.
  // False: what comes next may be announced by an fd event only (a transport that armed its
  // completion channel or doorbell), so an embedder that polls with poll_once() should ask
  // the kernel (run_once(0)) next.  O(1).
  bool last_iteration_busy() const { return last_busy_; }
  // Makes the calling thread the loop thread.  For an embedder that serialises every use of
  // the loop under its own lock and drives it from whichever thread holds that lock.
  void adopt_current_thread() { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  // The loop's clock (monotonic ns, base/clock.h), read at most once per stretch of an
  // iteration: the first call after the iteration started or after a wait that could block
  // returned reads it, later calls get that value; the timers' run reads it afresh (when
  // there are timers).  For handlers and hooks that need "about now" (last-received stamps,
  // spin windows) without a clock read each: a read is a system call where the clock source
  // has no vDSO path (the TCG testbed guest: ~5 us each), and an iteration in which nobody
  // asks reads none.  Stale by the time the iteration has run since.  Loop thread; O(1).
  uint64_t now_ns() const {
    if (now_stale_) {
      now_ns_ = monotonic_ns();
      now_stale_ = false;
    }
    return now_ns_;
  }
  // "About now" from code that runs both inside iterations (handlers, hooks) and outside
  // them (an application's call between iterations): now_ns() inside an iteration, a fresh
  // read outside one, where the last iteration's reading may be arbitrarily old.  Loop
  // thread; O(1), at most one clock read.
  uint64_t about_now_ns() const { return in_iteration_ ? now_ns() : monotonic_ns(); }
  // Number of wakeups from a blocking wait (for counters and tests).
  uint64_t wakeups() const { return wakeups_; }
  uint64_t iterations() const { return iterations_; }
  // The loop's polling policy (poll_us / busy_poll_us; off when neither): its window and
  // what it saw (hits, short misses, idle gaps, preemptions) -- for stats and tests.
  const AdaptiveSpin& spin() const { return spin_; }
  // True while run_once() runs (its hooks, handlers and timers): a hook that ran in this
  // iteration will not run again before the loop blocks.  Outside it, the next run_once()
  // runs every hook first.
  bool in_iteration() const { return in_iteration_; }
  // Destroys `obj` on the loop thread after the current dispatch (e.g. a connection that
  // is closed from inside its own handler).
  template <typename T>
  void destroy_later(std::unique_ptr<T> obj) {
    post([p = std::shared_ptr<T>(std::move(obj))]() mutable { p.reset(); });
  }

 private:
  struct FdEntry {
    int fd;
    uint32_t events;
    FdHandler* handler;
    bool alive;
  };
  struct Timer {
    uint64_t deadline;
    TimerId id;
    bool operator>(const Timer& o) const { return deadline > o.deadline || (deadline == o.deadline && id > o.id); }
  };
  struct TimerFn {
    uint64_t period;  // 0 = one-shot
    std::function<void()> fn;
  };

  EventLoop(UniqueFd epfd, UniqueFd wakefd, const LoopOptions& options);
  int next_timeout_ms(uint64_t now);
  // The wait of one iteration when spinning (spin_ enabled, wait_ms != 0): epoll_wait(0)
  // and the hooks until an event, a hook with work, or the window's end; then the blocking
  // wait.  Returns epoll_wait's count; *hooks_pending when a hook ended the spin.
  int spin_wait(epoll_event* events, int max_events, int wait_ms, bool* hooks_pending);
  bool run_timers(uint64_t now);  // true if any ran
  size_t run_posted();
  bool run_hooks();
  // run_once() and poll_once(): one iteration, with or without the epoll_wait.
  Status iterate(int timeout_ms, bool ask_kernel);
  void assert_loop_thread() const;

  UniqueFd epfd_;
  UniqueFd wakefd_;
  LoopOptions options_;
  AdaptiveSpin spin_;  // from busy_poll_us (fixed) or poll_us (adaptive)
  std::unordered_map<int, std::unique_ptr<FdEntry>> fds_;
  std::vector<std::unique_ptr<FdEntry>> graveyard_;  // removed during dispatch; freed after
  std::vector<Timer> timer_heap_;
  std::unordered_map<TimerId, TimerFn> timers_;
  TimerId next_timer_id_ = 1;
  std::vector<std::pair<HookId, std::function<bool()>>> hooks_;
  HookId next_hook_id_ = 1;
  std::vector<std::pair<HookId, std::function<void()>>> teardown_;
  std::vector<std::pair<const void*, void*>> slots_;

  std::mutex post_mu_;
  std::vector<std::function<void()>> posted_;
  // !posted_.empty(), written under post_mu_: the loop looks at it without the mutex, so an
  // iteration with nothing posted takes no lock (post() wakes the loop for what it adds).
  std::atomic<bool> posted_pending_{false};
  std::vector<std::function<void()>> running_;
  std::atomic<bool> stop_{false};
  std::atomic<std::thread::id> owner_{};
  uint64_t wakeups_ = 0;
  uint64_t iterations_ = 0;
  bool in_iteration_ = false;
  mutable uint64_t now_ns_ = 0;   // now_ns(): the last read
  mutable bool now_stale_ = true;  // now_ns() reads the clock at its next call
  bool last_busy_ = false;  // the last run_once left work for the next (poll_timeout_ms)
};

// N loops on N threads; connections are pinned to one loop each (next() round-robins).
class LoopGroup {
 public:
  static Result<std::unique_ptr<LoopGroup>> start(int threads, const LoopOptions& options = {});
  ~LoopGroup();  // stops and joins
  LoopGroup(const LoopGroup&) = delete;
  LoopGroup& operator=(const LoopGroup&) = delete;

  size_t size() const { return loops_.size(); }
  EventLoop& loop(size_t i) { return *loops_[i]; }
  EventLoop& next();  // thread-safe
  void stop();        // stops every loop and joins the threads; idempotent

 private:
  LoopGroup() = default;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
};

}  // namespace conduit::reactor
