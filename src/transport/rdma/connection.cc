// RdmaConnection: setup, rdma_cm events, teardown, control messages and completion
// handling.  The data path is in connection_io.cc, the receive area (its advertisement,
// growth and the space given back) in connection_rx.cc, keepalives in
// connection_keepalive.cc.
#include "connection.h"

#include <algorithm>
#include <optional>

#include "closer.h"
#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;
using reactor::EventLoop;
using ring::ConsumerCursor;
using ring::ProducerCursor;
using ring::RingGeometry;

namespace {
constexpr uint32_t kCtrlSendSlots = 16;
}  // namespace

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::kResolvingAddress: return "resolving-address";
    case Phase::kResolvingRoute: return "resolving-route";
    case Phase::kConnecting: return "connecting";
    case Phase::kAccepting: return "accepting";
    case Phase::kAwaitingBuffer: return "awaiting-buffer";
    case Phase::kOpen: return "open";
    case Phase::kPeerGone: return "peer-gone";
    case Phase::kFailed: return "failed";
    case Phase::kClosed: return "closed";
  }
  return "?";
}

namespace {
// Where a client's connect stood when its time ran out, for the error.
std::string connect_step(Phase p) {
  switch (p) {
    case Phase::kResolvingAddress: return "resolving the address (rdma_resolve_addr: no device or neighbour for it)";
    case Phase::kResolvingRoute: return "resolving the route (rdma_resolve_route)";
    case Phase::kConnecting: return "waiting for the peer's reply (connect request sent: is it listening, is the path up?)";
    case Phase::kAwaitingBuffer: return "waiting for the peer's RegisterXferMemory (connected)";
    default: return "in phase " + std::string(phase_name(p));
  }
}
}  // namespace

ConnState RdmaConnection::state() const {
  switch (phase_) {
    case Phase::kResolvingAddress:
    case Phase::kResolvingRoute:
    case Phase::kConnecting:
    case Phase::kAwaitingBuffer:
      return ConnState::kConnecting;
    case Phase::kAccepting:
      return ConnState::kAccepting;
    case Phase::kOpen:
    case Phase::kPeerGone:
      return ConnState::kConnected;
    case Phase::kFailed:
      return ConnState::kError;
    case Phase::kClosed:
      break;
  }
  return ConnState::kClosed;
}

Caps RdmaConnection::caps() const {
  Caps c;
  c.transport = "rdma";
  c.max_inline = qp() ? qp()->max_inline() : 0;
  c.one_sided = true;
  c.half_close = half_close();
  static const std::vector<std::string> kExt = [] {  // every combination, names in a fixed order
    std::vector<std::string> v(16);
    static constexpr std::string_view kNames[] = {"ring", "solicited", "half-close", "rendezvous"};
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t b = 0; b < 4; ++b)
        if ((i >> b) & 1) v[i] += (v[i].empty() ? "" : ",") + std::string(kNames[b]);
    return v;
  }();
  c.extensions = kExt[(features_ & (kFeatureRing | kFeatureSolicited)) | (half_close() ? 4 : 0) | (rendezvous() ? 8 : 0)];
  return c;
}

ConnSnapshot RdmaConnection::snapshot() const {
  ConnSnapshot s = Connection::snapshot();
  s.state = std::string(phase_name(phase_));
  s.credits = tx_known_ && sending() ? static_cast<int64_t>(tx_.free_space()) : 0;
  if (verbs::QueuePair* q = qp()) {
    s.qp_state = std::string(verbs::qp_state_name(q->state()));
    s.qpn = q->qp_num();
  }
  if (res_ && res_->id) {
    if (std::shared_ptr<verbs::Context> dev = res_->id->context()) {
      const uint8_t port = res_->id->port_num();
      s.device = std::string(dev->name()) + ":" + std::to_string(port);
      if (auto counters = dev->port_counters(port); counters.ok()) s.device_counters = std::move(*counters);
    }
  }
  return s;
}

void RdmaConnection::set_read_handler(Handler h) {
  read_handler_ = std::move(h);
  if (read_handler_ && readable()) ctx_->mark_pending(this);
}

void RdmaConnection::set_write_handler(Handler h) {
  write_handler_ = std::move(h);
  if (write_handler_ && writable()) ctx_->mark_pending(this);
}

// ---------------------------------------------------------------------------------------
// Setup

