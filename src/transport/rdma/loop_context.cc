#include "loop_context.h"

#include "closer.h"
#include "conduit/base/log.h"
#include "connection.h"
#include "cq_hub.h"
#include "srq_pool.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;
using reactor::EventLoop;

namespace {
// The key of the rdma transport's slot in every EventLoop (its address is what counts).
constexpr char kSlotKey = 0;
}  // namespace

Result<LoopContext*> LoopContext::acquire(EventLoop& loop) {
  if (auto* ctx = static_cast<LoopContext*>(loop.slot(&kSlotKey))) {
    ++ctx->refs_;
    return ctx;
  }
  CONDUIT_ASSIGN_OR_RETURN(auto channel, EventChannel::create());
  LoopContext* raw = new LoopContext(loop);
  raw->channel_ = std::move(channel);
  if (Status s = loop.add(raw->channel_->fd(), reactor::kReadable, raw); !s.ok()) {
    delete raw;
    return s;
  }
  raw->hook_ = loop.add_before_sleep([raw] { return raw->run_pending(); });
  raw->teardown_ = loop.add_teardown([raw] { raw->on_loop_teardown(); });
  raw->refs_ = 1;
  loop.set_slot(&kSlotKey, raw);
  return raw;
}

LoopContext::LoopContext(EventLoop& loop) : loop_(loop) {}
LoopContext::~LoopContext() = default;

void LoopContext::release() {
  --refs_;
  if (unused()) destroy();  // else the last closer's retirement or QP's reaping deletes it
}

void LoopContext::mark_pending_soon(RdmaConnection* c) {
  pending_.insert(c);
  if (in_hook_ || hook_iteration_ != loop_.iterations() || nudge_timer_ != 0 || loop_gone_) return;
  nudge_timer_ = loop_.run_after(0, [this] { nudge_timer_ = 0; });
}

void LoopContext::destroy() {
  destroying_ = true;  // closers retired but not yet destroyed release their resources here
  retired_.clear();
  to_reap_.clear();
  reaper_.stop();  // idle (unused()), unless the loop is going: then it waits for the kernel
  for (auto& r : reaper_.take_done()) r.reset();
  if (!loop_gone_) {
    if (nudge_timer_ != 0) loop_.cancel(nudge_timer_);
    loop_.set_slot(&kSlotKey, nullptr);
    for (auto& [key, pool] : srqs_) (void)loop_.remove(pool->fd());
  for (auto& [dev, hub] : hubs_) hub->unwatch();
    (void)loop_.remove(channel_->fd());
    loop_.remove_before_sleep(hook_);
    loop_.remove_teardown(teardown_);
  }
  delete this;
}

void LoopContext::adopt(std::unique_ptr<Closer> c) {
  Closer* raw = c.get();
  closers_.emplace(raw, std::move(c));
}

void LoopContext::retire(Closer* c) {
  auto it = closers_.find(c);
  if (it == closers_.end()) return;
  retired_.push_back(std::move(it->second));
  closers_.erase(it);
  loop_.wake();  // make sure the hook runs soon even if nothing else happens
}

void LoopContext::reap(std::unique_ptr<QpResources> res) {
  if (!res) return;
  if (tearing_down_ || loop_gone_ || destroying_) return res.reset();  // nothing to hand them back to
  res->prepare_to_reap();
  to_reap_.push_back(std::move(res));
  // Our hook runs before the loop sleeps -- unless it already ran in this iteration (we are
  // in a later hook, e.g. another layer's): then the loop must not sleep first.
  if (!in_hook_ && hook_iteration_ == loop_.iterations()) loop_.wake();
}

void LoopContext::hand_to_reaper() {
  if (to_reap_.empty()) return;
  // librdmacm's rdma_get_cm_event acts on an id's QP for some events (a late CONNECT_RESPONSE
  // or REJECTED moves it to RTR/RTS or ERR); with the QP being destroyed on another thread
  // that must not happen on this loop's channel, so the id moves to one nobody reads (its
  // events there die with it).  rdma_migrate_id waits for the id's events read here to be
  // acknowledged: CmId::next_event acknowledges each as it reads it, so it does not wait.
  if (!reap_channel_) {
    auto ch = EventChannel::create();
    if (ch.ok())
      reap_channel_ = std::move(*ch);
    else
      CONDUIT_LOG(kWarn) << "rdma: no event channel for the QP reaper (QPs are destroyed on the loop): "
                         << ch.status().to_string();
  }
  for (auto& res : to_reap_) {
    Status moved = !res->id ? Status() : !reap_channel_ ? Status(Code::kInternal, "no channel") : res->id->migrate(reap_channel_);
    if (moved.ok()) {
      reaper_.give(std::move(res));
    } else {
      CONDUIT_LOG(kDebug) << "rdma: QP " << res->qpn << " destroyed on the loop: " << moved.to_string();
      res.reset();
    }
  }
  to_reap_.clear();
}

