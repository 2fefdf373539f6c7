// ServerConn: one accepted connection of an rpc::Server: requests in, responses out.
#include "attachment_access.h"
#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "server_impl.h"
#include "stream_core.h"

namespace conduit::rpc {

using detail::Frame;
using detail::MethodInfo;
using detail::MethodKind;
using detail::ServerCall;
using wire::FrameType;

void ServerCall::Done::Run() {
  ServerCall* c = call;
  reactor::EventLoop& loop = c->conn->loop();
  if (loop.in_loop_thread()) {
    c->conn->finish(c);
  } else {
    loop.post([c] { c->conn->finish(c); });
  }
}

ServerConn::~ServerConn() = default;

void ServerConn::start(std::unique_ptr<transport::Connection> c) {
  transport_ = std::string(c->caps().transport);
  peer_ = c->peer_address();
  detail::LinkOptions lo;
  lo.stream_window = srv_.options().stream_window;
  lo.limits.max_payload = srv_.options().max_request_bytes;
  lo.hold_bytes = srv_.options().attachment_hold_bytes;
  lo.role = "rpc server";
  if (memory::BlockPool* p = c->pool()) pool_ = p->weak_from_this().lock();
  link_ = std::make_unique<detail::Link>(std::move(c), this, lo);
  link_->start();
}

void ServerConn::fill(ConnectionStatus* out) const {
  if (!link_) return;
  const transport::Connection& c = link_->connection();
  const transport::ConnSnapshot snap = c.snapshot();
  out->set_transport(snap.transport);
  out->set_local(snap.local);
  out->set_peer(peer_);
  out->set_extensions(snap.extensions);
  out->set_bytes_read(snap.stats.bytes_read);
  out->set_bytes_written(snap.stats.bytes_written);
  out->set_state(snap.state);
  out->set_fallback(snap.fallback);
  out->set_error(snap.error);
  out->set_reads(snap.stats.reads);
  out->set_writes(snap.stats.writes);
  out->set_wakeups(snap.stats.wakeups);
  out->set_pinned_bytes(snap.stats.pinned_bytes);
  out->set_credits(snap.credits);
  out->set_qp_state(snap.qp_state);
  out->set_qpn(snap.qpn);
  out->set_device(snap.device);
  for (const auto& [name, value] : snap.device_counters) (*out->mutable_device_counters())[name] = value;
  out->set_in_flight(calls_.size());
  out->set_loop(static_cast<uint32_t>(loop_index_));
  const detail::ReaderStats& rs = link_->reader_stats();
  out->set_attachments(rs.attachments);
  out->set_attachment_views(rs.views);
  out->set_attachments_copied_out(rs.copied_out);
  out->set_views_kept(rs.views_kept);
  out->set_zero_copy_pool(pool_ != nullptr);
  out->set_attachment_bytes_in(rs.attachment_bytes);
  out->set_attachment_bytes_copied_in(rs.copied_bytes);
  const detail::SendStats& ss = link_->send_stats();
  out->set_attachments_sent(ss.attachments);
  out->set_attachment_bytes_sent(ss.attachment_bytes);
  out->set_attachment_bytes_copied_sent(ss.copied_bytes);
  out->set_attachment_bytes_pool_sent(ss.pool_bytes);
}

void ServerConn::reject(uint64_t id, ErrorCode code, const std::string& text) {
  if (closed_) return;
  wire::FrameHeader h;
  h.type = FrameType::kResponse;
  h.call_id = id;
  h.code = static_cast<uint32_t>(code);
  (void)link_->send(h, nullptr, text, nullptr, nullptr);
}

void ServerConn::on_oversized(const wire::FrameHeader& h) {
  const std::string text = "rpc server: " + std::string(wire::frame_type_name(h.type)) + " of " +
                           std::to_string(uint64_t{h.body_len} + h.attach_len) +
                           " bytes (body + attachment) exceeds max_request_bytes " +
                           std::to_string(srv_.options().max_request_bytes);
  CONDUIT_LOG(kDebug) << text;
  if (h.type == FrameType::kRequest) {
    reject(h.call_id, ErrorCode::kResourceExhausted, text);
  } else if (ServerCall* call = find(h.call_id); call != nullptr) {
    // An oversized stream message ends its call; the connection goes on.
    call->cntl.SetFailed(ErrorCode::kResourceExhausted, text);
    cancel_call(call, ErrorCode::kResourceExhausted);
    reject(h.call_id, ErrorCode::kResourceExhausted, text);
  }
}

void ServerConn::on_frame(Frame& f) {
  switch (f.h.type) {
    case FrameType::kRequest:
      on_request(f);
      return;
    case FrameType::kMessage: {
      ServerCall* call = find(f.h.call_id);
      if (call == nullptr || !call->stream) return;  // finished or cancelled meanwhile: drop
      if (call->method->kind == MethodKind::kUnary || call->method->kind == MethodKind::kServerStream) {
        link_->close_with(ErrorCode::kInvalidArgument,
                          Status(Code::kProtocolError, "MESSAGE from the client on a call that takes one request"));
        return;
      }
      Status s = call->stream->core_->on_frame_message(f);
      if (!s.ok()) link_->close_with(ErrorCode::kInvalidArgument, s);
      return;
    }
    case FrameType::kHalfClose: {
      ServerCall* call = find(f.h.call_id);
      if (call != nullptr && call->stream) call->stream->core_->on_remote_half_close();
      return;
    }
    case FrameType::kCancel: {
      ServerCall* call = find(f.h.call_id);
      if (call != nullptr) cancel_call(call, ErrorCode::kCancelled);
      return;
    }
    case FrameType::kWindow: {
      ServerCall* call = find(f.h.call_id);
      if (call != nullptr && call->stream) call->stream->core_->add_credit(f.h.arg);
      return;
    }
    case FrameType::kPong:
      return;
    case FrameType::kGoaway:
      close_now(Status(Code::kClosed, "rpc server: client sent GOAWAY"));
      return;
    default:
      link_->close_with(ErrorCode::kInvalidArgument,
                        Status(Code::kProtocolError, "unexpected " + std::string(wire::frame_type_name(f.h.type)) +
                                                         " from a client"));
      return;
  }
}

void ServerConn::on_request(Frame& f) {
  const uint64_t id = f.h.call_id;
  if (find(id) != nullptr) {
    link_->close_with(ErrorCode::kInvalidArgument, Status(Code::kProtocolError, "REQUEST reuses a call id in flight"));
    return;
  }
  MethodInfo* m = srv_.find_method(f.h.code);
  if (m == nullptr) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "rpc server: no method with id 0x%08x", f.h.code);
    reject(id, ErrorCode::kUnimplemented, buf);
    return;
  }
  if (srv_.going_away() || goaway_sent_) {
    reject(id, ErrorCode::kUnavailable, "rpc server: shutting down");
    return;
  }
  const bool streaming_in = m->kind == MethodKind::kClientStream || m->kind == MethodKind::kBidi;
  if (m->max_concurrency != 0 && m->in_flight.load(std::memory_order_relaxed) >= m->max_concurrency) {
    m->rejected.fetch_add(1, std::memory_order_relaxed);
    reject(id, ErrorCode::kResourceExhausted,
           "rpc server: " + m->full_name + " has reached its max_concurrency of " + std::to_string(m->max_concurrency));
    return;
  }
  if (!srv_.try_acquire_server_slot()) {
    m->rejected.fetch_add(1, std::memory_order_relaxed);
    reject(id, ErrorCode::kResourceExhausted,
           "rpc server: max_concurrency of " + std::to_string(srv_.options().max_concurrency) + " calls reached");
    return;
  }
  auto call = std::make_unique<ServerCall>();
  call->counted_server = true;
  call->conn = shared_from_this();
  call->method = m;
  call->id = id;
  call->start_ns = monotonic_ns();
  call->cntl.transport_ = transport_;
  call->cntl.remote_ = peer_;
  call->cntl.loop_ = &loop_;
  call->cntl.pool_ = pool_;
  call->cntl.cancel_ = std::make_shared<Controller::CancelHook>();
  std::string ignored;
  Status ms = wire::decode_meta(f.meta, &call->cntl.request_meta_, &ignored);
  if (!ms.ok()) {
    srv_.release_server_slot();
    link_->close_with(ErrorCode::kInvalidArgument, ms.annotate("REQUEST"));
    return;
  }
  detail::AttachmentAccess::take(call->cntl.request_attachment_, f.attachment);
  call->req.reset(m->service->GetRequestPrototype(m->md).New());
  call->resp.reset(m->service->GetResponsePrototype(m->md).New());
  if (!streaming_in && !call->req->ParseFromArray(f.body.data(), static_cast<int>(f.body.size()))) {
    srv_.release_server_slot();
    reject(id, ErrorCode::kInvalidArgument, "rpc server: cannot parse the request as " + call->req->GetTypeName());
    return;
  }
  m->in_flight.fetch_add(1, std::memory_order_relaxed);
  srv_.in_flight_.fetch_add(1, std::memory_order_relaxed);
  ServerCall* c = call.release();
  calls_.emplace(id, c);
  if (f.h.arg != 0) {
    c->cntl.deadline_ns_ = c->start_ns + f.h.arg * 1000;
    std::weak_ptr<ServerConn> self = weak_from_this();
    c->deadline_timer = loop_.run_after(f.h.arg * 1000, [this, self, id] {
      if (self.expired()) return;
      if (ServerCall* x = find(id); x != nullptr) {
        x->deadline_timer = 0;
        cancel_call(x, ErrorCode::kDeadlineExceeded);
      }
    });
  }
  if (m->kind != MethodKind::kUnary) {
    const int64_t credit = link_->peer_hello() ? link_->peer_window() : 0;
    auto core = std::make_unique<detail::StreamCore>(
        link_.get(), id, std::unique_ptr<google::protobuf::Message>(c->req->New()), srv_.options().stream_window, credit);
    if (!streaming_in) core->remote_done = true;
    c->stream.reset(new ServerStream(std::move(core)));
    c->cntl.stream_ = c->stream.get();
    if (streaming_in && (f.h.flags & wire::kFlagEndStream) != 0) c->stream->core_->half_close_pending = true;
  }
  // Unary and server-streaming calls may run on a worker; streams with input stay here.
  // A view of the receive memory ends with this frame's dispatch: a handler elsewhere or
  // later gets private bytes (docs/PROTOCOL.md "Attachments").
  if (srv_.workers() != nullptr && m->kind == MethodKind::kUnary) {
    detail::AttachmentAccess::make_private(c->cntl.request_attachment_);
    if (srv_.workers()->push([c] { c->conn->run_handler(c); })) return;
    c->cntl.SetFailed(ErrorCode::kResourceExhausted, "rpc server: worker queue full");
    finish(c);
    return;
  }
  run_handler(c);
  // Still running (an asynchronous handler): it keeps the attachment past the view's end.
  if (auto it = calls_.find(id); it != calls_.end() && it->second == c)
    detail::AttachmentAccess::make_private(c->cntl.request_attachment_);
}

