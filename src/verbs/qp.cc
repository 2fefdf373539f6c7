#include "conduit/verbs/qp.h"

#include <rdma/rdma_cma.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "conduit/base/log.h"

namespace conduit::verbs {

std::string_view qp_state_name(QpState state) {
  switch (state) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kError: return "ERR";
    case QpState::kUnknown: break;
  }
  return "UNKNOWN";
}

QpState to_qp_state(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return QpState::kReset;
    case IBV_QPS_INIT: return QpState::kInit;
    case IBV_QPS_RTR: return QpState::kRtr;
    case IBV_QPS_RTS: return QpState::kRts;
    case IBV_QPS_SQD: return QpState::kSqd;
    case IBV_QPS_SQE: return QpState::kSqe;
    case IBV_QPS_ERR: return QpState::kError;
    default: break;
  }
  return QpState::kUnknown;
}

// ---------------------------------------------------------------------------------------
// SharedReceiveQueue

Result<std::shared_ptr<SharedReceiveQueue>> SharedReceiveQueue::create(std::shared_ptr<ProtectionDomain> pd,
                                                                       uint32_t max_wr, uint32_t max_sge) {
  if (!pd) return conduit::Status(Code::kInvalidArgument, "SharedReceiveQueue: null PD");
  const ibv_device_attr& dev = pd->context()->attr();
  if (max_wr == 0 || max_wr > static_cast<uint32_t>(dev.max_srq_wr) || max_sge == 0 ||
      max_sge > static_cast<uint32_t>(dev.max_srq_sge))
    return conduit::Status(Code::kInvalidArgument,
                           "SharedReceiveQueue: max_wr " + std::to_string(max_wr) + " / max_sge " +
                               std::to_string(max_sge) + " outside the device's limits (" +
                               std::to_string(dev.max_srq_wr) + " / " + std::to_string(dev.max_srq_sge) + ")");
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = max_wr;
  attr.attr.max_sge = max_sge;
  ibv_srq* srq = ibv_create_srq(pd->native_handle(), &attr);
  if (srq == nullptr) return conduit::Status::FromErrnoAuto(errno, "ibv_create_srq");
  return std::shared_ptr<SharedReceiveQueue>(new SharedReceiveQueue(std::move(pd), srq, attr.attr.max_wr));
}

SharedReceiveQueue::~SharedReceiveQueue() {
  if (int rc = ibv_destroy_srq(srq_); rc != 0)
    CONDUIT_LOG(kError) << "ibv_destroy_srq failed (a QP still uses it?): " << std::strerror(rc);
}

conduit::Status SharedReceiveQueue::arm_limit(uint32_t limit) {
  ibv_srq_attr attr{};
  attr.srq_limit = limit;
  if (int rc = ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT); rc != 0)
    return conduit::Status::FromErrnoAuto(rc, "ibv_modify_srq(srq_limit=" + std::to_string(limit) + ")");
  return {};
}

Result<uint32_t> SharedReceiveQueue::limit() const {
  ibv_srq_attr attr{};
  if (int rc = ibv_query_srq(srq_, &attr); rc != 0) return conduit::Status::FromErrnoAuto(rc, "ibv_query_srq");
  return attr.srq_limit;
}

conduit::Status SharedReceiveQueue::post_recv_chain(ibv_recv_wr* head) {
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_srq_recv(srq_, head, &bad); rc != 0) [[unlikely]]
    return conduit::Status::FromErrnoAuto(rc, "ibv_post_srq_recv (wr_id " + std::to_string(bad ? bad->wr_id : 0) + ")");
  return {};
}

// ---------------------------------------------------------------------------------------
// QueuePair

QueuePair::QueuePair(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> scq,
                     std::shared_ptr<CompletionQueue> rcq, std::shared_ptr<SharedReceiveQueue> srq, ibv_qp* qp,
                     rdma_cm_id* cm_id, QpOptions granted)
    : pd_(std::move(pd)),
      send_cq_(std::move(scq)),
      recv_cq_(std::move(rcq)),
      srq_(std::move(srq)),
      qp_(qp),
      cm_id_(cm_id),
      options_(granted) {}

QueuePair::~QueuePair() {
  if (cm_id_ != nullptr) {
    rdma_destroy_qp(cm_id_);  // also clears cm_id_->qp
  } else if (int rc = ibv_destroy_qp(qp_); rc != 0) {
    CONDUIT_LOG(kError) << "ibv_destroy_qp failed: " << std::strerror(rc);
  }
}

