// RegistrationCache: application memory that did not come from a pool, registered on first
// use and kept for the next (the "register per operation" strategy made cheap for buffers
// that come back, as UCX's rcache and MPI libraries do).
//
// acquire(addr, len) returns a handle to a registration covering the range: a cached one
// when an entry contains it (a hit: a map lookup), or a new one registered now, rounded out
// to whole pages and merged with the cached entries it overlaps or touches (so the index
// never holds overlapping entries).  A handle pins its entry: pinned entries are never
// evicted or deregistered -- memory exposed to a peer stays registered while exposed.
// Unpinned entries are evicted least recently used first once the registered bytes exceed
// the cap.  invalidate(addr, len) must be called before the application frees or remaps
// memory it registered: overlapping entries leave the index at once, and are deregistered
// as soon as no handle pins them.
//
// Threading: thread-safe (one mutex).  Handles may outlive the cache.  Cost: a hit is a
// mutex and a map lookup; a miss is a registration (slow; see registrar.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "conduit/base/status.h"
#include "conduit/memory/buffer.h"
#include "conduit/memory/registrar.h"

namespace conduit::memory {

struct CacheOptions {
  size_t byte_cap = size_t{256} << 20;  // registered bytes kept for reuse (pinned ones may exceed it)
  size_t page = 4096;                   // registrations are rounded out to this
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t invalidations = 0;  // entries taken out by invalidate()
  uint64_t merges = 0;         // entries folded into a larger registration
  size_t entries = 0;          // in the index
  size_t pinned = 0;           // entries (in the index or not) with handles
  size_t bytes_registered = 0;
  uint64_t register_ns = 0;
};

class RegistrationCache {
 public:
  class Handle;

  RegistrationCache(std::shared_ptr<Registrar> registrar, CacheOptions options = {});
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  Result<Handle> acquire(const void* addr, size_t len);
  // [addr, addr + len) as a Slice carrying the registration's keys in `domain` (the index a
  // transport reads them from); the slice pins the registration until its last copy goes.
  Result<Slice> slice(const void* addr, size_t len, unsigned domain = 0);
  // Returns how many of the entries taken out are still pinned (deregistered later).
  size_t invalidate(const void* addr, size_t len);
  CacheStats stats() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

// A pinned registration.  Copyable (shares the pin); the entry is unpinned when the last
// copy goes.  The accessors are inline and take no lock: the handle keeps a copy of the
// entry's range and keys (fixed for the entry's life) and a pointer to its "still indexed"
// flag, which the pin keeps alive.  Copying costs an atomic increment (the pin).
class RegistrationCache::Handle {
 public:
  // A moved-from handle is empty (its pin moved away: not valid, current() and covers()
  // false), like a default one.
  bool valid() const { return pin_ != nullptr; }
  // Still the cache's registration for its range: false once the range was invalidated,
  // merged into a larger registration or evicted (the pin keeps the region registered, but
  // acquire() would no longer return it).  One atomic load: a caller that keeps a handle
  // may reuse it for ranges it covers() while this holds, instead of acquire() (mutex,
  // lookup and a pin per call).
  bool current() const { return pin_ != nullptr && indexed_->load(std::memory_order_acquire); }
  bool covers(const void* addr, size_t len) const {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    return pin_ != nullptr && a >= start_ && a <= end_ && len <= end_ - a;
  }
  RegionKeys keys() const { return keys_; }
  uint64_t base() const { return start_; }  // the registered range (page-rounded), which contains the range asked for
  size_t length() const { return end_ - start_; }

  struct Pin;

 private:
  friend class RegistrationCache;
  std::shared_ptr<Pin> pin_;
  const std::atomic<bool>* indexed_ = nullptr;  // the entry's flag (kept alive by pin_); set with pin_
  uintptr_t start_ = 0, end_ = 0;
  RegionKeys keys_{};
};

}  // namespace conduit::memory
