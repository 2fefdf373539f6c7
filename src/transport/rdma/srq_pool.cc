#include "srq_pool.h"

#include <algorithm>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;

Result<std::shared_ptr<SrqPool>> SrqPool::create(std::shared_ptr<ProtectionDomain> pd, uint32_t depth,
                                                 std::function<void()> wake) {
  std::shared_ptr<SrqPool> p(new SrqPool(depth, std::move(wake)));
  std::shared_ptr<Context> dev = pd->context();
  p->pd_ = std::move(pd);
  CONDUIT_ASSIGN_OR_RETURN(p->channel_, CompletionChannel::create(dev));
  // One CQE per WQE taken from the SRQ, and a slot is re-posted only after its CQE was
  // polled: depth entries can never overflow.
  CONDUIT_ASSIGN_OR_RETURN(p->cq_, CompletionQueue::create(dev, static_cast<int>(depth) + 16, p->channel_));
  auto srq = SharedReceiveQueue::create(p->pd_, depth);
  if (!srq.ok()) return srq.status().annotate("rdma option srq_depth=" + std::to_string(depth));
  p->srq_ = std::move(*srq);
  CONDUIT_ASSIGN_OR_RETURN(auto buf, RegisteredBuffer::create(p->pd_, static_cast<size_t>(depth) * kCtrlSize, kLocalOnly));
  p->buf_ = std::make_unique<RegisteredBuffer>(std::move(buf));
  p->posted_.assign(depth, 0);
  for (uint32_t i = 0; i < depth; ++i) CONDUIT_RETURN_IF_ERROR(p->post(i));
  p->low_water_ = std::max(1u, depth / 8);
  if (Status s = p->srq_->arm_limit(p->low_water_); !s.ok()) {
    CONDUIT_LOG(kDebug) << "rdma: SRQ low-water mark not armed: " << s.to_string();
    p->low_water_ = 0;
  }
  CONDUIT_RETURN_IF_ERROR(p->cq_->arm());
  return p;
}

Status SrqPool::post(uint32_t slot) {
  ibv_sge sge = buf_->sge(static_cast<size_t>(slot) * kCtrlSize, kCtrlSize);
  RecvWr wr = RecvWr::make(&sge, 1, make_wr_id(kWrRecv, slot));
  CONDUIT_RETURN_IF_ERROR(srq_->post_recv(wr));
  posted_[slot] = 1;
  ++posted_count_;
  return {};
}

void SrqPool::give_back(uint32_t slot) {
  if (posted_[slot]) {  // only polled slots reach here, each once: a bug, never the peer
    CONDUIT_LOG(kError) << "rdma: SRQ slot " << slot << " re-posted twice";
    return;
  }
  if (Status s = post(slot); !s.ok()) CONDUIT_LOG(kError) << "rdma: SRQ slot " << slot << " lost: " << s.to_string();
}

int SrqPool::poll_all() {
  int total = 0;
  for (;;) {
    auto n = cq_->poll(wcs_);
    if (!n.ok()) {
      CONDUIT_LOG(kError) << "rdma: polling the SRQ's CQ: " << n.status().to_string();
      return total;
    }
    for (int i = 0; i < *n; ++i) {
      const uint32_t slot = wr_index(wcs_[i].wr_id);
      if (wr_kind(wcs_[i].wr_id) != kWrRecv || slot >= depth_ || !posted_[slot]) {
        CONDUIT_LOG(kError) << "rdma: SRQ completion with wr_id " << wcs_[i].wr_id << " that is not outstanding";
        continue;
      }
      posted_[slot] = 0;
      --posted_count_;
      backlog_.push_back(wcs_[i]);
    }
    total += *n;
    if (*n < static_cast<int>(std::size(wcs_))) return total;
  }
}

int SrqPool::process(std::optional<uint32_t> only) {
  const int polled = poll_all();
  // Pop before delivering: a handler may close its connection, whose detach() edits the queue.
  for (;;) {
    auto it = !only ? backlog_.begin()
                    : std::find_if(backlog_.begin(), backlog_.end(),
                                   [q = *only](const Completion& wc) { return wc.qp_num == q; });
    if (it == backlog_.end()) break;
    const Completion wc = *it;
    backlog_.erase(it);
    ++completions_;
    auto c = qps_.find(wc.qp_num);
    if (c != qps_.end() && c->second.client != nullptr) c->second.client->on_srq_completion(wc);
    give_back(wr_index(wc.wr_id));
    if (++since_check_ >= std::max(1u, depth_ / 4)) check_low_water();
  }
  return polled;
}

void SrqPool::attach(uint32_t qpn, SrqClient* c) {
  if (auto it = qps_.find(qpn); it != qps_.end() && it->second.client == nullptr) reclaim(qpn);
  qps_[qpn] = Qp{c, 0};
}

uint64_t SrqPool::orphan(uint32_t qpn) {
  qps_[qpn] = Qp{nullptr, ++next_token_};
  return next_token_;
}

void SrqPool::detach(uint32_t qpn, uint64_t token) {
  auto it = qps_.find(qpn);
  if (it == qps_.end() || it->second.client != nullptr || it->second.token != token) return;
  reclaim(qpn);
  qps_.erase(qpn);
}

void SrqPool::reclaim(uint32_t qpn) {
  (void)poll_all();
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    if (it->qp_num != qpn) {
      ++it;
      continue;
    }
    const uint32_t slot = wr_index(it->wr_id);
    it = backlog_.erase(it);
    give_back(slot);
  }
  if (!backlog_.empty() && wake_) wake_();  // others' completions, polled here, still to deliver
}

void SrqPool::check_low_water() {
  since_check_ = 0;
  if (low_water_ == 0) return;
  auto limit = srq_->limit();
  if (!limit.ok() || *limit != 0) return;
  ++low_water_events_;
  // A warning at most every 10 s; an overloaded loop would otherwise log at every check.
  const uint64_t now = monotonic_ns();
  const bool warn = last_warn_ns_ == 0 || now - last_warn_ns_ > 10'000 * kMs;
  if (warn) last_warn_ns_ = now;
  const char* what = " posted receives (senders stall on RNR until the loop catches up; consider a larger srq_depth)";
  if (warn)
    CONDUIT_LOG(kWarn) << "rdma: shared receive queue fell below " << low_water_ << " of " << depth_ << what;
  else
    CONDUIT_LOG(kDebug) << "rdma: shared receive queue fell below " << low_water_ << " of " << depth_ << what;
  if (Status s = srq_->arm_limit(low_water_); !s.ok()) low_water_ = 0;
}

void SrqPool::on_events(uint32_t) {
  auto events = cq_->consume_events();
  Status s = events.ok() ? cq_->arm() : events.status();
  if (!s.ok()) CONDUIT_LOG(kError) << "rdma: SRQ completion channel: " << s.to_string();
  (void)process();
}

}  // namespace conduit::transport::rdma
