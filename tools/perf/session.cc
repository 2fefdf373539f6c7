#include "session.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::perf {
namespace {

constexpr uint32_t kCtrlSlack = 4;   // send-queue slots beyond the data loops' depth
constexpr uint32_t kCtrlRecvs = 16;  // receives posted by a side that gets no SENDs
constexpr size_t kCtrlRegion = 4096;
constexpr size_t kInboxOffset = 0;
constexpr size_t kOutboxOffset = 2048;
constexpr uint64_t kCtrlWrId = ~uint64_t{0};
constexpr int kResolveTimeoutMs = 2000;
constexpr auto kRetryDelay = std::chrono::milliseconds(200);
constexpr size_t kRecvChain = 32;
constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms, perftest's MIN_RNR_TIMER

int ms_until(uint64_t deadline_ns) {
  const uint64_t now = monotonic_ns();
  if (now >= deadline_ns) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline_ns - now + 999'999) / 1'000'000, INT_MAX));
}

uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }

uint8_t clamp_u8(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

std::string describe(uint8_t test, bool all_sizes, uint32_t size) {
  const TestInfo* t = find_test(test);
  std::string s = t != nullptr ? std::string(t->name) : "unknown test #" + std::to_string(test);
  s += all_sizes ? " -a (all sizes)" : " size " + std::to_string(size);
  return s;
}

}  // namespace

uint64_t deadline_in(double seconds) { return monotonic_ns() + static_cast<uint64_t>(seconds * 1e9); }

// ---------------------------------------------------------------------------------------
// Watchdog

