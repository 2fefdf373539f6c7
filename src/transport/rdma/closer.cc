#include "closer.h"

#include <algorithm>

#include "arena.h"
#include "conduit/base/log.h"
#include "rdma/protocol.h"
#include "ring/ring_cursor.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;
using ring::Extent;
using ring::RingGeometry;

Closer::~Closer() { ctx_->reap(std::move(res_)); }

void Closer::start(uint64_t linger_ms) {
  res_->id->set_user_data(static_cast<CmSink*>(this));
  res_->hub->attach(res_->cq->native_handle(), this);
  watched_ = true;
  // The connection may have armed the CQ for solicited completions only; the completion
  // we wait for is a send completion.  Re-arm for all and look at what is already there.
  if (Status s = res_->cq->arm(); !s.ok()) return finish(s.to_string());
  if (!poll()) return;
  if (linger_ms != 0)
    timer_ = ctx_->loop().run_after(linger_ms * kMs, [this, linger_ms] {
      timer_ = 0;
      finish("not acknowledged within linger_ms=" + std::to_string(linger_ms) + " ms; unsent data is lost" +
             (offers_.empty() ? std::string() : " (" + std::to_string(offers_.size()) + " offers not read)"));
    });
  pump();
}

void Closer::on_cq_event(int) {
  if (done_) return;
  Status s = res_->cq->arm();
  if (!s.ok()) return finish(s.to_string());
  if (poll()) pump();
}

void Closer::on_cm_event(CmEvent& ev) {
  if (ev.type == RDMA_CM_EVENT_TIMEWAIT_EXIT) return;
  finish(std::string("peer event ") + ev.to_string());
}

bool Closer::poll() {
  for (bool more = true; more && !done_;) {
    auto n = res_->cq->poll(wcs_);
    if (!n.ok()) {
      finish(n.status().to_string());
      return false;
    }
    for (int i = 0; i < *n && !done_; ++i) {
      const Completion& wc = wcs_[i];
      if (!wc.ok()) {
        finish(wc.as_status().to_string());
        return false;
      }
      if (wr_kind(wc.wr_id) != kWrRecv) {
        res_->tracker->on_signaled_completion();
      } else if (Status s = on_receive(wc); !s.ok()) {
        finish(s.to_string());
        return false;
      }
    }
    more = *n == static_cast<int>(std::size(wcs_));
  }
  return !done_;
}

Status Closer::on_receive(const Completion& wc) {
  const uint32_t slot = wr_index(wc.wr_id);
  // Without offers to wait for nothing more is read, and receives are not re-posted.
  if (slot >= recv_slots_ || offers_.empty()) return {};
  if (wc.opcode == IBV_WC_RECV) {
    const uint8_t* data = res_->ctrl.data() + static_cast<size_t>(slot) * kCtrlSize;
    CONDUIT_ASSIGN_OR_RETURN(CtrlMsg m, CtrlMsg::decode(data, wc.byte_len));
    if (m.opcode == static_cast<uint16_t>(Opcode::kReadDone)) {
      auto it = std::find_if(offers_.begin(), offers_.end(), [&](const auto& o) { return o.first == m.tag; });
      if (it == offers_.end() || it->second != m.bytes)
        return Status(Code::kProtocolError, "rdma: ReadDone for tag " + std::to_string(m.tag) + " (" +
                                                std::to_string(m.bytes) + " bytes) matches no offer outstanding");
      offers_.erase(it);
    }
  }
  // Everything else (keepalives, credits, bytes written to us) is dropped.  The receive goes
  // back so that the peer's next message, a ReadDone perhaps, lands.
  ibv_sge sge = sge_of(res_->ctrl, static_cast<size_t>(slot) * kCtrlSize, kCtrlSize);
  RecvWr wr = RecvWr::make(&sge, 1, make_wr_id(kWrRecv, slot));
  return res_->qp()->post_recv(wr);
}

void Closer::abandon() {
  done_ = true;
  res_->disconnect();
}

void Closer::pump() {
  if (done_) return;
  SignalTracker& t = *res_->tracker;
  QueuePair& qp = *res_->qp();
  // The unposted bytes wrap around the end of the peer's ring at most once.
  while (tx_.posted != tx_.head && t.can_post(1)) {
    const Extent e = RingGeometry(tx_.capacity).extents(tx_.posted, tx_.head - tx_.posted).first;
    const uint32_t len = static_cast<uint32_t>(e.len);
    ibv_sge sge = sge_of(res_->tx, e.offset, len);
    SendWr wr = SendWr::write_imm(&sge, 1, tx_.addr + e.offset, tx_.rkey, len)
                    .id(make_wr_id(kWrData, 0))
                    .signaled()
                    .solicited()
                    .inlined(len <= qp.max_inline());
    if (Status s = qp.post_send(wr); !s.ok()) return finish(s.to_string());
    t.on_posted(true);
    tx_.posted += len;
  }
  if (tx_.posted == tx_.head && t.outstanding() > 0 && !t.last_signaled() && t.can_post(1)) {
    // The last data WR went unsignaled: a zero-length RDMA WRITE (invisible to the peer:
    // no immediate, no receive consumed) gets the completion that covers it.
    SendWr wr = SendWr::write(nullptr, 0, tx_.addr, tx_.rkey).id(make_wr_id(kWrData, 0)).signaled();
    if (Status s = qp.post_send(wr); !s.ok()) return finish(s.to_string());
    t.on_posted(true);
  }
  if (tx_.posted == tx_.head && t.outstanding() == 0 && offers_.empty()) finish("");
}

void Closer::finish(const std::string& why) {
  if (done_) return;
  done_ = true;
  if (!why.empty()) CONDUIT_LOG(kDebug) << "rdma: graceful close to " << peer_ << " cut short: " << why;
  if (timer_ != 0) ctx_->loop().cancel(timer_);
  timer_ = 0;
  if (watched_) res_->hub->detach(res_->cq->native_handle());
  watched_ = false;
  res_->disconnect();
  res_->id->set_user_data(nullptr);
  ctx_->retire(this);
}

}  // namespace conduit::transport::rdma
