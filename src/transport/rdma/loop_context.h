// The rdma transport's state per event loop: one rdma_cm event channel (in epoll) whose
// events it routes to the connection or listener owning each id, one protection domain per
// device, one completion channel per device (CqHub), the shared receive queues (srq=1), the set of connections with deferred work
// (data to post, data to deliver, writability to announce) serviced in a before-sleep hook,
// the graceful closes still in progress (Closer), and the thread that destroys closed
// connections' QPs (QpReaper).
//
// Found through the loop's slot (EventLoop::slot), so there is no process-global table and
// no lock: everything here runs on the loop's thread (the QpReaper's thread touches only
// the resources it was given).  Reference-counted by its connections and listeners; it
// lives on while closers remain or QPs are being destroyed, and is torn down with the loop
// at the latest.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/verbs/verbs.h"
#include "arena.h"
#include "qp_reaper.h"
#include "qp_stock.h"
#include "rdma.h"

namespace conduit::transport::rdma {

class RdmaConnection;
class Closer;
class SrqPool;
class CqHub;

// Receives the rdma_cm events of the ids it owns (a connection, a listener, a closer).
class CmSink {
 public:
  virtual void on_cm_event(verbs::CmEvent& ev) = 0;

 protected:
  ~CmSink() = default;
};

class LoopContext final : public reactor::FdHandler {
 public:
  // The loop's context, created on first use; each call takes a reference.
  static Result<LoopContext*> acquire(reactor::EventLoop& loop);
  void release();

  // Takes over a closing connection's resources until its data is acknowledged.
  void adopt(std::unique_ptr<Closer> c);
  // A closer has finished (it may be inside its own handler): destroyed at the next hook.
  void retire(Closer* c);
  // Releases a closed connection's (or closer's) resources: at the next hook the id moves
  // to an event channel nobody reads, so that no event of it reaches this loop's librdmacm
  // calls again, and the QP is destroyed on the reaper's thread (qp_reaper.h); the rest is
  // released at a later hook.  At once when the loop is going.
  void reap(std::unique_ptr<QpResources> res);
  static ReaperStats reaper_stats(reactor::EventLoop& loop);

  reactor::EventLoop& loop() { return loop_; }
  const std::shared_ptr<verbs::EventChannel>& channel() const { return channel_; }
  // The PD (and arena) of `id`'s device on this loop, created on first use; `arena_cap_bytes`
  // caps that arena when this call creates it (the first connection or listener decides).
  Result<std::shared_ptr<verbs::ProtectionDomain>> pd_for(verbs::CmId& id, size_t arena_cap_bytes);
  // The registered arena of `pd` (created with the PD; arena.h).
  Arena* arena_for(const verbs::ProtectionDomain& pd);
  // The completion channel every CQ of this loop on `dev` uses (cq_hub.h), created on first
  // use, kept until the context goes.
  Result<std::shared_ptr<CqHub>> hub_for(const std::shared_ptr<verbs::Context>& dev);
  // The shared receive queue for srq=1 connections on `pd` (created on first use, kept
  // until the context goes).
  Result<std::shared_ptr<SrqPool>> srq_for(const std::shared_ptr<verbs::ProtectionDomain>& pd, uint32_t depth);
  static std::vector<SrqStats> srq_stats(reactor::EventLoop& loop);
  // The spare queue pairs of this shape on `pd` (qp_stock.h), created on first use with
  // `count` (the first connection of the shape decides) and kept topped up by the arena's
  // keeper thread; null when `count` is 0.
  std::shared_ptr<QpStock> qp_stock_for(const std::shared_ptr<verbs::ProtectionDomain>& pd,
                                        const std::shared_ptr<verbs::CompletionChannel>& channel, const QpShape& shape,
                                        size_t count);
  static std::vector<QpStockStats> qp_stock_stats(reactor::EventLoop& loop);
  static std::vector<ArenaStats> arena_stats(reactor::EventLoop& loop);
  void mark_pending(RdmaConnection* c) { pending_.insert(c); }
  // mark_pending from outside the loop's view (a read_owned view released by a later
  // before-sleep hook of the same iteration): keeps the loop from blocking before our hook
  // runs again (a zero-delay timer; nothing when the hook is still to come).
  void mark_pending_soon(RdmaConnection* c);
  void forget(RdmaConnection* c) { pending_.erase(c); }

  void on_events(uint32_t events) override;

 private:
  explicit LoopContext(reactor::EventLoop& loop);
  ~LoopContext() override;
  bool run_pending();
  void on_loop_teardown();
  bool unused() const { return refs_ == 0 && closers_.empty() && to_reap_.empty() && !reaper_.busy(); }
  void hand_to_reaper();  // to_reap_: hook only (no CM event of theirs is being handled)
  void destroy();  // deletes this

  reactor::EventLoop& loop_;
  std::shared_ptr<verbs::EventChannel> channel_;
  std::map<ibv_context*, std::shared_ptr<verbs::ProtectionDomain>> pds_;
  std::map<const verbs::ProtectionDomain*, std::unique_ptr<Arena>> arenas_;
  std::map<std::pair<verbs::ProtectionDomain*, uint32_t>, std::shared_ptr<SrqPool>> srqs_;
  std::map<ibv_context*, std::shared_ptr<CqHub>> hubs_;
  // After arenas_: destroyed before the keepers are joined (they hold the stocks weakly).
  std::map<std::pair<const verbs::ProtectionDomain*, QpShape>, std::shared_ptr<QpStock>> stocks_;
  std::set<RdmaConnection*> pending_;
  std::map<Closer*, std::unique_ptr<Closer>> closers_;
  std::vector<std::unique_ptr<Closer>> retired_;
  std::vector<std::unique_ptr<QpResources>> to_reap_;  // for the reaper, at the next hook
  std::shared_ptr<verbs::EventChannel> reap_channel_;  // never read: the reaped ids' events die there
  reactor::EventLoop::HookId hook_ = 0;
  reactor::EventLoop::HookId teardown_ = 0;
  uint64_t hook_iteration_ = 0;  // loop iteration in which run_pending last started
  bool in_hook_ = false;
  reactor::TimerId nudge_timer_ = 0;
  bool loop_gone_ = false;
  bool tearing_down_ = false;
  bool destroying_ = false;
  int refs_ = 0;
  QpReaper reaper_{[this] { loop_.wake(); }};  // last: joined before the rest goes
};

}  // namespace conduit::transport::rdma
