// poll::AdaptiveSpin (the self-tuning window) and poll::SpinGroup (one spin per loop
// iteration over every polling member), with fake members on a real EventLoop.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/base/adaptive_spin.h"
#include "poll/spin_group.h"

namespace conduit::transport::poll {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kT0 = 1'000'000'000;  // any non-zero start time

// An idle gap of `gap` ns starting at *t: idle check, optional sleep, work.
void gap(AdaptiveSpin& s, uint64_t* t, uint64_t g, bool slept) {
  s.on_idle(*t);
  if (slept) s.on_sleep();
  *t += g;
  s.on_work(*t);
  *t += 100;  // the work itself
}

TEST(AdaptiveSpin, OffNeverSpins) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(0);
  EXPECT_FALSE(s.enabled());
  s.on_idle(kT0);
  EXPECT_EQ(s.deadline(), 0u);
  EXPECT_FALSE(AdaptiveSpin().enabled());
}

TEST(AdaptiveSpin, StartsAtMaxAndMeasuresFromTheStartOfIdleness) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  EXPECT_EQ(s.window_ns(), 50 * kUs);
  EXPECT_EQ(s.deadline(), UINT64_MAX) << "busy: the window has not started";
  s.on_idle(kT0);
  s.on_idle(kT0 + 10 * kUs);  // later idle checks do not move the start
  EXPECT_EQ(s.deadline(), kT0 + 50 * kUs);
}

TEST(AdaptiveSpin, ShortGapsCaughtWhileSpinningShrinkTheWindow) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  uint64_t t = kT0;
  for (int i = 0; i < 100; ++i) gap(s, &t, 1 * kUs, false);
  EXPECT_EQ(s.hits(), 100u);
  // 4 x the 1 us average, at least 1.5 x the gap, at least the floor.
  EXPECT_EQ(s.window_ns(), 4 * kUs);
}

TEST(AdaptiveSpin, AShortMissGrowsTheWindowPastTheGap) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  uint64_t t = kT0;
  for (int i = 0; i < 100; ++i) gap(s, &t, 1 * kUs, false);
  ASSERT_EQ(s.window_ns(), 4 * kUs);
  gap(s, &t, 10 * kUs, true);  // we slept, and the work came 10 us after we went idle
  EXPECT_EQ(s.short_misses(), 1u);
  EXPECT_GE(s.window_ns(), 15 * kUs);
  EXPECT_LE(s.window_ns(), 50 * kUs);
  // The next gap of the same length is caught.
  s.on_idle(t);
  EXPECT_GT(s.deadline(), t + 10 * kUs);
}

TEST(AdaptiveSpin, LongGapsTurnPollingOffAndDenseTrafficTurnsItBackOn) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  uint64_t t = kT0;
  for (int i = 0; i < 10; ++i) gap(s, &t, 1000 * kUs, true);  // one message a millisecond
  EXPECT_EQ(s.idle_gaps(), 10u);
  EXPECT_EQ(s.window_ns(), 0u);
  s.on_idle(t);
  EXPECT_LE(s.deadline(), t) << "window closed at once: pure event mode";
  s.on_sleep();
  t += 30 * kUs;  // dense again: the wakeup came after 30 us (well below max)
  s.on_work(t);
  EXPECT_GE(s.window_ns(), 45 * kUs);
  EXPECT_LE(s.window_ns(), 50 * kUs);
}

TEST(AdaptiveSpin, NeverAboveMax) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(20 * kUs);
  uint64_t t = kT0;
  for (int i = 0; i < 20; ++i) gap(s, &t, 19 * kUs, true);
  EXPECT_EQ(s.window_ns(), 20 * kUs);
}