// On the handler's thread (loop or worker).
void ServerConn::run_handler(ServerCall* c) {
  const CallInfo info{c->method->full_name, transport_, peer_};
  for (const auto& ic : srv_.interceptors()) {
    Status s = ic->before(info, c->cntl);
    ++c->interceptors_run;
    if (!s.ok()) {
      c->cntl.SetFailed(from_status_code(s.code()), std::string(s.message()));
      c->done.Run();
      return;
    }
  }
  if (c->cntl.IsCanceled()) {  // the deadline passed while queued
    c->cntl.SetFailed(ErrorCode::kDeadlineExceeded, "rpc server: deadline passed before the handler ran");
    c->done.Run();
    return;
  }
  c->method->service->CallMethod(c->method->md, &c->cntl, c->req.get(), c->resp.get(), &c->done);
}

void ServerConn::cancel_call(ServerCall* c, ErrorCode why) {
  if (c->cancelled) return;
  c->cancelled = true;
  if (why == ErrorCode::kDeadlineExceeded) {
    CONDUIT_LOG(kDebug) << "rpc server: " << c->method->full_name << " call " << c->id << " passed its deadline";
  }
  if (c->stream) c->stream->core_->end();
  c->cntl.cancel_->fire();
}

void ServerConn::orphan_calls(std::vector<ServerCall*>* out) {
  for (auto& [id, c] : calls_) {
    c->orphaned = true;
    if (c->deadline_timer != 0) loop_.cancel(c->deadline_timer);
    c->deadline_timer = 0;
    if (c->stream) c->stream->core_->end();
    out->push_back(c);
  }
  calls_.clear();
  link_.reset();
}

