// RdmaConnection: the data path -- write (copy into the staging mirror of the peer's
// buffer), flush (RDMA WRITE_WITH_IMM of what was written), read, handler delivery, and
// busy polling.
#include <cstring>

#include "conduit/base/clock.h"
#include "connection.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;
using ring::Extent;
using ring::Extents;

// Work for the before-sleep hook: buffered data to post, or a handler that should run
// again (handlers are level-style: one that leaves data unread is called again).
bool RdmaConnection::wants_service() const {
  if (live() && (tx_unposted() || (unsolicited_tail_ && solicited()))) return true;
  if (write_handler_ && writable()) return true;
  return read_handler_ != nullptr && readable() && phase_ != Phase::kFailed &&
         !(phase_ == Phase::kPeerGone && eof_delivered_ && rx_.available() == 0);
}

// Busy polling (busy_poll_us): while a handler is installed, the before-sleep hook polls the
// CQ itself and keeps the loop from sleeping until busy_poll_us pass without a completion.
// Completion events stay armed, so a connection that stops polling misses nothing.  Trades
// a core for the wakeup: under TCG an event-driven completion costs milliseconds.
bool RdmaConnection::busy_poll() {
  if (options_.busy_poll_us == 0 || !live() || (!read_handler_ && !write_handler_)) {
    busy_since_ns_ = 0;
    return false;
  }
  int handled = 0;
  if (Status s = process_cq(&handled); !s.ok()) {
    fail(s);
    return false;
  }
  if (res_ && res_->srq_attached) handled += res_->srq->process();  // may deliver to other connections too
  const uint64_t now = monotonic_ns();
  if (handled != 0 || busy_since_ns_ == 0) busy_since_ns_ = now;
  if (handled != 0 && tx_unposted()) (void)flush(true);
  if (now - busy_since_ns_ < options_.busy_poll_us * 1000) return true;
  busy_since_ns_ = 0;
  return false;
}

Status RdmaConnection::post_data(Extent e, bool solicit) {
  const uint32_t len = static_cast<uint32_t>(e.len);
  ibv_sge sge = sge_of(res_->tx, e.offset, len);
  SignalTracker& t = *res_->tracker;
  const bool signal = t.must_signal();
  SendWr wr = SendWr::write_imm(len != 0 ? &sge : nullptr, len != 0 ? 1 : 0, tx_addr_ + e.offset, tx_rkey_, len)
                  .id(make_wr_id(kWrData, 0))
                  .signaled(signal)
                  .solicited(solicit)
                  .inlined(len != 0 && len <= qp()->max_inline());
  if (Status s = qp()->post_send(wr); !s.ok()) {
    fail(s);
    return s;
  }
  t.on_posted(signal);
  return {};
}

// Posts the bytes written since the last post: one RDMA_WRITE_WITH_IMM per contiguous run
// (two when the run wraps around the end of the peer's ring).  `batch_end`: nothing more
// follows before the loop sleeps (or the writer is blocked), so the last WR is solicited --
// the one that wakes a peer which negotiated kFeatureSolicited.  A batch whose last WR went
// out unsolicited (posted early because it reached flush_bytes) is closed by a zero-length
// solicited WRITE_WITH_IMM.
Status RdmaConnection::flush(bool batch_end) {
  if (!live() || !tx_known_) return {};
  SignalTracker& t = *res_->tracker;
  if (!tx_unposted()) {
    if (!batch_end || !unsolicited_tail_ || !solicited()) return {};
    if (!t.can_post(1)) {
      ensure_send_events();
      return Status::WouldBlock();
    }
    CONDUIT_RETURN_IF_ERROR(post_data(Extent{tx_.geometry().offset(tx_posted_), 0}, true));
    unsolicited_tail_ = false;
    return {};
  }
  while (tx_unposted()) {
    if (!t.can_post(1)) {
      ensure_send_events();
      return Status::WouldBlock();  // a signaled completion will free room
    }
    const Extents e = tx_.geometry().extents(tx_posted_, tx_.head() - tx_posted_);
    const bool last = e.second.len == 0;
    CONDUIT_RETURN_IF_ERROR(post_data(e.first, batch_end && last));
    tx_posted_ += e.first.len;
    unsolicited_tail_ = !(batch_end && last);
  }
  return {};
}