// Two sides that wait on each other and both sleep: each gap holds the other's slow wake-up
// (300 us here, over max).  A probe spins through one such gap; when spinning makes the gap
// short (80 us) the bound lifts to twice that and the side polls from then on.
TEST(AdaptiveSpin, AProbeThatShortensTheGapLiftsTheBoundPastMax) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(100 * kUs);
  uint64_t t = kT0;
  for (uint64_t i = 0; i < AdaptiveSpin::kProbeEvery - 1; ++i) gap(s, &t, 300 * kUs, true);
  EXPECT_EQ(s.probes(), 0u);
  s.on_idle(t);
  EXPECT_LE(s.deadline(), t + 100 * kUs) << "no probe yet: the window stays within max";
  s.on_sleep();
  t += 300 * kUs;
  s.on_work(t);
  t += 100;
  EXPECT_EQ(s.probes(), 1u) << "the 8th gap over max (and under 8 x max) arms a probe";
  EXPECT_EQ(s.bound_ns(), 100 * kUs);
  s.on_idle(t);
  EXPECT_EQ(s.deadline(), t + 450 * kUs) << "1.5 x the sleeping gaps' average";
  t += 80 * kUs;  // caught while spinning, far sooner than the sleeping gaps
  s.on_work(t);
  t += 100;
  EXPECT_EQ(s.lifts(), 1u);
  EXPECT_EQ(s.bound_ns(), 160 * kUs);
  for (int i = 0; i < 50; ++i) gap(s, &t, 80 * kUs, false);
  EXPECT_EQ(s.hits(), 50u);
  EXPECT_EQ(s.window_ns(), 160 * kUs) << "4 x 80 us, held to the lifted bound";
  s.on_idle(t);
  EXPECT_EQ(s.deadline(), t + 160 * kUs);
  gap(s, &t, 2000 * kUs, true);  // the peer went quiet: an idle gap drops the lift
  EXPECT_EQ(s.bound_ns(), 100 * kUs);
  EXPECT_LE(s.window_ns(), 100 * kUs);
}

// The gaps are the peer's think time: spinning does not shorten them, the bound stays, and
// probes get rarer (8, then 16, then 32 gaps apart...).
TEST(AdaptiveSpin, ProbesThatDoNotShortenTheGapGetRarer) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(100 * kUs);
  uint64_t t = kT0;
  uint64_t gaps = 0;
  auto think = [&] {  // a gap of 300 us think time, asleep unless a probe spins through it
    s.on_idle(t);
    const bool probe = s.deadline() > t + 100 * kUs;
    if (!probe) s.on_sleep();
    t += 300 * kUs;
    s.on_work(t);
    t += 100;
    ++gaps;
  };
  while (s.probes() < 4) think();
  EXPECT_EQ(s.lifts(), 0u);
  EXPECT_EQ(s.bound_ns(), 100 * kUs);
  // Probes armed after gaps 8, 8+1+16, 8+1+16+1+32, 8+1+16+1+32+1+64 (a probed gap is not counted).
  EXPECT_EQ(gaps, 8u + 1 + 16 + 1 + 32 + 1 + 64);
  EXPECT_EQ(s.window_ns(), 0u) << "otherwise asleep: pure event mode";
}

TEST(AdaptiveSpin, NoProbesForGapsFarOverMax) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  uint64_t t = kT0;
  for (int i = 0; i < 100; ++i) gap(s, &t, 400 * kUs, true);  // 8 x max: idle, not a near miss
  EXPECT_EQ(s.probes(), 0u);
}

