// RdmaConnection: the data path -- write (copy into the staging mirror of the peer's
// buffer), flush (RDMA WRITE_WITH_IMM of what was written), read, handler delivery, and
// adaptive polling of the CQ.
#include <algorithm>
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
         !(peer_done() && eof_delivered_ && rx_.available() == 0);
}

// Polling (poll_us, busy_poll_us; conduit/base/adaptive_spin.h): while a handler is installed and
// our window is open, the before-sleep hook does not arm the CQ and sleep but polls it --
// together with the loop's other polling connections, in the loop's SpinGroup -- running
// handlers and posting what they wrote as completions appear.  Once the window closes
// without work the CQ is armed and polled once more (a completion that arrived in between
// raised no event); only then may the loop block.  Invariant: a connection whose CQ is not
// armed stays on the loop context's pending list, so its hook keeps running.
int RdmaConnection::poll_completions() {
  int handled = 0;
  if (Status s = process_cq(&handled); !s.ok()) {
    fail(s);
    return 1;  // the failure is work: the handlers learn it
  }
  if (res_ && res_->srq_attached) handled += res_->srq->process();  // may deliver to other connections too
  return handled;
}

void RdmaConnection::run_after_poll() {
  if (live() && tx_unposted()) (void)flush(true);  // completions may have freed send-queue slots
  deliver();
  if (live() && tx_unposted()) (void)flush(true);  // what the handlers wrote goes out now
}

bool RdmaConnection::arm_for_sleep() {
  if (!res_ || !res_->cq || cq_armed_) return true;
  if (Status s = arm_cq(); !s.ok()) {
    fail(s);
    return false;
  }
  if (poll_completions() == 0) return true;
  if (spin_.enabled()) spin_.on_work(monotonic_ns());
  run_after_poll();
  return false;
}

void RdmaConnection::stop_spinning() {
  if (spin_group_) spin_group_->leave(this);
  spin_group_.reset();
}

bool RdmaConnection::spin_poll(uint64_t now) {
  if (!polling()) return false;
  if (poll_completions() == 0) {
    spin_.on_idle(now);
    return false;
  }
  spin_.on_work(now);
  run_after_poll();
  return true;
}

uint64_t RdmaConnection::spin_deadline() const { return polling() ? spin_.deadline() : 0; }

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
// solicited WRITE_WITH_IMM.  A due HalfClose follows the last of them.
Status RdmaConnection::flush(bool batch_end) {
  Status s = flush_data(batch_end);
  if (half_close_due_ && s.ok()) return send_half_close();
  return s;
}

Status RdmaConnection::flush_data(bool batch_end) {
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
    if (!owned_.empty() && owned_.front().pos == tx_posted_) {  // an application slice: from where it lies
      const uint64_t len = owned_.front().slice.size();
      const bool last = tx_posted_ + len == tx_.head();
      CONDUIT_RETURN_IF_ERROR(post_owned(0, batch_end && last));
      tx_posted_ += len;
      owned_.pop_front();
      unsolicited_tail_ = !(batch_end && last);
      continue;
    }
    const uint64_t end = owned_.empty() ? tx_.head() : owned_.front().pos;  // staged bytes up to here
    const Extents e = tx_.geometry().extents(tx_posted_, end - tx_posted_);
    const bool last = e.second.len == 0 && end == tx_.head();
    CONDUIT_RETURN_IF_ERROR(post_data(e.first, batch_end && last));
    tx_posted_ += e.first.len;
    unsolicited_tail_ = !(batch_end && last);
  }
  return {};
}

// One WRITE_WITH_IMM from owned_[index]'s slice (registered in the arena: its own lkey)
// to its place in the peer's ring; the slice is kept until a completion covers the WR.
Status RdmaConnection::post_owned(size_t index, bool solicit) {
  OwnedSegment& seg = owned_[index];
  const uint32_t len = static_cast<uint32_t>(seg.slice.size());
  ibv_sge sge = sge_of(seg.slice, 0, len);
  SignalTracker& t = *res_->tracker;
  const bool signal = t.must_signal();
  const uint64_t seq = t.posted();
  SendWr wr = SendWr::write_imm(&sge, 1, tx_addr_ + tx_.geometry().offset(seg.pos), tx_rkey_, len)
                  .id(make_wr_id(kWrData, 0))
                  .signaled(signal)
                  .solicited(solicit);
  if (Status s = qp()->post_send(wr); !s.ok()) {
    fail(s);
    return s;
  }
  t.on_posted(signal);
  res_->sent_from.emplace_back(seq, std::move(seg.slice));
  return {};
}

