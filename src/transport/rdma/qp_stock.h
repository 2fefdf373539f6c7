// QpStock: a few RC queue pairs, each with its own CQ, created ahead of demand so that an
// rdma connection's setup takes one instead of creating it.  Creating a CQ and a QP is the
// largest step of a connection's setup under Soft-RoCE (rxe allocates and zeroes the
// queues: 1-3 ms per side in the guest, about what the whole bare rdma_cm handshake takes
// besides); a spare costs one ibv_modify_qp to INIT when taken (verbs::CmId::adopt_qp).
//
//   auto stock = ctx->qp_stock_for(pd, hub, shape, options.spare_qps);  // LoopContext
//   if (auto spare = stock->take()) qp = id.adopt_qp(std::move(spare->qp));  // its CQ: spare->cq
//
// One stock per (event loop, protection domain, shape): the shape is what a connection's
// options make of its QP (depths, inline bytes) and CQ (entries); connections with the
// shared receive queue (srq=1) take none.  The arena's SpareKeeper thread (arena.h) tops
// the stock up to `count` after every take, at nice 19, so the creation moves to another
// core rather than going away.  CQs are made on the loop's completion channel (cq_hub.h)
// and are neither armed nor attached until a connection takes them, so a spare raises no
// event.  What it costs: `count` QPs and CQs per shape and loop held in the kernel (with
// the defaults ~100-200 KiB each under rxe), the QP numbers they use, and nothing per
// operation.  Thread-safe (a mutex; take() is the loop's, top_up() the keeper's).  Owned by
// the LoopContext; the keeper holds it weakly, so the last reference may drop on the
// keeper's thread, which destroys the spares there.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "conduit/memory/spare_keeper.h"
#include "conduit/verbs/verbs.h"
#include "rdma.h"

namespace conduit::transport::rdma {

struct QpShape {
  uint32_t send_depth = 0;
  uint32_t recv_depth = 0;
  uint32_t inline_bytes = 0;
  int cqe = 0;  // the CQ's entries (sends and receives)
  auto operator<=>(const QpShape&) const = default;
  // What the QP is created with: these depths and inline bytes, one SGE each way.
  verbs::QpOptions qp_options() const {
    verbs::QpOptions o;
    o.max_send_wr = send_depth;
    o.max_recv_wr = recv_depth;
    o.max_send_sge = 1;
    o.max_recv_sge = 1;
    o.max_inline_data = inline_bytes;
    return o;
  }
};

class QpStock final : public memory::SpareKeeper::Stock {
 public:
  struct Spare {
    std::shared_ptr<verbs::CompletionQueue> cq;
    std::unique_ptr<verbs::QueuePair> qp;  // RESET, send and receive CQ `cq`
  };

  QpStock(std::shared_ptr<verbs::ProtectionDomain> pd, std::shared_ptr<verbs::CompletionChannel> channel,
          QpShape shape, size_t count);
  ~QpStock();
  QpStock(const QpStock&) = delete;
  QpStock& operator=(const QpStock&) = delete;

  // A spare, or none (counted as missed); the caller pokes the keeper afterwards.  Cheap
  // (a lock and a move).
  std::optional<Spare> take();
  // Keeper thread: creates spares until `count` are ready.  Stops at the first failure
  // (a device at its QP limit, say) until the next round.
  void top_up() override;

  QpStockStats stats() const;
  const QpShape& shape() const { return shape_; }

 private:
  Result<Spare> create() const;

  const std::shared_ptr<verbs::ProtectionDomain> pd_;
  const std::shared_ptr<verbs::CompletionChannel> channel_;
  const QpShape shape_;
  const size_t count_;
  mutable std::mutex mu_;
  std::vector<Spare> ready_;
  QpStockStats stats_;
  bool warned_ = false;
};

}  // namespace conduit::transport::rdma
