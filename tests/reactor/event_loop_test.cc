#include "conduit/reactor/event_loop.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"

namespace conduit::reactor {
namespace {

constexpr uint64_t kMs = 1'000'000;

std::unique_ptr<EventLoop> make_loop(LoopOptions o = {}) {
  auto l = EventLoop::create(o);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  return std::move(l).value();
}

// Runs the loop until pred() or the deadline; returns pred().
template <typename Pred>
bool run_until(EventLoop& loop, Pred pred, int timeout_ms = 5000) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * kMs;
  while (!pred() && monotonic_ns() < deadline) {
    Status s = loop.run_once(10);
    if (!s.ok()) return false;
  }
  return pred();
}

struct CountingHandler : FdHandler {
  std::function<void(uint32_t)> fn;
  int calls = 0;
  void on_events(uint32_t ev) override {
    ++calls;
    if (fn) fn(ev);
  }
};

TEST(EventLoop, DeliversReadableAndRemoveStopsIt) {
  auto loop = make_loop();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  CountingHandler h;
  uint32_t seen = 0;
  h.fn = [&](uint32_t ev) {
    seen |= ev;
    char buf[16];
    (void)!read(fds[0], buf, sizeof buf);
  };
  ASSERT_TRUE(loop->add(fds[0], kReadable, &h).ok());
  EXPECT_FALSE(loop->add(fds[0], kReadable, &h).ok()) << "double add must fail";
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  ASSERT_TRUE(run_until(*loop, [&] { return h.calls > 0; }));
  EXPECT_TRUE(seen & kReadable);
  ASSERT_TRUE(loop->remove(fds[0]).ok());
  EXPECT_FALSE(loop->watching(fds[0]));
  ASSERT_EQ(write(fds[1], "y", 1), 1);
  const int before = h.calls;
  ASSERT_TRUE(loop->run_once(20).ok());
  EXPECT_EQ(h.calls, before);
  EXPECT_EQ(loop->remove(fds[0]).code(), Code::kNotFound);
  close(fds[0]);
  close(fds[1]);
}

TEST(EventLoop, EdgeTriggeredEventfdReportsEveryWriteOnceWithoutReads) {
  auto loop = make_loop();
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  CountingHandler h;  // never reads the eventfd
  ASSERT_TRUE(loop->add(efd, kReadable | kEdgeTriggered, &h).ok());
  const uint64_t one = 1;
  for (int i = 1; i <= 3; ++i) {
    ASSERT_EQ(write(efd, &one, sizeof one), 8);
    ASSERT_TRUE(run_until(*loop, [&] { return h.calls == i; }));
    // Level-triggered this would fire on every iteration; edge-triggered it stays quiet.
    ASSERT_TRUE(loop->run_once(20).ok());
    EXPECT_EQ(h.calls, i);
  }
  ASSERT_TRUE(loop->remove(efd).ok());
  close(efd);
}

TEST(EventLoop, HandlerRemovedEarlierInTheSameBatchIsNotCalled) {
  auto loop = make_loop();
  int a[2], b[2];
  ASSERT_EQ(pipe2(a, O_NONBLOCK), 0);
  ASSERT_EQ(pipe2(b, O_NONBLOCK), 0);
  auto h1 = std::make_unique<CountingHandler>();
  auto h2 = std::make_unique<CountingHandler>();
  // Whichever runs first removes the other; the other must then never be called.
  h1->fn = [&](uint32_t) {
    if (loop->watching(b[0])) (void)loop->remove(b[0]);
    (void)loop->remove(a[0]);
  };
  h2->fn = [&](uint32_t) {
    if (loop->watching(a[0])) (void)loop->remove(a[0]);
    (void)loop->remove(b[0]);
  };
  ASSERT_TRUE(loop->add(a[0], kReadable, h1.get()).ok());
  ASSERT_TRUE(loop->add(b[0], kReadable, h2.get()).ok());
  ASSERT_EQ(write(a[1], "x", 1), 1);
  ASSERT_EQ(write(b[1], "x", 1), 1);
  ASSERT_TRUE(loop->run_once(100).ok());
  EXPECT_EQ(h1->calls + h2->calls, 1);
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

TEST(EventLoop, WritableAndModify) {
  auto loop = make_loop();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  CountingHandler h;
  uint32_t seen = 0;
  h.fn = [&](uint32_t ev) { seen |= ev; };
  ASSERT_TRUE(loop->add(fds[1], 0, &h).ok());
  ASSERT_TRUE(loop->run_once(20).ok());
  EXPECT_EQ(h.calls, 0);
  ASSERT_TRUE(loop->modify(fds[1], kWritable).ok());
  ASSERT_TRUE(run_until(*loop, [&] { return h.calls > 0; }));
  EXPECT_TRUE(seen & kWritable);
  ASSERT_TRUE(loop->remove(fds[1]).ok());
  close(fds[0]);
  close(fds[1]);
}

TEST(EventLoop, HangupIsReported) {
  auto loop = make_loop();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  CountingHandler h;
  uint32_t seen = 0;
  h.fn = [&](uint32_t ev) {
    seen |= ev;
    (void)loop->remove(fds[0]);
  };
  ASSERT_TRUE(loop->add(fds[0], kReadable, &h).ok());
  close(fds[1]);
  ASSERT_TRUE(run_until(*loop, [&] { return h.calls > 0; }));
  EXPECT_TRUE(seen & kHangup);
  close(fds[0]);
}

TEST(EventLoop, TimersFireInOrderAndNeverEarly) {
  auto loop = make_loop();
  std::vector<int> order;
  const uint64_t t0 = monotonic_ns();
  uint64_t fired_at = 0;
  loop->run_after(30 * kMs, [&] { order.push_back(3); fired_at = monotonic_ns(); });
  loop->run_after(10 * kMs, [&] { order.push_back(1); });
  loop->run_after(20 * kMs, [&] { order.push_back(2); });
  ASSERT_TRUE(run_until(*loop, [&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(fired_at - t0, 30 * kMs);
}

// kv's AOF commit and other end-of-iteration work rely on this: run_after(0) from a handler
// runs in the same iteration, after the fd handlers, whether the iteration blocked or not.
TEST(EventLoop, ZeroDelayTimerSetByAHandlerRunsAtTheEndOfTheSameIteration) {
  auto loop = make_loop();
  const int efd = eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  CountingHandler h;
  int fired = 0;
  h.fn = [&](uint32_t) {
    uint64_t v;
    (void)!read(efd, &v, sizeof v);
    loop->run_after(0, [&] { ++fired; });
  };
  ASSERT_TRUE(loop->add(efd, kReadable, &h).ok());
  for (int timeout_ms : {0, 100}) {
    const int before = fired;
    const uint64_t one = 1;
    ASSERT_EQ(write(efd, &one, sizeof one), 8);
    ASSERT_TRUE(loop->run_once(timeout_ms).ok());
    ASSERT_EQ(h.calls, timeout_ms == 0 ? 1 : 2) << "the eventfd was ready: one iteration dispatches it";
    EXPECT_EQ(fired, before + 1) << "run_once(" << timeout_ms << ")";
  }
  ASSERT_TRUE(loop->remove(efd).ok());
  close(efd);
}

TEST(EventLoop, CancelAndPeriodic) {
  auto loop = make_loop();
  bool cancelled_ran = false;
  TimerId id = loop->run_after(5 * kMs, [&] { cancelled_ran = true; });
  loop->cancel(id);
  loop->cancel(999999);  // unknown: ignored
  int ticks = 0;
  TimerId periodic = 0;
  periodic = loop->run_every(2 * kMs, [&] {
    if (++ticks == 5) loop->cancel(periodic);  // a periodic timer cancels itself
  });
  ASSERT_TRUE(run_until(*loop, [&] { return ticks >= 5; }));
  const uint64_t end = monotonic_ns() + 30 * kMs;
  while (monotonic_ns() < end) ASSERT_TRUE(loop->run_once(5).ok());
  EXPECT_EQ(ticks, 5);
  EXPECT_FALSE(cancelled_ran);
}

TEST(EventLoop, CancelledTimerDoesNotCutASleepShort) {
  auto loop = make_loop();
  const TimerId id = loop->run_after(2 * kMs, [] {});
  loop->cancel(id);
  // The cancelled entry is still in the heap; the wait must ignore it.
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run_once(60).ok());
  EXPECT_GE(monotonic_ns() - t0, 55 * kMs);
}

TEST(EventLoop, ManyCancelledLongTimersLeaveTheLiveOnesWorking) {
  // A connection re-arming a long timeout cancels and re-adds it over and over.
  auto loop = make_loop();
  int fired = 0;
  TimerId t = 0;
  for (int i = 0; i < 10000; ++i) {
    if (t != 0) loop->cancel(t);
    t = loop->run_after(3600'000 * kMs, [&] { ++fired; });
  }
  std::vector<int> order;
  loop->run_after(3 * kMs, [&] { order.push_back(2); });
  loop->run_after(1 * kMs, [&] { order.push_back(1); });
  ASSERT_TRUE(run_until(*loop, [&] { return order.size() == 2; }));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(fired, 0);
}

TEST(EventLoop, PostFromOtherThreadsWakesAndKeepsOrder) {
  auto loop = make_loop();
  std::vector<int> got;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) loop->post([&, i] { got.push_back(i); });
    loop->post([&] { done = true; });
  });
  std::thread runner([&] {
    while (!done) (void)loop->run_once(-1);
  });
  producer.join();
  runner.join();
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(got[i], i);
}

TEST(EventLoop, StopFromAnotherThreadEndsRun) {
  auto loop = make_loop();
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    loop->stop();
  });
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run().ok());
  EXPECT_LT(monotonic_ns() - t0, 2000 * kMs);
  t.join();
}

