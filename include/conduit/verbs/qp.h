// RC queue pairs and shared receive queues.
//
// A QueuePair keeps its PD, CQs and SRQ alive.  State changes follow the verbs state
// machine RESET -> INIT -> RTR -> RTS (and -> ERR from anywhere); the transition functions
// are setup-path calls.  post_send/post_recv are data-path calls: they do not allocate,
// and a post that would overrun the queue fails with kResourceExhausted instead of
// corrupting anything.  A QP is posted to by one thread at a time.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "conduit/base/status.h"
#include "conduit/verbs/cq.h"
#include "conduit/verbs/device.h"
#include "conduit/verbs/memory.h"
#include "conduit/verbs/wr.h"

struct rdma_cm_id;

namespace conduit::verbs {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kError, kUnknown };
std::string_view qp_state_name(QpState state);
QpState to_qp_state(ibv_qp_state s);

// Sizes of a queue pair.  Defaults suit a stream connection; all are checked against the
// device's limits at creation.
struct QpOptions {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;  // ignored when an SRQ is given
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 64;  // the provider may grant more; see QueuePair::max_inline()
  bool sq_sig_all = false;        // false: only WRs flagged signaled produce completions
};

// What the other side must know to connect to a QP by hand (the TCP bootstrap).
struct QpEndpoint {
  uint32_t qp_num = 0;
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;  // InfiniBand only
  Gid gid{};
  friend bool operator==(const QpEndpoint&, const QpEndpoint&) = default;
};

// Path and reliability parameters for INIT->RTR->RTS; defaults follow perftest.
struct ConnectOptions {
  uint8_t port = 1;
  int gid_index = -1;  // -1: Context::default_gid(port)
  ibv_mtu mtu = IBV_MTU_1024;  // clamped to the port's active MTU
  uint8_t max_rd_atomic = 1;   // outstanding READ/atomic as initiator, and as target
  uint8_t min_rnr_timer = 12;  // 0.64 ms
  uint8_t timeout = 14;        // 4.096 us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;       // 7 = retry forever
  uint8_t hop_limit = 64;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
               IBV_ACCESS_REMOTE_ATOMIC;  // what the QP lets the peer do (MRs still decide)
};

class SharedReceiveQueue {
 public:
  static Result<std::shared_ptr<SharedReceiveQueue>> create(std::shared_ptr<ProtectionDomain> pd,
                                                            uint32_t max_wr, uint32_t max_sge = 1);
  ~SharedReceiveQueue();
  SharedReceiveQueue(const SharedReceiveQueue&) = delete;
  SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

  ibv_srq* native_handle() const { return srq_; }
  uint32_t max_wr() const { return max_wr_; }
  conduit::Status post_recv(RecvWr& wr) { return post_recv_chain(wr.native()); }
  conduit::Status post_recv(RecvChain& chain) { return post_recv_chain(chain.head()); }

  // Low-water mark (ibv_modify_srq IBV_SRQ_LIMIT): arms one IBV_EVENT_SRQ_LIMIT_REACHED
  // for when fewer than `limit` WRs remain posted; the device then disarms it (limit 0).
  // Setup/slow path: a system call on most providers.
  conduit::Status arm_limit(uint32_t limit);
  // The armed limit (ibv_query_srq): 0 once the low-water event has fired (or never armed).
  Result<uint32_t> limit() const;

 private:
  SharedReceiveQueue(std::shared_ptr<ProtectionDomain> pd, ibv_srq* srq, uint32_t max_wr)
      : pd_(std::move(pd)), srq_(srq), max_wr_(max_wr) {}
  conduit::Status post_recv_chain(ibv_recv_wr* head);
  std::shared_ptr<ProtectionDomain> pd_;
  ibv_srq* srq_;
  uint32_t max_wr_;
};

class QueuePair {
 public:
  // An RC QP in RESET state.
  static Result<std::unique_ptr<QueuePair>> create(std::shared_ptr<ProtectionDomain> pd,
                                                   std::shared_ptr<CompletionQueue> send_cq,
                                                   std::shared_ptr<CompletionQueue> recv_cq,
                                                   const QpOptions& options,
                                                   std::shared_ptr<SharedReceiveQueue> srq = {});
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  ibv_qp* native_handle() const { return qp_; }
  uint32_t qp_num() const { return qp_->qp_num; }
  const QpOptions& options() const { return options_; }  // as granted by the provider
  uint32_t max_inline() const { return options_.max_inline_data; }
  CompletionQueue& send_cq() const { return *send_cq_; }
  CompletionQueue& recv_cq() const { return *recv_cq_; }
  const std::shared_ptr<ProtectionDomain>& pd() const { return pd_; }

  // Queries the QP; kUnknown if the query fails.
  QpState state() const;

  // The local half of a QpEndpoint for the TCP bootstrap (GID from options, a random PSN).
  Result<QpEndpoint> local_endpoint(const ConnectOptions& options) const;
  conduit::Status to_init(const ConnectOptions& options);
  conduit::Status to_rtr(const QpEndpoint& remote, const ConnectOptions& options);
  conduit::Status to_rts(uint32_t local_psn, const ConnectOptions& options);
  // INIT -> RTR -> RTS in one call.
  conduit::Status connect(const QpEndpoint& local, const QpEndpoint& remote, const ConnectOptions& options);
  // Moves to ERR: every outstanding WR completes with IBV_WC_WR_FLUSH_ERR.
  conduit::Status to_error();

  // Inline: the success path is the provider's post call and nothing else; the Status for
  // a rejected post is built out of line.
  conduit::Status post_send(SendWr& wr) { return post_send_chain(wr.native()); }
  conduit::Status post_send(SendChain& chain) { return post_send_chain(chain.head()); }
  conduit::Status post_recv(RecvWr& wr) { return post_recv_chain(wr.native()); }
  conduit::Status post_recv(RecvChain& chain) { return post_recv_chain(chain.head()); }

 private:
  friend class CmId;
  QueuePair(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> scq,
            std::shared_ptr<CompletionQueue> rcq, std::shared_ptr<SharedReceiveQueue> srq, ibv_qp* qp,
            rdma_cm_id* cm_id, QpOptions granted);
  static Result<ibv_qp_init_attr> init_attr(const ProtectionDomain& pd, const CompletionQueue& scq,
                                             const CompletionQueue& rcq, const SharedReceiveQueue* srq,
                                             const QpOptions& options);
  conduit::Status modify(ibv_qp_attr& attr, int mask, std::string_view what);
  conduit::Status post_send_chain(ibv_send_wr* head) {
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_, head, &bad); rc != 0) [[unlikely]]
      return post_send_error(rc, bad);
    return {};
  }
  conduit::Status post_recv_chain(ibv_recv_wr* head) {
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(qp_, head, &bad); rc != 0) [[unlikely]]
      return post_recv_error(rc, bad);
    return {};
  }
  [[gnu::cold, gnu::noinline]] conduit::Status post_send_error(int rc, const ibv_send_wr* bad) const;
  [[gnu::cold, gnu::noinline]] conduit::Status post_recv_error(int rc, const ibv_recv_wr* bad) const;

  // Declared in creation order: the QP is destroyed (in the destructor body) before these.
  std::shared_ptr<ProtectionDomain> pd_;
  std::shared_ptr<CompletionQueue> send_cq_;
  std::shared_ptr<CompletionQueue> recv_cq_;
  std::shared_ptr<SharedReceiveQueue> srq_;
  ibv_qp* qp_;
  rdma_cm_id* cm_id_;  // non-null when created through rdma_cm: destroyed with rdma_destroy_qp
  QpOptions options_;
};

}  // namespace conduit::verbs