// The HalfClose goes on the send queue after every data WR (posting them in order is what
// orders it after the data at the peer).  One that finds no control slot waits for a send
// completion, like a Credit.
Status RdmaConnection::send_half_close() {
  if (!sending()) {  // the peer is gone: there is nobody left to tell
    half_close_due_ = false;
    return {};
  }
  if (tx_unposted()) return {};  // flush() posts the data first, then comes back here
  Status s = send_ctrl(CtrlMsg::half_close(tx_stream_));
  if (s.code() == Code::kResourceExhausted) {
    ensure_send_events();
    return {};
  }
  CONDUIT_RETURN_IF_ERROR(s);
  half_close_due_ = false;
  // The HalfClose is solicited, so it ends the batch; nothing (not even the zero-length
  // WRITE_WITH_IMM that closes an unsolicited batch) may follow it.
  unsolicited_tail_ = false;
  return {};
}

Status RdmaConnection::shutdown_write() {
  if (!live()) return io_state();
  if (write_shut_) return {};
  if (!half_close())
    return Status(Code::kNotSupported,
                  "rdma: half-close was not negotiated with " + peer_ +
                      " (a Valkey peer -- the Valkey RDMA protocol has none --, features without bit 3, or a client "
                      "whose feature exchange has not finished yet); the peer reads EOF only at close");
  write_shut_ = true;
  if (phase_ == Phase::kPeerGone) return {};  // nothing can reach the peer any more
  half_close_due_ = true;
  Status s = flush(true);
  if (s.is_error()) return s;
  ctx_->mark_pending(this);
  return {};
}

void RdmaConnection::release_sent() {
  if (!res_) return;
  const uint64_t done = res_->tracker->completed();
  while (!res_->sent_from.empty() && res_->sent_from.front().first < done) res_->sent_from.pop_front();
}

// Before a Closer takes over (it posts from the staging area only): the unposted
// application slices are copied to their places in the staging area.
void RdmaConnection::stage_owned() {
  for (OwnedSegment& seg : owned_) {
    const uint64_t off = tx_.geometry().offset(seg.pos);
    std::memcpy(res_->tx.writable_data() + off, seg.slice.data(), seg.slice.size());
  }
  owned_.clear();
}

Status RdmaConnection::io_state() {
  if (!live()) {
    if (phase_ == Phase::kFailed) return error_;
    if (phase_ == Phase::kClosed) return Status(Code::kClosed, "rdma: connection is closed");
    return Status(Code::kInvalidArgument, "rdma: connection is still being set up");
  }
  if (write_shut_) return Status(Code::kClosed, "rdma: write after shutdown_write()");
  if (phase_ == Phase::kPeerGone) {
    // The peer is gone: what we would write can never arrive (TCP: EPIPE).
    fail(Status(Code::kClosed, "rdma: write after the peer disconnected"));
    return error_;
  }
  return {};
}

// `n` bytes were added at the producer's head (copied, built in place, or owned slices).
// Small runs wait for the before-sleep hook so that many writes become one WR; a full
// buffer or a large run goes out now (a full buffer ends the batch: the writer waits).
Status RdmaConnection::produced(size_t n) {
  tx_stream_ += n;
  stats_.bytes_written += n;
  ++stats_.writes;
  const bool full = tx_.free_space() == 0;
  if (tx_.head() - tx_posted_ >= options_.flush_bytes || full) {
    Status s = flush(full);
    if (s.is_error()) return s;
  }
  ctx_->mark_pending(this);
  return {};
}

