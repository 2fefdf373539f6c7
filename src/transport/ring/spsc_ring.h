// A single-producer/single-consumer byte ring in memory shared by two threads or two
// processes, built on the cursor arithmetic of ring_cursor.h, with the flags of a
// sleep/wakeup protocol whose doorbell (an eventfd, a futex, ...) is the caller's business.
//
// Memory ordering.  Ring bytes are plain memory.  The producer copies bytes in, then
// publishes head with a release store; the consumer loads head with acquire before copying
// out.  Symmetrically the consumer publishes tail with release after copying out, and the
// producer loads it with acquire before overwriting that space.  Nothing else on the data
// path is ordered, except the one fence of the wakeup protocol below.
//
// Wakeup protocol (Dekker).  A side that wants to block announces it in shared memory and
// re-checks the ring; the other side, after making progress, checks the announcement:
//
//   consumer, before sleeping:          producer, after publishing data:
//     consumer_sleeping = 1   (Sc)        head = h                 (Ph, release)
//     fence(seq_cst)          (Fc)        fence(seq_cst)           (Fp)
//     re-load head            (Lc)        load consumer_sleeping   (Lp)
//     data? -> don't sleep                1? -> clear it, ring the doorbell
//
// The two seq_cst fences are totally ordered.  If Fc comes first, Sc is visible to Lp (Sc
// is sequenced before Fc, Fc before Fp, Fp before Lp), so the producer sees the flag and
// rings.  If Fp comes first, Ph is visible to Lc and the consumer sees the data and does not
// sleep.  Either way the consumer cannot block on an empty ring while the data that would
// have woken it goes unannounced.  Without the fences both loads may be satisfied before
// the other side's store leaves its store buffer (x86 does reorder a store with a later
// load), and then both miss: the lost wakeup.  The flag is cleared only (a) by the waker's
// exchange, which then always rings, or (b) by the sleeper itself while awake, which
// re-announces and re-checks before it next blocks; so a set flag, once past its fence,
// stays visible until it has produced a ring.
//
// The same argument, with roles swapped, covers a producer blocked on a full ring:
// producer_waiting / fence / re-load tail against tail / fence / load producer_waiting.
// End of stream (producer_closed) is published like data: set the flag, fence, check
// consumer_sleeping; the sleeping consumer's re-check reads the flag too.
//
// Placement.  head and tail sit on separate cache lines (each written by one side only on
// the data path).  Each flag sits on the line of the side that *reads it on every operation*
// rather than the one that writes it: the producer checks consumer_sleeping after every
// write, so it lives on the producer's line, where that check hits in the producer's own
// cache; the consumer writes it only when it goes to sleep, which is rare while data flows.
//
// Mirrored mappings.  A transport may map a ring's data twice, back to back in virtual
// memory (shm/shm_region.h does), so that any range of up to `capacity` bytes starting
// anywhere in the ring is one contiguous span.  Constructed with `mirrored`, the writer's
// writable() and the reader's readable() hand out such spans whole; without it they stop
// at the wrap.  The copying calls work either way.
//
// Threading: one RingWriter on one thread and one RingReader on one (other) thread per ring.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ring/ring_cursor.h"

namespace conduit::transport::ring {

// The shared control block of one ring.  Layout (native byte order: both sides are on one
// host by construction; versioned by whoever embeds it):
//   line 0 (offset  0): head u64, consumer_sleeping u32, consumer_closed u32
//   line 1 (offset 64): tail u64, producer_waiting u32, producer_closed u32
// Zero-initialised memory is a valid empty ring positioned at 0.
struct RingControl {
  // Written by the producer on every write; read by the consumer.
  alignas(64) std::atomic<uint64_t> head{0};
  std::atomic<uint32_t> consumer_sleeping{0};  // consumer blocks until head moves; producer rings
  std::atomic<uint32_t> consumer_closed{0};    // consumer went away; writes are pointless
  // Written by the consumer on every read; read by the producer.
  alignas(64) std::atomic<uint64_t> tail{0};
  std::atomic<uint32_t> producer_waiting{0};  // producer blocks until tail moves; consumer rings
  std::atomic<uint32_t> producer_closed{0};   // end of stream after the last byte before head
};
static_assert(sizeof(RingControl) == 128);
static_assert(offsetof(RingControl, tail) == 64);
// Cross-process atomics must not hide a lock in process-local memory.
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// The fence of the wakeup protocol (a locked instruction on x86).
inline void wakeup_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

class RingWriter {
 public:
  RingWriter() : cursor_(RingGeometry(2)) {}
  // `data` holds `capacity` bytes (a power of two), followed by a second view of the same
  // bytes if `mirrored`; `ctl` may already hold positions (the writer starts at the
  // published head).
  RingWriter(RingControl* ctl, uint8_t* data, uint64_t capacity, bool mirrored = false);