Result<ibv_qp_init_attr> QueuePair::init_attr(const ProtectionDomain& pd, const CompletionQueue& scq,
                                              const CompletionQueue& rcq, const SharedReceiveQueue* srq,
                                              const QpOptions& o) {
  const ibv_device_attr& dev = pd.context()->attr();
  auto too_big = [](const char* what, uint32_t asked, int limit) {
    return conduit::Status(Code::kInvalidArgument, std::string("QueuePair: ") + what + " " + std::to_string(asked) +
                                                       " exceeds the device limit " + std::to_string(limit));
  };
  if (o.max_send_wr == 0) return conduit::Status(Code::kInvalidArgument, "QueuePair: max_send_wr must be > 0");
  if (o.max_send_wr > static_cast<uint32_t>(dev.max_qp_wr)) return too_big("max_send_wr", o.max_send_wr, dev.max_qp_wr);
  if (!srq && o.max_recv_wr > static_cast<uint32_t>(dev.max_qp_wr)) return too_big("max_recv_wr", o.max_recv_wr, dev.max_qp_wr);
  if (o.max_send_sge > static_cast<uint32_t>(dev.max_sge)) return too_big("max_send_sge", o.max_send_sge, dev.max_sge);
  if (o.max_recv_sge > static_cast<uint32_t>(dev.max_sge)) return too_big("max_recv_sge", o.max_recv_sge, dev.max_sge);
  ibv_qp_init_attr attr{};
  attr.send_cq = scq.native_handle();
  attr.recv_cq = rcq.native_handle();
  attr.srq = srq ? srq->native_handle() : nullptr;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = o.sq_sig_all ? 1 : 0;
  attr.cap.max_send_wr = o.max_send_wr;
  attr.cap.max_recv_wr = srq ? 0 : o.max_recv_wr;
  attr.cap.max_send_sge = std::max<uint32_t>(1, o.max_send_sge);
  attr.cap.max_recv_sge = srq ? 0 : std::max<uint32_t>(1, o.max_recv_sge);
  attr.cap.max_inline_data = o.max_inline_data;
  return attr;
}

namespace {
// What the provider granted (it may round up, and may grant less inline than asked).
QpOptions granted_options(const ibv_qp_init_attr& attr, const QpOptions& asked) {
  QpOptions g = asked;
  g.max_send_wr = attr.cap.max_send_wr;
  if (attr.srq == nullptr) g.max_recv_wr = attr.cap.max_recv_wr;
  g.max_send_sge = attr.cap.max_send_sge;
  g.max_recv_sge = attr.cap.max_recv_sge;
  g.max_inline_data = attr.cap.max_inline_data;
  return g;
}
}  // namespace

Result<std::unique_ptr<QueuePair>> QueuePair::create(std::shared_ptr<ProtectionDomain> pd,
                                                     std::shared_ptr<CompletionQueue> send_cq,
                                                     std::shared_ptr<CompletionQueue> recv_cq,
                                                     const QpOptions& options,
                                                     std::shared_ptr<SharedReceiveQueue> srq) {
  if (!pd || !send_cq || !recv_cq)
    return conduit::Status(Code::kInvalidArgument, "QueuePair::create: PD and both CQs are required");
  CONDUIT_ASSIGN_OR_RETURN(ibv_qp_init_attr attr, init_attr(*pd, *send_cq, *recv_cq, srq.get(), options));
  ibv_qp* qp = ibv_create_qp(pd->native_handle(), &attr);
  if (qp == nullptr)
    return conduit::Status::FromErrnoAuto(errno, "ibv_create_qp (send_wr " + std::to_string(options.max_send_wr) +
                                                     ", inline " + std::to_string(options.max_inline_data) + ")");
  return std::unique_ptr<QueuePair>(new QueuePair(std::move(pd), std::move(send_cq), std::move(recv_cq),
                                                  std::move(srq), qp, nullptr, granted_options(attr, options)));
}

QpState QueuePair::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) != 0) return QpState::kUnknown;
  return to_qp_state(attr.qp_state);
}

conduit::Status QueuePair::modify(ibv_qp_attr& attr, int mask, std::string_view what) {
  if (int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0)
    return conduit::Status::FromErrnoAuto(rc, "ibv_modify_qp to " + std::string(what) + " (qp " +
                                                  std::to_string(qp_num()) + ", now " +
                                                  std::string(qp_state_name(state())) + ")");
  return {};
}

