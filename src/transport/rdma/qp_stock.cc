#include "qp_stock.h"

#include <utility>

#include "conduit/base/log.h"

namespace conduit::transport::rdma {

QpStock::QpStock(std::shared_ptr<verbs::ProtectionDomain> pd, std::shared_ptr<verbs::CompletionChannel> channel,
                 QpShape shape, size_t count)
    : pd_(std::move(pd)), channel_(std::move(channel)), shape_(shape), count_(count) {}

QpStock::~QpStock() {
  // Each spare's QP before its CQ (Spare's members go in reverse order: qp, then cq).
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
}

std::optional<QpStock::Spare> QpStock::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (ready_.empty()) {
    ++stats_.missed;
    return std::nullopt;
  }
  Spare s = std::move(ready_.back());
  ready_.pop_back();
  ++stats_.taken;
  return s;
}

Result<QpStock::Spare> QpStock::create() const {
  Spare s;
  CONDUIT_ASSIGN_OR_RETURN(s.cq, verbs::CompletionQueue::create(pd_->context(), shape_.cqe, channel_));
  CONDUIT_ASSIGN_OR_RETURN(s.qp, verbs::QueuePair::create(pd_, s.cq, s.cq, shape_.qp_options()));
  return s;
}

void QpStock::top_up() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ready_.size() >= count_) return;
    }
    // Created outside the lock: the loop's take() never waits for the kernel.
    Result<Spare> s = create();
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      ++stats_.failed;
      if (!warned_) CONDUIT_LOG(kWarn) << "rdma: keeping spare queue pairs: " << s.status().to_string();
      warned_ = true;
      return;
    }
    ready_.push_back(std::move(*s));
    ++stats_.created;
  }
}

QpStockStats QpStock::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  QpStockStats st = stats_;
  st.ready = ready_.size();
  return st;
}

}  // namespace conduit::transport::rdma
