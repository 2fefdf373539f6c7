// Link: the framing half of an rpc connection, shared by server and client.  Owns the
// transport::Connection, reads frames off it (FrameReader, buffer.h), sends frames through
// an OutQueue (writes are deferred while frames are being dispatched, so a batch of
// requests answered in one go costs one writev), exchanges HELLO, and closes the connection
// with a logged reason on a malformed frame or a wire-version mismatch (after telling the
// peer with a GOAWAY it can read).
//
// Threading: the loop thread of the connection only.  Lifetime: the owner destroys a Link
// only outside of its callbacks (EventLoop::destroy_later).
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "buffer.h"
#include "conduit/rpc/attachment.h"
#include "conduit/rpc/errors.h"
#include "conduit/transport/connection.h"
#include "wire.h"

namespace conduit::rpc::detail {

class LinkOwner {
 public:
  virtual ~LinkOwner() = default;
  // f's views (meta, body, a view attachment) end when this returns: whatever the owner
  // keeps of the attachment past that it takes with AttachmentAccess::take and makes
  // private (AttachmentAccess::make_private) before returning.
  virtual void on_frame(Frame& f) = 0;
  // A well-formed frame whose payload exceeds the receive limit; its bytes are discarded.
  virtual void on_oversized(const wire::FrameHeader& h) = 0;
  // The output queue drained after having been above zero (resume streams, queued calls).
  virtual void on_writable() = 0;
  // The connection is gone (peer closed, error, protocol error, close()).  Once.
  virtual void on_closed(const Status& why) = 0;
  // The peer's HELLO arrived (its stream window and limits are known now).
  virtual void on_peer_hello() {}
  // After on_closed for a GOAWAY this side sent (close_with): the drain is over (the peer
  // closed, or the drain timer ran out) and the link has closed its connection.  Until
  // then the owner must keep the link alive -- destroying it closes the connection at once,
  // and unread input then turns the close into a reset that can destroy the GOAWAY in
  // flight.  Called from within the link: free it later (post), not here.
  virtual void on_drained() {}
};

struct LinkOptions {
  uint32_t stream_window = 256 << 10;  // per-stream receive window granted to the peer
  wire::Limits limits;                 // receive limits
  size_t block_size = 64 << 10;        // send scratch block size
  size_t hold_bytes = 256 << 10;       // larger attachments are never views (buffer.h)
  std::string role = "rpc";            // for log lines: "rpc server", "rpc client"
};

class Link {
 public:
  Link(std::unique_ptr<transport::Connection> conn, LinkOwner* owner, const LinkOptions& options);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // The constructor queues HELLO; frames sent before start() queue behind it.  start()
  // installs the handlers and writes; call it once the connection is established.
  void start();

  // Queues one frame: header fields from `h` (lengths are filled in), metadata (+ error
  // message), the serialised `body` (may be null) and `att` (shared, not copied).
  // Fails (invalid-argument) when the frame would exceed the peer's receive limit; the
  // link stays usable.  Errors of the connection surface through on_closed.
  Status send(wire::FrameHeader h, const wire::Metadata* meta, std::string_view message,
              const google::protobuf::MessageLite* body, const Attachment* att);
  // A frame without payload (WINDOW, CANCEL, HALF_CLOSE, PING, PONG).
  void send_control(wire::FrameType type, uint64_t call_id, uint64_t arg, uint32_t code = 0);
  // Tells the peer (GOAWAY code + message) and closes after it had a chance to read it.
  void close_with(ErrorCode code, const Status& why);
  // Closes now (queued bytes may be lost); on_closed runs.
  void close(const Status& why);

  bool open() const { return !closed_; }
  bool peer_hello() const { return peer_hello_; }
  uint32_t peer_window() const { return peer_window_; }
  uint64_t peer_max_payload() const { return peer_max_payload_; }
  size_t queued_bytes() const { return out_.bytes(); }
  // A GOAWAY was sent and the link still reads and drops input until the peer closes.
  bool draining() const { return draining_ && !closed_; }
  transport::Connection& connection() { return *conn_; }
  const transport::Connection& connection() const { return *conn_; }
  const LinkOptions& options() const { return options_; }
  const Status& close_reason() const { return reason_; }
  const ReaderStats& reader_stats() const { return reader_.stats(); }
  const SendStats& send_stats() const { return out_.stats(); }

 private:
  // The connection's reads as FrameReader's source.
  class ConnectionSource final : public ByteSource {
   public:
    explicit ConnectionSource(transport::Connection& c) : c_(c) {}
    Result<std::span<const uint8_t>> peek() override { return c_.peek(); }
    Status consume(size_t n) override { return c_.consume(n); }
    Result<size_t> read(std::span<uint8_t> buf) override { return c_.read(buf); }
    Result<size_t> read_owned(memory::Chain& out, size_t max) override { return c_.read_owned(out, max); }
    const void* pool() const override { return c_.pool(); }

   private:
    transport::Connection& c_;
  };

  void on_readable();
  bool dispatch(Frame& f);  // false: the link closed (possibly destroyed)
  void flush();
  void on_write_ready();
  void handle_hello(const Frame& f);
  void protocol_error(const Status& s);
  void finish_close(const Status& why);

  std::unique_ptr<transport::Connection> conn_;
  LinkOwner* owner_;
  LinkOptions options_;
  ConnectionSource src_;
  FrameReader reader_;
  OutQueue out_;
  uint64_t views_kept_seen_ = 0;  // reader_stats().views_kept already logged about
  bool dispatching_ = false;
  bool started_ = false;
  bool write_armed_ = false;
  bool blocked_ = false;     // a flush met would-block since the last drain
  bool closed_ = false;
  bool draining_ = false;    // GOAWAY sent: drop input until EOF or the drain timer
  bool got_first_ = false;
  bool peer_hello_ = false;
  uint32_t peer_window_ = 0;
  uint64_t peer_max_payload_ = 128ull << 20;  // until the peer's HELLO says otherwise
  uint64_t drain_timer_ = 0;
  Status reason_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace conduit::rpc::detail
