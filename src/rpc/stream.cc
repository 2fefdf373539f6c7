#include "conduit/rpc/stream.h"

#include "stream_core.h"

namespace conduit::rpc {
namespace detail {

Status StreamCore::write(const google::protobuf::Message& m, const Attachment* att, uint16_t flags) {
  if (ended || link == nullptr || !link->open()) return Status(Code::kClosed, "rpc stream: the call has ended");
  if (local_done) return Status(Code::kClosed, "rpc stream: this side already closed its sending half");
  if (credit <= 0) return Status::WouldBlock();
  wire::FrameHeader h;
  h.type = wire::FrameType::kMessage;
  h.call_id = id;
  h.flags = flags;
  CONDUIT_RETURN_IF_ERROR(link->send(h, nullptr, {}, &m, att));
  credit -= static_cast<int64_t>(m.ByteSizeLong() + (att != nullptr ? att->size() : 0));
  if ((flags & wire::kFlagEndStream) != 0) local_done = true;
  return Status::Ok();
}

Status StreamCore::on_frame_message(Frame& f) {
  if (remote_done) return Status(Code::kProtocolError, "rpc stream: MESSAGE after the peer's half-close");
  const size_t n = f.h.body_len + f.h.attach_len;
  received += n;
  // The peer may overshoot by the one message that crossed zero; more is a broken window.
  if (link != nullptr && received > uint64_t{window} + link->options().limits.max_payload)
    return Status(Code::kProtocolError, "rpc stream: peer exceeded the stream window");
  if ((f.h.flags & wire::kFlagEndStream) != 0) half_close_pending = true;
  if (paused || !on_message || !queue.empty() || delivering) {
    queue.push_back({std::string(reinterpret_cast<const char*>(f.body.data()), f.body.size()), std::move(f.attachment)});
  } else {
    const Attachment att = std::move(f.attachment);
    std::weak_ptr<bool> a = alive;
    if (!deliver_one(f.body.data(), f.body.size(), att)) return Status::Ok();
    if (a.expired()) return Status::Ok();
    consume(n);
  }
  if (half_close_pending && queue.empty()) on_remote_half_close();
  return Status::Ok();
}

bool StreamCore::deliver_one(const uint8_t* body, size_t n, const Attachment& att) {
  if (!in_msg->ParseFromArray(body, static_cast<int>(n))) {
    // A message we cannot parse is the peer's bug: end the stream with invalid-argument.
    if (on_close) on_close(Status(Code::kInvalidArgument, "rpc stream: cannot parse a " + in_msg->GetTypeName()));
    if (cancel_fn) cancel_fn();
    return false;
  }
  delivering = true;
  std::weak_ptr<bool> a = alive;
  on_message(*in_msg, att);
  if (!a.expired()) delivering = false;
  return true;
}

void StreamCore::drain() {
  std::weak_ptr<bool> a = alive;
  while (!paused && on_message && !queue.empty() && !delivering) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    const size_t n = p.body.size() + p.att.size();
    if (!deliver_one(reinterpret_cast<const uint8_t*>(p.body.data()), p.body.size(), p.att)) return;
    if (a.expired()) return;
    consume(n);
  }
  if (half_close_pending && queue.empty() && !remote_done) on_remote_half_close();
}

void StreamCore::consume(size_t n) {
  consumed += n;
  if (ended || link == nullptr || !link->open()) return;
  if (consumed >= window / 2 || (consumed > 0 && queue.empty() && consumed >= 16 * 1024)) {
    link->send_control(wire::FrameType::kWindow, id, consumed);
    received -= std::min<uint64_t>(received, consumed);
    consumed = 0;
  }
}

void StreamCore::on_remote_half_close() {
  half_close_pending = true;
  if (!queue.empty()) return;  // after the queue drains
  if (remote_done) return;
  remote_done = true;
  if (on_half_close) on_half_close();
}

void StreamCore::add_credit(uint64_t n) {
  const bool was_blocked = credit <= 0;
  credit += static_cast<int64_t>(std::min<uint64_t>(n, uint64_t{1} << 40));
  if (was_blocked && credit > 0 && on_writable && !ended) on_writable();
}

}  // namespace detail

StreamBase::StreamBase(std::unique_ptr<detail::StreamCore> core) : core_(std::move(core)) {}
StreamBase::~StreamBase() {
  if (core_) *core_->alive = false;
}
Status StreamBase::write(const google::protobuf::Message& m, const Attachment* att) { return core_->write(m, att); }
bool StreamBase::writable() const { return !core_->ended && !core_->local_done && core_->credit > 0; }
void StreamBase::set_on_message(MessageFn fn) {
  core_->on_message = std::move(fn);
  core_->drain();
}
void StreamBase::set_on_writable(std::function<void()> fn) { core_->on_writable = std::move(fn); }
void StreamBase::pause() { core_->paused = true; }
void StreamBase::resume() {
  core_->paused = false;
  core_->drain();
}
int64_t StreamBase::send_credit() const { return core_->credit; }
uint64_t StreamBase::id() const { return core_->id; }

ServerStream::ServerStream(std::unique_ptr<detail::StreamCore> core) : StreamBase(std::move(core)) {}
ClientStream::ClientStream(std::unique_ptr<detail::StreamCore> core) : StreamBase(std::move(core)) {}

void ServerStream::set_on_half_close(std::function<void()> fn) {
  core_->on_half_close = std::move(fn);
  if (core_->remote_done && core_->on_half_close) core_->on_half_close();
}
bool ServerStream::peer_done() const { return core_->remote_done; }

Status ClientStream::close_send() {
  if (core_->local_done) return Status::Ok();
  if (core_->ended) return Status(Code::kClosed, "rpc stream: the call has ended");
  core_->local_done = true;
  return core_->close_send_fn ? core_->close_send_fn() : Status::Ok();
}
void ClientStream::cancel() {
  if (core_->cancel_fn) core_->cancel_fn();
}
void ClientStream::set_on_close(std::function<void(const Status&)> fn) { core_->on_close = std::move(fn); }
bool ClientStream::closed() const { return core_->ended; }

}  // namespace conduit::rpc
