#include "poll/spin_group.h"

#include <algorithm>

#include "conduit/base/adaptive_spin.h"
#include "conduit/base/clock.h"

namespace conduit::transport::poll {
namespace {

// The loop slot's key: this object's address.
const char kSlotKey = 0;

}  // namespace

std::shared_ptr<SpinGroup> SpinGroup::of(reactor::EventLoop& loop) {
  if (void* p = loop.slot(&kSlotKey)) return static_cast<SpinGroup*>(p)->shared_from_this();
  std::shared_ptr<SpinGroup> g(new SpinGroup(loop));
  loop.set_slot(&kSlotKey, g.get());
  return g;
}

SpinGroup::~SpinGroup() {
  if (loop_.slot(&kSlotKey) == this) loop_.set_slot(&kSlotKey, nullptr);
}

size_t SpinGroup::active() const {
  return static_cast<size_t>(std::count_if(active_.begin(), active_.end(), [](Member* m) { return m != nullptr; }));
}

void SpinGroup::leave(Member* m) {
  if (!m->spin_active_) return;
  m->spin_active_ = false;
  auto it = std::find(active_.begin(), active_.end(), m);
  if (it == active_.end()) return;
  if (spinning_)
    *it = nullptr;  // spin() is walking active_: compacted when it ends
  else
    active_.erase(it);
}

void SpinGroup::compact() { active_.erase(std::remove(active_.begin(), active_.end(), nullptr), active_.end()); }

bool SpinGroup::spin(Member* m, uint64_t now) {
  if (!m->spin_active_) {
    m->spin_active_ = true;
    active_.push_back(m);
  }
  if (spinning_) return true;  // asked from inside a spin (a handler ran a hook's work): go on
  const uint64_t it = loop_.iterations();
  if (it == spun_iteration_) {
    // This iteration's spin ran already.  If it polled m, its answer holds for m too;
    // otherwise m's window opened after it: don't block, m is polled next iteration.
    return m->spin_polled_iteration_ == it ? spun_result_ : true;
  }
  // A handler run below may close every member, the one that asked included, and with them
  // the last references to this group: keep it alive until the spin is over.
  const std::shared_ptr<SpinGroup> self = shared_from_this();
  spun_iteration_ = it;
  ++spins_;
  spinning_ = true;
  const uint64_t slice_end = now + kSliceNs;
  RoundClock clock(now);  // the clock is read every few rounds, not every round
  bool ran = false, sliced = false, handed_off = false;
  for (;;) {
    bool open = false;
    // Index loop: spin_poll may add members (a handler connects) or remove them.
    for (size_t i = 0; i < active_.size(); ++i) {
      Member* x = active_[i];
      if (x == nullptr) continue;
      x->spin_polled_iteration_ = it;
      if (x->spin_deadline() <= now) {  // window closed: it announces sleep in its own hook
        x->spin_active_ = false;
        active_[i] = nullptr;
        continue;
      }
      if (x->spin_poll(now)) {
        ran = true;
        now = monotonic_ns();  // handler time is not a preemption
        clock.reset(now);
        // Its handler ran and removed itself (a one-shot handler): the work is for the
        // loop's caller (an embedder that reads outside the loop, like the preload), which
        // gets it only when run_once() returns -- end the spin now.
        if (active_[i] != nullptr && active_[i]->spin_deadline() <= now) handed_off = true;
      }
      if (active_[i] != nullptr && active_[i]->spin_deadline() > now) open = true;
    }
    if (!open || handed_off) break;
    if (now >= slice_end) {
      sliced = true;
      break;
    }
    cpu_relax();
    if (!clock.tick(monotonic_ns)) continue;
    now = clock.now();
    if (bar_.lost_cpu(clock.elapsed())) {
      // Lost the CPU: tell every polled member.  Adaptive windows close (their cool-down);
      // fixed ones stay open and the spin goes on for them.
      ++preemptions_;
      for (Member* x : active_)
        if (x != nullptr) x->spin_preempted(now);
    }
  }
  spinning_ = false;
  compact();
  spun_result_ = ran || sliced;
  return spun_result_;
}

}  // namespace conduit::transport::poll
