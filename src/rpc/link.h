// Link: the framing half of an rpc connection, shared by server and client.  Owns the
// transport::Connection, reads and splits frames (wire::FrameParser), sends frames through
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

struct Frame {
  wire::FrameHeader h;
  std::span<const uint8_t> meta;
  std::span<const uint8_t> body;
  Attachment attachment;  // slices of the receive block (zero copy)
};

class LinkOwner {
 public:
  virtual ~LinkOwner() = default;
  virtual void on_frame(Frame& f) = 0;
  // A well-formed frame whose payload exceeds the receive limit; its bytes are discarded.
  virtual void on_oversized(const wire::FrameHeader& h) = 0;
  // The output queue drained after having been above zero (resume streams, queued calls).
  virtual void on_writable() = 0;
  // The connection is gone (peer closed, error, protocol error, close()).  Once.
  virtual void on_closed(const Status& why) = 0;
  // The peer's HELLO arrived (its stream window and limits are known now).
  virtual void on_peer_hello() {}
};

struct LinkOptions {
  uint32_t stream_window = 256 << 10;  // per-stream receive window granted to the peer
  wire::Limits limits;                 // receive limits
  size_t block_size = 64 << 10;        // receive and send block size
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
  transport::Connection& connection() { return *conn_; }
  const transport::Connection& connection() const { return *conn_; }
  const LinkOptions& options() const { return options_; }
  const Status& close_reason() const { return reason_; }

 private:
  void on_readable();
  bool parse();  // false: the link closed
  void flush();
  void on_write_ready();
  void handle_hello(const Frame& f);
  void protocol_error(const Status& s);
  void finish_close(const Status& why);

  std::unique_ptr<transport::Connection> conn_;
  LinkOwner* owner_;
  LinkOptions options_;
  wire::FrameParser parser_;
  RxBuffer rx_;
  OutQueue out_;
  size_t want_ = 0;          // bytes the frame at rpos needs (0 = unknown)
  uint64_t discard_ = 0;     // bytes of an oversized frame still to drop
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
