// StreamCore: the state of one stream, the same for both sides (see stream.h): send credit,
// receive accounting and WINDOW returns, pause queue, half-close and callbacks.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "conduit/rpc/stream.h"
#include "link.h"

namespace conduit::rpc::detail {

class StreamCore {
 public:
  StreamCore(Link* l, uint64_t call_id, std::unique_ptr<google::protobuf::Message> msg, uint32_t recv_window,
             int64_t send_credit)
      : link(l), id(call_id), in_msg(std::move(msg)), window(recv_window), credit(send_credit) {}

  Status write(const google::protobuf::Message& m, const Attachment* att, uint16_t flags = 0);
  // A MESSAGE frame for this stream arrived.  Returns a protocol error when it breaks the
  // window (the peer sent more than it was granted) or arrives after the peer's half-close.
  Status on_frame_message(Frame& f);
  void on_remote_half_close();
  void add_credit(uint64_t n);
  void drain();
  // The call ended (either side): no more writes; queued messages are still delivered.
  void end() { link = nullptr; ended = true; }

  Link* link;
  uint64_t id;
  std::unique_ptr<google::protobuf::Message> in_msg;
  uint32_t window;        // what we granted the peer
  int64_t credit;         // what the peer granted us, minus what we sent
  uint64_t received = 0;  // bytes received beyond the last WINDOW return (for the check)
  uint64_t consumed = 0;  // bytes consumed, not yet returned
  bool paused = false;
  bool local_done = false;
  bool remote_done = false;
  bool half_close_pending = false;
  bool ended = false;
  bool delivering = false;
  struct Pending {
    std::string body;
    Attachment att;
  };
  std::deque<Pending> queue;
  StreamBase::MessageFn on_message;
  std::function<void()> on_writable;
  std::function<void()> on_half_close;
  std::function<void(const Status&)> on_close;
  std::function<void()> cancel_fn;      // client: cancels the call through its channel
  std::function<Status()> close_send_fn;  // client: sends HALF_CLOSE
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

 private:
  void consume(size_t n);
  bool deliver_one(const uint8_t* body, size_t n, const Attachment& att);
};

}  // namespace conduit::rpc::detail
