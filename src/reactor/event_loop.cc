#include "conduit/reactor/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::reactor {
namespace {

uint32_t to_epoll(uint32_t events) {
  // Half-close (RDHUP) is only news to a reader; a writer waiting for space must not be
  // woken forever by a peer that merely stopped sending.
  uint32_t e = 0;
  if (events & kReadable) e |= EPOLLIN | EPOLLRDHUP;
  if (events & kWritable) e |= EPOLLOUT;
  if (events & kEdgeTriggered) e |= EPOLLET;
  return e;
}

uint32_t from_epoll(uint32_t e) {
  uint32_t out = 0;
  if (e & (EPOLLIN | EPOLLPRI)) out |= kReadable;
  if (e & EPOLLOUT) out |= kWritable;
  if (e & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) out |= kHangup;
  return out;
}

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create(const LoopOptions& options) {
  if (options.max_events <= 0) return Status(Code::kInvalidArgument, "EventLoop: max_events must be > 0");
  UniqueFd ep(epoll_create1(EPOLL_CLOEXEC));
  if (!ep) return Status::FromErrnoAuto(errno, "epoll_create1");
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return Status::FromErrnoAuto(errno, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wakeup fd is the only entry with a null pointer
  if (epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) return Status::FromErrno(errno, "epoll_ctl(eventfd)");
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(ep), std::move(wake), options));
}

EventLoop::EventLoop(UniqueFd epfd, UniqueFd wakefd, const LoopOptions& options)
    : epfd_(std::move(epfd)),
      wakefd_(std::move(wakefd)),
      options_(options),
      spin_(options.busy_poll_us != 0 ? AdaptiveSpin::fixed(options.busy_poll_us * 1000ull)
                                      : AdaptiveSpin::adaptive(options.poll_us * 1000ull)) {}

EventLoop::~EventLoop() {
  // Whoever destroys the loop is its thread now (e.g. after a LoopGroup joined its runner).
  owner_.store(std::thread::id(), std::memory_order_relaxed);
  // Work on a moved-out list: a teardown function may remove itself or others.
  std::vector<std::pair<HookId, std::function<void()>>> fns = std::move(teardown_);
  teardown_.clear();
  for (auto& [id, fn] : fns) {
    (void)id;
    if (fn) fn();
  }
  if (!fds_.empty())
    CONDUIT_LOG(kDebug) << "EventLoop destroyed with " << fds_.size() << " fd(s) still registered";
}

void* EventLoop::slot(const void* key) const {
  assert_loop_thread();
  for (const auto& [k, v] : slots_)
    if (k == key) return v;
  return nullptr;
}

void EventLoop::set_slot(const void* key, void* value) {
  assert_loop_thread();
  for (auto it = slots_.begin(); it != slots_.end(); ++it) {
    if (it->first != key) continue;
    if (value == nullptr) slots_.erase(it);
    else it->second = value;
    return;
  }
  if (value != nullptr) slots_.emplace_back(key, value);
}

bool EventLoop::in_loop_thread() const {
  const std::thread::id owner = owner_.load(std::memory_order_relaxed);
  return owner == std::thread::id() || owner == std::this_thread::get_id();
}

void EventLoop::assert_loop_thread() const {
  assert(in_loop_thread() && "EventLoop method called off its loop thread");
}

Status EventLoop::add(int fd, uint32_t events, FdHandler* handler) {
  assert_loop_thread();
  if (fd < 0 || handler == nullptr) return Status(Code::kInvalidArgument, "EventLoop::add: bad fd or null handler");
  if (fds_.count(fd) != 0) return Status(Code::kInvalidArgument, "EventLoop::add: fd " + std::to_string(fd) + " already registered");
  auto entry = std::make_unique<FdEntry>(FdEntry{fd, events, handler, true});
  epoll_event ev{};
  ev.events = to_epoll(events);
  ev.data.ptr = entry.get();
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    return Status::FromErrnoAuto(errno, "epoll_ctl(ADD, fd " + std::to_string(fd) + ")");
  fds_.emplace(fd, std::move(entry));
  return {};
}

Status EventLoop::modify(int fd, uint32_t events) {
  assert_loop_thread();
  auto it = fds_.find(fd);
  if (it == fds_.end()) return Status(Code::kNotFound, "EventLoop::modify: fd " + std::to_string(fd) + " not registered");
  if (it->second->events == events) return {};
  epoll_event ev{};
  ev.events = to_epoll(events);
  ev.data.ptr = it->second.get();
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0)
    return Status::FromErrnoAuto(errno, "epoll_ctl(MOD, fd " + std::to_string(fd) + ")");
  it->second->events = events;
  return {};
}

