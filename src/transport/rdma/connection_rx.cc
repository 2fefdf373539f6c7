// RdmaConnection's receive area: the area the peer writes into, advertised with
// RegisterXferMemory (scope=mw: behind a window bound to this QP), the space given back to
// the writer as it is read (Credits in ring mode, a re-advertisement in the baseline), and
// the switch from rx_initial to rx_buffer once the peer has filled the first area
// (docs/PROTOCOL.md, "Growing the receive area").
#include "conduit/base/log.h"
#include "connection.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;
using ring::ConsumerCursor;
using ring::RingGeometry;

// scope=mw: binds the connection's window over its whole receive area (the area's own
// region), remote write only, to this QP; the bind precedes the RegisterXferMemory that
// carries its key on the same send queue, so the peer can never use the key before it holds.
Status RdmaConnection::bind_rx_window() {
  QpResources& r = *res_;
  MemoryRegion* mr = arena_->rx_mw_registrar->find(r.rx.keys(Arena::kDomain).lkey);
  if (mr == nullptr) return Status(Code::kInternal, "rdma: receive area has no region to bind a window over");
  SignalTracker& t = *r.tracker;
  if (!t.can_post(1)) return Status(Code::kResourceExhausted, "rdma: send queue full at setup");
  const uint32_t rkey = r.mw->next_rkey();
  SendWr wr = SendWr::bind_mw(r.mw->native_handle(), rkey, mr->native_handle(), mr->addr(), mr->size(),
                              IBV_ACCESS_REMOTE_WRITE)
                  .id(make_wr_id(kWrBind, 0))
                  .signaled();
  CONDUIT_RETURN_IF_ERROR(qp()->post_send(wr));
  t.on_posted(true);
  r.mw->bound(rkey);
  r.rx_rkey = rkey;
  return {};
}

// Puts a receive area of `bytes` in res_->rx (scope=private: registered for it alone;
// otherwise from the arena) with its key for scope=private and shared; scope=mw keys it by
// binding the window (bind_rx_window).  What was in res_->rx before is the caller's concern.
// On failure nothing has changed.
Status RdmaConnection::take_rx_area(uint64_t bytes) {
  QpResources& r = *res_;
  if (scope_ == Scope::kPrivate) {
    CONDUIT_ASSIGN_OR_RETURN(auto rx, RegisteredBuffer::create(r.pd, bytes, Access::kLocalWrite | Access::kRemoteWrite));
    r.rx_private = std::make_shared<RegisteredBuffer>(std::move(rx));
    r.rx = memory::Slice::foreign(r.rx_private->data(), bytes, [keep = r.rx_private] {});
    r.rx_rkey = r.rx_private->mr().rkey();
  } else {
    CONDUIT_ASSIGN_OR_RETURN(r.rx, arena_->allocate_rx(scope_, bytes, options_.spare_areas));
    if (scope_ == Scope::kShared) r.rx_rkey = r.rx.keys(Arena::kDomain).rkey;
  }
  rx_len_ = static_cast<uint32_t>(bytes);
  count_pinned();
  return {};
}

// The peer filled an area smaller than rx_buffer and all of it is back (read and released,
// no credit outstanding: the peer can write nothing): an rx_buffer-sized area replaces it.
// scope=mw invalidates the window and binds it again over the new area, all before the
// RegisterXferMemory on the same send queue; the old area goes back to the arena once the
// first of those work requests has completed (the peer's old key is dead by then).  When no
// larger area can be had the same one is advertised again and the connection stays small.
Status RdmaConnection::grow_rx() {
  QpResources& r = *res_;
  SignalTracker& t = *r.tracker;
  const uint32_t wrs = scope_ == Scope::kMw ? 3 : 1;  // invalidate, bind, RegisterXferMemory
  if (free_ctrl_slots_.empty() || !t.can_post(wrs))
    return Status(Code::kResourceExhausted, "rdma: no send-queue room to advertise a larger receive area");
  memory::Slice old = r.rx;  // retired once the switch's first work request has completed
  if (Status s = take_rx_area(options_.rx_buffer); !s.ok()) {
    CONDUIT_LOG(kDebug) << "rdma: " << peer_ << " keeps its " << rx_len_ << "-byte receive area: " << s.to_string();
    grow_due_ = false;
    grow_refused_ = true;
    return register_rx();
  }
  const uint64_t first = t.posted();
  if (scope_ == Scope::kMw) {
    SendWr inv = SendWr::local_invalidate(r.mw->rkey()).id(make_wr_id(kWrBind, 0)).signaled();
    CONDUIT_RETURN_IF_ERROR(qp()->post_send(inv));
    t.on_posted(true);
    CONDUIT_RETURN_IF_ERROR(bind_rx_window());
  }
  CONDUIT_RETURN_IF_ERROR(register_rx());
  r.sent_from.emplace_back(first, std::move(old));  // released once the completion covers `first`
  grow_due_ = false;
  return {};
}

Status RdmaConnection::register_rx() {
  const memory::Slice& rx = res_->rx;
  const uint32_t len = rx_len_;
  CONDUIT_RETURN_IF_ERROR(send_ctrl(CtrlMsg::register_xfer(rx.address(), len, res_->rx_rkey)));
  rx_ = ConsumerCursor(RingGeometry(len));  // only once the message is on its way
  return {};
}

// Gives consumed space back to the writer: in ring mode a Credit once credit_bytes are
// consumed; in the baseline the whole buffer, re-registered, once all of it is consumed.
// Consumed means read *and* released: space under a read_owned view still held stays the
// reader's (so do the bytes after it, which HoldTracker cannot return out of order).
void RdmaConnection::return_space() {
  if (!sending()) return;
  const uint64_t upto = holds_.releasable(rx_.tail());
  const bool all_back = rx_.returnable(upto) == rx_.geometry().capacity();
  Status s;
  if (grow_due_) {
    if (!all_back) return;  // no Credit until the whole area is back: then a larger one
    s = grow_rx();
  } else if (ring()) {
    if (rx_.returnable(upto) < credit_step() || rx_.returnable(upto) == 0) return;
    s = send_ctrl(CtrlMsg::credit(rx_.returnable(upto)));
    if (s.ok()) (void)rx_.take_credits_to(upto);
  } else {
    if (!all_back) return;
    s = register_rx();
  }
  if (s.ok()) {
    credit_blocked_ = false;
    return;
  }
  if (s.code() == Code::kResourceExhausted) {
    // No control slot or send-queue room: retried when a send completion frees one.
    credit_blocked_ = true;
    ensure_send_events();
    return;
  }
  fail(s);
}

}  // namespace conduit::transport::rdma
