#include <google/protobuf/descriptor.h>

#include "client_impl.h"
#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "stream_core.h"
#include "wire.h"

namespace conduit::rpc {

using detail::ClientCall;
using detail::Frame;
using detail::MethodKind;
using wire::FrameType;

std::string_view channel_state_name(ChannelState s) {
  switch (s) {
    case ChannelState::kIdle: return "idle";
    case ChannelState::kConnecting: return "connecting";
    case ChannelState::kReady: return "ready";
    case ChannelState::kFailed: return "failed";
    case ChannelState::kClosed: return "closed";
  }
  return "?";
}

// --- ClientConn ------------------------------------------------------------------------------

ClientConn::~ClientConn() {
  *alive_ = false;
  if (connect_timer_ != 0) ch_.loop_.cancel(connect_timer_);
  for (auto& [id, p] : pings_)
    if (p.second != 0) ch_.loop_.cancel(p.second);
}

void ClientConn::set_state(ChannelState s) {
  if (state_ == s) return;
  state_ = s;
  ch_.conn_state(this, s);
}

Status ClientConn::connect() {
  set_state(ChannelState::kConnecting);
  std::weak_ptr<bool> alive = alive_;
  auto c = transport::connect(ch_.loop_, ch_.url_, [this, alive](transport::Connection&, Status s) {
    if (alive.expired()) return;
    if (connect_timer_ != 0) {
      ch_.loop_.cancel(connect_timer_);
      connect_timer_ = 0;
    }
    if (!s.ok()) {
      link_->close(s.annotate("rpc: connect " + ch_.url_));
      return;
    }
    // A loopback connect to a free port in the ephemeral range can meet itself (TCP
    // simultaneous open) and would then answer its own HELLO and PINGs.
    if (link_->connection().caps().transport == "tcp" &&
        link_->connection().local_address() == link_->connection().peer_address()) {
      link_->close(Status(Code::kUnavailable, "rpc: connect " + ch_.url_ + ": connected to itself (nobody listens)"));
      return;
    }
    if (memory::BlockPool* p = link_->connection().pool()) ch_.set_pool(p->weak_from_this().lock());
    set_state(ChannelState::kReady);
    for (auto& [id, call] : calls) call->cntl->reached_server_ = true;
    link_->start();
  });
  if (!c.ok()) {
    state_ = ChannelState::kFailed;
    return c.status();
  }
  detail::LinkOptions lo;
  lo.stream_window = ch_.opts_.stream_window;
  lo.limits.max_payload = ch_.opts_.max_response_bytes;
  lo.hold_bytes = ch_.opts_.attachment_hold_bytes;
  lo.role = "rpc client";
  link_ = std::make_unique<detail::Link>(std::move(*c), this, lo);
  if (ch_.opts_.connect_timeout_ms != 0) {
    connect_timer_ = ch_.loop_.run_after(ch_.opts_.connect_timeout_ms * 1'000'000, [this, alive] {
      if (alive.expired()) return;
      connect_timer_ = 0;
      if (state_ == ChannelState::kConnecting)
        link_->close(Status(Code::kTimedOut, "rpc: connect " + ch_.url_ + ": no connection after " +
                                                 std::to_string(ch_.opts_.connect_timeout_ms) + " ms"));
    });
  }
  return Status::Ok();
}

void ClientConn::ping(std::function<void(Status)> cb, uint64_t timeout_ns) {
  if (!link_ || !link_->open()) {
    cb(Status(Code::kUnavailable, "rpc: not connected"));
    return;
  }
  const uint64_t id = next_ping_++;
  std::weak_ptr<bool> alive = alive_;
  const reactor::TimerId t = ch_.loop_.run_after(timeout_ns, [this, alive, id] {
    if (alive.expired()) return;
    auto it = pings_.find(id);
    if (it == pings_.end()) return;
    auto fn = std::move(it->second.first);
    pings_.erase(it);
    fn(Status(Code::kTimedOut, "rpc: no PONG from " + ch_.url_));
  });
  pings_.emplace(id, std::make_pair(std::move(cb), t));
  link_->send_control(FrameType::kPing, 0, id);
}

void ClientConn::on_peer_hello() {
  // Streams opened before the server's HELLO get their initial credit now.
  for (auto& [id, c] : calls)
    if (c->stream && c->stream->core_->credit == 0) c->stream->core_->add_credit(link_->peer_window());
}

void ClientConn::on_oversized(const wire::FrameHeader& h) {
  auto it = calls.find(h.call_id);
  if (it == calls.end()) return;
  ch_.complete(it->second, ErrorCode::kResourceExhausted,
               "rpc client: " + std::string(wire::frame_type_name(h.type)) + " of " +
                   std::to_string(uint64_t{h.body_len} + h.attach_len) + " bytes exceeds max_response_bytes " +
                   std::to_string(ch_.opts_.max_response_bytes));
  link_->send_control(FrameType::kCancel, h.call_id, 0);
}

void ClientConn::on_frame(Frame& f) {
  switch (f.h.type) {
    case FrameType::kResponse: {
      auto it = calls.find(f.h.call_id);
      if (it == calls.end()) return;  // timed out or cancelled: the answer is late
      ClientCall* c = it->second;
      std::string message;
      Status ms = wire::decode_meta(f.meta, &c->cntl->response_meta_, &message);
      if (!ms.ok()) {
        link_->close_with(ErrorCode::kInvalidArgument, ms.annotate("RESPONSE"));
        return;
      }
      ErrorCode code = error_code_from_wire(f.h.code);
      if (code == ErrorCode::kOk) {
        // The caller's Controller outlives this frame: a view is copied (Attachment's move).
        c->cntl->response_attachment_ = std::move(f.attachment);
        if (c->stream) {
          if (c->kind == MethodKind::kClientStream) {
            detail::StreamCore& sc = *c->stream->core_;
            sc.remote_done = false;
            if (sc.in_msg->ParseFromArray(f.body.data(), static_cast<int>(f.body.size()))) {
              if (sc.on_message) sc.on_message(*sc.in_msg, c->cntl->response_attachment_);
            } else {
              code = ErrorCode::kInternal;
              message = "rpc client: cannot parse the response as " + sc.in_msg->GetTypeName();
            }
          }
        } else if (c->resp != nullptr && !c->resp->ParseFromArray(f.body.data(), static_cast<int>(f.body.size()))) {
          code = ErrorCode::kInternal;
          message = "rpc client: cannot parse the response as " + c->resp->GetTypeName();
        }
      }
      ch_.complete(c, code, std::move(message));
      return;
    }
    case FrameType::kMessage: {
      auto it = calls.find(f.h.call_id);
      if (it == calls.end() || !it->second->stream) return;
      ClientCall* c = it->second;
      if (c->kind != MethodKind::kServerStream && c->kind != MethodKind::kBidi) {
        link_->close_with(ErrorCode::kInvalidArgument, Status(Code::kProtocolError, "MESSAGE from the server on a call without a response stream"));
        return;
      }
      Status s = c->stream->core_->on_frame_message(f);
      if (!s.ok()) link_->close_with(ErrorCode::kInvalidArgument, s);
      return;
    }
    case FrameType::kWindow: {
      auto it = calls.find(f.h.call_id);
      if (it != calls.end() && it->second->stream) it->second->stream->core_->add_credit(f.h.arg);
      return;
    }
    case FrameType::kHalfClose:
      return;  // the server's side ends with RESPONSE
    case FrameType::kPong: {
      auto it = pings_.find(f.h.arg);
      if (it == pings_.end()) return;
      auto fn = std::move(it->second.first);
      ch_.loop_.cancel(it->second.second);
      pings_.erase(it);
      fn(Status::Ok());
      return;
    }
    case FrameType::kGoaway: {
      std::string message;
      (void)wire::decode_meta(f.meta, nullptr, &message);
      const ErrorCode code = error_code_from_wire(f.h.code);
      if (code == ErrorCode::kUnavailable) {
        // Graceful: calls in flight finish here; new calls go to a new connection.
        CONDUIT_LOG(kDebug) << "rpc client: " << ch_.url_ << " going away: " << message;
        retired = true;
        ch_.conn_closed(this, Status(Code::kUnavailable, message));
        return;
      }
      CONDUIT_LOG(kWarn) << "rpc client: " << ch_.url_ << " closed the connection: " << message;
      fail_all(code, "rpc: server " + ch_.url_ + ": " + message);
      link_->close(Status(to_status_code(code), message));
      return;
    }
    default:
      link_->close_with(ErrorCode::kInvalidArgument,
                        Status(Code::kProtocolError, "unexpected " + std::string(wire::frame_type_name(f.h.type)) + " from a server"));
      return;
  }
}

void ClientConn::fail_all(ErrorCode code, const std::string& text) {
  std::vector<ClientCall*> v;
  v.reserve(calls.size());
  for (auto& [id, c] : calls) v.push_back(c);
  for (ClientCall* c : v) ch_.complete(c, code, text);
}

void ClientConn::on_closed(const Status& why) {
  const bool was_ready = state_ == ChannelState::kReady;
  set_state(ChannelState::kFailed);
  fail_all(ErrorCode::kUnavailable, "rpc: " + std::string(why.message()));
  auto pings = std::move(pings_);
  pings_.clear();
  for (auto& [id, p] : pings) {
    ch_.loop_.cancel(p.second);
    p.first(Status(Code::kUnavailable, why.message()));
  }
  if (!was_ready) {
    ch_.last_fail_ns_ = monotonic_ns();
    ch_.last_fail_ = why;
  }
  ch_.conn_closed(this, why);
}

void ClientConn::close(const Status& why) {
  if (link_) link_->close(why);
}

// --- ChannelImpl -------------------------------------------------------------------------------

ChannelImpl::~ChannelImpl() {
  *alive_ = false;
  listener_ = nullptr;
  std::vector<ClientCall*> v;
  for (auto& [id, c] : by_id_) v.push_back(c);
  for (ClientCall* c : v) complete(c, ErrorCode::kCancelled, "rpc: channel destroyed");
  for (auto& c : conns_)
    if (c) c->close(Status(Code::kCancelled, "rpc: channel destroyed"));
  for (auto& c : retired_) c->close(Status(Code::kCancelled, "rpc: channel destroyed"));
}

Status ChannelImpl::init() {
  if (opts_.connections < 1 || opts_.connections > 256)
    return Status(Code::kInvalidArgument, "rpc channel: connections must be 1..256");
  if (opts_.max_inflight < 1) return Status(Code::kInvalidArgument, "rpc channel: max_inflight must be >= 1");
  if (opts_.stream_window < 4096) return Status(Code::kInvalidArgument, "rpc channel: stream_window must be >= 4096");
  if (transport::find_transport(url_.substr(0, url_.find("://"))) == nullptr || url_.find("://") == std::string::npos)
    return Status(Code::kInvalidArgument, "rpc channel: no transport for " + url_);
  conns_.resize(opts_.connections);
  return Status::Ok();
}

uint32_t ChannelImpl::method_id(const google::protobuf::MethodDescriptor* md) {
  auto it = ids_.find(md);
  if (it != ids_.end()) return it->second;
  const uint32_t id = wire::method_id(md->service()->full_name() + "/" + md->name());
  ids_.emplace(md, id);
  return id;
}

void ChannelImpl::conn_state(ClientConn* c, ChannelState s) {
  if (c->slot() != 0 || c->retired) return;
  state_.store(s, std::memory_order_relaxed);
  if (listener_) listener_(s);
}

ClientConn* ChannelImpl::pick(bool ignore_backoff, Status* why) {
  const size_t slot = conns_.size() == 1 ? 0 : rr_++ % conns_.size();
  std::unique_ptr<ClientConn>& c = conns_[slot];
  if (c && c->usable()) return c.get();
  if (c) retire(c.get());
  if (!ignore_backoff && last_fail_ns_ != 0 && monotonic_ns() - last_fail_ns_ < opts_.reconnect_backoff_ms * 1'000'000) {
    *why = Status(Code::kUnavailable, "rpc: " + url_ + " unreachable (last attempt failed " +
                                          std::to_string((monotonic_ns() - last_fail_ns_) / 1'000'000) +
                                          " ms ago: " + std::string(last_fail_.message()) + ")");
    return nullptr;
  }
  auto fresh = std::make_unique<ClientConn>(*this, slot);
  Status s = fresh->connect();
  if (!s.ok()) {
    last_fail_ns_ = monotonic_ns();
    last_fail_ = s;
    *why = Status(Code::kUnavailable, "rpc: connect " + url_ + ": " + std::string(s.message()));
    return nullptr;
  }
  c = std::move(fresh);
  return c.get();
}

void ChannelImpl::retire(ClientConn* c) {
  for (auto& slot : conns_) {
    if (slot.get() != c) continue;
    c->retired = true;
    retired_.push_back(std::move(slot));
    break;
  }
}

void ChannelImpl::conn_closed(ClientConn* c, const Status&) {
  retire(c);
  // Free retired connections without calls, later: we may be inside their callbacks.
  std::weak_ptr<bool> alive = alive_;
  loop_.post([this, alive] {
    if (alive.expired()) return;
    std::erase_if(retired_, [](const std::unique_ptr<ClientConn>& r) {
      return r->calls.empty() && (r->link() == nullptr || !r->link()->open());
    });
  });
}

void ChannelImpl::start_call(const google::protobuf::MethodDescriptor* md, Controller* cntl,
                             const google::protobuf::Message* req, google::protobuf::Message* resp,
                             std::function<void()> done, std::shared_ptr<ClientStream>* stream_out) {
  cntl->code_ = ErrorCode::kOk;
  cntl->error_text_.clear();
  cntl->response_meta_.clear();
  cntl->response_attachment_.clear();
  cntl->remote_ = url_;
  cntl->reached_server_ = false;
  auto* c = new ClientCall;
  c->cntl = cntl;
  c->resp = resp;
  c->done = std::move(done);
  c->md = md;
  c->kind = detail::method_kind(md);
  c->start_ns = monotonic_ns();
  c->id = next_id_++;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  by_id_.emplace(c->id, c);
  auto fail = [&](ErrorCode code, std::string text) { complete(c, code, std::move(text)); };

  const std::string method = md->service()->full_name() + "/" + md->name();
  for (const auto& ic : opts_.interceptors) {
    Status s = ic->before(method, *cntl);
    ++c->interceptors_run;
    if (!s.ok()) return fail(from_status_code(s.code()), std::string(s.message()));
  }
  if (cntl->cancel_ && cntl->cancel_->cancelled()) return fail(ErrorCode::kCancelled, "rpc: cancelled before it started");
  if (in_flight_.load(std::memory_order_relaxed) > opts_.max_inflight)
    return fail(ErrorCode::kResourceExhausted,
                "rpc: " + std::to_string(opts_.max_inflight) + " calls in flight on " + url_ + " (max_inflight)");
  Status why;
  ClientConn* conn = pick(false, &why);
  if (conn == nullptr) return fail(ErrorCode::kUnavailable, std::string(why.message()));
  if (conn->link()->queued_bytes() > opts_.max_queued_bytes)
    return fail(ErrorCode::kResourceExhausted, "rpc: " + std::to_string(conn->link()->queued_bytes()) +
                                                   " bytes not yet sent to " + url_ + " (max_queued_bytes)");
  const int64_t timeout_us = cntl->timeout_us_ >= 0 ? cntl->timeout_us_ : opts_.timeout_ms * 1000;
  wire::FrameHeader h;
  h.type = FrameType::kRequest;
  h.call_id = c->id;
  h.code = method_id(md);
  h.arg = static_cast<uint64_t>(timeout_us);
  const bool one_request = c->kind == MethodKind::kUnary || c->kind == MethodKind::kServerStream;
  if (one_request) h.flags |= wire::kFlagEndStream;
  if (cntl->idempotent_) h.flags |= wire::kFlagIdempotent;
  Status s = conn->link()->send(h, &cntl->request_meta_, {}, one_request ? req : nullptr,
                                cntl->request_attachment_.empty() ? nullptr : &cntl->request_attachment_);
  if (!s.ok()) return fail(from_status_code(s.code()), std::string(s.message()));
  c->conn = conn;
  cntl->reached_server_ = conn->state() == ChannelState::kReady;
  conn->calls.emplace(c->id, c);
  const uint64_t id = c->id;
  std::weak_ptr<bool> alive = alive_;
  if (timeout_us > 0) {
    c->timer = loop_.run_after(static_cast<uint64_t>(timeout_us) * 1000, [this, alive, id, timeout_us] {
      if (alive.expired()) return;
      auto it = by_id_.find(id);
      if (it == by_id_.end()) return;
      it->second->timer = 0;
      cancel_call(id, ErrorCode::kDeadlineExceeded,
                  "rpc: deadline of " + std::to_string(timeout_us / 1000) + " ms exceeded calling " + url_);
    });
  }
  if (c->kind != MethodKind::kUnary) {
    detail::Link* link = conn->link();
    // The stream parses what arrives into a message of its own; `resp` was the template.
    auto core = std::make_unique<detail::StreamCore>(link, id, std::unique_ptr<google::protobuf::Message>(resp->New()),
                                                     opts_.stream_window, link->peer_hello() ? link->peer_window() : 0);
    c->resp = nullptr;
    core->local_done = one_request;
    core->cancel_fn = [this, alive, id] {
      if (!alive.expired()) cancel_call(id, ErrorCode::kCancelled, "rpc: stream cancelled by the client");
    };
    core->close_send_fn = [link, id]() -> Status {
      if (!link->open()) return Status(Code::kClosed, "rpc stream: connection closed");
      link->send_control(FrameType::kHalfClose, id, 0);
      return Status::Ok();
    };
    c->stream = std::shared_ptr<ClientStream>(new ClientStream(std::move(core)));
    if (stream_out != nullptr) *stream_out = c->stream;
  }
  cntl->ensure_cancel_hook();  // made on the caller's thread already unless it is this one
  reactor::EventLoop* loop = &loop_;
  cntl->cancel_->set_action([this, loop, alive, id] {
    auto run = [this, alive, id] {
      if (!alive.expired()) cancel_call(id, ErrorCode::kCancelled, "rpc: cancelled by the client");
    };
    if (on_loop()) {
      run();
    } else {
      loop->post(run);
    }
  });
}

void ChannelImpl::cancel_call(uint64_t id, ErrorCode code, const std::string& text) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  ClientCall* c = it->second;
  if (c->conn != nullptr && c->conn->link() != nullptr && c->conn->link()->open())
    c->conn->link()->send_control(FrameType::kCancel, id, 0);
  complete(c, code, text);
}

