// Channel internals: the channel, its connections and calls.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <memory>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "cancel_hook.h"
#include "conduit/rpc/channel.h"
#include "link.h"
#include "server_impl.h"  // MethodKind

namespace conduit::rpc {

class ChannelImpl;
class ClientConn;

namespace detail {
struct ClientCall {
  uint64_t id = 0;
  Controller* cntl = nullptr;
  google::protobuf::Message* resp = nullptr;
  std::function<void()> done;
  const google::protobuf::MethodDescriptor* md = nullptr;
  MethodKind kind = MethodKind::kUnary;
  uint64_t start_ns = 0;
  reactor::TimerId timer = 0;
  ClientConn* conn = nullptr;
  std::shared_ptr<ClientStream> stream;
  size_t interceptors_run = 0;
};
}  // namespace detail

class ClientConn : public detail::LinkOwner {
 public:
  ClientConn(ChannelImpl& ch, size_t slot) : ch_(ch), slot_(slot) {}
  ~ClientConn() override;
  Status connect();

  void on_frame(detail::Frame& f) override;
  void on_oversized(const wire::FrameHeader& h) override;
  void on_writable() override {}
  void on_closed(const Status& why) override;
  void on_peer_hello() override;

  bool usable() const { return state_ == ChannelState::kConnecting || state_ == ChannelState::kReady; }
  ChannelState state() const { return state_; }
  detail::Link* link() { return link_.get(); }
  void ping(std::function<void(Status)> cb, uint64_t timeout_ns);
  void close(const Status& why);

  std::unordered_map<uint64_t, detail::ClientCall*> calls;
  size_t slot() const { return slot_; }
  bool retired = false;

 private:
  void set_state(ChannelState s);
  void fail_all(ErrorCode code, const std::string& text);

  ChannelImpl& ch_;
  size_t slot_;
  ChannelState state_ = ChannelState::kIdle;
  std::unique_ptr<detail::Link> link_;
  reactor::TimerId connect_timer_ = 0;
  uint64_t next_ping_ = 1;
  std::unordered_map<uint64_t, std::pair<std::function<void(Status)>, reactor::TimerId>> pings_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class ChannelImpl {
 public:
  ChannelImpl(reactor::EventLoop& loop, std::string url, const ChannelOptions& o) : loop_(loop), url_(std::move(url)), opts_(o) {}
  ~ChannelImpl();
  Status init();

  void start_call(const google::protobuf::MethodDescriptor* md, Controller* cntl, const google::protobuf::Message* req,
                  google::protobuf::Message* resp, std::function<void()> done, std::shared_ptr<ClientStream>* stream_out);
  void complete(detail::ClientCall* c, ErrorCode code, std::string text);
  void cancel_call(uint64_t id, ErrorCode code, const std::string& text);
  void conn_closed(ClientConn* c, const Status& why);
  void conn_state(ClientConn* c, ChannelState s);
  void probe(std::function<void(Status)> cb);

  reactor::EventLoop& loop_;
  std::unique_ptr<reactor::LoopGroup> own_;  // own-thread channels
  std::thread::id own_tid_;                  // ... and their loop's thread
  // True on the thread that drives the loop (an own-thread loop that has not started yet
  // is not the caller's to drive).
  bool on_loop() const { return own_ ? std::this_thread::get_id() == own_tid_ : loop_.in_loop_thread(); }
  std::string url_;
  ChannelOptions opts_;
  std::vector<std::unique_ptr<ClientConn>> conns_;
  std::vector<std::unique_ptr<ClientConn>> retired_;
  size_t rr_ = 0;
  uint64_t next_id_ = 1;
  std::atomic<size_t> in_flight_{0};
  uint64_t last_fail_ns_ = 0;
  Status last_fail_;
  std::function<void(ChannelState)> listener_;
  std::atomic<ChannelState> state_{ChannelState::kIdle};
  std::unordered_map<const google::protobuf::MethodDescriptor*, uint32_t> ids_;
  std::unordered_map<uint64_t, detail::ClientCall*> by_id_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

 private:
  ClientConn* pick(bool ignore_backoff, Status* why);
  uint32_t method_id(const google::protobuf::MethodDescriptor* md);
  void retire(ClientConn* c);
};

}  // namespace conduit::rpc
