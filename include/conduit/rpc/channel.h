// rpc::Channel: the client side of one server (one URL), usable with protobuf's generated
// stubs (it is a google::protobuf::RpcChannel):
//
//   auto ch = rpc::Channel::create("tcp://127.0.0.1:7000").value();   // own thread
//   EchoService_Stub stub(ch.get());
//   rpc::Controller cntl;  cntl.set_timeout_ms(100);
//   stub.Echo(&cntl, &req, &resp, nullptr);                 // synchronous (done == nullptr)
//   stub.Echo(&cntl, &req, &resp, done);                    // asynchronous, done runs on the loop
//   auto f = ch->call_future(md, &cntl, &req, &resp);       // std::future<Status>
//
// One multiplexed connection by default (`connections` > 1: a pool, calls spread
// round-robin).  Connects lazily, reconnects after a failure (calls fail fast with
// unavailable for `reconnect_backoff_ms` after a failed connect).  Every call has a deadline
// (the Controller's or `timeout_ms`); at most `max_inflight` calls and `max_queued_bytes`
// unsent bytes per connection (more fail at once with resource-exhausted: backpressure,
// never an unbounded queue).  Changing tcp:// to shm:// or rdma:// changes the transport,
// nothing else.
//
// Threading: a Channel lives on one EventLoop (the caller's, or a thread of its own when
// created without one); callbacks run on it.  CallMethod/call/call_future are thread-safe:
// from another thread they post to the loop (one post per call).  A synchronous call on
// the loop's own thread drives the loop until the call ends; never from inside a callback
// of that loop.  open_stream and the stream objects: loop thread only.  Destroy the
// Channel on the loop thread (or, for an own-thread channel, from any thread but that one);
// pending calls then fail with cancelled.
#pragma once

#include <google/protobuf/service.h>

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rpc/controller.h"
#include "conduit/rpc/stream.h"

namespace conduit::rpc {

// Client interceptors: before() runs on the loop thread ahead of sending, in the order
// given (add metadata such as tokens or trace ids; a non-OK status fails the call without
// sending); after() runs once the call ended, in reverse order, before the caller's done.
class ClientInterceptor {
 public:
  virtual ~ClientInterceptor() = default;
  virtual Status before(std::string_view method, Controller& cntl) = 0;
  virtual void after(std::string_view method, const Controller& cntl) { (void)method, (void)cntl; }
};

struct ChannelOptions {
  int64_t timeout_ms = 10000;                // default per-call deadline (0 = none)
  uint64_t connect_timeout_ms = 5000;
  uint64_t reconnect_backoff_ms = 100;       // fail fast this long after a failed connect
  uint32_t max_inflight = 16384;             // calls in flight on the channel
  uint64_t max_queued_bytes = 64ull << 20;   // unsent bytes per connection
  uint32_t connections = 1;                  // connections per server (a pool when > 1)
  uint64_t max_response_bytes = 128ull << 20; // body + attachment of one response
  uint32_t stream_window = 256 << 10;        // per-stream receive window granted to servers
  uint64_t attachment_hold_bytes = 256 << 10; // as ServerOptions' (views only in stream callbacks)
  // Adaptive spinning of the loop a channel (or cluster channel) creates for itself, as
  // ServerOptions::poll_us; a channel on the caller's loop uses that loop's LoopOptions.
  uint32_t poll_us = 50;
  std::vector<std::shared_ptr<ClientInterceptor>> interceptors;
};

// A connection's life as the channel sees it (printable).
enum class ChannelState : uint8_t { kIdle, kConnecting, kReady, kFailed, kClosed };
std::string_view channel_state_name(ChannelState s);

class ChannelImpl;

class Channel : public google::protobuf::RpcChannel {
 public:
  // On `loop` (the caller drives it).
  static Result<std::unique_ptr<Channel>> create(reactor::EventLoop& loop, std::string_view url,
                                                 const ChannelOptions& options = {});
  // On a loop thread of its own (for synchronous use from any thread and futures).
  static Result<std::unique_ptr<Channel>> create(std::string_view url, const ChannelOptions& options = {});
  ~Channel() override;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // protobuf's entry point: done == nullptr means synchronous.  `controller` must be an
  // rpc::Controller.  request/response/controller stay the caller's and must live until
  // done runs (or the synchronous call returns).
  void CallMethod(const google::protobuf::MethodDescriptor* method, google::protobuf::RpcController* controller,
                  const google::protobuf::Message* request, google::protobuf::Message* response,
                  google::protobuf::Closure* done) override;
  // Asynchronous with a std::function (runs on the loop thread, exactly once).
  void call(const google::protobuf::MethodDescriptor* method, Controller* cntl, const google::protobuf::Message* request,
            google::protobuf::Message* response, std::function<void()> done);
  // The call's final status through a future.  Do not wait on it on the loop thread.
  std::future<Status> call_future(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                                  const google::protobuf::Message* request, google::protobuf::Message* response);
  // Opens a streaming call (loop thread).  Server-streaming methods take `request` (the one
  // request message); client-streaming and bidi methods take nullptr and write().  Install
  // the stream's callbacks right away (before returning to the loop).  `cntl` must live
  // until on_close ran.
  Result<std::shared_ptr<ClientStream>> open_stream(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                                                    const google::protobuf::Message* request = nullptr);

  // Health probe (loop thread): connects if needed and round-trips a PING; cb(OK) or the
  // failure.  Bounded by connect_timeout_ms.
  void probe(std::function<void(Status)> cb);
  // Runs on the loop thread whenever the state of the (first) connection changes.
  void set_state_listener(std::function<void(ChannelState)> fn);

  // The registered pool of the channel's connection, whose slices it sends without a
  // copy (the rdma transport's arena; allocate_attachment() takes from it); null for
  // transports without one (tcp, shm) and until the first connection is up.  Any thread.
  std::shared_ptr<memory::BlockPool> pool() const;

  ChannelState state() const;
  const std::string& url() const;
  size_t in_flight() const;
  reactor::EventLoop& loop();
  const ChannelOptions& options() const;

 private:
  explicit Channel(std::unique_ptr<ChannelImpl> impl);
  std::unique_ptr<ChannelImpl> impl_;
};

}  // namespace conduit::rpc