Watchdog::Watchdog(Session& session, uint64_t deadline_ns, const char* what)
    : session_(&session),
      deadline_ns_(deadline_ns),
      check_interval_tsc_(static_cast<uint64_t>(Tsc::cycles_per_us() * 10'000)),  // 10 ms
      what_(what) {}

bool Watchdog::check() {
  next_check_tsc_ = read_tsc() + check_interval_tsc_;
  if (Status s = session_->check_peer(); !s.ok()) {
    status_ = s.annotate(what_);
    return true;
  }
  if (monotonic_ns() >= deadline_ns_) {
    const Options& o = session_->opts();
    status_ = Status(Code::kTimedOut, std::string(what_) + ": not done within --timeout " +
                                          std::to_string(o.timeout_s) + " s" +
                                          (o.duration_mode() ? " plus -D" : "") + "; is the peer stuck?");
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Establishing the connection

Result<std::unique_ptr<Session>> Session::establish(const Options& opts) {
  const uint64_t deadline = deadline_in(opts.timeout_s);
  if (opts.is_server()) {
    std::unique_ptr<Session> s(new Session(opts));
    CONDUIT_RETURN_IF_ERROR(s->accept_client(deadline));
    return Result<std::unique_ptr<Session>>(std::move(s));
  }
  Status last;
  for (;;) {
    std::unique_ptr<Session> s(new Session(opts));
    bool retry = false;
    last = s->connect_server(deadline, &retry);
    if (last.ok()) return Result<std::unique_ptr<Session>>(std::move(s));
    if (!retry) return last;
    CONDUIT_LOG(kDebug) << "connection attempt failed, retrying: " << last.to_string();
    s.reset();  // frees this attempt's id, QP and buffers before the next one
    if (monotonic_ns() + std::chrono::nanoseconds(kRetryDelay).count() >= deadline) break;
    std::this_thread::sleep_for(kRetryDelay);
  }
  return Status(Code::kUnavailable, "no conduit-perf server accepted a connection at " + opts.server + ":" +
                                        std::to_string(opts.port) + " within " + std::to_string(opts.timeout_s) +
                                        " s (last attempt: " + std::string(last.message()) + ")");
}

Session::~Session() = default;

Result<verbs::CmEvent> Session::next_cm_event(uint64_t deadline_ns, const char* what) {
  const int left = ms_until(deadline_ns);
  auto ev = left > 0 ? verbs::CmId::next_event(channel_, left) : Result<verbs::CmEvent>(Status(Code::kTimedOut, ""));
  if (ev.ok()) {
    CONDUIT_LOG(kDebug) << what << ": rdma_cm event " << ev->to_string();
    return ev;
  }
  if (ev.status().code() == Code::kTimedOut || ev.status().would_block())
    return Status(Code::kTimedOut, std::string(what) + ": nothing happened within --timeout (" +
                                       std::to_string(opts_.timeout_s) + " s)");
  return ev.status().annotate(what);
}

Status Session::check_device() {
  if (opts_.device.empty()) return {};
  std::shared_ptr<verbs::Context> ctx = id_->context();
  const std::string actual = ctx ? std::string(ctx->name()) : std::string("(none)");
  if (actual == opts_.device) return {};
  const std::string where = opts_.is_server() ? "the client's connection arrived on device " + actual
                                              : "rdma_cm reaches " + opts_.server + " through device " + actual;
  return Status(Code::kInvalidArgument, "-d " + opts_.device + " was given, but " + where);
}

ConnParams Session::local_params() const {
  ConnParams p;
  p.test = static_cast<uint8_t>(opts_.test->kind);
  p.all_sizes = opts_.all_sizes;
  p.duration_mode = opts_.duration_mode();
  p.size = opts_.all_sizes ? 0 : opts_.size;
  p.iters = opts_.duration_mode() ? 0 : static_cast<uint32_t>(opts_.iters);
  p.duration_s = static_cast<uint16_t>(std::min<uint32_t>(opts_.duration_s, UINT16_MAX));
  p.tx_depth = static_cast<uint16_t>(opts_.tx_depth);
  p.rx_depth = static_cast<uint16_t>(opts_.rx_depth);
  p.inline_size = static_cast<uint16_t>(opts_.inline_size);
  if (buf_) {
    p.buf_addr = buf_addr() + half_;
    p.buf_rkey = buf_->mr().rkey();
    p.buf_len = unit_;
  }
  if (ctrl_) {
    p.ctrl_addr = reinterpret_cast<uintptr_t>(ctrl_->data()) + kInboxOffset;
    p.ctrl_rkey = ctrl_->mr().rkey();
    p.ctrl_len = kCtrlSlots * kCtrlMsgSize;
  }
  return p;
}

void Session::adopt_remote(const ConnParams& peer) {
  remote_ = {peer.buf_addr, peer.buf_rkey, peer.buf_len};
  remote_ctrl_ = {peer.ctrl_addr, peer.ctrl_rkey, peer.ctrl_len};
}

Status Session::create_resources() {
  ctx_ = id_->context();
  if (!ctx_) return Status(Code::kInternal, "the rdma_cm id is not bound to a device");
  const TestInfo& t = *opts_.test;
  CONDUIT_ASSIGN_OR_RETURN(pd_, verbs::ProtectionDomain::create(ctx_));
  CONDUIT_ASSIGN_OR_RETURN(recv_channel_, verbs::CompletionChannel::create(ctx_));
  const uint32_t sq = opts_.sq_depth() + kCtrlSlack;
  data_recvs_ = t.verb == Verb::kSend && (!t.bw || opts_.is_server());
  recv_count_ = data_recvs_ ? std::max(opts_.rx_depth, 1u) : kCtrlRecvs;
  CONDUIT_ASSIGN_OR_RETURN(send_cq_, verbs::CompletionQueue::create(ctx_, static_cast<int>(sq + 8)));
  CONDUIT_ASSIGN_OR_RETURN(recv_cq_,
                           verbs::CompletionQueue::create(ctx_, static_cast<int>(recv_count_ + 8), recv_channel_));

  // One buffer per side, as perftest: every message of a row uses the same bytes.  The
  // ping-pong tests keep what they send apart from what the peer writes into them.
  unit_ = round_up(std::max<uint32_t>(opts_.max_size(), 64), 64);
  half_ = (t.kind == TestKind::kWriteLat || t.kind == TestKind::kSendLat) ? round_up(unit_, 4096) : 0;
  CONDUIT_ASSIGN_OR_RETURN(auto buf, verbs::RegisteredBuffer::create(pd_, half_ + unit_, verbs::kRemoteAll));
  buf_ = std::make_unique<verbs::RegisteredBuffer>(std::move(buf));
  CONDUIT_ASSIGN_OR_RETURN(auto ctrl, verbs::RegisteredBuffer::create(
                                          pd_, kCtrlRegion, verbs::Access::kLocalWrite | verbs::Access::kRemoteWrite));
  ctrl_ = std::make_unique<verbs::RegisteredBuffer>(std::move(ctrl));

  verbs::QpOptions qo;
  qo.max_send_wr = sq;
  qo.max_recv_wr = recv_count_ + 1;
  qo.max_send_sge = 1;
  qo.max_recv_sge = 1;
  qo.max_inline_data = opts_.inline_size;
  auto qp = id_->create_qp(pd_, send_cq_, recv_cq_, qo);
  if (!qp.ok())
    return qp.status().annotate("creating the QP (send depth " + std::to_string(sq) + ", receive depth " +
                                std::to_string(qo.max_recv_wr) + ", inline " + std::to_string(qo.max_inline_data) +
                                ")");
  qp_ = *qp;
  if (qp_->max_inline() < opts_.inline_size)
    return Status(Code::kNotSupported, "the device grants only " + std::to_string(qp_->max_inline()) +
                                           " bytes of inline data; use -I " + std::to_string(qp_->max_inline()) +
                                           " or less");

  recv_sge_ = buf_->sge(half_, unit_);
  recv_wrs_.clear();
  single_recv_ = data_recvs_ ? verbs::RecvWr::make(&recv_sge_, 1, 0) : verbs::RecvWr::make(nullptr, 0, 0);
  for (size_t i = 0; i < kRecvChain; ++i) recv_wrs_.push_back(single_recv_);
  return repost_recvs(static_cast<int>(recv_count_));
}

Status Session::accept_client(uint64_t deadline_ns) {
  CONDUIT_ASSIGN_OR_RETURN(channel_, verbs::EventChannel::create());
  CONDUIT_ASSIGN_OR_RETURN(listener_, verbs::CmId::create(channel_));
  CONDUIT_ASSIGN_OR_RETURN(verbs::SocketAddress any, verbs::SocketAddress::resolve("", opts_.port));
  CONDUIT_RETURN_IF_ERROR(listener_->bind(any).annotate("listening on port " + std::to_string(opts_.port)));
  CONDUIT_RETURN_IF_ERROR(listener_->listen(1));

  verbs::CmEvent req;
  do {
    CONDUIT_ASSIGN_OR_RETURN(req, next_cm_event(deadline_ns, "waiting for a client to connect"));
  } while (req.type != RDMA_CM_EVENT_CONNECT_REQUEST);
  id_ = std::move(req.new_id);
  const std::string who = id_->peer_address().to_string();

  auto refuse = [&](RejectReason why, const std::string& detail) {
    ConnParams mine = local_params();
    mine.status = why;
    const ConnParamsBytes bytes = encode(mine);
    if (Status st = id_->reject(bytes); !st.ok())
      CONDUIT_LOG(kWarn) << "rejecting " << who << ": " << st.to_string();
    return Status(Code::kInvalidArgument, "refused the client at " + who + ": " + detail);
  };
  auto client = decode_conn_params(req.private_data);
  if (!client.ok()) return refuse(RejectReason::kVersion, std::string(client.status().message()));
  const std::string theirs = describe(client->test, client->all_sizes, client->size);
  const std::string ours = describe(static_cast<uint8_t>(opts_.test->kind), opts_.all_sizes, opts_.size);
  if (client->test != static_cast<uint8_t>(opts_.test->kind))
    return refuse(RejectReason::kTestMismatch, "it asked for " + theirs + ", this server runs " + ours);
  if (client->all_sizes != opts_.all_sizes || (!opts_.all_sizes && client->size != opts_.size))
    return refuse(RejectReason::kSizeMismatch, "it asked for " + theirs + ", this server runs " + ours);
  if (Status st = check_device(); !st.ok())
    return refuse(RejectReason::kDeviceMismatch, std::string(st.message()));

  // The client decides how long each size runs.
  apply_run_length(&opts_, client->duration_mode ? 0 : client->iters,
                   client->duration_mode ? client->duration_s : 0);
  if (Status st = create_resources(); !st.ok()) {
    (void)refuse(RejectReason::kServerError, std::string(st.message()));
    return st;
  }
  adopt_remote(*client);
  const ibv_device_attr& dev = ctx_->attr();
  const uint8_t initiator = clamp_u8(std::min<int>(dev.max_qp_init_rd_atom, req.responder_resources));
  const uint8_t responder = clamp_u8(std::min<int>(dev.max_qp_rd_atom, req.initiator_depth));
  const ConnParamsBytes bytes = encode(local_params());
  CONDUIT_RETURN_IF_ERROR(id_->accept(bytes, initiator, responder));
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(verbs::CmEvent ev, next_cm_event(deadline_ns, "accepting the client"));
    if (ev.type == RDMA_CM_EVENT_ESTABLISHED) break;
    if (ev.type != RDMA_CM_EVENT_CONNECT_REQUEST)  // a second client is refused by dropping its id
      return Status(Code::kUnavailable, "accepting the client at " + who + ": got " + ev.to_string());
  }
  listener_.reset();
  return set_min_rnr_timer();
}

Status Session::connect_server(uint64_t deadline_ns, bool* retry) {
  CONDUIT_ASSIGN_OR_RETURN(channel_, verbs::EventChannel::create());
  CONDUIT_ASSIGN_OR_RETURN(id_, verbs::CmId::create(channel_));
  CONDUIT_ASSIGN_OR_RETURN(verbs::SocketAddress dst, verbs::SocketAddress::resolve(opts_.server, opts_.port));
  const std::string where = dst.to_string();
  auto expect = [&](rdma_cm_event_type want, const char* what) -> Status {
    CONDUIT_ASSIGN_OR_RETURN(verbs::CmEvent ev, next_cm_event(deadline_ns, what));
    if (ev.type == want) return {};
    return Status(Code::kNotFound, std::string(what) + " " + where + ": got " + ev.to_string() +
                                       " (is the address on an RDMA device?)");
  };
  CONDUIT_RETURN_IF_ERROR(id_->resolve_addr(dst, kResolveTimeoutMs));
  CONDUIT_RETURN_IF_ERROR(expect(RDMA_CM_EVENT_ADDR_RESOLVED, "resolving the address of"));
  CONDUIT_RETURN_IF_ERROR(check_device());
  CONDUIT_RETURN_IF_ERROR(id_->resolve_route(kResolveTimeoutMs));
  CONDUIT_RETURN_IF_ERROR(expect(RDMA_CM_EVENT_ROUTE_RESOLVED, "resolving the route to"));
  CONDUIT_RETURN_IF_ERROR(create_resources());

  const ibv_device_attr& dev = ctx_->attr();
  const ConnParamsBytes bytes = encode(local_params());
  CONDUIT_RETURN_IF_ERROR(id_->connect(bytes, clamp_u8(dev.max_qp_init_rd_atom), clamp_u8(dev.max_qp_rd_atom)));
  CONDUIT_ASSIGN_OR_RETURN(verbs::CmEvent ev, next_cm_event(deadline_ns, "connecting"));
  if (ev.type == RDMA_CM_EVENT_REJECTED) {
    auto server = decode_conn_params(ev.private_data);
    // A reject without our record comes from the kernel: nobody listens on that port.
    if (!server.ok()) {
      *retry = true;
      return Status(Code::kUnavailable, "connection to " + where + " refused (" + ev.to_string() + ")");
    }
    const std::string ours = describe(static_cast<uint8_t>(opts_.test->kind), opts_.all_sizes, opts_.size);
    std::string msg = "the server at " + where + " refused the connection: " +
                      std::string(reject_reason_name(server->status));
    if (server->status == RejectReason::kTestMismatch || server->status == RejectReason::kSizeMismatch)
      msg += " (it runs " + describe(server->test, server->all_sizes, server->size) + ", we asked for " + ours + ")";
    else
      msg += " (see the server's output)";
    return Status(Code::kInvalidArgument, msg);
  }
  if (ev.type == RDMA_CM_EVENT_UNREACHABLE || ev.type == RDMA_CM_EVENT_CONNECT_ERROR) {
    *retry = true;
    return Status(Code::kUnavailable, "connecting to " + where + ": " + ev.to_string());
  }
  if (ev.type != RDMA_CM_EVENT_ESTABLISHED)
    return Status(Code::kIoError, "connecting to " + where + ": unexpected " + ev.to_string());
  CONDUIT_ASSIGN_OR_RETURN(ConnParams server, decode_conn_params(ev.private_data));
  if (server.status != RejectReason::kNone)
    return Status(Code::kProtocolError, "the server accepted but reports " +
                                            std::string(reject_reason_name(server.status)));
  if (server.test != static_cast<uint8_t>(opts_.test->kind) || server.all_sizes != opts_.all_sizes ||
      (!opts_.all_sizes && server.size != opts_.size))
    return Status(Code::kProtocolError, "the server accepted a different test: " +
                                            describe(server.test, server.all_sizes, server.size));
  adopt_remote(server);
  if (remote_.length < std::min<uint32_t>(unit_, opts_.max_size()) || remote_ctrl_.length < kCtrlSlots * kCtrlMsgSize)
    return Status(Code::kProtocolError, "the server advertised buffers too small for this test");
  return set_min_rnr_timer();
}

// rdma_cm leaves the responder's min_rnr_timer at 0, which the IB encoding makes 655 ms: a
// SEND that finds the receive queue empty would stall the sender for most of a second
// (send_bw with small messages did, now and then).  perftest's own QPs use 12 (0.64 ms);
// RTS -> RTS may change it.
Status Session::set_min_rnr_timer() {
  ibv_qp_attr attr{};
  attr.min_rnr_timer = kMinRnrTimer;
  if (int rc = ibv_modify_qp(qp_->native_handle(), &attr, IBV_QP_MIN_RNR_TIMER); rc != 0)
    return Status::FromErrno(rc, "ibv_modify_qp(min_rnr_timer " + std::to_string(kMinRnrTimer) + ")");
  return {};
}

// ---------------------------------------------------------------------------------------
// Receives and control messages

Status Session::repost_recvs(int n) {
  while (n > 0) {
    const int k = std::min<int>(n, static_cast<int>(recv_wrs_.size()));
    verbs::RecvChain chain;
    for (int i = 0; i < k; ++i) chain.append(recv_wrs_[static_cast<size_t>(i)]);
    CONDUIT_RETURN_IF_ERROR(qp_->post_recv(chain));
    n -= k;
  }
  return {};
}

Result<CtrlMsg> Session::read_ctrl(const verbs::Completion& wc) const {
  const uint32_t slot = wc.imm() % kCtrlSlots;
  return decode_ctrl(ctrl_->data() + kInboxOffset + slot * kCtrlMsgSize);
}

Status completion_error(Session& s, const verbs::Completion& wc, std::string_view what) {
  std::string msg = std::string(what) + ": work completion failed: " + wc.to_string();
  if (Status peer = s.check_peer(); !peer.ok())
    msg += " (" + std::string(peer.message()) + ")";
  else if (wc.ibv_wc::status == IBV_WC_RETRY_EXC_ERR || wc.ibv_wc::status == IBV_WC_RNR_RETRY_EXC_ERR)
    msg += " (the peer stopped answering; did it exit?)";
  return Status(Code::kIoError, msg, DetailKind::kWcStatus, static_cast<int>(wc.ibv_wc::status));
}

Status Session::send_ctrl(const CtrlMsg& msg, uint64_t deadline_ns) {
  encode(msg, ctrl_->data() + kOutboxOffset);
  const uint32_t seq = ctrl_seq_++;
  ibv_sge sge = ctrl_->sge(kOutboxOffset, kCtrlMsgSize);
  auto wr = verbs::SendWr::write_imm(&sge, 1, remote_ctrl_.addr + (seq % kCtrlSlots) * kCtrlMsgSize,
                                     remote_ctrl_.rkey, seq)
                .id(kCtrlWrId)
                .signaled();
  CONDUIT_RETURN_IF_ERROR(qp_->post_send(wr));
  Watchdog wd(*this, deadline_ns, "sending a control message");
  verbs::Completion wc[4];
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int n, send_cq_->poll(wc));
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok()) return completion_error(*this, wc[i], std::string("sending ") + std::string(ctrl_type_name(msg.type)));
      if (wc[i].wr_id == kCtrlWrId) return {};
    }
    if (n == 0 && wd.tick()) return wd.status();
  }
}

