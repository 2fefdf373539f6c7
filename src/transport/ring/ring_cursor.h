// Index and credit arithmetic for a single-producer/single-consumer byte ring, with no
// memory, atomics or I/O in it, so that every ring Conduit has shares one tested piece:
//
//   shm   both cursors live in the two processes; the producer learns the consumer's
//         position by loading a shared counter (ring/spsc_ring.h).
//   rdma  the producer writes into the remote ring with RDMA WRITE at the offsets
//         ProducerCursor hands out, the consumer learns byte counts from immediate data
//         (add_produced) and returns space by message (take_credits -> add_credits).
//
// Positions are free-running 64-bit byte counters (head = bytes ever produced, tail = bytes
// ever consumed); the ring offset is position & (capacity - 1).  All comparisons are on
// differences, so the arithmetic stays right even when a counter wraps 2^64.
//
// Anything that comes from the peer (a counter or a credit count) is validated: a method
// returns false rather than letting a corrupt or malicious peer push a cursor out of range,
// and leaves the cursor unchanged in that case.
//
// Threading: a cursor is plain data owned by one thread.  Cost: a few instructions each.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace conduit::transport::ring {

// `len` contiguous bytes at ring offset `offset`.
struct Extent {
  uint64_t offset = 0;
  uint64_t len = 0;
};

// A range of the ring as at most two contiguous pieces: `second` is non-empty only when the
// range wraps past the end of the buffer, and then starts at offset 0.
struct Extents {
  Extent first;
  Extent second;
  uint64_t total() const { return first.len + second.len; }
};

class RingGeometry {
 public:
  // Any capacity in [1, 2^62] (checked by valid_any_capacity; asserted here).  Rings Conduit
  // allocates itself use powers of two (valid_capacity): offsets are then a mask.  Other
  // capacities (an RDMA peer's receive buffer is whatever length it advertised) use a
  // modulo, which stays exact until a position wraps 2^64, some 58 years of streaming at
  // 10 GB/s; the rdma transport restarts its positions at every buffer registration anyway.
  explicit constexpr RingGeometry(uint64_t capacity)
      : capacity_(capacity), mask_(valid_capacity(capacity) ? capacity - 1 : 0) {
    assert(valid_any_capacity(capacity));
  }
  static constexpr bool valid_capacity(uint64_t c) { return c >= 2 && c <= (uint64_t{1} << 62) && (c & (c - 1)) == 0; }
  static constexpr bool valid_any_capacity(uint64_t c) { return c >= 1 && c <= (uint64_t{1} << 62); }

  constexpr uint64_t capacity() const { return capacity_; }
  constexpr uint64_t offset(uint64_t pos) const { return mask_ != 0 ? pos & mask_ : pos % capacity_; }
  // The `len` bytes (len <= capacity) starting at position `pos`.
  constexpr Extents extents(uint64_t pos, uint64_t len) const {
    assert(len <= capacity_);
    const uint64_t off = offset(pos);
    const uint64_t first = std::min(len, capacity_ - off);
    return Extents{Extent{off, first}, Extent{0, len - first}};
  }

 private:
  uint64_t capacity_;
  uint64_t mask_;  // capacity - 1 for a power of two, else 0
};

// The producer's view: how far it has written (head) and how far it knows the consumer has
// read (acked).  Space is capacity - (head - acked).
class ProducerCursor {
 public:
  explicit constexpr ProducerCursor(RingGeometry g, uint64_t start = 0) : geom_(g), head_(start), acked_(start) {}

  constexpr const RingGeometry& geometry() const { return geom_; }
  constexpr uint64_t head() const { return head_; }
  constexpr uint64_t acked() const { return acked_; }
  // Bytes written that the consumer has not given back yet.
  constexpr uint64_t in_flight() const { return head_ - acked_; }
  constexpr uint64_t free_space() const { return geom_.capacity() - in_flight(); }