ReaperStats LoopContext::reaper_stats(EventLoop& loop) {
  auto* ctx = static_cast<LoopContext*>(loop.slot(&kSlotKey));
  if (ctx == nullptr) return {};
  return ReaperStats{ctx->closers_.size(), ctx->reaper_.given(), ctx->reaper_.outstanding(), ctx->reaper_.slowest_ns()};
}

void LoopContext::on_loop_teardown() {
  tearing_down_ = true;
  // Graceful closes still waiting are abandoned: the loop that would finish them is going.
  for (auto& [raw, c] : closers_) c->abandon();
  closers_.clear();
  retired_.clear();
  to_reap_.clear();
  // QPs still being destroyed are waited for (the kernel may take its time); their
  // resources are released here.
  reaper_.stop();
  for (auto& r : reaper_.take_done()) r.reset();
  if (refs_ == 0) return destroy();
  // Connections or listeners outlived their loop (a caller bug): never touch the loop again.
  CONDUIT_LOG(kWarn) << "rdma: event loop destroyed while " << refs_ << " RDMA connection(s)/listener(s) still use it";
  loop_.set_slot(&kSlotKey, nullptr);
  for (auto& [key, pool] : srqs_) (void)loop_.remove(pool->fd());
  for (auto& [dev, hub] : hubs_) hub->unwatch();
  loop_gone_ = true;
}

Result<std::shared_ptr<ProtectionDomain>> LoopContext::pd_for(CmId& id, size_t arena_cap_bytes) {
  // Found by the id's raw device first: borrowing a Context queries the device (a system
  // call), which only the first connection of a loop on a device pays.
  ibv_context* raw = id.native_handle()->verbs;
  if (raw == nullptr) return Status(Code::kInternal, "rdma: cm id has no device");
  if (auto it = pds_.find(raw); it != pds_.end()) return it->second;
  std::shared_ptr<Context> dev = id.context();
  if (!dev) return Status(Code::kInternal, "rdma: cm id has no device");
  CONDUIT_ASSIGN_OR_RETURN(auto pd, ProtectionDomain::create(dev));
  CONDUIT_ASSIGN_OR_RETURN(auto arena, Arena::create(pd, arena_cap_bytes));
  arenas_.emplace(pd.get(), std::move(arena));
  pds_.emplace(dev->native_handle(), pd);
  return pd;
}

Arena* LoopContext::arena_for(const ProtectionDomain& pd) {
  auto it = arenas_.find(&pd);
  return it == arenas_.end() ? nullptr : it->second.get();
}

Result<std::shared_ptr<CqHub>> LoopContext::hub_for(const std::shared_ptr<Context>& dev) {
  if (auto it = hubs_.find(dev->native_handle()); it != hubs_.end()) return it->second;
  CONDUIT_ASSIGN_OR_RETURN(auto hub, CqHub::create(loop_, dev));
  hubs_.emplace(dev->native_handle(), hub);
  return hub;
}

Result<std::shared_ptr<SrqPool>> LoopContext::srq_for(const std::shared_ptr<ProtectionDomain>& pd, uint32_t depth) {
  const auto key = std::make_pair(pd.get(), depth);
  auto it = srqs_.find(key);
  if (it != srqs_.end()) return it->second;
  CONDUIT_ASSIGN_OR_RETURN(auto pool, SrqPool::create(pd, depth, [this] {
                             if (!loop_gone_ && !tearing_down_) loop_.wake();
                           }));
  CONDUIT_RETURN_IF_ERROR(loop_.add(pool->fd(), reactor::kReadable, pool.get()));
  srqs_.emplace(key, pool);
  return pool;
}