TEST(EventLoop, BeforeSleepHooksRunAndPendingPreventsSleep) {
  auto loop = make_loop();
  int calls = 0;
  int pending_rounds = 3;
  auto id = loop->add_before_sleep([&] {
    ++calls;
    return pending_rounds-- > 0;
  });
  // With pending work the loop must not sleep: 4 iterations with a long timeout are quick.
  const uint64_t t0 = monotonic_ns();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(loop->run_once(i < 3 ? 1000 : 0).ok());
  EXPECT_LT(monotonic_ns() - t0, 500 * kMs);
  EXPECT_EQ(calls, 4);
  loop->remove_before_sleep(id);
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(calls, 4);
}

TEST(EventLoop, HookThatFindsWorkWhileSpinningKeepsTheLoopAwake) {
  // Busy polling runs the hooks while it spins; one that reports work (a ring or CQ that
  // filled up) must end the iteration, not send the loop to sleep.
  LoopOptions o;
  o.busy_poll_us = 20'000;
  auto loop = make_loop(o);
  int calls = 0;
  loop->add_before_sleep([&] { return ++calls == 5; });  // work appears on the 5th look
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run_once(2000).ok());
  EXPECT_LT(monotonic_ns() - t0, 1000 * kMs) << "slept after a hook reported work";
  EXPECT_GE(calls, 5);
}