  // Where the next min(max, free_space()) bytes go.
  constexpr Extents writable(uint64_t max) const { return geom_.extents(head_, std::min(max, free_space())); }
  // Marks n <= free_space() bytes as written.
  constexpr void produce(uint64_t n) {
    assert(n <= free_space());
    head_ += n;
  }

  // The consumer has reached absolute position `pos` (shm: its published tail).  False if
  // pos goes backwards or past head.
  [[nodiscard]] constexpr bool update_consumed(uint64_t pos) {
    if (pos - acked_ > in_flight()) return false;
    acked_ = pos;
    return true;
  }
  // The consumer gave back n more bytes (rdma: a credit message).  False if n exceeds what
  // is in flight.
  [[nodiscard]] constexpr bool add_credits(uint64_t n) {
    if (n > in_flight()) return false;
    acked_ += n;
    return true;
  }

 private:
  RingGeometry geom_;
  uint64_t head_;
  uint64_t acked_;
};

// The consumer's view: how far it has read (tail), how far it knows the producer has
// written (produced), and how much of what it read it has not yet reported back
// (unreturned credits; shm reports by publishing tail, rdma by message).
class ConsumerCursor {
 public:
  explicit constexpr ConsumerCursor(RingGeometry g, uint64_t start = 0)
      : geom_(g), tail_(start), produced_(start), returned_(start) {}

  constexpr const RingGeometry& geometry() const { return geom_; }
  constexpr uint64_t tail() const { return tail_; }
  constexpr uint64_t produced() const { return produced_; }
  constexpr uint64_t available() const { return produced_ - tail_; }

  // Where the next min(max, available()) bytes are.
  constexpr Extents readable(uint64_t max) const { return geom_.extents(tail_, std::min(max, available())); }
  // Marks n <= available() bytes as read.
  constexpr void consume(uint64_t n) {
    assert(n <= available());
    tail_ += n;
  }

  // The producer has reached absolute position `pos` (shm: its published head).  False if
  // pos goes backwards or claims more than a ring's worth of unread data.
  [[nodiscard]] constexpr bool update_produced(uint64_t pos) {
    if (pos - produced_ > geom_.capacity() - available()) return false;
    produced_ = pos;
    return true;
  }
  // The producer announced n more bytes (rdma: the immediate data of a WRITE_WITH_IMM).
  // Credit-based rings: the producer may only use space the consumer has given back, so n
  // is checked against capacity - (produced - returned), not just against unread bytes --
  // a producer that writes into consumed-but-unreturned space has broken the protocol.
  [[nodiscard]] constexpr bool add_produced(uint64_t n) {
    const uint64_t held = produced_ - returned_;  // granted space in use
    if (held > geom_.capacity() || n > geom_.capacity() - held) return false;
    produced_ += n;
    return true;
  }
  // Space the producer may still use without more credits.
  constexpr uint64_t granted() const { return geom_.capacity() - (produced_ - returned_); }

  // Incremental credit return: bytes consumed since the last take_credits().
  constexpr uint64_t unreturned() const { return tail_ - returned_; }
  constexpr bool credits_due(uint64_t threshold) const { return unreturned() >= threshold; }
  constexpr uint64_t take_credits() {
    const uint64_t n = unreturned();
    returned_ = tail_;
    return n;
  }
  // The same, only up to `pos` (returned position <= pos <= tail()): bytes read but still
  // held by the application (HoldTracker) are not given back yet.
  constexpr uint64_t returnable(uint64_t pos) const { return pos - returned_; }
  constexpr uint64_t take_credits_to(uint64_t pos) {
    assert(pos - returned_ <= tail_ - returned_);
    const uint64_t n = pos - returned_;
    returned_ = pos;
    return n;
  }

 private:
  RingGeometry geom_;
  uint64_t tail_;
  uint64_t produced_;
  uint64_t returned_;
};

}  // namespace conduit::transport::ring