Result<CtrlMsg> Session::wait_ctrl(uint64_t deadline_ns, const char* what) {
  for (;;) {
    // Arm before the last poll, so a completion landing in between still wakes us.
    CONDUIT_ASSIGN_OR_RETURN(int events, recv_cq_->consume_events());
    (void)events;
    CONDUIT_RETURN_IF_ERROR(recv_cq_->arm());
    verbs::Completion wc[1];
    CONDUIT_ASSIGN_OR_RETURN(int n, recv_cq_->poll(wc));
    if (n == 1) {
      if (!wc[0].ok()) return completion_error(*this, wc[0], what);
      CONDUIT_RETURN_IF_ERROR(repost_recvs(1));
      if (!is_ctrl(wc[0]))
        return Status(Code::kProtocolError, std::string(what) + ": the peer sent data outside a test row");
      return read_ctrl(wc[0]);
    }
    if (Status st = check_peer(); !st.ok()) return st.annotate(what);
    const int left = ms_until(deadline_ns);
    if (left == 0)
      return Status(Code::kTimedOut, std::string(what) + ": nothing from the peer within --timeout (" +
                                         std::to_string(opts_.timeout_s) + " s)");
    pollfd fds[2] = {{recv_channel_->fd(), POLLIN, 0}, {channel_->fd(), POLLIN, 0}};
    if (::poll(fds, 2, std::min(left, 1000)) < 0 && errno != EINTR)
      return Status::FromErrno(errno, "poll on the completion and rdma_cm channels");
  }
}