Status EventLoop::remove(int fd) {
  assert_loop_thread();
  auto it = fds_.find(fd);
  if (it == fds_.end()) return Status(Code::kNotFound, "EventLoop::remove: fd " + std::to_string(fd) + " not registered");
  // EBADF/ENOENT: the fd was closed already, which removed it from epoll; not an error.
  if (epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != EBADF && errno != ENOENT)
    CONDUIT_LOG(kWarn) << "epoll_ctl(DEL, fd " << fd << "): " << std::strerror(errno);
  it->second->alive = false;
  graveyard_.push_back(std::move(it->second));
  fds_.erase(it);
  return {};
}

TimerId EventLoop::run_after(uint64_t delay_ns, std::function<void()> fn) {
  assert_loop_thread();
  const TimerId id = next_timer_id_++;
  timers_.emplace(id, TimerFn{0, std::move(fn)});
  timer_heap_.push_back(Timer{monotonic_ns() + delay_ns, id});
  std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  return id;
}

TimerId EventLoop::run_every(uint64_t period_ns, std::function<void()> fn) {
  assert_loop_thread();
  if (period_ns == 0) period_ns = 1;
  const TimerId id = next_timer_id_++;
  timers_.emplace(id, TimerFn{period_ns, std::move(fn)});
  timer_heap_.push_back(Timer{monotonic_ns() + period_ns, id});
  std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  return id;
}

void EventLoop::cancel(TimerId id) {
  assert_loop_thread();
  timers_.erase(id);  // the heap entry is dropped lazily when it reaches the top
  // ...unless stale entries pile up under long-lived timers (a connection re-arming a long
  // timeout): rebuild the heap once they outnumber the live ones.
  if (timer_heap_.size() > 64 && timer_heap_.size() > 2 * timers_.size()) {
    std::erase_if(timer_heap_, [this](const Timer& t) { return !timers_.contains(t.id); });
    std::make_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  }
}

void EventLoop::post(std::function<void()> fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
    posted_pending_.store(true, std::memory_order_release);
  }
  if (was_empty) wake();
}

void EventLoop::wake() {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated, i.e. a wakeup is pending anyway.
  ssize_t n = ::write(wakefd_.get(), &one, sizeof one);
  (void)n;
}

void EventLoop::stop() {
  stop_.store(true, std::memory_order_release);
  wake();
}

EventLoop::HookId EventLoop::add_before_sleep(std::function<bool()> hook) {
  assert_loop_thread();
  const HookId id = next_hook_id_++;
  hooks_.emplace_back(id, std::move(hook));
  return id;
}

void EventLoop::remove_before_sleep(HookId id) {
  assert_loop_thread();
  for (auto& h : hooks_)
    if (h.first == id) h.second = nullptr;  // compacted in run_hooks (may be running now)
}

EventLoop::HookId EventLoop::add_teardown(std::function<void()> fn) {
  assert_loop_thread();
  const HookId id = next_hook_id_++;
  teardown_.emplace_back(id, std::move(fn));
  return id;
}

void EventLoop::remove_teardown(HookId id) {
  assert_loop_thread();
  teardown_.erase(std::remove_if(teardown_.begin(), teardown_.end(), [id](const auto& t) { return t.first == id; }),
                  teardown_.end());
}

int EventLoop::next_timeout_ms(uint64_t now) {
  // Cancelled timers stay in the heap until they reach the top (lazy cancel); drop them
  // here so a cancelled deadline never cuts a sleep short.
  while (!timer_heap_.empty() && !timers_.contains(timer_heap_.front().id)) {
    std::pop_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
    timer_heap_.pop_back();
  }
  if (timer_heap_.empty()) return -1;
  const uint64_t deadline = timer_heap_.front().deadline;
  if (deadline <= now) return 0;
  // Round up so a timer never fires early.
  const uint64_t ms = (deadline - now + 999'999) / 1'000'000;
  return ms > 60'000 ? 60'000 : static_cast<int>(ms);
}

bool EventLoop::run_timers(uint64_t now) {
  bool ran = false;
  while (!timer_heap_.empty() && timer_heap_.front().deadline <= now) {
    std::pop_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
    const Timer t = timer_heap_.back();
    timer_heap_.pop_back();
    auto it = timers_.find(t.id);
    if (it == timers_.end()) continue;  // cancelled
    ran = true;
    if (it->second.period == 0) {
      std::function<void()> fn = std::move(it->second.fn);
      timers_.erase(it);
      fn();
    } else {
      timer_heap_.push_back(Timer{now + it->second.period, t.id});
      std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
      // Copy: the callback may cancel itself, which erases the map entry under us.
      std::function<void()> fn = it->second.fn;
      fn();
    }
  }
  return ran;
}

size_t EventLoop::run_posted() {
  if (!posted_pending_.load(std::memory_order_acquire)) return 0;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    running_.swap(posted_);
    posted_pending_.store(false, std::memory_order_relaxed);
  }
  const size_t n = running_.size();
  for (auto& fn : running_) fn();
  running_.clear();
  return n;
}