// The staging mirror of the peer's buffer, from the arena, at the first write that needs it
// (setup takes none: the peer's RegisterXferMemory only says how large it must be).  Spares
// of that size are kept only when it is our own buffer size too (a peer cannot choose what
// we pin ahead).  At the arena's cap: would-block, and the write handler runs again when
// blocks come back.
Status RdmaConnection::ensure_staging() {
  const size_t need = tx_.geometry().capacity();
  if (res_->tx.capacity() >= need) return {};
  if (staging_waiter_) return Status::WouldBlock();
  auto tx = arena_->pool->allocate(need);
  if (tx.status().would_block()) {
    staging_waiter_ = wait_for_memory(need, &RdmaConnection::staging_memory_back);
    return Status::WouldBlock();
  }
  if (!tx.ok()) return tx.status().annotate("rdma: staging area from the arena");
  res_->tx = std::move(*tx);
  count_pinned();
  return {};
}

void RdmaConnection::staging_memory_back() {
  stop_waiting(staging_waiter_, /*cancel=*/false);
  if (live() && write_handler_) ctx_->mark_pending(this);
}

Result<size_t> RdmaConnection::writev(std::span<const iovec> iov) {
  CONDUIT_RETURN_IF_ERROR(io_state());
  if (tx_known_) {
    bool empty = true;
    for (const iovec& v : iov) empty = empty && v.iov_len == 0;
    if (empty) return size_t{0};
    if (Status s = ensure_staging(); !s.ok()) {
      if (s.would_block()) ++stats_.write_would_block;
      return s;
    }
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
  CONDUIT_RETURN_IF_ERROR(produced(total));
  return total;
}

Result<std::span<uint8_t>> RdmaConnection::reserve(size_t min, size_t max) {
  if (min == 0 || min > max) return Status(Code::kInvalidArgument, "reserve: need 0 < min <= max");
  CONDUIT_RETURN_IF_ERROR(io_state());
  if (tx_known_) {
    if (Status s = ensure_staging(); !s.ok()) {
      if (s.would_block()) ++stats_.write_would_block;
      return s;
    }
  }
  // At most what is contiguous up to the end of the peer's ring can ever be offered here.
  const uint64_t to_end = tx_known_ ? tx_.geometry().capacity() - tx_.geometry().offset(tx_.head()) : 0;
  const Extent e = tx_known_ ? tx_.writable(max).first : Extent{};
  if (e.len == 0 || e.len < std::min<uint64_t>(min, to_end)) {
    ++stats_.write_would_block;
    return Status::WouldBlock();
  }
  reserved_ = e.len;
  return std::span<uint8_t>(res_->tx.writable_data() + e.offset, e.len);
}

Status RdmaConnection::commit(size_t n) {
  if (n == 0) return {};
  if (n > reserved_) return Status(Code::kInvalidArgument, "commit: more than the last reserve() returned");
  CONDUIT_RETURN_IF_ERROR(io_state());
  reserved_ = 0;
  tx_.produce(n);
  return produced(n);
}

Result<size_t> RdmaConnection::write_owned(memory::Chain& chain) {
  CONDUIT_RETURN_IF_ERROR(io_state());
  if (chain.empty()) return size_t{0};
  // Owned slices may go out zero-copy, but a close that lingers copies the unposted ones into
  // the staging area (stage_owned), so it must be there before they are accepted.
  if (tx_known_) {
    if (Status s = ensure_staging(); !s.ok()) {
      if (s.would_block()) ++stats_.write_would_block;
      return s;
    }
  }
  size_t total = 0, inband = 0;
  while (tx_known_ && !chain.empty()) {
    const memory::Slice& s = chain.front();
    if (rendezvous() && options_.rendezvous_min != 0 && s.size() >= options_.rendezvous_min) {
      if (inband != 0) {  // accounted first: the offer's stream position follows these bytes
        CONDUIT_RETURN_IF_ERROR(produced(inband));
        inband = 0;
      }
      CONDUIT_ASSIGN_OR_RETURN(const bool offered, offer(s));
      if (offered) {
        total += s.size();
        chain.consume(s.size());
        continue;
      }
    }
    if (tx_.free_space() == 0) break;
    const Extent room = tx_.writable(s.size()).first;  // contiguous in the peer's ring
    const size_t n = room.len;
    if (s.owner() == arena_->pool.get() && s.registered(Arena::kDomain) && n >= options_.zero_copy_min) {
      owned_.push_back(OwnedSegment{tx_.head(), s.sub(0, n)});
    } else {
      std::memcpy(res_->tx.writable_data() + room.offset, s.data(), n);
    }
    tx_.produce(n);
    chain.consume(n);
    total += n;
    inband += n;
  }
  if (total == 0) {
    ++stats_.write_would_block;
    return Status::WouldBlock();
  }
  if (inband != 0) CONDUIT_RETURN_IF_ERROR(produced(inband));
  else ctx_->mark_pending(this);
  return total;
}

Result<size_t> RdmaConnection::write(std::span<const uint8_t> data) {
  iovec v{const_cast<uint8_t*>(data.data()), data.size()};
  return writev(std::span<const iovec>(&v, 1));
}

Result<size_t> RdmaConnection::read(std::span<uint8_t> buf) {
  if (!live()) return io_state();
  if (const std::span<const uint8_t> h = rv_head(); !h.empty()) {  // an offer's bytes, READ into our pool
    const size_t n = std::min(h.size(), buf.size());
    std::memcpy(buf.data(), h.data(), n);
    rv_consume(n);
    return n;
  }
  if (rv_next()) return rv_wait();
  if (rx_.available() == 0) {
    if (peer_done()) {
      eof_delivered_ = true;
      return size_t{0};
    }
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  const uint64_t room = std::min(hold_room(), rv_inband_room());
  if (room == 0) return hold_blocked();
  const Extents e = rx_.readable(std::min<uint64_t>(buf.size(), room));
  const uint8_t* rx = res_->rx.data();
  std::memcpy(buf.data(), rx + e.first.offset, e.first.len);
  if (e.second.len != 0) std::memcpy(buf.data() + e.first.len, rx, e.second.len);
  const size_t n = e.total();
  consumed(n);
  return n;
}

Result<std::span<const uint8_t>> RdmaConnection::peek() {
  if (!live()) return io_state();
  peeked_rv_ = false;
  if (const std::span<const uint8_t> h = rv_head(); !h.empty()) {
    peeked_rv_ = true;
    peeked_ = h.size();
    return h;
  }
  if (rv_next()) return rv_wait();
  if (rx_.available() == 0) {
    if (peer_done()) {
      eof_delivered_ = true;
      return std::span<const uint8_t>();
    }
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  const uint64_t room = std::min(hold_room(), rv_inband_room());
  if (room == 0) return hold_blocked();
  const Extent e = rx_.readable(std::min(rx_.available(), room)).first;
  peeked_ = e.len;
  return std::span<const uint8_t>(res_->rx.data() + e.offset, e.len);
}

Status RdmaConnection::consume(size_t n) {
  if (n == 0) return {};
  if (n > peeked_) return Status(Code::kInvalidArgument, "consume: more than peek() returned");
  peeked_ -= n;
  if (peeked_rv_)
    rv_consume(n);
  else
    consumed(n);
  return {};
}

// Zero-copy receive.  read_owned hands out views of the receive area itself
// (Slice::foreign over res_->rx, which each view keeps alive).  The read position moves past
// them, but their space -- and everything read after them -- goes back to the writer only
// once they are released (ring/hold_tracker.h, the same bookkeeping as shm's): a Credit in
// ring mode, the re-advertised buffer in the baseline.  The stretch from the oldest held
// byte to the read position is bounded by hold_bytes; at the bound every read
// would-blocks and the read handler pauses until a release.  A view released after the
// connection closed only drops its memory.  Releases come from any thread; off the loop
// thread they are posted to it.
Result<size_t> RdmaConnection::read_owned(memory::Chain& out, size_t max) {
  if (!live()) return io_state();
  peeked_ = 0;
  if (max == 0) return size_t{0};
  // An offer's block is our own pool memory: handed over whole, outside hold_bytes.
  if (const std::span<const uint8_t> h = rv_head(); !h.empty()) {
    const size_t n = std::min(h.size(), max);
    out.append(rv_blocks_.front().block.sub(rv_blocks_.front().done, n));
    rv_consume(n);
    return n;
  }
  if (rv_next()) return rv_wait();
  // The new view is held itself: with nothing held yet, up to hold_bytes of it.
  const uint64_t room = holds_.empty() ? hold_limit() : hold_room();
  if (room == 0) return hold_blocked();
  if (rx_.available() == 0) {
    if (peer_done()) {
      eof_delivered_ = true;
      return size_t{0};
    }
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  const Extent e = rx_.readable(std::min({static_cast<uint64_t>(max), room, rv_inband_room()})).first;  // contiguous
  if (!rx_share_) {
    rx_share_ = std::make_shared<RxShare>();
    rx_share_->conn = this;
    rx_share_->loop = &ctx_->loop();
  }
  const ring::HoldTracker::Ticket t = holds_.hold(rx_.tail(), e.len);
  rx_.consume(e.len);
  rx_inband_consumed_ += e.len;
  stats_.bytes_read += e.len;
  ++stats_.reads;
  uint8_t* data = res_->rx.writable_data() + e.offset;
  out.append(memory::Slice::foreign(
      data, e.len, [share = rx_share_, t, keep = res_->rx] { release_view(share, t); }, nullptr, 0, rx_share_.get()));
  return static_cast<size_t>(e.len);
}

Status RdmaConnection::hold_blocked() {
  hold_blocked_ = true;
  ++stats_.read_would_block;
  return Status::WouldBlock();
}

void RdmaConnection::release_view(const std::shared_ptr<RxShare>& share, ring::HoldTracker::Ticket t) {
  std::unique_lock<std::mutex> lock(share->mu);
  RdmaConnection* conn = share->conn;
  if (conn == nullptr) return;  // closed: the memory goes when the last view does
  if (share->loop->in_loop_thread()) {
    lock.unlock();  // only the loop thread clears conn, and it is us
    conn->on_released(t);
    return;
  }
  // Posted under the lock: the connection cannot close before the closure is queued; the
  // closure checks again when it runs.
  share->loop->post([share, t] {
    if (share->conn != nullptr) share->conn->on_released(t);
  });
}

void RdmaConnection::on_released(ring::HoldTracker::Ticket t) {
  if (!holds_.release(t) || !live()) return;
  return_space();
  if (hold_blocked_ && hold_room() > 0) {
    hold_blocked_ = false;
    ctx_->mark_pending_soon(this);  // the read handler runs again
  }
}

void RdmaConnection::detach_share() {
  if (!rx_share_) return;
  {
    std::lock_guard<std::mutex> lock(rx_share_->mu);
    rx_share_->conn = nullptr;
  }
  rx_share_.reset();
}

void RdmaConnection::consumed(size_t n) {
  rx_.consume(n);
  rx_inband_consumed_ += n;
  stats_.bytes_read += n;
  ++stats_.reads;
  return_space();
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

// The before-sleep hook (through the loop context's pending list).  True: stay on the
// list (and keep the loop from blocking).
bool RdmaConnection::run_deferred() {
  if (poll_again_ && live()) {
    poll_again_ = false;
    if (Status s = process_cq(); !s.ok()) fail(s);
  }
  const bool poll = polling();
  const int handled = poll ? poll_completions() : 0;
  if (live()) {
    Status s = flush(true);
    if (s.is_error()) fail(s);
  }
  deliver();
  if (!live()) return wants_service();
  if (!polling()) return wants_service() || !arm_for_sleep();
  // The iteration's reading (one clock read per iteration, however many connections poll,
  // and the one the preload's wait reads after its drive): stale by this iteration's
  // handlers at most.
  reactor::EventLoop& loop = ctx_->loop();
  const uint64_t now = loop.about_now_ns();
  if (handled != 0)
    spin_.on_work(now);
  else
    spin_.on_idle(now);
  if (wants_service()) return true;  // a handler left work: the hook runs again at once
  if (spin_.deadline() > now) {
    if (!spin_group_) spin_group_ = poll::SpinGroup::of(ctx_->loop());
    const bool pending = spin_group_->spin(this, now);
    if (!live()) return wants_service();
    if (pending || handled != 0) return true;
  } else if (handled != 0) {
    return true;
  }
  spin_.on_sleep();
  return wants_service() || !arm_for_sleep();
}

}  // namespace conduit::transport::rdma
