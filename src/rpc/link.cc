#include "link.h"

#include <cstring>
#include <string>

#include "conduit/base/log.h"

namespace conduit::rpc::detail {
namespace {

// How long a link that sent GOAWAY after a protocol error waits for the peer to read it
// (and close) before closing itself.
constexpr uint64_t kDrainNs = 500'000'000;
// Reads per readable event before giving the loop to other connections.
constexpr int kMaxReadsPerEvent = 16;

}  // namespace

Link::Link(std::unique_ptr<transport::Connection> conn, LinkOwner* owner, const LinkOptions& options)
    : conn_(std::move(conn)),
      owner_(owner),
      options_(options),
      parser_(options.limits),
      rx_(options.block_size),
      out_(options.block_size) {
  wire::Metadata m = {{"max_payload", std::to_string(options_.limits.max_payload)}, {"impl", "conduit/0.1"}};
  wire::FrameHeader h;
  h.type = wire::FrameType::kHello;
  h.arg = options_.stream_window;
  (void)send(h, &m, {}, nullptr, nullptr);
}

Link::~Link() {
  *alive_ = false;
  if (drain_timer_ != 0) conn_->loop().cancel(drain_timer_);
  if (conn_) {
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler(nullptr);
    conn_->close();
  }
}

void Link::start() {
  if (started_ || closed_) return;
  started_ = true;
  conn_->set_read_handler([this](transport::Connection&) { on_readable(); });
  flush();
}

Status Link::send(wire::FrameHeader h, const wire::Metadata* meta, std::string_view message,
                  const google::protobuf::MessageLite* body, const Attachment* att) {
  if (closed_ || draining_) return Status(Code::kClosed, "rpc connection closed");
  const size_t ml = meta != nullptr ? wire::meta_size(*meta, message) : wire::meta_size({}, message);
  const size_t bl = body != nullptr ? body->ByteSizeLong() : 0;
  const size_t al = att != nullptr ? att->size() : 0;
  if (ml > options_.limits.max_meta) return Status(Code::kInvalidArgument, "rpc: metadata too large (" + std::to_string(ml) + " bytes)");
  if (uint64_t{bl} + al > peer_max_payload_) {
    return Status(Code::kResourceExhausted, "rpc: message of " + std::to_string(bl + al) +
                                              " bytes (body + attachment) exceeds the receiving side's limit (max_request_bytes / max_response_bytes) of " +
                                              std::to_string(peer_max_payload_));
  }
  h.version = wire::kVersion;
  h.meta_len = static_cast<uint32_t>(ml);
  h.body_len = static_cast<uint32_t>(bl);
  h.attach_len = static_cast<uint32_t>(al);
  uint8_t* p = out_.reserve(wire::kHeaderSize + ml + bl);
  wire::encode_header(h, p);
  p += wire::kHeaderSize;
  if (ml != 0) wire::encode_meta(meta != nullptr ? *meta : wire::Metadata{}, message, p);
  p += ml;
  if (bl != 0) body->SerializeWithCachedSizesToArray(p);
  if (al != 0) out_.append(*att);
  if (started_ && !dispatching_ && !write_armed_) flush();
  return Status::Ok();
}

void Link::send_control(wire::FrameType type, uint64_t call_id, uint64_t arg, uint32_t code) {
  wire::FrameHeader h;
  h.type = type;
  h.call_id = call_id;
  h.arg = arg;
  h.code = code;
  (void)send(h, nullptr, {}, nullptr, nullptr);
}

void Link::flush() {
  if (closed_ || !started_) return;
  Status s = out_.flush(*conn_);
  if (s.ok()) {
    if (write_armed_) {
      write_armed_ = false;
      conn_->set_write_handler(nullptr);
    }
    // Only a queue that had backed up is news to the owner (streams and calls waiting for
    // room); an immediate flush after send() is not, and must not re-enter it.
    if (blocked_ && !draining_) {
      blocked_ = false;
      std::weak_ptr<bool> alive = alive_;
      owner_->on_writable();
      if (alive.expired()) return;
    }
    return;
  }
  if (s.would_block()) {
    blocked_ = true;
    if (!write_armed_) {
      write_armed_ = true;
      conn_->set_write_handler([this](transport::Connection&) { on_write_ready(); });
    }
    return;
  }
  finish_close(s.annotate(options_.role + ": write"));
}

void Link::on_write_ready() { flush(); }

void Link::on_readable() {
  if (closed_) return;
  std::weak_ptr<bool> alive = alive_;
  dispatching_ = true;
  for (int i = 0; i < kMaxReadsPerEvent; ++i) {
    std::span<uint8_t> room = rx_.writable(want_);
    auto r = conn_->read(room);
    if (!r.ok()) {
      if (r.status().would_block()) break;
      dispatching_ = false;
      finish_close(r.status().annotate(options_.role + ": read"));
      return;
    }
    if (*r == 0) {
      dispatching_ = false;
      finish_close(Status(Code::kClosed, options_.role + ": peer closed the connection"));
      return;
    }
    rx_.produced(*r);
    if (!parse()) return;  // closed (possibly destroyed: touch nothing)
    if (alive.expired() || closed_) return;
    if (*r < room.size()) break;  // drained what was there
  }
  dispatching_ = false;
  if (!out_.empty() && !write_armed_) flush();
}

bool Link::parse() {
  std::weak_ptr<bool> alive = alive_;
  for (;;) {
    std::span<const uint8_t> in = rx_.readable();
    if (discard_ != 0) {
      const size_t d = static_cast<size_t>(std::min<uint64_t>(discard_, in.size()));
      rx_.consume(d);
      discard_ -= d;
      want_ = 0;
      if (discard_ != 0) return true;
      continue;
    }
    if (draining_) {
      rx_.consume(in.size());
      return true;
    }
    auto ev = parser_.next(in);
    switch (ev.kind) {
      case wire::FrameParser::Kind::kNeedMore:
        want_ = ev.need;
        return true;
      case wire::FrameParser::Kind::kError:
        protocol_error(ev.error);
        return false;
      case wire::FrameParser::Kind::kOversized:
        if (!got_first_) {
          protocol_error(Status(Code::kProtocolError, "first frame is not HELLO"));
          return false;
        }
        discard_ = ev.frame_bytes;
        want_ = 0;
        owner_->on_oversized(ev.header);
        if (alive.expired() || closed_) return false;
        continue;
      case wire::FrameParser::Kind::kFrame:
        break;
    }
    want_ = 0;
    Frame f;
    f.h = ev.header;
    const uint8_t* p = in.data() + wire::kHeaderSize;
    f.meta = {p, f.h.meta_len};
    f.body = {p + f.h.meta_len, f.h.body_len};
    if (f.h.attach_len != 0)
      f.attachment.append_slice(rx_.slice(wire::kHeaderSize + f.h.meta_len + f.h.body_len, f.h.attach_len));
    if (!got_first_) {
      got_first_ = true;
      if (f.h.type != wire::FrameType::kHello) {
        protocol_error(Status(Code::kProtocolError, "first frame is " + std::string(wire::frame_type_name(f.h.type)) + ", not HELLO"));
        return false;
      }
      handle_hello(f);
      if (closed_) return false;
      rx_.consume(ev.frame_bytes);
      continue;
    }
    if (f.h.type == wire::FrameType::kHello) {
      protocol_error(Status(Code::kProtocolError, "second HELLO"));
      return false;
    }
    if (f.h.type == wire::FrameType::kPing) {
      rx_.consume(ev.frame_bytes);
      send_control(wire::FrameType::kPong, f.h.call_id, f.h.arg);
      continue;
    }
    // The frame's views point into the block; consume after dispatch (the block stays
    // alive through `f.attachment` or this buffer).
    owner_->on_frame(f);
    if (alive.expired() || closed_) return false;
    rx_.consume(ev.frame_bytes);
  }
}

void Link::handle_hello(const Frame& f) {
  wire::Metadata m;
  Status s = wire::decode_meta(f.meta, &m, nullptr);
  if (!s.ok()) {
    protocol_error(s.annotate("HELLO"));
    return;
  }
  peer_hello_ = true;
  peer_window_ = static_cast<uint32_t>(std::min<uint64_t>(f.h.arg, 1u << 30));
  for (const auto& [k, v] : m) {
    if (k == "max_payload") {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (end != v.c_str() && *end == '\0' && n > 0) peer_max_payload_ = n;
    }
  }
  if (peer_window_ == 0) {
    protocol_error(Status(Code::kProtocolError, "HELLO grants a stream window of 0"));
    return;
  }
  owner_->on_peer_hello();
}

void Link::protocol_error(const Status& s) {
  CONDUIT_LOG(kWarn) << options_.role << ": closing " << conn_->describe() << ": " << s.to_string();
  // A peer of another wire version learns why in a frame of its own version's layout:
  // magic, version and the GOAWAY type/code/message sit where every version keeps them.
  const ErrorCode code = s.code() == Code::kNotSupported ? ErrorCode::kUnimplemented : ErrorCode::kInvalidArgument;
  close_with(code, s);
}

void Link::close_with(ErrorCode code, const Status& why) {
  if (closed_ || draining_) return;
  wire::FrameHeader h;
  h.type = wire::FrameType::kGoaway;
  h.code = static_cast<uint32_t>(code);
  const std::string text(why.message());
  (void)send(h, nullptr, text, nullptr, nullptr);
  draining_ = true;
  dispatching_ = false;
  flush();
  if (closed_) return;
  (void)conn_->shutdown_write();
  // Keep reading (and dropping) until the peer closes, so that our unread input does not
  // turn the close into a reset that destroys the GOAWAY in flight.
  std::weak_ptr<bool> alive = alive_;
  const Status reason = why;
  drain_timer_ = conn_->loop().run_after(kDrainNs, [this, alive, reason] {
    if (alive.expired()) return;
    drain_timer_ = 0;
    finish_close(reason);
  });
  // The owner learns now: no more calls on this link.
  reason_ = why;
  owner_->on_closed(why);
}

void Link::close(const Status& why) { finish_close(why); }

void Link::finish_close(const Status& why) {
  if (closed_) return;
  const bool told = draining_;
  closed_ = true;
  if (drain_timer_ != 0) {
    conn_->loop().cancel(drain_timer_);
    drain_timer_ = 0;
  }
  conn_->set_read_handler(nullptr);
  conn_->set_write_handler(nullptr);
  write_armed_ = false;
  conn_->close();
  out_.clear();
  if (!told) {
    reason_ = why;
    owner_->on_closed(why);
  }
}

}  // namespace conduit::rpc::detail