bool EventLoop::run_hooks() {
  bool pending = false;
  // Index loop: a hook may add hooks (appended; they run next iteration).
  const size_t n = hooks_.size();
  for (size_t i = 0; i < n; ++i) {
    if (hooks_[i].second) {
      auto hook = hooks_[i].second;  // copy: the hook may remove itself
      pending = hook() || pending;
    }
  }
  hooks_.erase(std::remove_if(hooks_.begin(), hooks_.end(), [](const auto& h) { return !h.second; }), hooks_.end());
  return pending;
}

// Polls epoll_wait(0) (and the hooks, which may poll rings or CQs) without sleeping while
// the policy's window is open, then blocks.  The window (conduit/base/adaptive_spin.h) is
// fixed for busy_poll_us and tuned for poll_us: the idle gap starts at the first empty poll
// and ends when an fd event (or a hook's work) arrives, caught while spinning or after the
// sleep.  A poll that took far longer than usual (PreemptionBar) means the spinning thread
// lost its CPU: the policy backs off.  Never spins past the caller's timeout or the
// next timer.
int EventLoop::spin_wait(epoll_event* events, int max_events, int wait_ms, bool* hooks_pending) {
  *hooks_pending = false;
  const uint64_t start = monotonic_ns();
  uint64_t before = start;
  int n = epoll_wait(epfd_.get(), events, max_events, 0);
  uint64_t now = monotonic_ns();
  if (n == 0) {
    spin_.on_idle(before);
    uint64_t until = spin_.deadline();
    if (wait_ms > 0) until = std::min<uint64_t>(until, now + static_cast<uint64_t>(wait_ms) * 1'000'000ull);
    while (n == 0 && now < until && !stop_.load(std::memory_order_relaxed)) {
      if ((*hooks_pending = run_hooks())) break;  // a hook has work: return to the caller
      before = monotonic_ns();
      n = epoll_wait(epfd_.get(), events, max_events, 0);
      now = monotonic_ns();
      if (spin_.on_round(now - before, now)) until = std::min(until, spin_.deadline());
    }
    if (n == 0 && !*hooks_pending) {
      spin_.on_sleep();
      if (wait_ms > 0) {  // the caller's timeout counts from the start of the spin
        const uint64_t spent_ms = (now - start) / 1'000'000ull;
        wait_ms = spent_ms >= static_cast<uint64_t>(wait_ms) ? 0 : wait_ms - static_cast<int>(spent_ms);
      }
      const int t = next_timeout_ms(now);
      if (t >= 0 && (wait_ms < 0 || t < wait_ms)) wait_ms = t;
      n = epoll_wait(epfd_.get(), events, max_events, wait_ms);
      if (n > 0) ++wakeups_;
      now = monotonic_ns();
    }
  }
  if (n > 0 || *hooks_pending) spin_.on_work(now);
  return n;
}

Status EventLoop::run_once(int timeout_ms) { return iterate(timeout_ms, true); }

Status EventLoop::poll_once() { return iterate(0, false); }

