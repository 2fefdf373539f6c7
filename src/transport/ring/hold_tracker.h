// HoldTracker: which stretches of a ring's consumed bytes the application still holds, and
// so how far the consumer may report progress to the producer.
//
// A zero-copy read hands the application views of the receive ring itself (read_owned:
// memory::Slice::foreign over ring memory).  The consumer has *read* those bytes -- its
// read position moves past them, so later reads see what follows -- but it must not give
// their space back to the producer until the application releases them, or the producer
// would overwrite bytes someone is still looking at.  Releases come in any order.  This
// class turns "handed out in stream order, released in any order" into the one number a
// ring can publish: the end of the contiguous released prefix.
//
//   HoldTracker h;
//   auto a = h.hold(100, 50);      // [100, 150) handed out
//   auto b = h.hold(150, 20);      // [150, 170)
//   // bytes [170, 200) are read by copying: nothing to hold
//   h.releasable(200) == 100       // a is still held
//   h.release(b);  h.releasable(200) == 100   // b is free, but a still blocks the prefix
//   h.release(a);  h.releasable(200) == 200   // everything read is free
//
// Positions are the ring's free-running 64-bit stream positions (ring_cursor.h); they may
// wrap 2^64, so everything is compared by difference.  Holds must be taken in stream order
// (each at or after the end of the previous one); bytes between holds, or after the last,
// count as released the moment they are read.
//
// Users: shm:// publishes releasable() as its ring tail.  The rdma transport uses the same
// class for its owned reads: in ring mode it returns the growth of releasable() to the
// writer as credits; in the baseline (Valkey) protocol the writer may restart at offset 0
// only after the whole receive buffer was consumed *and released*, so there a held slice
// stalls the stream until it is released (the reader re-advertises its buffer only then).
//
// Threading: plain data, one thread (the connection's loop; releases from other threads
// are posted there first).  Cost: hold() and release() are O(1) amortised (a deque of the
// outstanding holds; release pops the released prefix); releasable() and held_bytes() are
// O(1).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace conduit::transport::ring {

class HoldTracker {
 public:
  using Ticket = uint64_t;

  // Records that [begin, begin + len) (len > 0) was handed out; returns the ticket that
  // releases it.  `begin` must be at or after the end of the previous hold.
  Ticket hold(uint64_t begin, uint64_t len) {
    assert(len > 0);
    assert(holds_.empty() || begin - holds_.back().end() <= (uint64_t{1} << 62));
    holds_.push_back(Hold{begin, len, false});
    held_bytes_ += len;
    return front_ticket_ + holds_.size() - 1;
  }

  // Marks a hold released.  False (and no change) for a ticket that was never handed out
  // or is already released: a double release is the caller's bug, never a reason to give
  // space back twice.
  bool release(Ticket t) {
    const uint64_t i = t - front_ticket_;
    if (i >= holds_.size() || holds_[i].released) return false;
    holds_[i].released = true;
    held_bytes_ -= holds_[i].len;
    while (!holds_.empty() && holds_.front().released) {
      holds_.pop_front();
      ++front_ticket_;
    }
    return true;
  }

  // The position up to which every consumed byte is released, given that the consumer has
  // read up to `consumed` (at or after the end of every hold): the start of the oldest
  // hold still outstanding, or `consumed` when none is.
  uint64_t releasable(uint64_t consumed) const { return holds_.empty() ? consumed : holds_.front().begin; }

  uint64_t held_bytes() const { return held_bytes_; }  // in holds not yet released
  // Holds not yet released, plus released ones behind an outstanding one (for tests and
  // stats; bounded by the bytes a connection may hold).
  size_t outstanding() const { return holds_.size(); }
  bool empty() const { return holds_.empty(); }

 private:
  struct Hold {
    uint64_t begin;
    uint64_t len;
    bool released;
    uint64_t end() const { return begin + len; }
  };
  std::deque<Hold> holds_;   // in stream order; front() is never released (popped at once)
  Ticket front_ticket_ = 0;  // ticket of holds_.front()
  uint64_t held_bytes_ = 0;
};

}  // namespace conduit::transport::ring