void ServerConn::finish(ServerCall* c) {
  if (c->finished || c->orphaned) return;  // done->Run() twice is the handler's bug; ignore the second
  c->finished = true;
  const uint64_t lat = monotonic_ns() - c->start_ns;
  const CallInfo info{c->method->full_name, transport_, peer_};
  const auto& ics = srv_.interceptors();
  for (size_t i = c->interceptors_run; i-- > 0;) ics[i]->after(info, c->cntl, lat / 1000);
  MethodInfo* m = c->method;
  m->calls.fetch_add(1, std::memory_order_relaxed);
  if (c->cntl.Failed() || c->cancelled) m->errors.fetch_add(1, std::memory_order_relaxed);
  m->latency.add(lat);
  m->in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (c->counted_server) srv_.release_server_slot();
  if (c->deadline_timer != 0) loop_.cancel(c->deadline_timer);
  c->cntl.cancel_->finish();
  if (c->stream) c->stream->core_->end();
  if (!closed_ && !c->cancelled && link_ && link_->open()) {  // else nobody waits for it
    wire::FrameHeader h;
    h.type = FrameType::kResponse;
    h.call_id = c->id;
    h.code = static_cast<uint32_t>(c->cntl.error_code());
    const bool with_body = !c->cntl.Failed() && m->kind != MethodKind::kServerStream && m->kind != MethodKind::kBidi;
    const bool with_att = !c->cntl.Failed() && !c->cntl.response_attachment_.empty();
    const uint64_t size = (with_body ? c->resp->ByteSizeLong() : 0) + (with_att ? c->cntl.response_attachment_.size() : 0);
    if (size > srv_.options().max_response_bytes) {
      reject(c->id, ErrorCode::kResourceExhausted,
             "rpc server: response of " + std::to_string(size) + " bytes exceeds max_response_bytes " +
                 std::to_string(srv_.options().max_response_bytes));
    } else {
      Status s = link_->send(h, &c->cntl.response_meta_, c->cntl.error_text_, with_body ? c->resp.get() : nullptr,
                             with_att ? &c->cntl.response_attachment_ : nullptr);
      if (!s.ok() && !s.would_block()) reject(c->id, from_status_code(s.code()), std::string(s.message()));
    }
  }
  calls_.erase(c->id);
  srv_.in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (c->stream) {
    // done->Run() of a stream usually comes from inside one of the stream's callbacks:
    // free the call (and its stream) after the callback has returned.
    loop_.post([c] {
      std::shared_ptr<ServerConn> keep = std::move(c->conn);
      delete c;
    });
    return;
  }
  std::shared_ptr<ServerConn> keep = std::move(c->conn);  // the call may hold the last reference
  delete c;
}

void ServerConn::go_away() {
  if (closed_ || goaway_sent_) return;
  goaway_sent_ = true;
  wire::FrameHeader h;
  h.type = FrameType::kGoaway;
  h.code = static_cast<uint32_t>(ErrorCode::kUnavailable);
  (void)link_->send(h, nullptr, "rpc server: shutting down, no new calls", nullptr, nullptr);
}

void ServerConn::close_now(const Status& why) {
  if (closed_) return;
  link_->close(why);  // on_closed runs
}

void ServerConn::on_closed(const Status& why) {
  if (closed_) return;
  closed_ = true;
  CONDUIT_LOG(kDebug) << "rpc server: connection from " << peer_ << " closed: " << why.to_string();
  // Calls still running learn it through IsCanceled; their responses go nowhere.
  std::vector<ServerCall*> running;
  for (auto& [id, c] : calls_) running.push_back(c);
  for (ServerCall* c : running) cancel_call(c, ErrorCode::kCancelled);
  srv_.conn_closed(this, loop_index_, link_->draining());
}

void ServerConn::on_drained() { srv_.conn_drained(this, loop_index_); }

}  // namespace conduit::rpc