TEST(AdaptiveSpin, APreemptedSpinCoolsDownExponentially) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(50 * kUs);
  uint64_t t = kT0;
  s.on_idle(t);
  s.on_preempted(t + 40 * kUs);
  EXPECT_LE(s.deadline(), t) << "stops at once";
  s.on_work(t + 60 * kUs);  // the preempted gap teaches nothing: not an idle gap
  EXPECT_EQ(s.idle_gaps(), 0u);
  EXPECT_EQ(s.hits() + s.short_misses(), 0u);
  EXPECT_EQ(s.window_ns(), 50 * kUs);
  t += 100 * kUs;
  s.on_idle(t);
  EXPECT_LE(s.deadline(), t) << "no polling during the 1 ms cool-down";
  s.on_sleep();
  s.on_work(t + 10 * kUs);  // learnt as usual: a short miss
  EXPECT_EQ(s.short_misses(), 1u);
  t = kT0 + 1'100 * kUs;  // past the cool-down
  s.on_idle(t);
  EXPECT_GT(s.deadline(), t) << "polling again";
  s.on_preempted(t + 40 * kUs);  // again: 2 ms this time
  s.on_work(t + 41 * kUs);
  t += 1'500 * kUs;
  s.on_idle(t);
  EXPECT_LE(s.deadline(), t) << "still cooling down 1.5 ms later";
  s.on_sleep();
  s.on_work(t + 10 * kUs);
  t = kT0 + 1'100 * kUs + 2'100 * kUs;
  s.on_idle(t);
  EXPECT_GT(s.deadline(), t) << "polling again after 2 ms";
  EXPECT_EQ(s.preemptions(), 2u);
  // Gaps caught while spinning bring the cool-down back to 1 ms.
  s.on_work(t + 5 * kUs);
  t += 10 * kUs;
  s.on_idle(t);
  s.on_work(t + 5 * kUs);
  t += 10 * kUs;
  s.on_idle(t);
  s.on_preempted(t);
  s.on_work(t + 1 * kUs);
  t += 1'100 * kUs;
  s.on_idle(t);
  EXPECT_GT(s.deadline(), t) << "a 1 ms cool-down after the hits";

  AdaptiveSpin f = AdaptiveSpin::fixed(10 * kUs);
  f.on_idle(t);
  f.on_preempted(t);
  EXPECT_EQ(f.deadline(), t + 10 * kUs) << "fixed polling never backs off";
  EXPECT_EQ(f.preemptions(), 0u);
}