Result<std::unique_ptr<RdmaConnection>> RdmaConnection::start_connect(EventLoop& loop, const Endpoint& ep,
                                                                       const RdmaOptions& o, ConnectCallback cb) {
  CONDUIT_ASSIGN_OR_RETURN(auto hp, ep.host_port());
  CONDUIT_ASSIGN_OR_RETURN(SocketAddress dst, SocketAddress::resolve(hp.first, hp.second));
  CONDUIT_ASSIGN_OR_RETURN(LoopContext * ctx, LoopContext::acquire(loop));
  std::unique_ptr<RdmaConnection> c(new RdmaConnection(ctx, o, Phase::kResolvingAddress, /*client=*/true));
  c->peer_ = dst.to_string();
  c->on_connect_ = std::move(cb);
  c->res_ = std::make_unique<QpResources>();
  CONDUIT_ASSIGN_OR_RETURN(c->res_->id, CmId::create(ctx->channel()));
  c->res_->id->set_user_data(static_cast<CmSink*>(c.get()));
  CONDUIT_RETURN_IF_ERROR(c->res_->id->resolve_addr(dst, static_cast<int>(o.connect_timeout_ms)));
  RdmaConnection* raw = c.get();
  c->connect_timer_ = loop.run_after(o.connect_timeout_ms * kMs, [raw] {
    raw->connect_timer_ = 0;
    raw->finish_connect(Status(Code::kTimedOut, "rdma connect to " + raw->peer_ + " timed out after " +
                                                    std::to_string(raw->options_.connect_timeout_ms) + " ms " +
                                                    connect_step(raw->phase_)));
  });
  return c;
}

Result<std::unique_ptr<RdmaConnection>> RdmaConnection::start_accept(LoopContext* ctx, CmEvent& request,
                                                                      const RdmaOptions& o) {
  // Each connection holds its own reference on the loop context.
  CONDUIT_ASSIGN_OR_RETURN(LoopContext * again, LoopContext::acquire(ctx->loop()));
  std::unique_ptr<RdmaConnection> c(new RdmaConnection(again, o, Phase::kAccepting, /*client=*/false));
  c->res_ = std::make_unique<QpResources>();
  c->res_->id = std::move(request.new_id);
  c->res_->id->set_user_data(static_cast<CmSink*>(c.get()));
  c->req_initiator_depth_ = request.initiator_depth;
  c->req_responder_resources_ = request.responder_resources;
  c->req_hello_ = decode_hello(request.private_data);
  c->peer_ = c->res_->id->peer_address().to_string();
  c->local_ = c->res_->id->local_address().to_string();
  CONDUIT_RETURN_IF_ERROR(c->setup_resources());
  CONDUIT_RETURN_IF_ERROR(c->cm_connect_params(/*accept=*/true));
  // The handshake is bounded like an outbound one: a peer that never completes it must
  // not hold a QP and registered memory for ever.
  RdmaConnection* raw = c.get();
  c->connect_timer_ = ctx->loop().run_after(o.connect_timeout_ms * kMs, [raw] {
    raw->connect_timer_ = 0;
    raw->fail(Status(Code::kTimedOut, "rdma: handshake with " + raw->peer_ + " not completed within " +
                                          std::to_string(raw->options_.connect_timeout_ms) + " ms"));
  });
  return c;
}

// The retry budget (URL options) and then rdma_connect / rdma_accept.
Status RdmaConnection::cm_connect_params(bool accept) {
  CmId& id = *res_->id;
  CONDUIT_RETURN_IF_ERROR(id.set_ack_timeout(static_cast<uint8_t>(options_.timeout)));
  const auto rnr = static_cast<uint8_t>(options_.rnr_retry), retry = static_cast<uint8_t>(options_.retry_cnt);
  // Reserve READ resources up to the device's limits (at most kMaxReadDepth), Valkey peer
  // or not: the rendezvous extension is negotiated after setup, when they can no longer
  // be changed.
  // The PD's device is the id's (create_qp checked): its attributes were queried once.
  const ibv_device_attr* attr = res_->pd ? &res_->pd->context()->attr() : nullptr;
  const auto clamp = [](int dev) { return static_cast<uint8_t>(std::clamp(dev, 1, kMaxReadDepth)); };
  const uint8_t dev_initiator = attr ? clamp(attr->max_qp_init_rd_atom) : 1;
  const uint8_t dev_responder = attr ? clamp(attr->max_qp_rd_atom) : 1;
  uint8_t hello[kHelloSize];
  if (!accept) {
    read_initiator_depth_ = dev_initiator;  // settled by the reply: see established()
    read_responder_resources_ = dev_responder;
    // A Hello offers our features in the request (a Valkey server ignores it).
    hello_offered_ = options_.cm_features ? offered_features() : 0;
    if (hello_offered_ == 0) return id.connect({}, dev_initiator, dev_responder, rnr, retry);
    encode_hello(hello_offered_, hello);
    return id.connect(hello, dev_initiator, dev_responder, rnr, retry);
  }
  // Never more outstanding READs than the requester serves, nor serving more than it may
  // issue. rdma_cm reports the request from our side already (rdma_get_cm_event(3): the
  // event's initiator_depth is the requester's responder_resources and the reverse), so
  // its fields bound ours of the same name (rdma_accept(3)).
  read_initiator_depth_ = std::min(dev_initiator, req_initiator_depth_);
  read_responder_resources_ = std::min(dev_responder, req_responder_resources_);
  // The request's Hello is answered with what both offer, in force from ESTABLISHED.  A
  // server that offers nothing answers none (it looks like Valkey: the client asks).
  if (!req_hello_ || !options_.cm_features || offered_features() == 0)
    return id.accept({}, read_initiator_depth_, read_responder_resources_, rnr, retry);
  features_ = *req_hello_ & offered_features();
  hello_done_ = true;
  encode_hello(features_, hello);
  return id.accept(hello, read_initiator_depth_, read_responder_resources_, rnr, retry);
}