void ChannelImpl::complete(ClientCall* c, ErrorCode code, std::string text) {
  by_id_.erase(c->id);
  if (c->conn != nullptr) c->conn->calls.erase(c->id);
  if (c->timer != 0) loop_.cancel(c->timer);
  Controller* cntl = c->cntl;
  if (code != ErrorCode::kOk) {
    cntl->code_ = code;
    cntl->error_text_ = text.empty() ? std::string(error_code_name(code)) : std::move(text);
  }
  cntl->latency_us_ = (monotonic_ns() - c->start_ns) / 1000;
  if (cntl->cancel_) cntl->cancel_->finish();
  const std::string method = c->md->service()->full_name() + "/" + c->md->name();
  for (size_t i = c->interceptors_run; i-- > 0;) opts_.interceptors[i]->after(method, *cntl);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  std::shared_ptr<ClientStream> stream = std::move(c->stream);
  std::function<void()> done = std::move(c->done);
  delete c;
  if (stream) {
    detail::StreamCore& sc = *stream->core_;
    sc.end();
    if (sc.on_close) {
      auto fn = std::move(sc.on_close);
      fn(cntl->status());
    }
  }
  if (done) done();
}

void ChannelImpl::probe(std::function<void(Status)> cb) {
  Status why;
  ClientConn* c = pick(true, &why);
  if (c == nullptr) {
    cb(why);
    return;
  }
  const uint64_t t = std::max<uint64_t>(opts_.connect_timeout_ms, 1) * 1'000'000;
  c->ping(std::move(cb), t);
}