Status Session::check_peer() {
  while (!peer_gone_) {
    auto ev = verbs::CmId::next_event(channel_, 0);
    if (!ev.ok()) return ev.status().would_block() ? Status() : ev.status();
    if (ev->type == RDMA_CM_EVENT_DISCONNECTED || ev->type == RDMA_CM_EVENT_DEVICE_REMOVAL) peer_gone_ = true;
    // Anything else (a second client knocking: dropping its id refuses it) is not our business.
  }
  return Status(Code::kClosed, "the peer disconnected (did it exit?)");
}

Status Session::finish(uint64_t deadline_ns) {
  if (opts_.is_server()) {
    CtrlMsg fin;
    fin.type = CtrlType::kFin;
    CONDUIT_RETURN_IF_ERROR(send_ctrl(fin, deadline_ns));
  } else {
    CONDUIT_ASSIGN_OR_RETURN(CtrlMsg fin, wait_ctrl(deadline_ns, "waiting for the server to finish"));
    if (fin.type != CtrlType::kFin)
      return Status(Code::kProtocolError, "expected FIN from the server, got " + std::string(ctrl_type_name(fin.type)));
    CONDUIT_RETURN_IF_ERROR(id_->disconnect());
  }
  while (!peer_gone_) {
    CONDUIT_ASSIGN_OR_RETURN(verbs::CmEvent ev, next_cm_event(deadline_ns, "waiting for the disconnect"));
    if (ev.type == RDMA_CM_EVENT_DISCONNECTED) peer_gone_ = true;
  }
  if (opts_.is_server()) (void)id_->disconnect();  // answers the client's request; may already be done
  return {};
}