Status RdmaConnection::setup_resources() {
  QpResources& r = *res_;
  if (!options_.device.empty()) {
    const ibv_context* dev = r.id->native_handle()->verbs;
    const std::string_view name = dev != nullptr ? ibv_get_device_name(dev->device) : "?";
    if (name != options_.device)
      return Status(Code::kUnavailable,
                    "rdma: route uses device " + std::string(name) + ", not the requested " + options_.device);
  }
  CONDUIT_ASSIGN_OR_RETURN(r.pd, ctx_->pd_for(*r.id, static_cast<size_t>(options_.arena_mb) << 20));
  if (options_.srq) {
    CONDUIT_ASSIGN_OR_RETURN(r.srq, ctx_->srq_for(r.pd, static_cast<uint32_t>(options_.srq_depth)));
  }
  std::shared_ptr<Context> dev = r.pd->context();
  // The loop's completion channel for this device (cq_hub.h): no channel of our own.
  CONDUIT_ASSIGN_OR_RETURN(r.hub, ctx_->hub_for(dev));
  r.channel = r.hub->channel();
  // With an SRQ, receive completions go to the pool's CQ: this one carries sends only.
  const int cqe = static_cast<int>(options_.send_depth + ctrl_recv_slots()) + 16;
  const QpShape shape{static_cast<uint32_t>(options_.send_depth), static_cast<uint32_t>(options_.recv_depth),
                      static_cast<uint32_t>(options_.inline_bytes), cqe};
  QueuePair* qp = nullptr;
  // A spare QP and CQ of our shape when the loop has one ready (qp_stock.h): creating them
  // is the largest step of setup under Soft-RoCE.
  if (!r.srq) {
    if (auto stock = ctx_->qp_stock_for(r.pd, r.channel, shape, options_.spare_qps)) {
      std::optional<QpStock::Spare> spare = stock->take();
      ctx_->arena_for(*r.pd)->spares.poke();  // the stock exists only with the PD's arena
      if (spare) {
        r.cq = std::move(spare->cq);
        CONDUIT_ASSIGN_OR_RETURN(qp, r.id->adopt_qp(std::move(spare->qp)));
      }
    }
  }
  if (qp == nullptr) {
    CONDUIT_ASSIGN_OR_RETURN(r.cq, CompletionQueue::create(dev, cqe, r.channel));
    CONDUIT_ASSIGN_OR_RETURN(qp, r.id->create_qp(r.pd, r.cq, r.srq ? r.srq->cq() : r.cq, shape.qp_options(),
                                                 r.srq ? r.srq->srq() : nullptr));
  }
  r.qpn = qp->qp_num();
  if (r.srq) {
    r.srq->attach(r.qpn, this);
    r.srq_attached = true;
  }
  // Never trust the provider to refuse overruns (rxe keeps spare slots): the tracker
  // enforces the depth it granted, signalling at least every quarter of it.
  const uint32_t depth = std::min(static_cast<uint32_t>(options_.send_depth), qp->options().max_send_wr);
  r.tracker = std::make_unique<SignalTracker>(depth, std::max(1u, depth / 4));

  // Memory from the loop's arena: in steady state nothing here registers anything.
  arena_ = ctx_->arena_for(*r.pd);
  if (arena_ == nullptr) return Status(Code::kInternal, "rdma: no arena for the protection domain");
  scope_ = options_.scope == "mw"        ? Scope::kMw
           : options_.scope == "private" ? Scope::kPrivate
           : options_.scope == "shared"  ? Scope::kShared
           : arena_->has_mw              ? Scope::kMw
                                         : Scope::kPrivate;
  const size_t ctrl_bytes = static_cast<size_t>(ctrl_recv_slots() + kCtrlSendSlots) * kCtrlSize;
  auto ctrl = arena_->pool->allocate(ctrl_bytes);
  if (!ctrl.ok()) return ctrl.status().annotate("rdma: control slots from the arena");
  r.ctrl = std::move(*ctrl);
  CONDUIT_RETURN_IF_ERROR(take_rx_area(options_.rx_initial));
  if (scope_ == Scope::kMw) {
    CONDUIT_ASSIGN_OR_RETURN(r.mw, MemoryWindow::create(r.pd));
  }
  CONDUIT_RETURN_IF_ERROR(post_all_recv_slots());
  for (uint32_t i = 0; i < kCtrlSendSlots; ++i) free_ctrl_slots_.push_back(kCtrlSendSlots - 1 - i);
  CONDUIT_RETURN_IF_ERROR(arm_cq());
  r.hub->attach(r.cq->native_handle(), this);
  channel_watched_ = true;
  return {};
}