std::shared_ptr<QpStock> LoopContext::qp_stock_for(const std::shared_ptr<ProtectionDomain>& pd,
                                                   const std::shared_ptr<CompletionChannel>& channel,
                                                   const QpShape& shape, size_t count) {
  if (count == 0) return nullptr;
  const auto key = std::make_pair(static_cast<const ProtectionDomain*>(pd.get()), shape);
  if (auto it = stocks_.find(key); it != stocks_.end()) return it->second;
  Arena* arena = arena_for(*pd);
  if (arena == nullptr) return nullptr;
  auto stock = std::make_shared<QpStock>(pd, channel, shape, count);
  arena->spares.keep(stock);  // starts topping it up
  stocks_.emplace(key, stock);
  return stock;
}

std::vector<QpStockStats> LoopContext::qp_stock_stats(EventLoop& loop) {
  std::vector<QpStockStats> out;
  auto* ctx = static_cast<LoopContext*>(loop.slot(&kSlotKey));
  if (ctx == nullptr) return out;
  for (auto& [key, stock] : ctx->stocks_) out.push_back(stock->stats());
  return out;
}

std::vector<SrqStats> LoopContext::srq_stats(EventLoop& loop) {
  std::vector<SrqStats> out;
  auto* ctx = static_cast<LoopContext*>(loop.slot(&kSlotKey));
  if (ctx == nullptr) return out;
  for (auto& [key, pool] : ctx->srqs_) out.push_back(pool->stats());
  return out;
}

std::vector<ArenaStats> LoopContext::arena_stats(EventLoop& loop) {
  std::vector<ArenaStats> out;
  auto* ctx = static_cast<LoopContext*>(loop.slot(&kSlotKey));
  if (ctx == nullptr) return out;
  for (auto& [pd, a] : ctx->arenas_) {
    ArenaStats st;
    st.device = std::string(a->pd->context()->name());
    st.pool = a->pool->stats();
    if (a->rx_mw) st.rx = a->rx_mw->stats();
    if (a->rx_shared) st.rx_shared = a->rx_shared->stats();
    st.spares_idle = a->spares.idle();
    out.push_back(std::move(st));
  }
  return out;
}

void LoopContext::on_events(uint32_t) {
  // Bounded batch so a connection storm can't starve the loop.
  for (int i = 0; i < 64; ++i) {
    auto ev = CmId::next_event(channel_, 0);
    if (!ev.ok()) {
      if (ev.status().is_error()) CONDUIT_LOG(kWarn) << "rdma_cm: " << ev.status().to_string();
      return;
    }
    CmId* target = ev->owner;
    if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id != nullptr)
      target = static_cast<CmId*>(ev->listen_id->context);
    auto* sink = target ? static_cast<CmSink*>(target->user_data()) : nullptr;
    if (sink == nullptr) {
      CONDUIT_LOG(kDebug) << "rdma_cm: event " << ev->to_string() << " for an id nobody owns";
      continue;  // e.g. a CONNECT_REQUEST for a closed listener: new_id is destroyed = rejected
    }
    sink->on_cm_event(*ev);
  }
}

bool LoopContext::run_pending() {
  hook_iteration_ = loop_.iterations();
  retired_.clear();  // their resources go to to_reap_
  // Receive completions left queued by SrqPool::detach() or a per-QP drain.
  for (auto& [key, pool] : srqs_)
    if (pool->has_backlog()) (void)pool->process();
  if (!pending_.empty()) {
    // Handlers may mark connections pending again: work on a copy.  Every pointer in it
    // stays valid throughout (connections are destroyed only through
    // EventLoop::destroy_later, and a closed one's run_deferred does nothing).
    std::vector<RdmaConnection*> batch(pending_.begin(), pending_.end());
    pending_.clear();
    in_hook_ = true;
    for (RdmaConnection* c : batch) {
      if (c->run_deferred()) pending_.insert(c);
    }
    in_hook_ = false;
  }
  hand_to_reaper();
  // Resources whose QP the reaper destroyed: the rest is released here, on the loop.
  if (reaper_.busy())
    for (auto& r : reaper_.take_done()) r.reset();
  if (unused()) {
    destroy();
    return false;
  }
  return !pending_.empty();
}

}  // namespace conduit::transport::rdma