  uint64_t capacity() const { return cursor_.geometry().capacity(); }
  // Free space as last seen; refresh() loads the consumer's position.
  uint64_t free_space() const { return cursor_.free_space(); }
  // Loads tail (acquire).  False if the peer published an impossible value (then corrupt()).
  bool refresh();
  bool corrupt() const { return corrupt_; }
  // True if there is space, reloading tail only when the cached view shows none.
  bool has_space() { return cursor_.free_space() > 0 || (refresh() && cursor_.free_space() > 0); }
  // True if at least n bytes are free, reloading tail only when the cached view is short.
  bool has_space(uint64_t n) { return cursor_.free_space() >= n || (refresh() && cursor_.free_space() >= n); }

  // Copies up to `max` bytes of the gather list into the ring and publishes them; returns
  // the count (0 = full, or corrupt()).  Reloads tail only if the cached space is short.
  size_t write(std::span<const iovec> iov, size_t max);
  size_t write(std::span<const uint8_t> data) {
    const iovec v{const_cast<uint8_t*>(data.data()), data.size()};
    return write(std::span<const iovec>(&v, 1), data.size());
  }

  // In-place writing: up to `max` free bytes at head, to fill and then produce().  Whole
  // when mirrored, else the part before the wrap.  Reloads tail if the cached space is
  // short of `max`.  Empty when the ring is full (or corrupt()).
  std::span<uint8_t> writable(size_t max);
  // Publishes the first n bytes of what writable() returned (n <= its size).
  void produce(size_t n);

  // After publishing (write or close): true if the consumer announced it sleeps, in which case
  // the announcement is consumed and the caller must ring the consumer's doorbell.
  // Contains the protocol fence.
  bool consumer_needs_wakeup() {
    wakeup_fence();
    return check_consumer_sleeping();
  }
  // The same, for a caller that already executed wakeup_fence() after its last publish.
  bool check_consumer_sleeping() {
    return ctl_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->consumer_sleeping.exchange(0, std::memory_order_relaxed) != 0;
  }

  // Blocking on a full ring: announce_wait(), wakeup_fence(), then refresh()/has_space()
  // must be re-checked before blocking (wait_for_space() does all three).
  void announce_wait() { ctl_->producer_waiting.store(1, std::memory_order_relaxed); }
  void cancel_wait() { ctl_->producer_waiting.store(0, std::memory_order_relaxed); }
  // True if space appeared: do not block.
  bool wait_for_space() {
    announce_wait();
    wakeup_fence();
    return has_space();
  }

  // End of stream after everything written so far.  Follow with consumer_needs_wakeup().
  void close() { ctl_->producer_closed.store(1, std::memory_order_release); }
  bool reader_closed() const { return ctl_->consumer_closed.load(std::memory_order_acquire) != 0; }

 private:
  RingControl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  ProducerCursor cursor_;
  bool mirrored_ = false;
  bool corrupt_ = false;
};

class RingReader {
 public:
  RingReader() : cursor_(RingGeometry(2)) {}
  RingReader(RingControl* ctl, uint8_t* data, uint64_t capacity, bool mirrored = false);

  uint64_t capacity() const { return cursor_.geometry().capacity(); }
  // Unread bytes as last seen; refresh() loads the producer's position.
  uint64_t available() const { return cursor_.available(); }
  bool refresh();
  bool corrupt() const { return corrupt_; }
  // True if there is data, reloading head only when the cached view shows none.
  bool has_data() { return cursor_.available() > 0 || (refresh() && cursor_.available() > 0); }
  // The same without updating the cached view (true also when head moved impossibly, so
  // that a caller goes on to read() and learns of the corruption).
  bool has_data_now() const {
    return cursor_.available() > 0 || ctl_->head.load(std::memory_order_acquire) != cursor_.tail();
  }