RdmaConnection::RdmaConnection(LoopContext* ctx, const RdmaOptions& o, Phase p, bool client)
    : ctx_(ctx),
      options_(o),
      client_side_(client),
      phase_(p),
      spin_(o.busy_poll_us != 0 ? AdaptiveSpin::fixed(o.busy_poll_us * 1000)
                                : AdaptiveSpin::adaptive(o.poll_us * 1000)) {}

RdmaConnection::~RdmaConnection() {
  close();
  ctx_->forget(this);
  ctx_->release();
}

void RdmaConnection::cancel_timers() {
  if (keepalive_timer_ != 0) ctx_->loop().cancel(keepalive_timer_);
  if (connect_timer_ != 0) ctx_->loop().cancel(connect_timer_);
  keepalive_timer_ = connect_timer_ = 0;
}

void RdmaConnection::release_resources() {
  rv_park();
  cancel_timers();
  stop_spinning();
  if (channel_watched_) res_->hub->detach(res_->cq->native_handle());
  channel_watched_ = false;
  ctx_->reap(std::move(res_));  // the QP off the loop, then its memory, CQ, SRQ, PD (QpResources)
}

void RdmaConnection::on_srq_completion(const Completion& wc) {
  if (Status s = handle_completion(wc); !s.ok()) return fail(s);
  if (polling()) spin_.on_work(monotonic_ns());
  ctx_->mark_pending(this);  // the hook flushes and runs the handlers, as on_cq_event would
}

bool RdmaConnection::linger() {
  if (!res_ || !res_->tracker || !sending() || res_->disconnected) return false;
  // Offers the peer has not read yet are waited for (their ReadDone) where this QP's
  // receives are its own; with an SRQ they are the pool's and the Closer reads none.
  std::vector<std::pair<uint32_t, uint32_t>> offers;
  if (rv_slots_ && !res_->srq) offers = rv_slots_->offers();
  if (!tx_unposted() && res_->tracker->outstanding() == 0 && offers.empty()) return false;  // nothing on the wire
  cancel_timers();
  if (channel_watched_) res_->hub->detach(res_->cq->native_handle());
  channel_watched_ = false;
  res_->orphan();  // receives stay the pool's (srq=1); the Closer reads none
  const uint32_t ctrl_recv_slots_at_close = ctrl_recv_slots();
  stage_owned();
  rv_park();  // the offered slices stay with the resources until the QP is gone
  Closer::Tx tx{tx_addr_, tx_rkey_, tx_.geometry().capacity(), tx_posted_, tx_.head()};
  auto closer = std::make_unique<Closer>(ctx_, std::move(res_), tx, peer_, std::move(offers), ctrl_recv_slots_at_close);
  Closer* raw = closer.get();
  ctx_->adopt(std::move(closer));
  raw->start(options_.linger_ms);
  return true;
}

void RdmaConnection::close() {
  detach_share();  // views still held keep their memory; releasing them now changes nothing
  if (phase_ == Phase::kClosed && !res_) return;
  (void)linger();  // takes the resources if writes are still on the wire
  if (res_ && live()) res_->disconnect();
  release_resources();
  if (phase_ != Phase::kFailed) phase_ = Phase::kClosed;
  read_handler_ = nullptr;
  write_handler_ = nullptr;
  ctx_->forget(this);
}

void RdmaConnection::fail(Status s) {
  if (phase_ == Phase::kFailed || phase_ == Phase::kClosed) return;
  if (s.code() == Code::kProtocolError)
    CONDUIT_LOG(kWarn) << "rdma: protocol error from " << peer_ << ", closing: " << s.to_string();
  else
    CONDUIT_LOG(kDebug) << "rdma: connection to " << peer_ << " failed in phase " << phase_name(phase_) << ": "
                        << s.to_string();
  const bool was_setting_up = setting_up();
  error_ = s;
  phase_ = Phase::kFailed;
  if (res_) res_->disconnect();
  if (keepalive_timer_ != 0) ctx_->loop().cancel(keepalive_timer_);
  keepalive_timer_ = 0;
  if (was_setting_up) {
    finish_connect(s);
    return;
  }
  ctx_->mark_pending(this);  // the read handler will see the error
}

