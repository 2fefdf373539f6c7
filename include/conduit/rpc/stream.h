// Streams: server-streaming, client-streaming and bidirectional calls with per-stream flow
// control (docs/PROTOCOL.md "Streams").
//
// Each side grants the other a receive window per stream (ChannelOptions/ServerOptions
// stream_window, sent in HELLO).  write() spends the peer's window by the message's
// size (body + attachment) and returns would-block once it is spent (a message is never
// split: the one that crosses zero is still sent); the window comes back in WINDOW frames
// as the receiver consumes messages, and on_writable runs.  A receiver consumes a message
// when its on_message callback returns, unless paused: pause() stops delivery (messages
// queue, up to the window the peer was given) and resume() delivers the queue.
//
// Threading: a stream belongs to its connection's loop thread; every method is called and
// every callback runs there.  Lifetime: the library owns stream objects; a pointer stays
// valid until on_close (client) / the handler's done->Run() (server) has run.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "conduit/base/status.h"
#include "conduit/rpc/attachment.h"

namespace conduit::rpc {

namespace detail {
class StreamCore;
}

class StreamBase {
 public:
  using MessageFn = std::function<void(const google::protobuf::Message&, const Attachment&)>;
  virtual ~StreamBase();
  StreamBase(const StreamBase&) = delete;
  StreamBase& operator=(const StreamBase&) = delete;

  // Sends one message.  OK: queued; would-block: the peer's window is spent (nothing sent;
  // retry from on_writable); closed: this side already half-closed or the call ended.
  // Cost: one serialisation into the connection's output block; the attachment is shared.
  Status write(const google::protobuf::Message& m, const Attachment* att = nullptr);
  bool writable() const;
  // Runs for each message received, in order; `m` is valid during the call only.
  void set_on_message(MessageFn fn);
  void set_on_writable(std::function<void()> fn);
  void pause();
  void resume();
  // Bytes of send window left (may be negative after a message larger than the window).
  int64_t send_credit() const;
  uint64_t id() const;

 protected:
  explicit StreamBase(std::unique_ptr<detail::StreamCore> core);
  std::unique_ptr<detail::StreamCore> core_;
  friend class ServerConn;
  friend class ClientConn;
  friend class ChannelImpl;
};

// The handler's side of a streaming call (Controller::stream()).  The handler ends the
// call with done->Run(): for client-streaming methods the response message is sent then.
class ServerStream : public StreamBase {
 public:
  explicit ServerStream(std::unique_ptr<detail::StreamCore> core);  // made by the library
  // The client half-closed (sent its last message).
  void set_on_half_close(std::function<void()> fn);
  bool peer_done() const;
};

// The caller's side (Channel::open_stream).
class ClientStream : public StreamBase {
 public:
  explicit ClientStream(std::unique_ptr<detail::StreamCore> core);  // made by the library
  // No more messages from this side (the server sees the half-close).
  Status close_send();
  // Abandons the call: on_close runs with `cancelled`, the server is told.
  void cancel();
  // Runs once when the call ends: OK, or the server's/transport's error.  For
  // client-streaming methods the response message arrives through on_message first.
  void set_on_close(std::function<void(const Status&)> fn);
  bool closed() const;
};

}  // namespace conduit::rpc