LinkInfo Session::link_info() const {
  LinkInfo li;
  li.device = std::string(ctx_->name());
  li.port = id_->port_num();
  if (auto port = ctx_->port(li.port); port.ok()) li.link_layer = port->is_ethernet() ? "Ethernet" : "IB";
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  const int mask = IBV_QP_PATH_MTU | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN | IBV_QP_AV |
                   IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_CAP | IBV_QP_MIN_RNR_TIMER;
  if (ibv_query_qp(qp_->native_handle(), &attr, mask, &init) == 0) {
    li.mtu = verbs::mtu_bytes(attr.path_mtu);
    li.gid_index = attr.ah_attr.grh.sgid_index;
    li.out_reads = attr.max_rd_atomic;
    li.min_rnr_timer = attr.min_rnr_timer;
    li.local.psn = attr.sq_psn;
    li.remote.psn = attr.rq_psn;
    li.remote.qpn = attr.dest_qp_num;
    std::memcpy(li.remote.gid, attr.ah_attr.grh.dgid.raw, 16);
    ibv_gid gid{};
    if (ibv_query_gid(ctx_->native_handle(), li.port, attr.ah_attr.grh.sgid_index, &gid) == 0)
      std::memcpy(li.local.gid, gid.raw, 16);
  }
  li.max_inline = qp_->max_inline();
  li.local.qpn = qp_->qp_num();
  li.local.rkey = buf_->mr().rkey();
  li.local.vaddr = buf_addr() + half_;
  li.remote.rkey = remote_.rkey;
  li.remote.vaddr = remote_.addr;
  return li;
}

}  // namespace conduit::perf
