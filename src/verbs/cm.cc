#include "conduit/verbs/cm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::verbs {

// ---------------------------------------------------------------------------------------
// SocketAddress

std::string SocketAddress::to_string() const {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (storage.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (storage.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "unspecified";
}

Result<SocketAddress> SocketAddress::resolve(std::string_view host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string h(host);
  const std::string p = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : h.c_str(), p.c_str(), &hints, &res); rc != 0)
    return conduit::Status(Code::kNotFound, "cannot resolve '" + h + "': " + gai_strerror(rc));
  SocketAddress out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.length = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

SocketAddress SocketAddress::from(const sockaddr* sa) {
  SocketAddress out;
  if (sa == nullptr) return out;
  out.length = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(&out.storage, sa, out.length);
  return out;
}

// ---------------------------------------------------------------------------------------
// EventChannel

Result<std::shared_ptr<EventChannel>> EventChannel::create() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) {
    const int err = errno;
    if (err == ENODEV || err == ENOENT)
      return conduit::Status(Code::kUnavailable, "rdma_create_event_channel: no RDMA CM support (/dev/infiniband/rdma_cm)",
                             DetailKind::kErrno, err);
    return conduit::Status::FromErrnoAuto(err, "rdma_create_event_channel");
  }
  std::shared_ptr<EventChannel> out(new EventChannel(ch));
  const int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return conduit::Status::FromErrno(errno, "fcntl(O_NONBLOCK) on rdma_cm channel");
  return out;
}

EventChannel::~EventChannel() { rdma_destroy_event_channel(ch_); }

std::string CmEvent::to_string() const {
  std::string s(name());
  if (status != 0) s += " (status " + std::to_string(status) + ")";
  return s;
}

// ---------------------------------------------------------------------------------------
// CmId

CmId::CmId(std::shared_ptr<EventChannel> channel, rdma_cm_id* id) : channel_(std::move(channel)), id_(id) {
  id_->context = this;
}

CmId::~CmId() {
  qp_.reset();
  if (int rc = rdma_destroy_id(id_); rc != 0)
    CONDUIT_LOG(kError) << "rdma_destroy_id failed: " << std::strerror(errno);
}

Result<std::unique_ptr<CmId>> CmId::create(std::shared_ptr<EventChannel> channel, rdma_port_space ps) {
  if (!channel) return conduit::Status(Code::kInvalidArgument, "CmId::create: null channel");
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel->native_handle(), &id, nullptr, ps) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_create_id");
  return std::unique_ptr<CmId>(new CmId(std::move(channel), id));
}

