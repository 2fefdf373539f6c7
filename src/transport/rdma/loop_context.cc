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
  if (--refs_ > 0 || !closers_.empty()) return;  // the last closer's retirement deletes it
  destroy();
}

void LoopContext::mark_pending_soon(RdmaConnection* c) {
  pending_.insert(c);
  if (in_hook_ || hook_iteration_ != loop_.iterations() || nudge_timer_ != 0 || loop_gone_) return;
  nudge_timer_ = loop_.run_after(0, [this] { nudge_timer_ = 0; });
}

void LoopContext::destroy() {
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

void LoopContext::on_loop_teardown() {
  tearing_down_ = true;
  // Graceful closes still waiting are abandoned: the loop that would finish them is going.
  for (auto& [raw, c] : closers_) c->abandon();
  closers_.clear();
  retired_.clear();
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
  if (!retired_.empty()) {
    retired_.clear();
    if (refs_ == 0 && closers_.empty()) {
      destroy();
      return false;
    }
  }
  // Receive completions left queued by SrqPool::detach() or a per-QP drain.
  for (auto& [key, pool] : srqs_)
    if (pool->has_backlog()) (void)pool->process();
  if (pending_.empty()) return false;
  // Handlers may mark connections pending again: work on a copy.  Every pointer in it stays
  // valid throughout (connections are destroyed only through EventLoop::destroy_later, and
  // a closed one's run_deferred does nothing).
  std::vector<RdmaConnection*> batch(pending_.begin(), pending_.end());
  pending_.clear();
  in_hook_ = true;
  for (RdmaConnection* c : batch) {
    if (c->run_deferred()) pending_.insert(c);
  }
  in_hook_ = false;
  return !pending_.empty();
}

}  // namespace conduit::transport::rdma
