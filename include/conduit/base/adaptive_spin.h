// AdaptiveSpin: how long one side of a connection keeps polling (spinning) after it ran
// out of work, before it announces sleep and blocks -- self-tuned from the idle gaps it
// sees, so that it polls while traffic is recent and dense and stops when it is not.
//
// Why: a sleeping thread's wakeup costs ~20 us on these machines (an eventfd write by the
// peer, the scheduler, epoll_wait returning).  A request/response exchange that sleeps on
// both sides pays that twice per round trip; spinning a few microseconds longer than the
// peer takes to answer pays nothing.  Spinning when nobody answers soon wastes a core, so
// the window follows what was seen (rsocket's `polling_time` spins a fixed time; brpc's
// polling mode spins while the queue is busy; this does both and tunes the window):
//
//   An *idle gap* is the time from when the side found nothing to do until work arrived.
//   - gap < max, caught while spinning (a hit): the window shrinks toward 4 x the gaps'
//     moving average (never below 1.5 x this gap): spinning ends soon after a burst.
//   - gap < max, but the side had gone to sleep (a short miss: a longer window would have
//     caught it): the window doubles, at least to 1.5 x the gap.  A side in pure event
//     mode (window 0) turns polling back on this way as soon as traffic gets dense.
//   - gap >= max (the side was idle): the window halves, and below kFloorNs it is 0 --
//     polling is off until gaps shorten again.
//   The window never exceeds `max`; a fresh policy starts at `max`.  A connection that
//   idles costs one window of spinning, then nothing.
//
// Probing past `max`.  Two sides that wait on each other (request/response) can both sleep
// for good: each one's gap then holds the other's wake-up, and where a wake-up is slow (an
// emulator: ~100 us) those gaps exceed `max` though spinning on both sides would make them
// short -- the rules above never find that out.  So a side whose gaps after a sleep stay
// under kProbeFactor x max (but not under max) spins, once every kProbeEvery such gaps, a
// *probe* window of 1.5 x their average.  A gap is only worth spinning through if spinning
// shortens it: a probe that catches its work in under 3/4 of the sleeping gaps' average
// lifts the bound to twice that gap (never past kProbeFactor x max), and the usual rules
// then run under that bound -- on both sides, since one side's spinning shortens the
// other's gaps.  A probe that does not (the gap is the peer's think time, which no spinning
// shortens) doubles the number of gaps until the next one, up to kMaxProbeEvery: a side
// whose gaps are think time ends up spending one window in 1024 gaps on probes.  An idle
// gap at or over the lifted bound drops it back to `max`.  On hardware, where a wake-up is
// ~20 us, gaps under `max` already teach the window and probes are rare.
//
// Contention.  Spinning pays only when the peer runs on another CPU at the same time.  On
// a machine with more runnable threads than CPUs -- or when the scheduler puts both ends on
// one CPU, as it likes to for threads that wake each other -- a spinner keeps the CPU from
// the very thread it waits for, and each exchange costs a scheduler time slice instead of
// a wakeup (measured here: 0.1x TCP's rate instead of 20x).  The sign is that the spin
// itself loses the CPU: the clock jumps between two polls by far more than a round takes
// (PreemptionBar; SpinGroup sees it and calls on_preempted).  Then polling stops for a
// cool-down, 1 ms at first, doubling up to 1 s while it keeps happening and halving with
// every gap caught while spinning outside a cool-down; in between the side sleeps at once
// (pure event mode, which is what a contended CPU rewards).  The gap during which the spin
// lost its CPU teaches nothing (its length is the scheduler's, not the peer's); the gaps
// seen while cooling down are learnt as usual (they are short misses or idle gaps), so
// polling resumes with a window that fits.
//
// Fixed mode (shm's busy_poll_us) spins a constant window and never tunes or backs off (it
// is for dedicated cores); off never spins.
//
// Users: shm:// connections (each side's window, spun by transport/poll's SpinGroup) and
// the reactor's EventLoop (LoopOptions::poll_us: the loop spins on epoll_wait(0), which is
// how tcp:// and every other fd-driven connection poll).
//
// Clock: the caller passes monotonic nanoseconds (base/clock.h).  Threading: plain data,
// one thread.  Cost: a few arithmetic operations per call.
#pragma once

#include <algorithm>
#include <cstdint>

namespace conduit {

// A spin-wait hint between two polls (the core's pipeline and its sibling hyperthread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Did a spin lose its CPU between two polls?  Yes when the clock moved by more than
// AdaptiveSpin::kPreemptedNs *and* by more than 16 x the moving average of the rounds
// seen: where one round is itself slow -- under an emulator a clock read is a system call
// (~5 us in the TCG guest) and a round makes several, so rounds of 30-40 us are normal
// there -- a slow round is not a lost CPU (a scheduler time slice is milliseconds).  Each
// round feeds the average clamped to 2 x kMinNs, so the bar never exceeds 16 x 60 us =
// 0.96 ms -- below a time slice even when every round is slow -- and one real preemption
// raises it only briefly.  Plain data, one thread; a few operations per round.
class PreemptionBar {
 public:
  static constexpr uint64_t kMinNs = 30'000;
  bool lost_cpu(uint64_t round_ns) {
    const bool lost = round_ns > std::max(kMinNs, avg_ * 16);
    const uint64_t x = std::min(round_ns, 2 * kMinNs);
    avg_ = avg_ == 0 ? x : avg_ - avg_ / 16 + x / 16;
    return lost;
  }
  uint64_t average_ns() const { return avg_; }