void RdmaConnection::finish_connect(Status s) {
  if (connect_timer_ != 0) ctx_->loop().cancel(connect_timer_);
  connect_timer_ = 0;
  if (!s.ok() && phase_ != Phase::kFailed) {
    error_ = s;
    phase_ = Phase::kFailed;
    if (res_) res_->disconnect();
  }
  if (on_established_) {
    auto cb = std::move(on_established_);
    on_established_ = nullptr;
    cb(this, s);  // may destroy this
    return;
  }
  if (on_connect_) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    cb(*this, s);
  }
}

void RdmaConnection::on_cm_event(CmEvent& ev) {
  switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      phase_ = Phase::kResolvingRoute;
      if (Status s = res_->id->resolve_route(static_cast<int>(options_.connect_timeout_ms)); !s.ok()) fail(s);
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      Status s = setup_resources();
      if (s.ok()) s = cm_connect_params(/*accept=*/false);
      if (!s.ok()) return fail(s);
      phase_ = Phase::kConnecting;
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      if (client_side_) {
        // The reply carries the server's choice, reported from our side like the request
        // on its side: ev.initiator_depth is the server's responder resources (READs we
        // may issue), ev.responder_resources its initiator depth (READs we serve).
        read_initiator_depth_ = std::min(read_initiator_depth_, ev.initiator_depth);
        read_responder_resources_ = std::min(read_responder_resources_, ev.responder_resources);
        // The reply's Hello, if our request carried one: the features both run from now on.
        if (auto chosen = hello_offered_ != 0 ? decode_hello(ev.private_data) : std::nullopt) {
          if ((*chosen & ~hello_offered_) != 0)
            return fail(Status(Code::kProtocolError, "rdma: server selected features " + std::to_string(*chosen) +
                                                         " in its reply, beyond the " + std::to_string(hello_offered_) +
                                                         " offered"));
          features_ = *chosen;
          hello_done_ = true;
        }
      }
      if (hello_done_) CONDUIT_LOG(kDebug) << "rdma: " << peer_ << " negotiated features " << features_ << " in the handshake";
      established();
      return;
    case RDMA_CM_EVENT_DISCONNECTED:
      if (phase_ == Phase::kOpen) {
        phase_ = Phase::kPeerGone;
        res_->disconnect();
        // Completions that raced the disconnect (data the peer wrote last) are still in
        // the CQ: take them before announcing EOF.
        (void)process_cq();
        if (res_ && res_->srq_attached) (void)res_->srq->process(res_->qpn);
        ctx_->mark_pending(this);
      } else if (setting_up()) {
        fail(Status(Code::kClosed, "rdma: peer disconnected during setup (" + std::string(phase_name(phase_)) + ")"));
      }
      return;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return;
    case RDMA_CM_EVENT_REJECTED:
      if (auto why = decode_refusal(ev.private_data)) {
        fail(Status(Code::kResourceExhausted,
                    "rdma connect to " + peer_ + ": refused by the listener: " + std::string(refusal_name(*why)),
                    DetailKind::kCmEvent, ev.status));
      } else {
        fail(Status(Code::kUnavailable, "rdma connect to " + peer_ + ": rejected (no RDMA listener there)",
                    DetailKind::kCmEvent, ev.status));
      }
      return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      fail(Status(Code::kUnavailable, "rdma: device removed"));
      return;
    default:
      fail(Status(Code::kUnavailable, "rdma connect to " + peer_ + ": " + ev.to_string(), DetailKind::kCmEvent,
                  ev.status));
      return;
  }
}

void RdmaConnection::established() {
  if (phase_ != Phase::kConnecting && phase_ != Phase::kAccepting) return;
  local_ = res_->id->local_address().to_string();
  peer_ = res_->id->peer_address().to_string();
  last_rx_ns_ = monotonic_ns();
  rv_start();
  Status s = scope_ == Scope::kMw ? bind_rx_window() : Status();
  if (s.ok()) s = register_rx();
  // A client asks for the server's features; a Valkey server answers 0.  The server side
  // never starts negotiation (Valkey clients may not send anything but RegisterXferMemory).
  if (s.ok() && client_side_ && !hello_done_ && offered_features() != 0) {
    s = send_ctrl(CtrlMsg::feature(Opcode::kGetServerFeature, offered_features()));
    awaiting_features_ = s.ok();
  }
  if (!s.ok()) return fail(s);
  arm_keepalive();
  // The caller hears of the connection once the peer has advertised its RX buffer (it
  // does so right after ESTABLISHED, and its message may even have arrived already), so a
  // new connection is writable at once.  The connect timer still bounds the wait.
  // (Servers hand over at ESTABLISHED: a client that never advertises a buffer can still be
  // served replies as soon as it does, and protocol errors reach the accepted connection.)
  // A client that asked for the server's features also waits for the answer (every server
  // answers, Valkey's with 0), so that caps() -- half_close above all -- are final when the
  // caller gets the connection.  Its SetClientFeature, if any, is then posted before any of
  // the caller's data, and the server knows the extensions before it reads a byte.
  if (client_side_ && (!tx_known_ || awaiting_features_)) {
    phase_ = Phase::kAwaitingBuffer;
    return;
  }
  open();
}