TEST(EventLoop, TeardownFunctionsRunOnceWhenTheLoopIsDestroyed) {
  std::vector<int> order;
  {
    auto loop = make_loop();
    loop->add_teardown([&] { order.push_back(1); });
    const auto removed = loop->add_teardown([&] { order.push_back(99); });
    loop->add_teardown([&, l = loop.get()] {
      order.push_back(3);
      l->remove_teardown(removed);  // removing from inside teardown is harmless
    });
    loop->remove_teardown(removed);
    ASSERT_TRUE(loop->run_once(0).ok());
    EXPECT_TRUE(order.empty()) << "teardown functions ran before the loop was destroyed";
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
}

TEST(EventLoop, IdleLoopSleeps) {
  auto loop = make_loop();
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run_once(50).ok());
  EXPECT_GE(monotonic_ns() - t0, 45 * kMs);
}

TEST(EventLoop, BusyPollingCatchesEventsWithoutSleeping) {
  LoopOptions o;
  o.busy_poll_us = 200000;
  auto loop = make_loop(o);
  const int efd = eventfd(0, EFD_NONBLOCK);
  CountingHandler h;
  h.fn = [&](uint32_t) {
    uint64_t v;
    (void)!read(efd, &v, sizeof v);
  };
  ASSERT_TRUE(loop->add(efd, kReadable, &h).ok());
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    uint64_t one = 1;
    (void)!write(efd, &one, sizeof one);
  });
  ASSERT_TRUE(loop->run_once(1000).ok());
  t.join();
  EXPECT_EQ(h.calls, 1);
  EXPECT_EQ(loop->wakeups(), 0u) << "the event should have been caught while spinning";
  (void)loop->remove(efd);
  close(efd);
}

