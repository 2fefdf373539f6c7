// RdmaConnection: the READ rendezvous (docs/PROTOCOL.md "Rendezvous (bit 2)").  The writer
// binds a type-2 window over an owned pool slice to its QP (REMOTE_READ only), posts a
// ReadOffer behind it and behind every in-band byte written before; the reader READs the
// slice into a block of its own arena pool, sends ReadDone when the READ completed and
// delivers the block's bytes at the offer's place in the stream; on ReadDone the writer
// invalidates the window and releases the slice once the invalidation completed.  The
// bookkeeping (tags, positions, READ order and bound) is rendezvous.h's.
#include <cstring>

#include "conduit/base/log.h"
#include "connection.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;

// Told by the pool (on whatever thread released memory) that blocks came back; hands the
// news to the loop, where `back` runs.  `conn` is cleared on the loop thread when the
// connection closes or stops waiting.
struct RdmaConnection::RvWaiter final : memory::MemoryWaiter {
  std::mutex mu;
  RdmaConnection* conn = nullptr;
  reactor::EventLoop* loop = nullptr;
  void (RdmaConnection::*back)() = nullptr;
  std::weak_ptr<RvWaiter> self;
  void on_memory_available() override {
    std::lock_guard<std::mutex> lock(mu);
    if (conn == nullptr) return;
    loop->post([s = self.lock()] {
      if (s && s->conn != nullptr) (s->conn->*(s->back))();
    });
  }
};

std::shared_ptr<RdmaConnection::RvWaiter> RdmaConnection::wait_for_memory(size_t bytes, void (RdmaConnection::*back)()) {
  auto w = std::make_shared<RvWaiter>();
  w->conn = this;
  w->loop = &ctx_->loop();
  w->back = back;
  w->self = w;
  arena_->pool->wait(w.get(), bytes);
  return w;
}

void RdmaConnection::stop_waiting(std::shared_ptr<RvWaiter>& w, bool cancel) {
  if (!w) return;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    w->conn = nullptr;
  }
  if (cancel) arena_->pool->cancel_wait(w.get());
  w.reset();
}

uint64_t RdmaConnection::offered_features() const {
  const bool can = options_.rendezvous_min != 0 && arena_ != nullptr && arena_->has_mw && arena_->pool_registrar &&
                   scope_ != Scope::kPrivate && read_initiator_depth_ >= 1 && read_responder_resources_ >= 1;
  return can ? options_.feature_mask : options_.feature_mask & ~kFeatureRendezvous;
}

void RdmaConnection::rv_start() {
  rv_slots_ = std::make_unique<OfferSlots<OfferHeld>>(read_responder_resources_);
  rv_seq_ = std::make_unique<OfferSequencer>(read_initiator_depth_);
}

// Writer.  False (not an error): this slice goes in-band -- it is not a whole-region block
// of our pool where the window would open more than the slice, or the offers are at their
// limit, or the send queue / control slots have no room now (never would-block for that).
Result<bool> RdmaConnection::offer(const memory::Slice& s) {
  const size_t len = s.size();
  if (!rendezvous() || !rv_slots_ || len == 0 || len > kMaxRendezvous || s.owner() != arena_->pool.get() ||
      !s.registered(Arena::kDomain))
    return false;
  MemoryRegion* mr = arena_->pool_registrar->find(s.keys(Arena::kDomain).lkey);
  if (mr == nullptr) return false;
  // rxe (Linux 6.1) bounds a window key only by its region (tests/verbs/rdma_mw_test.cc):
  // with scope=mw a slice is offered only when its block is the whole region (the arena's
  // blocks of Arena::kSoloBytes and more are), so the key opens nothing but memory this
  // write handed over.  scope=shared is a trust boundary.
  if (scope_ != Scope::kShared && mr->size() != s.capacity()) return false;
  SignalTracker& t = *res_->tracker;
  if (rv_slots_->outstanding() >= rv_slots_->limit()) {
    ++stats_.rendezvous_fallbacks;
    return false;
  }
  // The in-band run written before goes first: the reader's receives then list the stream
  // in order.
  if (tx_unposted()) {
    Status f = flush_data(false);
    if (f.is_error()) return f;
  }
  if (tx_unposted() || !t.can_post(2) || free_ctrl_slots_.empty()) {
    ++stats_.rendezvous_fallbacks;
    return false;
  }
  uint32_t w;
  if (!rv_free_windows_.empty()) {
    w = rv_free_windows_.back();
    rv_free_windows_.pop_back();
  } else {
    CONDUIT_ASSIGN_OR_RETURN(auto mw, MemoryWindow::create(res_->pd));
    res_->offer_mws.push_back(std::move(mw));
    w = static_cast<uint32_t>(res_->offer_mws.size() - 1);
  }
  MemoryWindow& mw = *res_->offer_mws[w];
  const uint32_t rkey = mw.next_rkey();
  const bool signal = t.must_signal();
  SendWr bind = SendWr::bind_mw(mw.native_handle(), rkey, mr->native_handle(), s.address(), len,
                                IBV_ACCESS_REMOTE_READ)
                    .id(make_wr_id(kWrBind, 0))
                    .signaled(signal);
  if (Status st = qp()->post_send(bind); !st.ok()) {
    rv_free_windows_.push_back(w);
    fail(st);
    return st;
  }
  t.on_posted(signal);
  mw.bound(rkey);
  const uint32_t tag = *rv_slots_->take(static_cast<uint32_t>(len), OfferHeld{s.sub(0, len), w});
  if (Status st = send_ctrl(CtrlMsg::read_offer(tag, s.address(), static_cast<uint32_t>(len), rkey, tx_stream_));
      !st.ok()) {
    fail(st);  // room was checked: only a failed post gets here; the slice is parked at close
    return st;
  }
  unsolicited_tail_ = false;  // the offer is solicited: it ends the batch
  tx_stream_ += len;
  stats_.bytes_written += len;
  ++stats_.writes;
  ++stats_.rendezvous_offers;
  stats_.rendezvous_bytes_sent += len;
  return true;
}

