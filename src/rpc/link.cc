#include "link.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "conduit/base/log.h"

namespace conduit::rpc::detail {
namespace {

// How long a link that sent GOAWAY after a protocol error waits for the peer to read it
// (and close) before closing itself.
constexpr uint64_t kDrainNs = 500'000'000;
// Bytes per readable event before giving the loop to other connections (checked where the
// reader is at rest, so nothing staged is left behind).
constexpr uint64_t kBytesPerEvent = 1 << 20;

}  // namespace

Link::Link(std::unique_ptr<transport::Connection> conn, LinkOwner* owner, const LinkOptions& options)
    : conn_(std::move(conn)),
      owner_(owner),
      options_(options),
      src_(*conn_),
      reader_(options.limits, options.hold_bytes),
      out_(options.block_size) {
  out_.set_pool(conn_->pool());
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
  out_.set_pool(conn_->pool());  // known once connected
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
  if (bl > UINT32_MAX || al > UINT32_MAX)  // before the peer's HELLO its limit is unknown
    return Status(Code::kResourceExhausted, "rpc: a body or attachment of " + std::to_string(std::max(bl, al)) +
                                                " bytes exceeds the wire format's limit of 4294967295 bytes");
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
  uint64_t done = reader_.take_progress();
  for (;;) {
    const FrameReader::Event ev = draining_ ? reader_.skip(src_) : reader_.next(src_);
    switch (ev.kind) {
      case FrameReader::Kind::kWouldBlock:
        break;
      case FrameReader::Kind::kEof:
        dispatching_ = false;
        // The peer may only have shut its write side (tcp): what the frames just read were
        // answered with goes out first, as far as the connection takes it now.
        if (!out_.empty()) (void)out_.flush(*conn_);
        finish_close(Status(Code::kClosed, options_.role + ": peer closed the connection"));
        return;
      case FrameReader::Kind::kIoError:
        dispatching_ = false;
        finish_close(Status(ev.error).annotate(options_.role + ": read"));
        return;
      case FrameReader::Kind::kProtocol:
        protocol_error(ev.error);
        return;
      case FrameReader::Kind::kOversized:
        if (!got_first_) {
          protocol_error(Status(Code::kProtocolError, "first frame is not HELLO"));
          return;
        }
        owner_->on_oversized(reader_.frame().h);
        if (alive.expired() || closed_) return;
        break;
      case FrameReader::Kind::kFrame:
        if (!dispatch(reader_.frame())) return;  // closed (possibly destroyed: touch nothing)
        reader_.finish(src_);
        if (reader_.stats().views_kept != views_kept_seen_) {
          if (views_kept_seen_ == 0)
            CONDUIT_LOG(kWarn) << options_.role << ": " << conn_->describe()
                               << ": an attachment view was kept past its call by its slices; it pins the "
                                  "connection's receive memory (keep a copy of the Attachment instead)";
          views_kept_seen_ = reader_.stats().views_kept;
        }
        break;
    }
    if (ev.kind == FrameReader::Kind::kWouldBlock) break;
    done += reader_.take_progress();
    if (done >= kBytesPerEvent && reader_.at_rest()) break;  // readiness brings us back
  }
  dispatching_ = false;
  if (!out_.empty() && !write_armed_) flush();
}

bool Link::dispatch(Frame& f) {
  std::weak_ptr<bool> alive = alive_;
  if (!got_first_) {
    got_first_ = true;
    if (f.h.type != wire::FrameType::kHello) {
      protocol_error(Status(Code::kProtocolError, "first frame is " + std::string(wire::frame_type_name(f.h.type)) + ", not HELLO"));
      return false;
    }
    handle_hello(f);
    return !alive.expired() && !closed_ && !draining_;
  }
  if (f.h.type == wire::FrameType::kHello) {
    protocol_error(Status(Code::kProtocolError, "second HELLO"));
    return false;
  }
  if (f.h.type == wire::FrameType::kPing) {
    send_control(wire::FrameType::kPong, f.h.call_id, f.h.arg);
    return true;
  }
  owner_->on_frame(f);
  return !alive.expired() && !closed_;
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
  } else {
    owner_->on_drained();
  }
}

}  // namespace conduit::rpc::detail