// Adaptive spinning (poll_us): an event soon after the loop ran out of work is caught while
// spinning (no wakeup) -- unless the spin lost its CPU on this shared machine, which the
// policy must notice and count; an event after a long idle gap finds the loop asleep, and
// the policy learns from it (the window shrinks); the caller's timeout bounds the spin.
TEST(EventLoop, AdaptivePollingCatchesCloseEventsAndLearnsFromIdleGaps) {
  LoopOptions o;
  o.poll_us = 100'000;  // a fresh policy starts at its maximum window
  auto loop = make_loop(o);
  ASSERT_EQ(loop->spin().mode(), AdaptiveSpin::Mode::kAdaptive);
  const int efd = eventfd(0, EFD_NONBLOCK);
  CountingHandler h;
  h.fn = [&](uint32_t) {
    uint64_t v;
    (void)!read(efd, &v, sizeof v);
  };
  ASSERT_TRUE(loop->add(efd, kReadable, &h).ok());
  auto ring_after = [&](int ms) {
    return std::thread([efd, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      uint64_t one = 1;
      (void)!write(efd, &one, sizeof one);
    });
  };
  std::thread t = ring_after(5);
  ASSERT_TRUE(loop->run_once(2000).ok());
  t.join();
  EXPECT_EQ(h.calls, 1);
  if (loop->spin().preemptions() == 0) {
    EXPECT_EQ(loop->wakeups(), 0u) << "a 5 ms gap inside a 100 ms window should be caught spinning";
    EXPECT_EQ(loop->spin().hits(), 1u);
  }

  // A gap longer than the maximum: the loop went to sleep, the window halves.
  LoopOptions short_window;
  short_window.poll_us = 200;
  auto sleepy = make_loop(short_window);
  CountingHandler h2;
  h2.fn = h.fn;
  ASSERT_TRUE(sleepy->add(efd, kReadable, &h2).ok());
  t = ring_after(30);
  ASSERT_TRUE(sleepy->run_once(2000).ok());
  t.join();
  EXPECT_EQ(h2.calls, 1);
  EXPECT_EQ(sleepy->wakeups(), 1u) << "a 30 ms gap must find a 200 us window closed and the loop asleep";
  if (sleepy->spin().preemptions() == 0) {  // a preempted gap teaches nothing (by design)
    EXPECT_EQ(sleepy->spin().idle_gaps(), 1u);
    EXPECT_EQ(sleepy->spin().window_ns(), 100'000u);
  }
  (void)sleepy->remove(efd);

  // Nothing happens: run_once(20) returns after about 20 ms although the window is 100 ms.
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run_once(20).ok());
  const uint64_t took = monotonic_ns() - t0;
  EXPECT_GE(took, 19 * kMs);
  EXPECT_LT(took, 90 * kMs) << "the spin ran past the caller's timeout";
  (void)loop->remove(efd);
  close(efd);
}

TEST(EventLoop, SlotsHoldOnePointerPerKeyUntilCleared) {
  auto loop = make_loop();
  static const char key_a = 0, key_b = 0;
  int a = 1, b = 2, c = 3;
  EXPECT_EQ(loop->slot(&key_a), nullptr);
  loop->set_slot(&key_a, &a);
  loop->set_slot(&key_b, &b);
  EXPECT_EQ(loop->slot(&key_a), &a);
  EXPECT_EQ(loop->slot(&key_b), &b);
  loop->set_slot(&key_a, &c);  // replaces, does not add
  EXPECT_EQ(loop->slot(&key_a), &c);
  loop->set_slot(&key_a, nullptr);
  EXPECT_EQ(loop->slot(&key_a), nullptr);
  EXPECT_EQ(loop->slot(&key_b), &b);
  auto other = make_loop();
  EXPECT_EQ(other->slot(&key_b), nullptr) << "slots are per loop";
}