void RdmaConnection::open() {
  phase_ = Phase::kOpen;
  finish_connect(Status());
}

// ---------------------------------------------------------------------------------------
// Control messages and completions

// At setup: every control slot's receive in one chain, one ibv_post_recv (272 calls by
// default otherwise, ~0.1 ms of a setup under Soft-RoCE).
Status RdmaConnection::post_all_recv_slots() {
  if (res_->srq) return {};
  const uint32_t n = ctrl_recv_slots();
  std::vector<ibv_sge> sges(n);
  std::vector<RecvWr> wrs(n);
  RecvChain chain;
  for (uint32_t i = 0; i < n; ++i) {
    sges[i] = sge_of(res_->ctrl, static_cast<size_t>(i) * kCtrlSize, kCtrlSize);
    wrs[i] = RecvWr::make(&sges[i], 1, make_wr_id(kWrRecv, i));
    chain.append(wrs[i]);
  }
  return chain.empty() ? Status() : qp()->post_recv(chain);
}

Status RdmaConnection::post_recv_slot(uint32_t slot) {
  if (res_->srq) return {};  // the pool re-posts the slot once the completion has been handled
  ibv_sge sge = sge_of(res_->ctrl, static_cast<size_t>(slot) * kCtrlSize, kCtrlSize);
  RecvWr wr = RecvWr::make(&sge, 1, make_wr_id(kWrRecv, slot));
  return qp()->post_recv(wr);
}

Status RdmaConnection::send_ctrl(const CtrlMsg& m) {
  SignalTracker& t = *res_->tracker;
  if (free_ctrl_slots_.empty() || !t.can_post(1)) return Status(Code::kResourceExhausted, "rdma: control send queue full");
  const uint32_t slot = free_ctrl_slots_.back();
  const size_t offset = static_cast<size_t>(ctrl_recv_slots() + slot) * kCtrlSize;
  m.encode(*reinterpret_cast<uint8_t(*)[kCtrlSize]>(res_->ctrl.writable_data() + offset));
  ibv_sge sge = sge_of(res_->ctrl, offset, kCtrlSize);
  // Control sends are always signaled (their completion frees the slot) and solicited (a
  // peer that negotiated kFeatureSolicited wakes for them; others ignore the bit).
  SendWr wr = SendWr::send(&sge, 1).id(make_wr_id(kWrCtrlSend, slot)).signaled().solicited();
  CONDUIT_RETURN_IF_ERROR(qp()->post_send(wr));
  t.on_posted(true);
  free_ctrl_slots_.pop_back();
  return {};
}