conduit::Status CmId::bind(const SocketAddress& addr) {
  if (rdma_bind_addr(id_, const_cast<sockaddr*>(addr.get())) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_bind_addr " + addr.to_string());
  return {};
}

conduit::Status CmId::listen(int backlog) {
  if (rdma_listen(id_, backlog) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_listen");
  return {};
}

conduit::Status CmId::resolve_addr(const SocketAddress& dst, int timeout_ms, const SocketAddress* src) {
  if (rdma_resolve_addr(id_, src ? const_cast<sockaddr*>(src->get()) : nullptr,
                        const_cast<sockaddr*>(dst.get()), timeout_ms) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_resolve_addr " + dst.to_string());
  return {};
}

conduit::Status CmId::resolve_route(int timeout_ms) {
  if (rdma_resolve_route(id_, timeout_ms) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_resolve_route");
  return {};
}

namespace {
Result<rdma_conn_param> conn_param(std::span<const uint8_t> pd, size_t max, uint8_t initiator_depth,
                                   uint8_t responder_resources, uint8_t rnr_retry, uint8_t retry_count,
                                   const char* what) {
  if (pd.size() > max)
    return conduit::Status(Code::kInvalidArgument, std::string(what) + ": private data of " +
                                                       std::to_string(pd.size()) + " bytes exceeds " +
                                                       std::to_string(max));
  rdma_conn_param p{};
  p.private_data = pd.empty() ? nullptr : pd.data();
  p.private_data_len = static_cast<uint8_t>(pd.size());
  p.initiator_depth = initiator_depth;
  p.responder_resources = responder_resources;
  if (retry_count > 7 || rnr_retry > 7)
    return conduit::Status(Code::kInvalidArgument, std::string(what) + ": retry counts are 0..7");
  p.retry_count = retry_count;
  p.rnr_retry_count = rnr_retry;
  return p;
}
}  // namespace

conduit::Status CmId::connect(std::span<const uint8_t> private_data, uint8_t initiator_depth,
                              uint8_t responder_resources, uint8_t rnr_retry, uint8_t retry_count) {
  CONDUIT_ASSIGN_OR_RETURN(rdma_conn_param p, conn_param(private_data, 56, initiator_depth, responder_resources,
                                                         rnr_retry, retry_count, "rdma_connect"));
  if (rdma_connect(id_, &p) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_connect");
  return {};
}

conduit::Status CmId::accept(std::span<const uint8_t> private_data, uint8_t initiator_depth,
                             uint8_t responder_resources, uint8_t rnr_retry, uint8_t retry_count) {
  CONDUIT_ASSIGN_OR_RETURN(rdma_conn_param p, conn_param(private_data, 196, initiator_depth, responder_resources,
                                                         rnr_retry, retry_count, "rdma_accept"));
  if (rdma_accept(id_, &p) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_accept");
  return {};
}

conduit::Status CmId::set_ack_timeout(uint8_t exponent) {
  if (exponent > 31) return conduit::Status(Code::kInvalidArgument, "rdma ack timeout exponent is 0..31");
  if (rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent, sizeof exponent) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_set_option(ACK_TIMEOUT)");
  return {};
}

conduit::Status CmId::reject(std::span<const uint8_t> private_data) {
  if (private_data.size() > 196)
    return conduit::Status(Code::kInvalidArgument, "rdma_reject: private data over 196 bytes");
  if (rdma_reject(id_, private_data.data(), static_cast<uint8_t>(private_data.size())) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_reject");
  return {};
}

conduit::Status CmId::disconnect() {
  if (rdma_disconnect(id_) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_disconnect");
  return {};
}

conduit::Status CmId::migrate(std::shared_ptr<EventChannel> channel) {
  if (!channel) return conduit::Status(Code::kInvalidArgument, "migrate: null channel");
  if (rdma_migrate_id(id_, channel->native_handle()) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_migrate_id");
  channel_ = std::move(channel);
  return {};
}

std::shared_ptr<Context> CmId::context() {
  if (id_->verbs == nullptr) return nullptr;
  if (!context_ || context_->native_handle() != id_->verbs) context_ = Context::borrow(id_->verbs);
  return context_;
}

Result<QueuePair*> CmId::create_qp(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> send_cq,
                                   std::shared_ptr<CompletionQueue> recv_cq, const QpOptions& options,
                                   std::shared_ptr<SharedReceiveQueue> srq) {
  if (qp_) return conduit::Status(Code::kInvalidArgument, "create_qp: this id already has a QP");
  if (!pd || !send_cq || !recv_cq)
    return conduit::Status(Code::kInvalidArgument, "create_qp: PD and both CQs are required");
  if (id_->verbs == nullptr)
    return conduit::Status(Code::kInvalidArgument, "create_qp: id is not bound to a device yet");
  if (pd->context()->native_handle() != id_->verbs)
    return conduit::Status(Code::kInvalidArgument, "create_qp: PD belongs to another device than the id");
  CONDUIT_ASSIGN_OR_RETURN(ibv_qp_init_attr attr,
                           QueuePair::init_attr(*pd, *send_cq, *recv_cq, srq.get(), options));
  if (rdma_create_qp(id_, pd->native_handle(), &attr) != 0)
    return conduit::Status::FromErrnoAuto(errno, "rdma_create_qp");
  QpOptions granted = options;
  granted.max_send_wr = attr.cap.max_send_wr;
  if (!srq) granted.max_recv_wr = attr.cap.max_recv_wr;
  granted.max_send_sge = attr.cap.max_send_sge;
  granted.max_recv_sge = attr.cap.max_recv_sge;
  granted.max_inline_data = attr.cap.max_inline_data;
  qp_.reset(new QueuePair(std::move(pd), std::move(send_cq), std::move(recv_cq), std::move(srq), id_->qp, id_,
                          granted));
  return qp_.get();
}

Result<QueuePair*> CmId::adopt_qp(std::unique_ptr<QueuePair> qp) {
  if (qp_) return conduit::Status(Code::kInvalidArgument, "adopt_qp: this id already has a QP");
  if (!qp) return conduit::Status(Code::kInvalidArgument, "adopt_qp: no QP");
  if (qp->cm_id_ != nullptr) return conduit::Status(Code::kInvalidArgument, "adopt_qp: the QP belongs to another id");
  if (id_->verbs == nullptr)
    return conduit::Status(Code::kInvalidArgument, "adopt_qp: id is not bound to a device yet");
  if (qp->pd()->context()->native_handle() != id_->verbs)
    return conduit::Status(Code::kInvalidArgument, "adopt_qp: the QP belongs to another device than the id");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  int mask = 0;
  if (rdma_init_qp_attr(id_, &attr, &mask) != 0) return conduit::Status::FromErrnoAuto(errno, "rdma_init_qp_attr(INIT)");
  CONDUIT_RETURN_IF_ERROR(qp->modify(attr, mask, "INIT"));
  id_->pd = qp->pd()->native_handle();
  id_->qp = qp->native_handle();
  qp->cm_id_ = id_;  // from now on destroyed through rdma_destroy_qp, which clears id_->qp
  qp_ = std::move(qp);
  return qp_.get();
}

conduit::Status CmId::reset_qp(uint32_t psn) {
  if (!qp_) return conduit::Status(Code::kInvalidArgument, "reset_qp: this id has no QP");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  CONDUIT_RETURN_IF_ERROR(qp_->modify(attr, IBV_QP_STATE, "RESET"));
  const std::pair<ibv_qp_state, const char*> steps[] = {{IBV_QPS_INIT, "INIT"}, {IBV_QPS_RTR, "RTR"}, {IBV_QPS_RTS, "RTS"}};
  for (const auto& [state, name] : steps) {
    attr = {};
    attr.qp_state = state;
    int mask = 0;
    if (rdma_init_qp_attr(id_, &attr, &mask) != 0)
      return conduit::Status::FromErrnoAuto(errno, std::string("rdma_init_qp_attr(") + name + ")");
    if (state == IBV_QPS_RTR) attr.rq_psn = psn & 0xffffff;
    if (state == IBV_QPS_RTS) attr.sq_psn = psn & 0xffffff;
    CONDUIT_RETURN_IF_ERROR(qp_->modify(attr, mask, name));
  }
  return {};
}

SocketAddress CmId::local_address() const { return SocketAddress::from(rdma_get_local_addr(id_)); }
SocketAddress CmId::peer_address() const { return SocketAddress::from(rdma_get_peer_addr(id_)); }

Result<CmEvent> CmId::next_event(const std::shared_ptr<EventChannel>& channel, int timeout_ms) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel->native_handle(), &ev) == 0) {
      CmEvent out;
      out.type = ev->event;
      out.status = ev->status;
      out.id = ev->id;
      out.listen_id = ev->listen_id;
      const rdma_conn_param& p = ev->param.conn;
      if (p.private_data != nullptr && p.private_data_len > 0) {
        auto* bytes = static_cast<const uint8_t*>(p.private_data);
        out.private_data.assign(bytes, bytes + p.private_data_len);
      }
      out.initiator_depth = p.initiator_depth;
      out.responder_resources = p.responder_resources;
      if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        // The new id inherited the listener's context pointer; give it its own owner.
        out.new_id.reset(new CmId(channel, ev->id));
        out.owner = out.new_id.get();
      } else {
        out.owner = static_cast<CmId*>(ev->id ? ev->id->context : nullptr);
      }
      rdma_ack_cm_event(ev);
      return out;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) return conduit::Status::FromErrno(errno, "rdma_get_cm_event");
    const uint64_t now = monotonic_ns();
    if (timeout_ms == 0) return conduit::Status::WouldBlock();
    if (now >= deadline) return conduit::Status(Code::kTimedOut, "no rdma_cm event before the timeout");
    pollfd pfd{channel->fd(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>((deadline - now + 999999) / 1000000)) < 0 && errno != EINTR)
      return conduit::Status::FromErrno(errno, "poll on rdma_cm channel");
  }
}

Result<CmEvent> CmId::expect_event(const std::shared_ptr<EventChannel>& channel, rdma_cm_event_type expected,
                                   int timeout_ms) {
  auto ev = next_event(channel, timeout_ms);
  if (!ev.ok()) return ev.status().annotate(std::string("waiting for ") + rdma_event_str(expected));
  if (ev->type != expected) {
    Code code = Code::kUnavailable;
    if (ev->type == RDMA_CM_EVENT_REJECTED) code = Code::kUnavailable;
    if (ev->type == RDMA_CM_EVENT_ADDR_ERROR || ev->type == RDMA_CM_EVENT_ROUTE_ERROR) code = Code::kNotFound;
    if (ev->status == -ETIMEDOUT) code = Code::kTimedOut;
    return conduit::Status(code, std::string("expected ") + rdma_event_str(expected) + ", got " + ev->to_string(),
                           DetailKind::kCmEvent, ev->status);
  }
  return std::move(ev).value();
}

}  // namespace conduit::verbs