Status RdmaConnection::on_read_done(const CtrlMsg& m) {
  if (!rendezvous() || !rv_slots_)
    return Status(Code::kProtocolError, "rdma: " + m.to_string() + " from a peer that did not negotiate rendezvous");
  CONDUIT_ASSIGN_OR_RETURN(OfferHeld h, rv_slots_->done(m.tag, m.bytes));
  rv_inv_due_.push_back(std::move(h));
  return rv_service();
}

// Reader.
Status RdmaConnection::on_read_offer(const CtrlMsg& m) {
  if (!rendezvous() || !rv_seq_)
    return Status(Code::kProtocolError, "rdma: " + m.to_string() + " from a peer that did not negotiate rendezvous");
  if (peer_shut_) return Status(Code::kProtocolError, "rdma: ReadOffer after the peer's HalfClose");
  CONDUIT_RETURN_IF_ERROR(rv_seq_->on_offer(m, kMaxRendezvous));
  RvBlock b;
  b.tag = m.tag;
  b.length = m.length;
  rv_blocks_.push_back(std::move(b));
  rx_stream_ += m.length;
  return rv_service();
}

Status RdmaConnection::on_read_completion(const Completion& wc) {
  const uint32_t tag = wr_index(wc.wr_id);
  if (!wc.ok()) {
    if (wc.ibv_wc::status == IBV_WC_WR_FLUSH_ERR && (phase_ == Phase::kPeerGone || (res_ && res_->disconnected)))
      return {};  // the peer is gone: rv_wait() reports the lost bytes
    return Status(Code::kProtocolError, "rdma: RDMA READ of " + peer_ + "'s ReadOffer tag " + std::to_string(tag) +
                                            " failed (addr/rkey/len outside what the peer granted?): " +
                                            wc.as_status().to_string());
  }
  res_->tracker->on_signaled_completion();
  release_sent();
  CONDUIT_RETURN_IF_ERROR(rv_seq_->read_completed(tag));
  for (RvBlock& b : rv_blocks_) {
    if (b.tag != tag || !b.posted || b.read) continue;
    b.read = true;
    ++stats_.rendezvous_reads;
    stats_.rendezvous_bytes_read += b.length;
    rv_done_due_.emplace_back(tag, b.length);
    break;
  }
  ctx_->mark_pending(this);  // the head offer may be deliverable now
  return rv_service();
}