// Where a poll round is itself slow (an emulator: a clock read is a system call), rounds of
// 35 us are not preemptions; a jump of milliseconds still is, and on real hardware (rounds
// well under a microsecond) the bar stays at kPreemptedNs.
TEST(PreemptionBar, ASlowRoundIsALostCpuOnlyAgainstTheRoundsBeforeIt) {
  PreemptionBar fast;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(fast.lost_cpu(300)) << "0.3 us rounds";
  EXPECT_TRUE(fast.lost_cpu(AdaptiveSpin::kPreemptedNs + 1000)) << "31 us after sub-us rounds";
  for (int i = 0; i < 200; ++i) (void)fast.lost_cpu(300);  // the one jump is forgotten
  EXPECT_TRUE(fast.lost_cpu(AdaptiveSpin::kPreemptedNs + 1000));

  PreemptionBar slow;
  int lost = 0;
  for (int i = 0; i < 200; ++i) lost += slow.lost_cpu(35 * kUs) ? 1 : 0;
  EXPECT_LE(lost, 1) << "at most the very first round, before there is an average";
  EXPECT_FALSE(slow.lost_cpu(200 * kUs)) << "under 16 x the usual 35 us";
  EXPECT_TRUE(slow.lost_cpu(4'000 * kUs)) << "a scheduler time slice";
  EXPECT_FALSE(slow.lost_cpu(35 * kUs));
  EXPECT_LE(slow.average_ns(), 60 * kUs) << "one preemption raises the bar only a little";
  // Even when every round is slow, the bar stays below a scheduler time slice.
  PreemptionBar starved;
  for (int i = 0; i < 500; ++i) (void)starved.lost_cpu(5'000 * kUs);
  EXPECT_TRUE(starved.lost_cpu(1'000 * kUs)) << "1 ms is still a lost CPU";
}

// A fake clock: every round costs `round_ns`, a read `read_ns` more.
struct FakeRounds {
  uint64_t t = kT0;
  uint64_t reads = 0;
  uint64_t read_ns;
  uint64_t operator()() {
    ++reads;
    return t += read_ns;
  }
};

// Cheap rounds and a cheap clock (hardware): the stride grows until reads are ~kTargetNs
// apart.  Rounds as slow as the guest's (~0.5 us, a 1 us clock): a stride of a few.  Rounds
// slower than the target: every round.  A stall between two reads is in elapsed().
TEST(RoundClock, ReadsTheClockAboutEveryTargetInterval) {
  for (const auto [round_ns, read_ns, lo, hi] :
       {std::array<uint64_t, 4>{100, 20, 16, 64}, {500, 1'000, 2, 8}, {9'000, 1'000, 1, 1}}) {
    FakeRounds f{.read_ns = read_ns};
    RoundClock c(f.t);
    for (int i = 0; i < 10'000; ++i) {
      f.t += round_ns;
      if (c.tick([&] { return f(); })) {
        EXPECT_EQ(c.now(), f.t);
      }
    }
    EXPECT_GE(c.stride(), lo) << round_ns << " ns rounds";
    EXPECT_LE(c.stride(), hi) << round_ns << " ns rounds";
    EXPECT_LE(c.elapsed(), 2 * RoundClock::kTargetNs + round_ns + read_ns);
    EXPECT_LE(f.reads, 10'000 / lo + 20);
    // A stall: the next read's elapsed() holds it; PreemptionBar sees it there.
    f.t += 5'000 * kUs;
    uint32_t n = 0;
    while (!c.tick([&] { return f(); })) ++n;
    EXPECT_LE(n, hi);
    EXPECT_GE(c.elapsed(), 5'000 * kUs);
    c.reset(f.t += 10);
    EXPECT_EQ(c.now(), f.t) << "reset: the caller's own reading";
  }
}

// on_round() is the spin's own bar: a slow but usual round keeps it polling.
TEST(AdaptiveSpin, OnRoundCoolsDownOnlyOnALostCpu) {
  AdaptiveSpin s = AdaptiveSpin::adaptive(500 * kUs);
  uint64_t t = kT0;
  s.on_idle(t);
  for (int i = 0; i < 50; ++i) (void)s.on_round(35 * kUs, t += 35 * kUs);
  const uint64_t after_warmup = s.preemptions();
  EXPECT_LE(after_warmup, 1u);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(s.on_round(35 * kUs, t += 35 * kUs));
  EXPECT_EQ(s.preemptions(), after_warmup);
  EXPECT_TRUE(s.on_round(5'000 * kUs, t += 5'000 * kUs));
  EXPECT_EQ(s.preemptions(), after_warmup + 1);
  EXPECT_LE(s.deadline(), t) << "cooling down";
}

TEST(AdaptiveSpin, FixedNeverTunes) {
  AdaptiveSpin s = AdaptiveSpin::fixed(100 * kUs);
  EXPECT_EQ(s.mode(), AdaptiveSpin::Mode::kFixed);
  uint64_t t = kT0;
  for (int i = 0; i < 10; ++i) gap(s, &t, 10'000 * kUs, true);
  for (int i = 0; i < 10; ++i) gap(s, &t, 1 * kUs, false);
  EXPECT_EQ(s.window_ns(), 100 * kUs);
  s.on_idle(t);
  EXPECT_EQ(s.deadline(), t + 100 * kUs);
}

// A member whose work is a flag another thread (or another member) sets.
class FakeMember : public SpinGroup::Member {
 public:
  explicit FakeMember(uint64_t window_ns, bool adaptive = false)
      : spin_(adaptive ? AdaptiveSpin::adaptive(window_ns) : AdaptiveSpin::fixed(window_ns)) {}
  bool spin_poll(uint64_t now) override {
    ++polls;
    if (!ready.exchange(false)) {
      spin_.on_idle(now);
      return false;
    }
    ++runs;
    spin_.on_work(now);
    if (on_run) on_run();
    return true;
  }
  uint64_t spin_deadline() const override {
    if (stall_ns > 0) {  // stands for losing the CPU between two polls
      std::this_thread::sleep_for(std::chrono::nanoseconds(stall_ns));
      const_cast<FakeMember*>(this)->stall_ns = 0;
    }
    return open ? spin_.deadline() : 0;
  }
  void spin_preempted(uint64_t now) override {
    ++preempted;
    spin_.on_preempted(now);
  }
  void idle(uint64_t now) { spin_.on_idle(now); }
  uint64_t stall_ns = 0;
  int preempted = 0;

  std::atomic<bool> ready{false};
  bool open = true;
  int polls = 0, runs = 0;
  std::function<void()> on_run;
  AdaptiveSpin spin_;
};

std::unique_ptr<reactor::EventLoop> make_loop() {
  auto l = reactor::EventLoop::create();
  EXPECT_TRUE(l.ok());
  return std::move(l).value();
}

TEST(SpinGroup, OneGroupPerLoopWhileHeld) {
  auto loop = make_loop();
  std::weak_ptr<SpinGroup> weak;
  {
    auto a = SpinGroup::of(*loop);
    auto b = SpinGroup::of(*loop);
    EXPECT_EQ(a, b);
    weak = a;
  }
  EXPECT_TRUE(weak.expired()) << "the loop does not own the group";
  auto c = SpinGroup::of(*loop);
  EXPECT_NE(c, nullptr);
}

// Work that appears on another thread within the window is run by the spin (the fake
// member's only way to run).
TEST(SpinGroup, CatchesWorkWithinTheWindowWithoutSleeping) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember m(200'000 * kUs);  // a window far longer than the test
  std::atomic<int> sent{0};
  std::atomic<bool> done{false};
  const int kRounds = 200;
  std::thread peer([&] {
    for (int i = 0; i < kRounds && !done.load(); ++i) {
      while (m.ready.load() && !done.load()) std::this_thread::yield();
      m.ready.store(true);
      sent.fetch_add(1);
    }
  });
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    m.idle(now);
    return g->spin(&m, now);
  });
  // A fake member has no doorbell: bound each wait, in case the spin is preempted on a
  // loaded machine and the loop sleeps (a real member would be woken by its peer).  On a
  // badly overloaded machine the spinning loop and the peer share a CPU and take turns by
  // time slices: allow for that, and make the peer give up with the loop (a failure, not a
  // hang).
  const uint64_t deadline = monotonic_ns() + 120'000'000'000ull;
  while ((m.runs < kRounds) && monotonic_ns() < deadline) {
    if (!loop->run_once(1).ok()) break;
  }
  done.store(true);
  peer.join();
  EXPECT_EQ(m.runs, kRounds) << "every piece of work ran inside a spin";
}

// The window closes: spin returns false (block), quickly.
TEST(SpinGroup, ClosedWindowsLetTheLoopBlock) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember m(20 * kUs);
  bool result = true;
  uint64_t took = 0;
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    m.idle(now);
    result = g->spin(&m, now);
    took = monotonic_ns() - now;
    return false;
  });
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_FALSE(result);
  EXPECT_GE(took, 20 * kUs);
  EXPECT_EQ(g->active(), 0u) << "a member whose window closed is dropped";
}

// A long window is spun in slices: spin yields to the loop (true) after about kSliceNs.
TEST(SpinGroup, YieldsToTheLoopEverySlice) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember m(10'000'000 * kUs);
  const uint64_t now = monotonic_ns();
  m.idle(now);
  bool result = false;
  loop->add_before_sleep([&] {
    result = g->spin(&m, monotonic_ns());
    return false;
  });
  const uint64_t t0 = monotonic_ns();
  ASSERT_TRUE(loop->run_once(0).ok());
  const uint64_t took = monotonic_ns() - t0;
  EXPECT_TRUE(result);
  EXPECT_GE(took, SpinGroup::kSliceNs);
  EXPECT_LT(took, 500'000'000ull) << "a slice, not the whole window (generous bound for a loaded machine)";
}

// Two members on one loop: one spin per iteration polls both, and work on the second is
// run while the first member's hook spins.
TEST(SpinGroup, OneSpinPerIterationPollsEveryOpenMember) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember a(1'000 * kUs), b(1'000 * kUs);
  a.on_run = [&] { b.ready.store(true); };  // a's work makes work for b (a proxy)
  int hooks = 0;
  bool b_result = false;
  loop->add_before_sleep([&] {
    ++hooks;
    const uint64_t now = monotonic_ns();
    a.idle(now);
    return g->spin(&a, now);
  });
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    b.idle(now);
    b_result = g->spin(&b, now);
    return b_result;
  });
  ASSERT_TRUE(loop->run_once(0).ok());  // both join; b joined after a's spin: b told not to block
  EXPECT_TRUE(b_result);
  const uint64_t spins = g->spins();
  a.ready.store(true);
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(a.runs, 1);
  EXPECT_EQ(b.runs, 1) << "b's work ran inside the same spin";
  EXPECT_EQ(g->spins(), spins + 1) << "b's hook reused the iteration's spin";
  EXPECT_GT(b.polls, 0);
}

// A member whose handler removes itself when it runs (one-shot: the preload's, whose work
// is done by run_once()'s caller) ends the spin at once, instead of the spin polling the
// other open members to the end of the slice while the caller waits for what ran.
TEST(SpinGroup, AOneShotHandlerEndsTheSpin) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember a(1'000'000 * kUs), b(1'000'000 * kUs);
  a.on_run = [&] { a.open = false; };  // as a handler that uninstalls itself
  bool result = false;
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    a.idle(now);
    b.idle(now);
    result = g->spin(&a, now);
    return result;
  });
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    return b.spin_deadline() > now && g->spin(&b, now);
  });
  ASSERT_TRUE(loop->run_once(0).ok());  // both join
  a.ready.store(true);
  const int before = b.polls;
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(a.runs, 1);
  EXPECT_TRUE(result) << "work ran: the loop must not block";
  EXPECT_LE(b.polls - before, 1) << "the spin went on polling b after a's one-shot handler ran";
}