  // Copies up to buf.size() bytes out and publishes the space; returns the count (0 = empty,
  // or corrupt()).  Reloads head only if the cached view shows nothing.
  size_t read(std::span<uint8_t> buf) {
    const size_t n = copy_out(buf);
    if (n > 0) publish(position());
    return n;
  }

  // The consumer's two positions.  position() is how far it has read; published() how far
  // it has given space back (the shared tail).  They differ while a caller holds bytes it
  // read in place (ring/hold_tracker.h): read and advance move the first, publish the second.
  uint64_t position() const { return cursor_.tail(); }
  uint64_t published() const { return published_; }
  // read() without publishing.
  size_t copy_out(std::span<uint8_t> buf);
  // The unread bytes in place (refreshing head first): all of them when mirrored, else up
  // to the wrap.  Valid until the space is published.  Empty when none (or corrupt()).
  std::span<const uint8_t> readable();
  // Marks n <= available() bytes as read, without publishing.
  void advance(size_t n) { cursor_.consume(n); }
  // Gives the space before `pos` back to the producer (release store of tail).  `pos` lies
  // between published() and position().
  void publish(uint64_t pos) {
    assert(pos - published_ <= cursor_.tail() - published_);
    published_ = pos;
    ctl_->tail.store(pos, std::memory_order_release);
  }

  // Zero-copy access for parsers: the unread bytes as at most two pieces, then consume(n)
  // to mark them read and publish the space.  The pointers stay valid until consume().
  struct Pieces {
    std::span<const uint8_t> first, second;
  };
  Pieces peek();
  void consume(size_t n);

  // After consuming: true if the producer announced it waits for space (announcement
  // consumed; ring the producer's doorbell).  Contains the protocol fence.
  //
  // With min_free > 0 a waiting producer is woken only once at least min_free bytes are
  // free or nothing is left unread, and the announcement stays for a later call otherwise:
  // waking a blocked writer for every sliver of space costs a wakeup per sliver (the same
  // reason TCP waits for a third of the send buffer before waking a writer).  Free space
  // counts from published(): bytes read but held are not free, and while none is free the
  // announcement always stays.  This cannot strand the producer: a consumer about to wait
  // for more data has nothing unread, and then any free space wakes the producer; space
  // that held bytes give back later is published, and checked, then.
  bool producer_needs_wakeup(uint64_t min_free = 0) {
    wakeup_fence();
    if (ctl_->producer_waiting.load(std::memory_order_relaxed) == 0) return false;
    const uint64_t free = capacity() - (cursor_.produced() - published_);
    if (free == 0 || (cursor_.available() > 0 && free < min_free)) return false;
    return check_producer_waiting();
  }
  bool check_producer_waiting() {
    return ctl_->producer_waiting.load(std::memory_order_relaxed) != 0 &&
           ctl_->producer_waiting.exchange(0, std::memory_order_relaxed) != 0;
  }

  // Blocking on an empty ring: announce_sleep(), wakeup_fence(), then re-check has_data()
  // and writer_closed() (wait_for_data() does all of it).
  void announce_sleep() { ctl_->consumer_sleeping.store(1, std::memory_order_relaxed); }
  void cancel_sleep() { ctl_->consumer_sleeping.store(0, std::memory_order_relaxed); }
  // True if data or end of stream appeared: do not block.
  bool wait_for_data() {
    announce_sleep();
    wakeup_fence();
    return has_data() || writer_closed();
  }

  // The producer closed its side.  Data published before that stays readable: read until
  // has_data() is false after writer_closed() was seen true (at_eof() does exactly that).
  bool writer_closed() const { return ctl_->producer_closed.load(std::memory_order_acquire) != 0; }
  bool at_eof() { return !has_data() && writer_closed() && !has_data(); }
  // This consumer goes away; the producer's writes fail from now on.
  void close() { ctl_->consumer_closed.store(1, std::memory_order_release); }

 private:
  RingControl* ctl_ = nullptr;
  const uint8_t* data_ = nullptr;
  ConsumerCursor cursor_;
  uint64_t published_ = 0;
  bool mirrored_ = false;
  bool corrupt_ = false;
};

}  // namespace conduit::transport::ring