Status RdmaConnection::rv_service() {
  if (!res_ || !res_->tracker || !sending()) return {};
  SignalTracker& t = *res_->tracker;
  // ReadDones first: they free the writer's slices and offer slots.
  while (!rv_done_due_.empty()) {
    const auto [tag, len] = rv_done_due_.front();
    Status s = send_ctrl(CtrlMsg::read_done(tag, len));
    if (s.code() == Code::kResourceExhausted) {
      ensure_send_events();
      break;
    }
    CONDUIT_RETURN_IF_ERROR(s);
    rv_done_due_.pop_front();
  }
  // The writer's window invalidations; the slice goes back once this WR has completed.
  while (!rv_inv_due_.empty()) {
    if (!t.can_post(1)) {
      ensure_send_events();
      break;
    }
    OfferHeld& h = rv_inv_due_.front();
    const uint64_t seq = t.posted();
    SendWr inv = SendWr::local_invalidate(res_->offer_mws[h.window]->rkey()).id(make_wr_id(kWrBind, 0)).signaled();
    CONDUIT_RETURN_IF_ERROR(qp()->post_send(inv));
    t.on_posted(true);
    res_->sent_from.emplace_back(seq, std::move(h.slice));
    rv_free_windows_.push_back(h.window);
    rv_inv_due_.pop_front();
  }
  // READs, in offer order, at most the initiator depth (the sequencer's bound).
  while (rv_seq_ && !rv_waiter_) {
    const OfferSequencer::Offer* o = rv_seq_->next_to_read();
    if (o == nullptr) break;
    if (!t.can_post(1)) {
      ensure_send_events();
      break;
    }
    const uint32_t tag = o->tag, len = o->length, rkey = o->rkey;
    const uint64_t addr = o->addr;
    RvBlock* b = nullptr;
    for (RvBlock& x : rv_blocks_)
      if (!x.posted) {
        b = &x;
        break;
      }
    if (b == nullptr || b->tag != tag) return Status(Code::kInternal, "rdma: rendezvous blocks out of step");
    if (b->block.size() == 0) {
      auto got = arena_->pool->allocate(len);
      if (got.status().would_block()) {
        // The offer (and the stream behind it) waits, in order, until blocks come back.
        rv_waiter_ = wait_for_memory(len, &RdmaConnection::rv_memory_back);
        break;
      }
      if (!got.ok()) return got.status().annotate("rdma: rendezvous destination block");
      b->block = std::move(*got);
    }
    ibv_sge sge = sge_of(b->block, 0, len);
    SendWr rd = SendWr::read(&sge, 1, addr, rkey).id(make_wr_id(kWrRead, tag)).signaled();
    CONDUIT_RETURN_IF_ERROR(qp()->post_send(rd));
    t.on_posted(true);
    b->posted = true;
    CONDUIT_RETURN_IF_ERROR(rv_seq_->read_posted(tag));
  }
  return {};
}

bool RdmaConnection::rv_due() const {
  return !rv_done_due_.empty() || !rv_inv_due_.empty() ||
         (rv_seq_ && !rv_waiter_ && rv_seq_->next_to_read() != nullptr);
}

void RdmaConnection::rv_memory_back() {
  stop_waiting(rv_waiter_, /*cancel=*/false);
  if (!live()) return;
  if (Status s = rv_service(); !s.ok()) return fail(s);
  ctx_->mark_pending(this);
}

uint64_t RdmaConnection::rv_inband_room() const {
  if (!rv_seq_ || rv_seq_->empty()) return UINT64_MAX;
  return rv_seq_->inband_limit() - rx_inband_consumed_;
}

std::span<const uint8_t> RdmaConnection::rv_head() const {
  if (!rv_seq_ || rv_seq_->deliverable(rx_inband_consumed_) == nullptr || rv_blocks_.empty()) return {};
  const RvBlock& b = rv_blocks_.front();
  return std::span<const uint8_t>(b.block.data() + b.done, b.length - b.done);
}

void RdmaConnection::rv_consume(size_t n) {
  RvBlock& b = rv_blocks_.front();
  b.done += n;
  stats_.bytes_read += n;
  ++stats_.reads;
  if (b.done < b.length) return;
  rv_seq_->pop_head();
  rv_blocks_.pop_front();  // the block goes back to our pool (unless read_owned lent it out)
}

Status RdmaConnection::rv_wait() {
  if (phase_ != Phase::kPeerGone) {
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  fail(Status(Code::kIoError, "rdma: " + peer_ + " disconnected with " + std::to_string(rv_seq_->pending_bytes()) +
                                  " offered (rendezvous) bytes not read; the stream ends before them"));
  return error_;
}

// Everything the NIC may still touch -- offered slices (the peer may still READ them) and
// READ destinations -- goes into the resources' release list, which is destroyed after the
// QP (QpResources), so nothing is reused while a work request could reach it.
void RdmaConnection::rv_park() {
  stop_waiting(rv_waiter_, /*cancel=*/true);
  stop_waiting(staging_waiter_, /*cancel=*/true);
  if (!res_) return;
  if (rv_slots_)
    for (OfferHeld& h : rv_slots_->drain()) res_->sent_from.emplace_back(UINT64_MAX, std::move(h.slice));
  for (OfferHeld& h : rv_inv_due_) res_->sent_from.emplace_back(UINT64_MAX, std::move(h.slice));
  rv_inv_due_.clear();
  for (RvBlock& b : rv_blocks_)
    if (b.posted) res_->sent_from.emplace_back(UINT64_MAX, std::move(b.block));
  rv_blocks_.clear();
  rv_done_due_.clear();
  if (rv_seq_) (void)rv_seq_->drain();
}

}  // namespace conduit::transport::rdma