// Losing the CPU between two polls tells every polled member; adaptive ones then sleep
// (their windows close for the cool-down), so the spin ends.
TEST(SpinGroup, APreemptedSpinEndsAndTellsTheMembers) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  FakeMember a(1'000'000 * kUs, true), b(1'000'000 * kUs, true);
  bool result = true;
  loop->add_before_sleep([&] {
    const uint64_t now = monotonic_ns();
    a.idle(now);
    b.idle(now);
    result = g->spin(&a, now);
    return false;
  });
  loop->add_before_sleep([&] {  // as shm's hook: asks for a spin only while its window is open
    const uint64_t now = monotonic_ns();
    return b.spin_deadline() > now && g->spin(&b, now);
  });
  ASSERT_TRUE(loop->run_once(0).ok());  // both join (b after the spin: told not to block)
  // Longer than the bar can ever be: how slow the rounds before it were (ASan on a loaded
  // machine) must not matter.
  b.stall_ns = 2'000 * kUs;  // above PreemptionBar's highest bar, 16 x 60 us
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_FALSE(result) << "no work ran: the members sleep";
  // At least once (b's stall); a loaded machine may have preempted the first spin too.
  EXPECT_GE(g->preemptions(), 1u);
  EXPECT_GE(a.preempted, 1);
  EXPECT_GE(b.preempted, 1);
  EXPECT_EQ(g->active(), 0u);
  EXPECT_LE(a.spin_deadline(), monotonic_ns()) << "cooling down";
}