Result<size_t> RdmaConnection::writev(std::span<const iovec> iov) {
  if (!live()) {
    if (phase_ == Phase::kFailed) return error_;
    if (phase_ == Phase::kClosed) return Status(Code::kClosed, "rdma: connection is closed");
    return Status(Code::kInvalidArgument, "rdma: connection is still being set up");
  }
  if (phase_ == Phase::kPeerGone) {
    // The peer is gone: what we would write can never arrive (TCP: EPIPE).
    fail(Status(Code::kClosed, "rdma: write after the peer disconnected"));
    return error_;
  }
  size_t total = 0;
  // Until the peer has advertised its buffer (right after ESTABLISHED) nothing can be written.
  for (const iovec& v : tx_known_ ? iov : std::span<const iovec>()) {
    const auto* src = static_cast<const uint8_t*>(v.iov_base);
    size_t left = v.iov_len;
    while (left != 0 && tx_.free_space() != 0) {  // an empty iovec may carry a null base
      const Extent e = tx_.writable(left).first;   // contiguous; wraps on the next round
      std::memcpy(res_->tx.writable_data() + e.offset, src, e.len);
      tx_.produce(e.len);
      src += e.len;
      left -= e.len;
      total += e.len;
    }
    if (left != 0) break;
  }
  if (total == 0) {
    bool empty = true;
    for (const iovec& v : iov) empty = empty && v.iov_len == 0;
    if (empty) return size_t{0};
    ++stats_.write_would_block;
    return Status::WouldBlock();
  }
  stats_.bytes_written += total;
  ++stats_.writes;
  // Small runs wait for the before-sleep hook so that many writes become one WR; a full
  // buffer or a large run goes out now (a full buffer ends the batch: the writer waits).
  const bool full = tx_.free_space() == 0;
  if (tx_.head() - tx_posted_ >= options_.flush_bytes || full) {
    Status s = flush(full);
    if (s.is_error()) return s;
  }
  ctx_->mark_pending(this);
  return total;
}

Result<size_t> RdmaConnection::write(std::span<const uint8_t> data) {
  iovec v{const_cast<uint8_t*>(data.data()), data.size()};
  return writev(std::span<const iovec>(&v, 1));
}

Result<size_t> RdmaConnection::read(std::span<uint8_t> buf) {
  if (!live()) {
    if (phase_ == Phase::kFailed) return error_;
    if (phase_ == Phase::kClosed) return Status(Code::kClosed, "rdma: connection is closed");
    return Status(Code::kInvalidArgument, "rdma: connection is still being set up");
  }
  if (rx_.available() == 0) {
    if (phase_ == Phase::kPeerGone) {
      eof_delivered_ = true;
      return size_t{0};
    }
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  const Extents e = rx_.readable(buf.size());
  const uint8_t* rx = res_->rx.data();
  std::memcpy(buf.data(), rx + e.first.offset, e.first.len);
  if (e.second.len != 0) std::memcpy(buf.data() + e.first.len, rx, e.second.len);
  const size_t n = e.total();
  rx_.consume(n);
  stats_.bytes_read += n;
  ++stats_.reads;
  return_space();
  return n;
}

void RdmaConnection::deliver() {
  // Handlers may close the connection: re-check the state around every call.
  if (read_handler_ && readable()) {
    Handler h = read_handler_;
    h(*this);
  }
  if (live() && write_handler_ && writable()) {
    Handler h = write_handler_;
    h(*this);
  } else if (phase_ == Phase::kFailed && write_handler_ && !error_told_writer_) {
    // A writer waiting for space learns of the failure too (TCP: EPOLLERR wakes writers).
    error_told_writer_ = true;
    Handler h = write_handler_;
    h(*this);
  }
  // Level-style: what a handler left undone is offered again before the loop sleeps.
  if (wants_service()) ctx_->mark_pending(this);
}

bool RdmaConnection::run_deferred() {
  if (poll_again_ && live()) {
    poll_again_ = false;
    if (Status s = process_cq(); !s.ok()) fail(s);
  }
  const bool polling = busy_poll();
  if (live()) {
    Status s = flush(true);
    if (s.is_error()) fail(s);
  }
  deliver();
  // Stay on the list while something is left that no event will announce.
  return wants_service() || (polling && live());
}

}  // namespace conduit::transport::rdma
