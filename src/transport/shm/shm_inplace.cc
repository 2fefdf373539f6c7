// shm:// in-place and owned-buffer I/O: the application writes into and reads from the
// rings themselves.  The rings are mapped twice back to back (shm_region.h), so every span
// handed out is contiguous however it falls across the wrap.
//
//   reserve/commit   free space of the outbound ring; commit publishes head (as writev does
//                    after copying), with the same wakeup check.  Zero copies.
//   peek/consume     the inbound ring's unread bytes; consume publishes tail.  Zero copies.
//   write_owned      copies the chain's bytes into the ring (writev) and releases its slices
//                    at once: shared memory is the only thing both processes see, so there
//                    is nothing to send "from where it lies".  One copy.
//   read_owned       views of the inbound ring (Slice::foreign).  Zero copies.  Their space
//                    goes back to the peer only once released (ring/hold_tracker.h: the
//                    published tail stops at the oldest held byte, so everything read after
//                    it waits for it too).  That stretch -- from the oldest held byte to the
//                    read position -- is what hold_bytes bounds: at the bound every read
//                    would-blocks, and the read handler pauses, until a release.  So the
//                    writer always keeps ring - hold_bytes, and a reader that waits for more
//                    data must not hold slices it could release.
//
// Releases come from any thread.  On the loop thread they are applied at once; from
// elsewhere they are posted to the loop (EventLoop::post).  Held slices keep the mapping
// alive (RxShare): closing or destroying the connection while the application holds slices
// leaves their bytes readable and unchanged -- the peer never gets their space back, so
// it never overwrites them -- and the region is unmapped when the last one goes.
#include <algorithm>
#include <utility>

#include "shm/shm_connection.h"

namespace conduit::transport::shm {
namespace {
constexpr size_t kMaxIov = 64;  // gather entries per write_owned call
}  // namespace

Result<std::span<uint8_t>> ShmConnection::reserve(size_t min, size_t max) {
  if (min == 0 || min > max) return Status(Code::kInvalidArgument, "reserve: need 0 < min <= max");
  CONDUIT_RETURN_IF_ERROR(check_writable());
  if (min > tx_.capacity())
    return Status(Code::kInvalidArgument, "shm reserve: min=" + std::to_string(min) + " exceeds the ring (" +
                                              std::to_string(tx_.capacity()) + " bytes)");
  const std::span<uint8_t> span = tx_.writable(std::min<uint64_t>(max, tx_.capacity()));
  if (span.size() < min) {
    if (tx_.corrupt()) return fail(corrupt_status("tail"));
    want_space_ = min;  // the write handler runs once this much is free
    ++stats_.write_would_block;
    return Status::WouldBlock();
  }
  want_space_ = 1;
  reserved_ = span.size();
  return span;
}

Status ShmConnection::commit(size_t n) {
  if (n == 0) {
    reserved_ = 0;
    return {};
  }
  if (state_ != ConnState::kConnected) return not_connected().status();
  if (n > reserved_) return Status(Code::kInvalidArgument, "commit: more than the last reserve() returned");
  reserved_ = 0;
  tx_.produce(n);
  stats_.bytes_written += n;
  ++stats_.writes;
  if (tx_.consumer_needs_wakeup()) ring_peer();
  return {};
}

Result<std::span<const uint8_t>> ShmConnection::peek() {
  if (state_ != ConnState::kConnected) return not_connected().status();
  peeked_ = 0;
  const uint64_t room = read_room();
  std::span<const uint8_t> span = room == 0 ? std::span<const uint8_t>() : rx_.readable();
  if (span.empty() && room != 0 && rx_.writer_closed()) span = rx_.readable();  // data before the close flag
  if (span.empty()) {
    CONDUIT_ASSIGN_OR_RETURN(size_t eof, room == 0 ? hold_blocked() : read_status());
    (void)eof;
    return std::span<const uint8_t>();  // end of stream
  }
  if (span.size() > room) span = span.first(static_cast<size_t>(room));
  peeked_ = span.size();
  return span;
}

Status ShmConnection::consume(size_t n) {
  if (n == 0) return {};
  if (state_ != ConnState::kConnected) return not_connected().status();
  if (n > peeked_) return Status(Code::kInvalidArgument, "consume: more than peek() returned");
  peeked_ = 0;
  rx_.advance(n);
  note_read(n);
  publish_rx();
  return {};
}

Result<size_t> ShmConnection::write_owned(memory::Chain& chain) {
  if (chain.empty()) {
    CONDUIT_RETURN_IF_ERROR(check_writable());
    return size_t{0};
  }
  iovec iov[kMaxIov];
  const size_t n = chain.to_iovec(iov);
  CONDUIT_ASSIGN_OR_RETURN(size_t taken, writev(std::span<const iovec>(iov, n)));
  chain.consume(taken);  // copied: the slices go back to their owners now
  return taken;
}

Result<size_t> ShmConnection::read_owned(memory::Chain& out, size_t max) {
  if (state_ != ConnState::kConnected) return not_connected();
  peeked_ = 0;
  if (max == 0) return size_t{0};
  // The new slice is held itself: with nothing held yet, up to hold_bytes of it.
  const uint64_t room = holds_.empty() ? hold_cap_ : read_room();
  if (room == 0) return hold_blocked();
  std::span<const uint8_t> span = rx_.readable();
  if (span.empty() && rx_.writer_closed()) span = rx_.readable();
  if (span.empty()) return read_status();
  const size_t n = static_cast<size_t>(std::min<uint64_t>({span.size(), max, room}));
  const ring::HoldTracker::Ticket t = holds_.hold(rx_.position(), n);
  rx_.advance(n);
  note_read(n);
  const void* owner = rx_share_.get();  // Slice::owner(): this connection's receive ring
  out.append(memory::Slice::foreign(const_cast<uint8_t*>(span.data()), n,
                                    [share = rx_share_, t] { release_slice(share, t); }, nullptr, 0, owner));
  return n;
}

// A slice's last reference went, on any thread.
void ShmConnection::release_slice(const std::shared_ptr<RxShare>& share, ring::HoldTracker::Ticket t) {
  std::unique_lock<std::mutex> lock(share->mu);
  ShmConnection* conn = share->conn;
  if (conn == nullptr) return;  // closed: nobody to give the space back to
  if (share->loop->in_loop_thread()) {
    // Only the loop thread clears conn, and it is us: no race once unlocked.
    lock.unlock();
    conn->on_released(t);
    return;
  }
  // Posting under the lock: the connection cannot close (and its loop cannot go away)
  // before the closure is queued; the closure checks again when it runs.
  share->loop->post([share, t] {
    if (share->conn != nullptr) share->conn->on_released(t);
  });
}

void ShmConnection::on_released(ring::HoldTracker::Ticket t) {
  if (!holds_.release(t)) return;
  if (state_ != ConnState::kConnected) return;
  publish_rx();
  if (hold_blocked_ && read_room() > 0) {
    hold_blocked_ = false;
    became_runnable();
  }
}

// close(): releases from now on only drop their reference to the mapping.
void ShmConnection::detach_share() {
  if (!rx_share_) return;
  {
    std::lock_guard<std::mutex> lock(rx_share_->mu);
    rx_share_->conn = nullptr;
  }
  rx_share_.reset();
}

}  // namespace conduit::transport::shm
