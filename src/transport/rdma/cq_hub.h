// CqHub: one completion channel per event loop and device, shared by every rdma connection
// (and lingering Closer) of that loop on that device.  The channel's fd sits in epoll once;
// when it is readable the hub reads every pending completion event, acknowledges each at
// once, and tells the owner of each CQ that fired (CqSink::on_cq_event, with how many of
// its events were read).  A connection therefore costs no channel of its own: no fd, no
// epoll registration, no channel creation on its setup path (~0.1 ms each under Soft-RoCE).
//
//   auto hub = CqHub::create(loop, dev);             // LoopContext, once per device
//   cq = CompletionQueue::create(dev, n, hub->channel());
//   hub->attach(cq->native_handle(), this);          // this: a CqSink
//   ... hub->detach(cq->native_handle()) before the CQ is destroyed or changes hands.
//
// Events of a CQ nobody is attached to are acknowledged and dropped (a CQ between owners,
// e.g. from its connection to a Closer, re-polls after attaching).  The kernel drops a
// destroyed CQ's unread events, and every event read is acknowledged before the hub
// returns, so ibv_destroy_cq never waits on it.
// Loop thread only.  Owned by the LoopContext (shared with the QpResources of the CQs made
// on its channel, so the channel outlives them).  Cost: a hash lookup per event.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "conduit/reactor/event_loop.h"
#include "conduit/verbs/verbs.h"

namespace conduit::transport::rdma {

// Receives the completion events of the CQs it attached to a CqHub.
class CqSink {
 public:
  // `events` (>= 1) events of this sink's CQ were read and acknowledged: the arming is used
  // up, completions may be waiting.
  virtual void on_cq_event(int events) = 0;

 protected:
  ~CqSink() = default;
};

class CqHub final : public reactor::FdHandler, public std::enable_shared_from_this<CqHub> {
 public:
  // Creates the channel and adds its fd to `loop` (removed by unwatch() or the destructor).
  static Result<std::shared_ptr<CqHub>> create(reactor::EventLoop& loop, std::shared_ptr<verbs::Context> dev);
  ~CqHub() override;
  CqHub(const CqHub&) = delete;
  CqHub& operator=(const CqHub&) = delete;

  const std::shared_ptr<verbs::CompletionChannel>& channel() const { return channel_; }
  void attach(ibv_cq* cq, CqSink* sink) { sinks_[cq] = sink; }
  void detach(ibv_cq* cq) { sinks_.erase(cq); }
  // The loop is going (or gone): never touch it again.
  void unwatch();

  void on_events(uint32_t) override;

 private:
  CqHub(reactor::EventLoop& loop, std::shared_ptr<verbs::CompletionChannel> ch)
      : loop_(&loop), channel_(std::move(ch)) {}

  reactor::EventLoop* loop_;  // null once unwatched
  std::shared_ptr<verbs::CompletionChannel> channel_;
  std::unordered_map<ibv_cq*, CqSink*> sinks_;
};

}  // namespace conduit::transport::rdma
