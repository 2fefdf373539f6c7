// SpinGroup: the connections of one event loop that poll instead of sleeping, spun
// together.  Spinning is a property of the loop's thread, not of one connection: a
// connection that spun in its own before-sleep hook would keep every other connection of
// its loop waiting for its window to close, and N such connections would spin one after
// another.  So the loop spins once per iteration, in the hook of whichever member asks
// first, polling every member whose window is open and running what becomes ready.
//
//   member's before-sleep hook:
//     run handlers whose work is ready (on_work / on_idle on its AdaptiveSpin)
//     if its window is open: return group->spin(this, now)     // true: don't block
//     else: announce sleep, re-check (the transport's wakeup protocol), return the result
//
// spin() returns true when the loop must not block -- work ran (so run_once() returns and
// an application loop sees what the handlers did; the spin goes on to the end of the slice
// unless a member's handler removed itself when it ran -- a one-shot handler, whose work
// is for run_once()'s caller, which then gets it at once), or a slice of kSliceNs ended (so the
// loop services its fds, timers and posted work and then calls the hooks again) -- and
// false when every open window closed without work: then each member announces sleep in
// its own hook and the loop may block.  A member whose window opens after this
// iteration's spin already ran gets true, so it is polled in the next iteration instead of
// being put to sleep.  Members whose window is closed are not polled: they sleep, and
// their peers wake them the usual way (for shm, a doorbell; it is seen at the end of the
// current slice at the latest).
//
// Contention: if the clock jumps by far more than a few rounds take (PreemptionBar) between
// two of its reads (outside the handlers), the spinning thread lost its CPU -- to another thread, possibly
// the very peer it waits for.  The spin tells every polled member (spin_preempted): adaptive windows
// close for a cool-down, so those members sleep; fixed ones (busy_poll_us) spin on.
//
// Used by shm:// (ring loads) and rdma:// (a CQ poll).
//
// Threading: loop thread only.  Lifetime: members hold the group by shared_ptr; the loop
// keeps a plain pointer in a slot, cleared when the last member lets go (so a loop with no
// polling connection has no group).  A member must leave() before it is destroyed; it may
// leave (or another member may be closed) from inside spin_poll.  Cost: while spinning,
// one spin_poll per open member per step, and a clock read every few steps (RoundClock,
// base/adaptive_spin.h: reads land ~4 us apart; a step's `now` may be that stale).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "conduit/reactor/event_loop.h"

namespace conduit::transport::poll {

class SpinGroup : public std::enable_shared_from_this<SpinGroup> {
 public:
  // A spin yields to the loop after this long even if work keeps coming.
  static constexpr uint64_t kSliceNs = 50'000;

  class Member {
   public:
    // Runs the member's handlers if its work is ready now (shared-memory loads or a CQ
    // poll; no blocking call); returns true if any ran.  Also tells the member's
    // AdaptiveSpin what it found.
    virtual bool spin_poll(uint64_t now) = 0;
    // When the member's window closes (AdaptiveSpin::deadline()); <= now: closed.
    virtual uint64_t spin_deadline() const = 0;
    // The spin lost the CPU while polling this member (AdaptiveSpin::on_preempted).
    virtual void spin_preempted(uint64_t now) = 0;

   protected:
    virtual ~Member() = default;

   private:
    friend class SpinGroup;
    bool spin_active_ = false;           // in active_
    uint64_t spin_polled_iteration_ = 0;  // loop iteration of the last spin that polled it
  };

  // The loop's group, created on first use.
  static std::shared_ptr<SpinGroup> of(reactor::EventLoop& loop);
  ~SpinGroup();
  SpinGroup(const SpinGroup&) = delete;
  SpinGroup& operator=(const SpinGroup&) = delete;

  // From m's before-sleep hook when m has no work but its window is open: spins the loop
  // (see above).  True: the loop must not block.
  bool spin(Member* m, uint64_t now);
  // m stops spinning (closed, or polling turned off).  Idempotent.
  void leave(Member* m);

  size_t active() const;  // members polled by the next spin (tests)
  uint64_t spins() const { return spins_; }
  uint64_t preemptions() const { return preemptions_; }

 private:
  explicit SpinGroup(reactor::EventLoop& loop) : loop_(loop) {}
  void compact();

  reactor::EventLoop& loop_;
  std::vector<Member*> active_;  // members whose window was open at their last hook; null = left
  bool spinning_ = false;
  uint64_t spun_iteration_ = 0;  // loop iteration of the last spin (iterations start at 1)
  bool spun_result_ = false;
  uint64_t spins_ = 0;
  uint64_t preemptions_ = 0;
  PreemptionBar bar_;  // when a round between two polls means the spin lost its CPU
};

}  // namespace conduit::transport::poll