 private:
  uint64_t avg_ = 0;  // moving average (1/16) of the rounds, clamped
};

// How often a spin reads the clock.  A spin needs the time only for its deadlines and for
// PreemptionBar, and a few microseconds' slack in either is harmless; but where the clock
// source has no vDSO path (the testbed guest's HPET: ~1 us per read, a system call) one read
// per round costs more than the poll itself -- a CQ or ring check -- and so delays the poll
// that finds the work.  RoundClock reads the clock every stride-th round only, the stride
// doubling while reads land under kTargetNs / 2 apart and halving above 2 x kTargetNs (1 to
// kMaxStride): on hardware, with a ~20 ns vDSO clock and sub-microsecond rounds, it settles
// at a stride that reads every few microseconds; in the guest at 4-8.  tick() returns true
// when it read the clock (then `now` is fresh and `elapsed` covers the rounds since the last
// read -- what PreemptionBar judges); else `now` is the last reading.  reset(t) after the
// caller read the clock itself (handler time).  Plain data, one thread; one increment per
// round, a clock read per stride.
class RoundClock {
 public:
  static constexpr uint64_t kTargetNs = 4'000;
  static constexpr uint32_t kMaxStride = 64;

  explicit RoundClock(uint64_t now) : now_(now) {}
  template <typename ReadClock>
  bool tick(ReadClock&& read) {
    if (++since_ < stride_) return false;
    since_ = 0;
    const uint64_t t = read();
    elapsed_ = t - now_;
    now_ = t;
    if (elapsed_ < kTargetNs / 2 && stride_ < kMaxStride)
      stride_ *= 2;
    else if (elapsed_ > 2 * kTargetNs && stride_ > 1)
      stride_ /= 2;
    return true;
  }
  void reset(uint64_t now) {
    now_ = now;
    since_ = 0;
  }
  uint64_t now() const { return now_; }
  uint64_t elapsed() const { return elapsed_; }
  uint32_t stride() const { return stride_; }

 private:
  uint64_t now_;
  uint64_t elapsed_ = 0;
  uint32_t stride_ = 1;
  uint32_t since_ = 0;
};

class AdaptiveSpin {
 public:
  enum class Mode : uint8_t { kOff, kAdaptive, kFixed };
  static constexpr uint64_t kFloorNs = 2'000;  // smallest window worth spinning
  static constexpr uint64_t kMinCooldownNs = 1'000'000;  // after a preempted spin
  static constexpr uint64_t kMaxCooldownNs = 1'000'000'000;
  // A poll that took longer than this -- and than PreemptionBar's multiple of the usual
  // round -- lost its CPU (the caller then calls on_preempted): one poll costs well under a
  // microsecond on real hardware, a scheduler time slice milliseconds.
  static constexpr uint64_t kPreemptedNs = PreemptionBar::kMinNs;

  AdaptiveSpin() = default;  // off
  static AdaptiveSpin off() { return AdaptiveSpin(); }
  static AdaptiveSpin adaptive(uint64_t max_ns) { return max_ns == 0 ? off() : AdaptiveSpin(Mode::kAdaptive, max_ns); }
  static AdaptiveSpin fixed(uint64_t window_ns) { return window_ns == 0 ? off() : AdaptiveSpin(Mode::kFixed, window_ns); }

  Mode mode() const { return mode_; }
  bool enabled() const { return mode_ != Mode::kOff; }
  uint64_t window_ns() const { return window_; }
  uint64_t max_ns() const { return max_; }
  // The bound in force: max, or what a successful probe lifted it to.
  uint64_t bound_ns() const { return std::max(max_, lifted_); }
  static constexpr uint64_t kProbeFactor = 8;  // probes look at gaps under 8 x max
  static constexpr uint64_t kProbeEvery = 8;   // one probe per 8 such gaps at first...
  static constexpr uint64_t kMaxProbeEvery = 1024;  // ...doubling after each failed probe