Result<QpEndpoint> QueuePair::local_endpoint(const ConnectOptions& options) const {
  const Context& ctx = *pd_->context();
  CONDUIT_ASSIGN_OR_RETURN(PortInfo port, ctx.port(options.port));
  QpEndpoint ep;
  ep.qp_num = qp_num();
  ep.lid = port.lid;
  uint32_t psn = 0;
  if (getrandom(&psn, sizeof psn, 0) != sizeof psn) psn = static_cast<uint32_t>(qp_num() * 2654435761u);
  ep.psn = psn & 0xffffff;
  if (options.gid_index >= 0) {
    ibv_gid gid{};
    if (int rc = ibv_query_gid(ctx.native_handle(), options.port, options.gid_index, &gid); rc != 0)
      return conduit::Status::FromErrno(rc, "ibv_query_gid index " + std::to_string(options.gid_index));
    std::memcpy(ep.gid.data(), gid.raw, 16);
  } else {
    CONDUIT_ASSIGN_OR_RETURN(GidEntry e, ctx.default_gid(options.port));
    ep.gid = e.gid;
  }
  return ep;
}

conduit::Status QueuePair::to_init(const ConnectOptions& o) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = o.port;
  attr.qp_access_flags = o.access;
  return modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

conduit::Status QueuePair::to_rtr(const QpEndpoint& remote, const ConnectOptions& o) {
  const Context& ctx = *pd_->context();
  CONDUIT_ASSIGN_OR_RETURN(PortInfo port, ctx.port(o.port));
  int gid_index = o.gid_index;
  if (gid_index < 0) {
    CONDUIT_ASSIGN_OR_RETURN(GidEntry e, ctx.default_gid(o.port));
    gid_index = e.index;
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(o.mtu, port.active_mtu);
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn & 0xffffff;
  attr.max_dest_rd_atomic = o.max_rd_atomic;
  attr.min_rnr_timer = o.min_rnr_timer;
  attr.ah_attr.port_num = o.port;
  attr.ah_attr.dlid = remote.lid;
  // RoCE always needs a GRH; InfiniBand only across subnets (we add it when a GID is given).
  bool has_gid = false;
  for (uint8_t b : remote.gid) has_gid = has_gid || b != 0;
  if (port.is_ethernet() || has_gid) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
    attr.ah_attr.grh.hop_limit = o.hop_limit;
  }
  return modify(attr,
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                "RTR");
}

conduit::Status QueuePair::to_rts(uint32_t local_psn, const ConnectOptions& o) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn & 0xffffff;
  attr.timeout = o.timeout;
  attr.retry_cnt = o.retry_cnt;
  attr.rnr_retry = o.rnr_retry;
  attr.max_rd_atomic = o.max_rd_atomic;
  return modify(attr,
                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                "RTS");
}

conduit::Status QueuePair::connect(const QpEndpoint& local, const QpEndpoint& remote, const ConnectOptions& o) {
  CONDUIT_RETURN_IF_ERROR(to_init(o));
  CONDUIT_RETURN_IF_ERROR(to_rtr(remote, o));
  return to_rts(local.psn, o);
}

conduit::Status QueuePair::to_error() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(attr, IBV_QP_STATE, "ERR");
}

conduit::Status QueuePair::post_send_error(int rc, const ibv_send_wr* bad) const {
  std::string what = "ibv_post_send (qp " + std::to_string(qp_num());
  if (bad != nullptr) what += ", first rejected wr_id " + std::to_string(bad->wr_id) + " " + std::string(wr_opcode_name(bad->opcode));
  what += ")";
  return conduit::Status::FromErrnoAuto(rc, what);
}

conduit::Status QueuePair::post_recv_error(int rc, const ibv_recv_wr* bad) const {
  return conduit::Status::FromErrnoAuto(rc, "ibv_post_recv (qp " + std::to_string(qp_num()) + ", wr_id " +
                                                std::to_string(bad ? bad->wr_id : 0) + ")");
}

std::string_view wr_opcode_name(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_SEND: return "SEND";
    case IBV_WR_SEND_WITH_IMM: return "SEND_WITH_IMM";
    case IBV_WR_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA_WRITE_WITH_IMM";
    case IBV_WR_RDMA_READ: return "RDMA_READ";
    case IBV_WR_ATOMIC_CMP_AND_SWP: return "ATOMIC_CMP_AND_SWP";
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return "ATOMIC_FETCH_AND_ADD";
    default: break;
  }
  return "OTHER";
}

}  // namespace conduit::verbs
