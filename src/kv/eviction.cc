// maxmemory policies: Redis' sampled approximations.  Before a command runs while used
// memory is above maxmemory, keys are evicted until it is below: each round samples
// maxmemory-samples keys (from the whole keyspace or from the keys with an expiry) in
// every database and evicts the best candidate -- least recently used (LRU clock of the
// last access, seconds), least frequently used (Redis' logarithmic counter with decay),
// nearest expiry (volatile-ttl) or a random one.  An evicted key is deleted as a DEL
// (propagated to the AOF, seen by WATCH).  noeviction refuses write commands with -OOM
// instead, and so does any policy that finds nothing to evict.
//
// Access times: every lookup stores the LRU clock or bumps the LFU counter in the entry
// (Entry::access, 24 bits as in Redis' robj->lru).  OBJECT IDLETIME / FREQ report them.
#include <cmath>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "server_impl.h"

namespace conduit::kv {

namespace {

constexpr uint32_t kLruMask = (1u << 24) - 1;
constexpr uint8_t kLfuInit = 5;  // LFU_INIT_VAL: new keys are not evicted at once

bool is_lfu(EvictionPolicy p) { return p == EvictionPolicy::kAllKeysLfu || p == EvictionPolicy::kVolatileLfu; }

}  // namespace

bool ServerImpl::lfu_policy() const { return is_lfu(options_.maxmemory_policy); }

void ServerImpl::record_access(Entry* e) {
  if (!lfu_policy()) {
    e->access = static_cast<uint32_t>(coarse_ms_ / 1000) & kLruMask;
    return;
  }
  // Decay by the minutes since the last access, then a logarithmic increment.
  const uint32_t now_min = static_cast<uint32_t>(coarse_ms_ / 60000) & 0xffff;
  uint8_t counter = lfu_counter(e);
  if (counter < 255) {
    const double r = static_cast<double>(random64() >> 11) / static_cast<double>(1ull << 53);
    const double base = counter > kLfuInit ? counter - kLfuInit : 0;
    const double p = 1.0 / (base * options_.lfu_log_factor + 1);
    if (r < p) ++counter;
  }
  e->access = (now_min << 8) | counter;
}

uint8_t ServerImpl::lfu_counter(const Entry* e) const {
  if ((e->access >> 8) == 0 && (e->access & 0xff) == 0) return kLfuInit;  // never accessed under LFU
  const uint32_t now_min = static_cast<uint32_t>(coarse_ms_ / 60000) & 0xffff;
  const uint32_t then = e->access >> 8;
  const uint32_t elapsed = now_min >= then ? now_min - then : 65535 - then + now_min;
  const uint32_t periods = options_.lfu_decay_time > 0 ? elapsed / options_.lfu_decay_time : 0;
  const uint32_t c = e->access & 0xff;
  return static_cast<uint8_t>(periods > c ? 0 : c - periods);
}

int64_t ServerImpl::idle_seconds(const Entry* e) const {
  const uint32_t now = static_cast<uint32_t>(coarse_ms_ / 1000) & kLruMask;
  const uint32_t then = e->access & kLruMask;
  return now >= then ? now - then : static_cast<int64_t>(kLruMask - then + now);
}

bool ServerImpl::evict_locked() {
  if (used_memory() <= options_.maxmemory) return true;
  const EvictionPolicy p = options_.maxmemory_policy;
  if (p == EvictionPolicy::kNoEviction) return false;
  const bool volatile_only = p == EvictionPolicy::kVolatileLru || p == EvictionPolicy::kVolatileLfu ||
                             p == EvictionPolicy::kVolatileRandom || p == EvictionPolicy::kVolatileTtl;
  const uint64_t start = monotonic_ns();
  // Bounded: at most 50 ms of evicting per command (the rest happens on the next ones).
  while (used_memory_ + transport_memory_locked() > options_.maxmemory) {
    Entry* best = nullptr;
    Database* best_db = nullptr;
    double best_score = 0;  // higher = better to evict
    for (auto& dp : dbs_) {
      Database& d = *dp;
      const size_t pool = volatile_only ? d.expires() : d.size();
      if (pool == 0) continue;
      for (uint32_t i = 0; i < std::max<uint32_t>(options_.maxmemory_samples, 1); ++i) {
        Entry* e = volatile_only ? d.random_volatile(random64()) : d.random_entry(random64());
        if (e == nullptr) break;
        double score;
        switch (p) {
          case EvictionPolicy::kAllKeysLru:
          case EvictionPolicy::kVolatileLru: score = static_cast<double>(idle_seconds(e)); break;
          case EvictionPolicy::kAllKeysLfu:
          case EvictionPolicy::kVolatileLfu: score = 255.0 - lfu_counter(e); break;
          case EvictionPolicy::kVolatileTtl: score = -static_cast<double>(e->expire_ms); break;
          default: score = static_cast<double>(random64() >> 11); break;
        }
        if (best == nullptr || score > best_score) {
          best = e;
          best_db = &d;
          best_score = score;
        }
      }
    }
    if (best == nullptr) return false;
    const size_t freed = estimate_bytes(best);
    const std::string key(best->key());
    const std::string_view del[2] = {"DEL", key};
    propagate(best_db->index(), del);
    best_db->remove(best);
    notify(kNotifyEvicted, "evicted", key, best_db->index());
    signal_key(best_db->index(), key);
    ++evicted_keys_;
    used_memory_ = used_memory_ > freed ? used_memory_ - freed : 0;
    if (monotonic_ns() - start > 50'000'000ull) break;
  }
  return used_memory_ + transport_memory_locked() <= options_.maxmemory;
}

void ServerImpl::record_latency(const char* event, uint64_t ms) {
  LatencyEvent& ev = latency_[event];
  const int64_t now = wall_ms() / 1000;
  ev.latest_ms = ms;
  ev.max_ms = std::max(ev.max_ms, ms);
  if (!ev.history.empty() && ev.history.back().first == now) {
    ev.history.back().second = std::max(ev.history.back().second, ms);
  } else {
    ev.history.emplace_back(now, ms);
    if (ev.history.size() > 160) ev.history.pop_front();
  }
  ev.last_time = now;
}

}  // namespace conduit::kv