  // The side looked for work at `now` and found none.  The first such call after work
  // starts an idle gap (later ones extend it).
  void on_idle(uint64_t now) {
    if (idle_since_ != 0) return;
    idle_since_ = now;
    cooling_ = now < cool_until_;
    probing_ = probe_next_ && !cooling_;
    probe_next_ = false;
  }
  // One poll round of the spin took `round_ns` (the clock between two polls) and ended at
  // `now`: calls on_preempted(now) if that round lost the CPU (PreemptionBar).  True if so.
  bool on_round(uint64_t round_ns, uint64_t now) {
    if (!bar_.lost_cpu(round_ns)) return false;
    on_preempted(now);
    return true;
  }
  // A spin lost its CPU (contention): stop polling for the cool-down (see above).
  void on_preempted(uint64_t now) {
    if (mode_ != Mode::kAdaptive) return;
    ++preemptions_;
    cool_until_ = now + cooldown_;
    cooldown_ = std::min(cooldown_ * 2, kMaxCooldownNs);
    cooling_ = true;
    gap_preempted_ = idle_since_ != 0;
  }
  // The side is about to block (its window closed).
  void on_sleep() { slept_ = idle_since_ != 0; }
  // Work arrived (a handler ran) at `now`.
  void on_work(uint64_t now) {
    if (idle_since_ == 0) return;  // still busy from the last work: no gap to learn from
    const uint64_t gap = now > idle_since_ ? now - idle_since_ : 0;
    idle_since_ = 0;
    const bool slept = slept_;
    slept_ = false;
    const bool preempted = gap_preempted_;
    gap_preempted_ = false;
    const bool probed = probing_;
    probing_ = false;
    if (mode_ != Mode::kAdaptive || preempted) return;
    const bool lift = probed && !slept && gap < sleep_avg_ - sleep_avg_ / 4;
    if (probed) probe_every_ = lift ? kProbeEvery : std::min(probe_every_ * 2, kMaxProbeEvery);
    if (lift) {
      // Spinning shortened the gap: lift the bound, and go on as after a hit.
      ++lifts_;
      lifted_ = std::min(2 * gap, kProbeFactor * max_);
      avg_ = gap;
      window_ = std::min(std::max({gap + gap / 2, kFloorNs, window_}), bound_ns());
      return;
    }
    const uint64_t bound = bound_ns();
    if (gap >= bound) {
      ++idle_gaps_;
      lifted_ = 0;
      window_ /= 2;
      if (window_ < kFloorNs) window_ = 0;
      if (slept && gap < kProbeFactor * max_) {
        sleep_avg_ = sleep_avg_ == 0 ? gap : sleep_avg_ - sleep_avg_ / 8 + gap / 8;
        if (++near_gaps_ >= probe_every_) {
          near_gaps_ = 0;
          probe_next_ = true;
          probe_window_ = std::min(sleep_avg_ + sleep_avg_ / 2, kProbeFactor * max_);
          ++probes_;
        }
      }
      return;
    }
    avg_ = avg_ == 0 ? gap : avg_ - avg_ / 8 + gap / 8;
    const uint64_t past_gap = gap + gap / 2;
    if (slept) {
      ++short_misses_;
      window_ = std::max({window_ * 2, past_gap, kFloorNs});
    } else {
      ++hits_;
      window_ = std::max({avg_ * 4, past_gap, kFloorNs});
      if (!cooling_) cooldown_ = std::max(cooldown_ / 2, kMinCooldownNs);
    }
    window_ = std::min(window_, bound);
  }

  // Spin until this time; a time <= now means: don't spin (or stop), block.  While the
  // side is busy (work since its last idle check) the window has not started: UINT64_MAX.
  uint64_t deadline() const {
    if (mode_ == Mode::kOff) return 0;
    if (idle_since_ == 0) return UINT64_MAX;
    if (cooling_) return idle_since_;
    return idle_since_ + (probing_ ? std::max(window_, probe_window_) : window_);
  }

  // What the policy saw (tests, stats).
  uint64_t hits() const { return hits_; }                  // idle gaps caught while spinning
  uint64_t short_misses() const { return short_misses_; }  // short gaps that found the side asleep
  uint64_t idle_gaps() const { return idle_gaps_; }        // gaps of at least the bound
  uint64_t preemptions() const { return preemptions_; }    // spins that lost the CPU
  uint64_t probes() const { return probes_; }              // probe windows armed
  uint64_t lifts() const { return lifts_; }                // probes that lifted the bound

 private:
  AdaptiveSpin(Mode m, uint64_t max_ns) : mode_(m), max_(max_ns), window_(max_ns) {}

  Mode mode_ = Mode::kOff;
  uint64_t max_ = 0;
  uint64_t window_ = 0;
  uint64_t idle_since_ = 0;  // 0 = busy (no idle check since the last work)
  uint64_t avg_ = 0;         // moving average (1/8) of the short gaps
  bool slept_ = false;
  bool cooling_ = false;        // this idle gap falls in a cool-down: no spinning
  bool gap_preempted_ = false;  // the spin lost its CPU during this idle gap
  uint64_t cool_until_ = 0;
  uint64_t cooldown_ = kMinCooldownNs;
  uint64_t hits_ = 0, short_misses_ = 0, idle_gaps_ = 0, preemptions_ = 0, probes_ = 0, lifts_ = 0;
  // Probing past max (see above).
  uint64_t lifted_ = 0;        // the bound a probe lifted (0: max)
  uint64_t sleep_avg_ = 0;     // moving average (1/8) of gaps over the bound that found the side asleep
  uint64_t near_gaps_ = 0;     // how many of those (under kProbeFactor x max) since the last probe
  uint64_t probe_every_ = kProbeEvery;
  uint64_t probe_window_ = 0;  // the next probe's window
  bool probe_next_ = false;    // the next idle gap is a probe
  bool probing_ = false;       // this one is
  PreemptionBar bar_;
};

}  // namespace conduit