Status RdmaConnection::handle_ctrl(const CtrlMsg& m) {
  switch (static_cast<Opcode>(m.opcode)) {
    case Opcode::kRegisterXferMemory: {
      if (tx_known_ && tx_unposted())
        return Status(Code::kProtocolError, "rdma: peer re-registered its buffer before receiving all data");
      // The staging mirror is taken at the first write (ensure_staging): a connection that
      // never copies a byte pins none, and setup registers nothing for it.  A buffer larger
      // than the whole arena could never be mirrored: refused now, not at that write.
      if (m.length > arena_->pool->options().cap_bytes)
        return Status(Code::kResourceExhausted, "rdma: peer advertised a " + std::to_string(m.length) +
                                                    "-byte buffer, more than the arena's cap of " +
                                                    std::to_string(arena_->pool->options().cap_bytes) + " bytes");
      if (res_->tx.capacity() < m.length && res_->tx.capacity() != 0) {
        res_->tx = memory::Slice();  // too small for the new buffer: a larger one at the next write
        count_pinned();
      }
      // The keeper registers spares of this size now, in the background, so that the first
      // write (here or on the next connection) finds a block without registering one.
      if (m.length == options_.rx_buffer || m.length == options_.rx_initial)
        arena_->spare_staging(m.length, options_.spare_areas);
      tx_known_ = true;
      tx_addr_ = m.addr;
      tx_rkey_ = m.rkey;
      tx_ = ProducerCursor(RingGeometry(m.length));
      tx_posted_ = 0;
      if (phase_ == Phase::kAwaitingBuffer && !awaiting_features_) open();
      if (write_handler_) ctx_->mark_pending(this);
      return {};
    }
    case Opcode::kKeepalive:
      peer_keepalive_seen_ = true;
      return {};
    case Opcode::kCredit:
      if (!ring()) return Status(Code::kProtocolError, "rdma: Credit from a peer that did not negotiate ring mode");
      if (!tx_known_ || !tx_.add_credits(m.bytes))
        return Status(Code::kProtocolError, "rdma: peer returned " + std::to_string(m.bytes) + " bytes but only " +
                                                std::to_string(tx_known_ ? tx_.in_flight() : 0) + " are in flight");
      if (write_handler_) ctx_->mark_pending(this);
      return {};
    case Opcode::kGetServerFeature: {
      if (!client_side_) {
        // A client asks: answer with the select it named and the bits we offer there.
        CtrlMsg reply = CtrlMsg::feature(Opcode::kGetServerFeature, m.select == 0 ? offered_features() : 0);
        reply.select = m.select;
        return send_feature(reply);
      }
      // The server's answer: switch on what both sides support (a Valkey server says 0,
      // and must then never see a SetClientFeature with bits set).
      if (!awaiting_features_) return {};  // a second answer changes nothing
      awaiting_features_ = false;
      const uint64_t chosen = m.select == 0 ? (m.features & offered_features()) : 0;
      if (chosen != 0) CONDUIT_RETURN_IF_ERROR(send_feature(CtrlMsg::feature(Opcode::kSetClientFeature, chosen)));
      if (phase_ == Phase::kAwaitingBuffer && tx_known_) open();
      return {};
    }
    case Opcode::kSetClientFeature:
      if (client_side_) return Status(Code::kProtocolError, "rdma: server sent SetClientFeature");
      if (hello_done_)
        return Status(Code::kProtocolError, "rdma: SetClientFeature after the features were settled in the handshake");
      if (m.select != 0 || (m.features & ~offered_features()) != 0)
        return Status(Code::kProtocolError, "rdma: peer selected unsupported features " + std::to_string(m.features));
      features_ = m.features;
      on_features();
      return {};
    case Opcode::kReadOffer:
      return on_read_offer(m);
    case Opcode::kReadDone:
      return on_read_done(m);
    case Opcode::kHalfClose:
      // RC delivers the receive completions of every WRITE_WITH_IMM posted before the
      // HalfClose ahead of it, so all the data it covers has been counted.
      if (!half_close())
        return Status(Code::kProtocolError, "rdma: HalfClose from a peer that did not negotiate half-close");
      if (peer_shut_) return Status(Code::kProtocolError, "rdma: second HalfClose from the peer");
      if (m.bytes != rx_stream_)
        return Status(Code::kProtocolError, "rdma: HalfClose after " + std::to_string(m.bytes) + " stream bytes, but " +
                                                std::to_string(rx_stream_) + " arrived");
      peer_shut_ = true;
      ctx_->mark_pending(this);  // the read handler sees EOF once the data is read
      return {};
  }
  return Status(Code::kProtocolError, "rdma: unknown opcode " + std::to_string(m.opcode));
}

// Both sides now run the negotiated extensions.  Nothing on the wire changes at this point:
// space already consumed is credited from now on (ring), and a batch posted before without
// a solicited tail gets one before the loop sleeps (solicited); the CQ is armed for
// solicited completions at the next re-arm.
// The feature exchange may meet a send queue full of data (the stream is usable before it
// ends: Valkey's client never waits for it): a message that finds no room waits for the next
// send completion instead of failing the connection.  A SetClientFeature takes effect here
// once posted (the peer switches when it arrives, after everything posted before it).
Status RdmaConnection::send_feature(const CtrlMsg& m) {
  Status s = send_ctrl(m);
  if (s.code() == Code::kResourceExhausted) {
    deferred_feature_ = m;
    return {};
  }
  CONDUIT_RETURN_IF_ERROR(s);
  deferred_feature_.reset();
  if (m.opcode == static_cast<uint16_t>(Opcode::kSetClientFeature)) {
    features_ = m.features;
    on_features();
  }
  return {};
}

void RdmaConnection::on_features() {
  CONDUIT_LOG(kDebug) << "rdma: " << peer_ << " negotiated features " << features_;
  ctx_->mark_pending(this);
}