Status EventLoop::iterate(int timeout_ms, bool ask_kernel) {
  const std::thread::id self = std::this_thread::get_id();
  std::thread::id expected{};
  owner_.compare_exchange_strong(expected, self);
  assert_loop_thread();
  ++iterations_;
  struct InIteration {  // restores the flag on every way out (a nested run_once included)
    bool& flag;
    bool was;
    ~InIteration() { flag = was; }
  } in_iteration{in_iteration_, in_iteration_};
  in_iteration_ = true;
  // now_ns() reads the clock when first asked in this iteration (and again after a wait
  // that may block): an iteration nobody asks the time of reads none.
  now_stale_ = true;

  // Posted work may have changed what the caller waits for: don't sleep after running any.
  const bool ran_posted = run_posted() > 0;
  const bool hooks_pending = run_hooks();
  int wait_ms = timeout_ms;
  if (wait_ms != 0) {
    // No live timer: no clock read (a system call where the clock source has no vDSO path).
    const int timer_ms = timers_.empty() ? -1 : next_timeout_ms(monotonic_ns());
    if (timer_ms >= 0 && (wait_ms < 0 || timer_ms < wait_ms)) wait_ms = timer_ms;
  }
  const bool has_posted = posted_pending_.load(std::memory_order_acquire);
  if (ran_posted || hooks_pending || has_posted || stop_.load(std::memory_order_acquire)) wait_ms = 0;

  epoll_event events[256];
  const int max_events = std::min<int>(options_.max_events, 256);
  int n;
  bool spin_pending = false;
  const bool spin = wait_ms != 0 && spin_.enabled();
  if (!ask_kernel) {
    n = 0;  // poll_once(): fd events wait for the next run_once()
  } else if (spin) {
    n = spin_wait(events, max_events, wait_ms, &spin_pending);
  } else {
    // One system call per iteration: a ready fd returns at once, otherwise this is the sleep.
    n = epoll_wait(epfd_.get(), events, max_events, wait_ms);
    if (n > 0 && wait_ms != 0) ++wakeups_;
  }
  if (wait_ms != 0) now_stale_ = true;
  if (!spin && n > 0 && spin_.enabled()) spin_.on_work(now_ns());  // ends an idle gap
  if (n < 0) {
    if (errno != EINTR) return Status::FromErrno(errno, "epoll_wait");
    n = 0;
  }
  bool dispatched = false;
  for (int i = 0; i < n; ++i) {
    auto* entry = static_cast<FdEntry*>(events[i].data.ptr);
    if (entry == nullptr) {
      uint64_t drained;
      while (::read(wakefd_.get(), &drained, sizeof drained) > 0) {
      }
      continue;
    }
    if (!entry->alive) continue;  // removed by an earlier handler in this batch
    dispatched = true;
    entry->handler->on_events(from_epoll(events[i].events));
  }
  graveyard_.clear();
  // The timers read the clock afresh, so that a zero-delay timer a handler set in this
  // iteration runs at its end, as run_after promises; with no timer there is nothing to read
  // it for.
  if (timers_.empty()) timer_heap_.clear();  // only cancelled entries were left (lazy cancel)
  if (!timer_heap_.empty()) {
    now_ns_ = monotonic_ns();
    now_stale_ = false;
    dispatched = run_timers(now_ns_) || dispatched;
  }
  last_busy_ = dispatched || hooks_pending || spin_pending;
  return {};
}

int EventLoop::poll_timeout_ms() { return poll_timeout_ms(monotonic_ns()); }

int EventLoop::poll_timeout_ms(uint64_t now) {
  assert_loop_thread();
  if (last_busy_) return 0;
  if (posted_pending_.load(std::memory_order_acquire)) return 0;
  return next_timeout_ms(now);
}

Status EventLoop::run() {
  // A stop() that came before run() started is honoured; the flag is cleared on the way
  // out so the loop can be run again.
  while (!stop_.load(std::memory_order_acquire)) CONDUIT_RETURN_IF_ERROR(run_once(-1));
  run_posted();
  stop_.store(false, std::memory_order_release);
  return {};
}

// ---------------------------------------------------------------------------------------

Result<std::unique_ptr<LoopGroup>> LoopGroup::start(int threads, const LoopOptions& options) {
  if (threads <= 0) return Status(Code::kInvalidArgument, "LoopGroup: threads must be > 0");
  std::unique_ptr<LoopGroup> g(new LoopGroup());
  for (int i = 0; i < threads; ++i) {
    CONDUIT_ASSIGN_OR_RETURN(auto loop, EventLoop::create(options));
    g->loops_.push_back(std::move(loop));
  }
  for (auto& loop : g->loops_) {
    EventLoop* l = loop.get();
    g->threads_.emplace_back([l] {
      Status s = l->run();
      if (!s.ok()) CONDUIT_LOG(kError) << "event loop failed: " << s.to_string();
    });
  }
  return g;
}

LoopGroup::~LoopGroup() { stop(); }

EventLoop& LoopGroup::next() { return *loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()]; }

void LoopGroup::stop() {
  for (auto& l : loops_) l->stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace conduit::reactor