// Embedding: an outer poll() on backend_fd() plus its own fds replaces run_once(-1).
TEST(EventLoopEmbedding, BackendFdWakesAnOuterPollAndTimeoutSaysWhenToComeBack) {
  auto loop = make_loop();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  CountingHandler h;
  h.fn = [&](uint32_t) {
    char buf[16];
    (void)!read(fds[0], buf, sizeof buf);
  };
  ASSERT_TRUE(loop->add(fds[0], kReadable, &h).ok());
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(loop->poll_timeout_ms(), -1) << "idle, no timers: the embedder may wait forever";

  pollfd p{loop->backend_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "nothing to dispatch";
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "an fd event makes the backend fd readable";
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(h.calls, 1);
  EXPECT_EQ(loop->poll_timeout_ms(), 0) << "after a dispatch the hooks must run again before a wait";
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(loop->poll_timeout_ms(), -1);
  EXPECT_EQ(poll(&p, 1, 0), 0);

  // A timer bounds the wait; a hook with work makes it 0.
  bool fired = false;
  loop->run_after(200 * kMs, [&] { fired = true; });
  const int t = loop->poll_timeout_ms();
  EXPECT_GT(t, 0);
  EXPECT_LE(t, 200);
  bool busy = true;
  const auto hook = loop->add_before_sleep([&] { return busy; });
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(loop->poll_timeout_ms(), 0) << "a hook that still has work keeps the embedder polling";
  busy = false;
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_GT(loop->poll_timeout_ms(), 0);
  loop->remove_before_sleep(hook);
  EXPECT_TRUE(run_until(*loop, [&] { return fired; }));
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(loop->poll_timeout_ms(), -1);
  loop->post([] {});
  EXPECT_EQ(loop->poll_timeout_ms(), 0) << "posted work is pending";
  ASSERT_TRUE(loop->run_once(0).ok());
  ASSERT_TRUE(loop->remove(fds[0]).ok());
  close(fds[0]);
  close(fds[1]);
}

TEST(EventLoopEmbedding, PollOnceRunsHooksPostedWorkAndTimersButLeavesFdEventsToRunOnce) {
  auto loop = make_loop();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_NONBLOCK), 0);
  CountingHandler h;
  h.fn = [&](uint32_t) {
    char buf[16];
    (void)!read(fds[0], buf, sizeof buf);
  };
  ASSERT_TRUE(loop->add(fds[0], kReadable, &h).ok());
  int hook_calls = 0;
  bool hook_busy = true;
  const auto hook = loop->add_before_sleep([&] {
    ++hook_calls;
    return hook_busy;
  });
  bool posted = false, fired = false;
  loop->post([&] { posted = true; });
  loop->run_after(0, [&] { fired = true; });
  ASSERT_EQ(write(fds[1], "x", 1), 1);

  ASSERT_TRUE(loop->poll_once().ok());
  EXPECT_EQ(hook_calls, 1);
  EXPECT_TRUE(posted);
  EXPECT_TRUE(fired) << "a due timer runs without the kernel";
  EXPECT_EQ(h.calls, 0) << "poll_once must not ask the kernel for fd events";
  EXPECT_TRUE(loop->last_iteration_busy()) << "the hook still has work";
  pollfd p{loop->backend_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 1) << "the skipped fd event still shows on the backend fd";

  hook_busy = false;
  ASSERT_TRUE(loop->poll_once().ok());
  EXPECT_EQ(hook_calls, 2);
  EXPECT_FALSE(loop->last_iteration_busy()) << "hooks idle, nothing dispatched: ask the kernel next";
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(h.calls, 1) << "run_once dispatches what poll_once left";
  EXPECT_TRUE(loop->last_iteration_busy()) << "a dispatch leaves work for the hooks";
  loop->remove_before_sleep(hook);
  ASSERT_TRUE(loop->remove(fds[0]).ok());
  close(fds[0]);
  close(fds[1]);
}

TEST(EventLoopEmbedding, AnotherThreadAdoptsTheLoop) {
  auto loop = make_loop();
  ASSERT_TRUE(loop->run_once(0).ok());  // binds this thread
  std::thread other([&] {
    EXPECT_FALSE(loop->in_loop_thread());
    loop->adopt_current_thread();
    EXPECT_TRUE(loop->in_loop_thread());
    EXPECT_TRUE(loop->run_once(0).ok());
  });
  other.join();
  EXPECT_FALSE(loop->in_loop_thread());
  loop->adopt_current_thread();
  EXPECT_TRUE(loop->in_loop_thread());
}

TEST(LoopGroup, RunsLoopsOnThreadsAndStops) {
  auto g = LoopGroup::start(3);
  ASSERT_TRUE(g.ok());
  std::atomic<int> ran{0};
  std::vector<std::thread::id> ids(3);
  for (size_t i = 0; i < 3; ++i) {
    EventLoop& l = (*g)->next();
    l.post([&, i] {
      ids[i] = std::this_thread::get_id();
      EXPECT_TRUE(l.in_loop_thread());
      ++ran;
    });
  }
  const uint64_t deadline = monotonic_ns() + 5000 * kMs;
  while (ran < 3 && monotonic_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran, 3);
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  (*g)->stop();
  (*g)->stop();  // idempotent
  EXPECT_EQ(LoopGroup::start(0).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::reactor