Status RdmaConnection::handle_completion(const Completion& wc) {
  if (wr_kind(wc.wr_id) == kWrRead) return on_read_completion(wc);
  if (!wc.ok()) {
    if (wc.ibv_wc::status == IBV_WC_WR_FLUSH_ERR && (phase_ == Phase::kPeerGone || (res_ && res_->disconnected)))
      return {};
    return wc.as_status().annotate("rdma " + peer_);
  }
  switch (wr_kind(wc.wr_id)) {
    case kWrRecv: {
      const uint32_t slot = wr_index(wc.wr_id);
      // The iteration's clock (a keepalive's resolution is ms); outside an iteration, a fresh read.
      last_rx_ns_ = ctx_->loop().about_now_ns();
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        const uint32_t len = wc.imm();
        if (peer_shut_)
          return Status(Code::kProtocolError, "rdma: peer wrote " + std::to_string(len) + " bytes after its HalfClose");
        rx_stream_ += len;
        if (rv_seq_) rv_seq_->on_inband(len);
        if (!rx_.add_produced(len))
          return Status(Code::kProtocolError, "rdma: peer wrote " + std::to_string(len) + " bytes but only " +
                                                  std::to_string(rx_.granted()) + " of its " +
                                                  std::to_string(rx_.geometry().capacity()) +
                                                  "-byte buffer were granted");
        // The peer used all the space it was given: if that was an area smaller than
        // rx_buffer, the next return of space is a larger area instead.
        if (rx_.granted() == 0 && rx_len_ < options_.rx_buffer && !grow_refused_) grow_due_ = true;
      } else {
        CONDUIT_ASSIGN_OR_RETURN(CtrlMsg m, CtrlMsg::decode(recv_slot_data(slot), wc.byte_len));
        CONDUIT_RETURN_IF_ERROR(handle_ctrl(m));
      }
      return post_recv_slot(slot);
    }
    case kWrCtrlSend:
      free_ctrl_slots_.push_back(wr_index(wc.wr_id));
      [[fallthrough]];
    case kWrData:
    case kWrBind:
      res_->tracker->on_signaled_completion();
      release_sent();
      if (credit_blocked_) return_space();
      if (rv_due()) CONDUIT_RETURN_IF_ERROR(rv_service());
      if (half_close_due_) CONDUIT_RETURN_IF_ERROR(send_half_close());
      if (deferred_feature_) return send_feature(*deferred_feature_);
      return {};
    case kWrRead:
      break;  // on_read_completion, above
  }
  return Status(Code::kInternal, "rdma: completion with unknown wr_id " + std::to_string(wc.wr_id));
}

Status RdmaConnection::process_cq(int* handled) {
  if (!res_ || !res_->cq) return {};
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int n, res_->cq->poll(wcs_));
    if (handled != nullptr) *handled += n;
    for (int i = 0; i < n; ++i) CONDUIT_RETURN_IF_ERROR(handle_completion(wcs_[i]));
    if (n < static_cast<int>(std::size(wcs_))) return {};
  }
}

// Arms the CQ for the next event: solicited completions only once the peer marks its batches
// (kFeatureSolicited), unless we are waiting for a send completion ourselves.
Status RdmaConnection::arm_cq() {
  armed_solicited_ = solicited() && !needs_send_events();
  cq_armed_ = true;
  return res_->cq->arm(armed_solicited_);
}

// We now wait for a send completion: widen a solicited-only arming to every completion, and
// poll once more before sleeping for completions that arrived while it was narrow (they
// raised no event).
void RdmaConnection::ensure_send_events() {
  if (!armed_solicited_ || !res_) return;
  armed_solicited_ = false;
  if (Status s = res_->cq->arm(false); !s.ok()) return fail(s);
  poll_again_ = true;
  ctx_->mark_pending(this);
}

// A completion event.  Event mode re-arms at once; a polling connection leaves the CQ
// unarmed and polls it from the before-sleep hook until its window closes (then it arms
// again: arm_for_sleep), so that while traffic is dense no event (a system call on each
// side) is raised at all.
void RdmaConnection::on_cq_event(int events) {
  if (!res_) return;
  Status s;
  stats_.wakeups += static_cast<uint64_t>(events);
  const bool poll = polling();
  if (!poll) {
    s = arm_cq();
  } else {
    cq_armed_ = armed_solicited_ = false;  // the event used the arming up
    ctx_->mark_pending(this);              // the hook polls, and arms before the loop sleeps
  }
  int handled = 0;
  if (s.ok()) s = process_cq(&handled);
  if (!s.ok()) {
    fail(s);
  } else if (tx_unposted()) {
    (void)flush(true);  // completions may have freed send-queue slots
  }
  if (live() && armed_solicited_ && needs_send_events()) ensure_send_events();
  if (poll && handled != 0) spin_.on_work(monotonic_ns());
  deliver();
}

}  // namespace conduit::transport::rdma