// --- Channel facade --------------------------------------------------------------------------------

Channel::Channel(std::unique_ptr<ChannelImpl> impl) : impl_(std::move(impl)) {}

Channel::~Channel() {
  if (impl_->own_) {
    auto group = std::move(impl_->own_);
    std::promise<void> p;
    ChannelImpl* raw = impl_.release();
    group->loop(0).post([raw, &p] {
      delete raw;
      p.set_value();
    });
    p.get_future().wait();
    group->stop();
  }
}

Result<std::unique_ptr<Channel>> Channel::create(reactor::EventLoop& loop, std::string_view url,
                                                 const ChannelOptions& options) {
  auto impl = std::make_unique<ChannelImpl>(loop, std::string(url), options);
  CONDUIT_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

Result<std::unique_ptr<Channel>> Channel::create(std::string_view url, const ChannelOptions& options) {
  if (options.poll_us > 100000) return Status(Code::kInvalidArgument, "rpc channel: poll_us must be 0..100000");
  reactor::LoopOptions lo;
  lo.poll_us = options.poll_us;
  CONDUIT_ASSIGN_OR_RETURN(auto group, reactor::LoopGroup::start(1, lo));
  auto impl = std::make_unique<ChannelImpl>(group->loop(0), std::string(url), options);
  CONDUIT_RETURN_IF_ERROR(impl->init());
  std::promise<std::thread::id> tid;
  group->loop(0).post([&tid] { tid.set_value(std::this_thread::get_id()); });
  impl->own_tid_ = tid.get_future().get();
  impl->own_ = std::move(group);
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

void Channel::CallMethod(const google::protobuf::MethodDescriptor* method, google::protobuf::RpcController* controller,
                         const google::protobuf::Message* request, google::protobuf::Message* response,
                         google::protobuf::Closure* done) {
  auto* cntl = dynamic_cast<Controller*>(controller);
  if (cntl == nullptr) {
    controller->SetFailed("conduit::rpc::Channel needs a conduit::rpc::Controller");
    if (done != nullptr) done->Run();
    return;
  }
  if (done != nullptr) {
    call(method, cntl, request, response, [done] { done->Run(); });
    return;
  }
  reactor::EventLoop& loop = impl_->loop_;
  cntl->ensure_cancel_hook();
  if (impl_->on_loop()) {
    bool finished = false;
    impl_->start_call(method, cntl, request, response, [&finished] { finished = true; }, nullptr);
    while (!finished) {
      Status s = loop.run_once(-1);
      if (!s.ok()) break;
    }
    return;
  }
  call_future(method, cntl, request, response).wait();
}

void Channel::call(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                   const google::protobuf::Message* request, google::protobuf::Message* response,
                   std::function<void()> done) {
  cntl->ensure_cancel_hook();
  reactor::EventLoop& loop = impl_->loop_;
  if (impl_->on_loop()) {
    impl_->start_call(method, cntl, request, response, std::move(done), nullptr);
    return;
  }
  ChannelImpl* impl = impl_.get();
  loop.post([impl, method, cntl, request, response, done = std::move(done)]() mutable {
    impl->start_call(method, cntl, request, response, std::move(done), nullptr);
  });
}

std::future<Status> Channel::call_future(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                                         const google::protobuf::Message* request, google::protobuf::Message* response) {
  auto p = std::make_shared<std::promise<Status>>();
  std::future<Status> f = p->get_future();
  call(method, cntl, request, response, [p, cntl] { p->set_value(cntl->status()); });
  return f;
}

Result<std::shared_ptr<ClientStream>> Channel::open_stream(const google::protobuf::MethodDescriptor* method,
                                                           Controller* cntl, const google::protobuf::Message* request) {
  const MethodKind kind = detail::method_kind(method);
  if (kind == MethodKind::kUnary) return Status(Code::kInvalidArgument, "rpc: " + method->full_name() + " is not a streaming method");
  if ((kind == MethodKind::kServerStream) != (request != nullptr))
    return Status(Code::kInvalidArgument, "rpc: server-streaming methods take the request in open_stream; client/bidi streams take nullptr");
  std::shared_ptr<ClientStream> out;
  std::unique_ptr<google::protobuf::Message> proto(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->output_type())->New());
  impl_->start_call(method, cntl, request, proto.get(), nullptr, &out);
  if (!out) return cntl->status();
  // The stream parses into its own message; the prototype instance was only the template.
  return out;
}

void Channel::probe(std::function<void(Status)> cb) { impl_->probe(std::move(cb)); }
void Channel::set_state_listener(std::function<void(ChannelState)> fn) { impl_->listener_ = std::move(fn); }
std::shared_ptr<memory::BlockPool> Channel::pool() const {
  std::lock_guard<std::mutex> lock(impl_->pool_mu_);
  return impl_->pool_;
}
ChannelState Channel::state() const { return impl_->state_.load(std::memory_order_relaxed); }
const std::string& Channel::url() const { return impl_->url_; }
size_t Channel::in_flight() const { return impl_->in_flight_.load(std::memory_order_relaxed); }
reactor::EventLoop& Channel::loop() { return impl_->loop_; }
const ChannelOptions& Channel::options() const { return impl_->opts_; }

}  // namespace conduit::rpc
