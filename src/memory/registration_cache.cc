#include "conduit/memory/registration_cache.h"

#include <algorithm>
#include <atomic>
#include <list>
#include <map>
#include <mutex>

#include "conduit/base/clock.h"

namespace conduit::memory {

namespace {
struct Entry {
  uintptr_t start = 0;
  uintptr_t end = 0;  // exclusive
  Registrar::Registration reg;
  size_t pins = 0;
  // In the map (false once invalidated, merged away or evicted).  Written under the core's
  // mutex; Handle::current() reads it without (through a pointer the pin keeps valid).
  std::atomic<bool> indexed{true};
  std::list<Entry*>::iterator lru;
};
}  // namespace

struct RegistrationCache::Core {
  std::shared_ptr<Registrar> registrar;
  CacheOptions options;
  mutable std::mutex mu;
  std::map<uintptr_t, std::unique_ptr<Entry>> index;  // by start; never overlapping
  std::vector<std::unique_ptr<Entry>> detached;       // out of the index, still pinned
  std::list<Entry*> lru;                              // indexed entries, most recent first
  size_t bytes = 0;                                   // registered bytes of every live entry
  CacheStats st;
  bool closing = false;

  void deregister(Entry& e) {
    registrar->deregister(e.reg);
    bytes -= e.end - e.start;
  }
  // Takes `e` out of the index; deregisters it now unless pinned.
  void unindex(std::map<uintptr_t, std::unique_ptr<Entry>>::iterator it) {
    std::unique_ptr<Entry> e = std::move(it->second);
    index.erase(it);
    lru.erase(e->lru);
    e->indexed.store(false, std::memory_order_release);
    if (e->pins == 0) deregister(*e);
    else detached.push_back(std::move(e));
  }
  void unpin(Entry* e) {
    std::lock_guard<std::mutex> lock(mu);
    if (--e->pins != 0 || e->indexed.load(std::memory_order_relaxed)) return;
    deregister(*e);
    detached.erase(std::find_if(detached.begin(), detached.end(), [e](const auto& p) { return p.get() == e; }));
  }
  void evict() {
    for (auto it = lru.rbegin(); bytes > options.byte_cap && it != lru.rend();) {
      Entry* e = *it;
      ++it;
      if (e->pins != 0) continue;
      ++st.evictions;
      unindex(index.find(e->start));
    }
  }
};

struct RegistrationCache::Handle::Pin {
  Pin(std::shared_ptr<Core> c, Entry* e) : core(std::move(c)), entry(e) {}
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  ~Pin() { core->unpin(entry); }
  std::shared_ptr<Core> core;
  Entry* entry;
};

RegistrationCache::RegistrationCache(std::shared_ptr<Registrar> registrar, CacheOptions options)
    : core_(std::make_shared<Core>()) {
  core_->registrar = std::move(registrar);
  if (options.page == 0 || (options.page & (options.page - 1)) != 0) options.page = 4096;
  core_->options = options;
}

RegistrationCache::~RegistrationCache() {
  std::lock_guard<std::mutex> lock(core_->mu);
  // Unpinned entries go now; pinned ones when their handles do (handles hold the core).
  while (!core_->index.empty()) core_->unindex(core_->index.begin());
}

Result<RegistrationCache::Handle> RegistrationCache::acquire(const void* addr, size_t len) {
  if (addr == nullptr || len == 0) return Status(Code::kInvalidArgument, "registration cache: empty range");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (a + len < a) return Status(Code::kInvalidArgument, "registration cache: range wraps the address space");
  Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  Entry* hit = nullptr;
  auto it = c.index.upper_bound(a);
  if (it != c.index.begin()) {
    auto prev = std::prev(it);
    if (prev->second->start <= a && a + len <= prev->second->end) hit = prev->second.get();
  }
  if (hit != nullptr) {
    ++c.st.hits;
    c.lru.splice(c.lru.begin(), c.lru, hit->lru);
  } else {
    ++c.st.misses;
    const uintptr_t page = c.options.page;
    uintptr_t start = a & ~(page - 1);
    uintptr_t end = (a + len + page - 1) & ~(page - 1);
    // Fold in every entry that overlaps or touches the new range, so one registration
    // covers them all and the index stays free of overlaps.
    for (;;) {
      auto n = c.index.upper_bound(end);  // first entry starting after `end`
      bool merged = false;
      while (n != c.index.begin()) {
        auto p = std::prev(n);
        if (p->second->end < start) break;
        start = std::min(start, p->second->start);
        end = std::max(end, p->second->end);
        ++c.st.merges;
        c.unindex(p);
        merged = true;
        n = c.index.upper_bound(end);
      }
      if (!merged) break;
    }
    auto e = std::make_unique<Entry>();
    e->start = start;
    e->end = end;
    const uint64_t t0 = monotonic_ns();
    auto reg = c.registrar->register_memory(reinterpret_cast<void*>(start), end - start);
    if (!reg.ok()) return reg.status().annotate("registration cache");
    c.st.register_ns += monotonic_ns() - t0;
    e->reg = *reg;
    c.bytes += end - start;
    c.lru.push_front(e.get());
    e->lru = c.lru.begin();
    hit = e.get();
    c.index.emplace(start, std::move(e));
  }
  ++hit->pins;
  Handle h;
  h.pin_ = std::make_shared<Handle::Pin>(core_, hit);
  h.indexed_ = &hit->indexed;
  h.start_ = hit->start;
  h.end_ = hit->end;
  h.keys_ = hit->reg.keys;
  c.evict();  // never the entry just pinned
  return h;
}

Result<Slice> RegistrationCache::slice(const void* addr, size_t len, unsigned domain) {
  if (domain >= kMaxDomains) return Status(Code::kInvalidArgument, "registration cache: domain out of range");
  CONDUIT_ASSIGN_OR_RETURN(Handle h, acquire(addr, len));
  // The keys array lives as long as the slice (the release function holds it).
  auto keys = std::make_shared<RegionKeys[]>(kMaxDomains);
  keys[domain] = h.keys();
  const RegionKeys* raw = keys.get();
  return Slice::foreign(static_cast<uint8_t*>(const_cast<void*>(addr)), len,
                        [h = std::move(h), keys = std::move(keys)]() mutable { h = Handle(); }, raw, 1u << domain,
                        core_.get());
}

size_t RegistrationCache::invalidate(const void* addr, size_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t b = a + len;
  Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  size_t pinned = 0;
  for (auto it = c.index.lower_bound(b); it != c.index.begin();) {  // entries starting before b
    auto p = std::prev(it);
    if (p->second->end <= a) break;
    ++c.st.invalidations;
    pinned += p->second->pins != 0 ? 1 : 0;
    c.unindex(p);
    it = c.index.lower_bound(b);
  }
  return pinned;
}

CacheStats RegistrationCache::stats() const {
  const Core& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  CacheStats st = c.st;
  st.entries = c.index.size();
  st.bytes_registered = c.bytes;
  st.pinned = c.detached.size();
  for (const auto& [k, e] : c.index) st.pinned += e->pins != 0 ? 1 : 0;
  return st;
}

}  // namespace conduit::memory