// A member may leave while the group spins (its handler closed it, or closed another).
TEST(SpinGroup, MembersMayLeaveDuringTheSpin) {
  auto loop = make_loop();
  auto g = SpinGroup::of(*loop);
  // Windows far longer than the test: with 1 ms ones, a slow iteration (ASan on a loaded
  // machine) closed a's window before its work came, and it was never polled.
  auto a = std::make_unique<FakeMember>(1'000'000 * kUs);
  auto b = std::make_unique<FakeMember>(1'000'000 * kUs);
  bool b_left = false;
  a->on_run = [&] {
    g->leave(b.get());
    b_left = true;
    g->leave(a.get());
    a->open = false;
  };
  const uint64_t now = monotonic_ns();
  b->idle(now);
  loop->add_before_sleep([&] {
    const uint64_t t = monotonic_ns();
    if (a->open) a->idle(t);
    if (a->open) (void)g->spin(a.get(), t);
    return false;
  });
  ASSERT_TRUE(loop->run_once(0).ok());  // a joins and spins (b has not joined: only a is polled)
  loop->add_before_sleep([&] {
    if (!b_left) (void)g->spin(b.get(), monotonic_ns());
    return false;
  });
  ASSERT_TRUE(loop->run_once(0).ok());  // b joins
  a->ready.store(true);
  ASSERT_TRUE(loop->run_once(0).ok());  // a runs, both leave mid-spin
  EXPECT_EQ(a->runs, 1);
  EXPECT_EQ(g->active(), 0u);
  b.reset();  // gone: the group must not touch it again
  ASSERT_TRUE(loop->run_once(0).ok());
}

}  // namespace
}  // namespace conduit::transport::poll
