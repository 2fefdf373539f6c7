// BlockPool: registered memory in size classes -- the seeds' third strategy, one pool shared
// by the application and the NIC, so a transport sends from and receives into memory that
// was registered once, never per operation.
//
// Memory is mapped in regions (2 MiB, on hugepages when the system has them, plain pages
// with transparent-hugepage advice otherwise), each holding blocks of one size class (or,
// from PoolOptions::solo_bytes up, exactly one block); every
// region is registered once with every registrar the pool was given (a registrar per
// device/protection domain).  Blocks larger than the largest class get a region of their
// own, registered when allocated and deregistered when freed (register-per-operation,
// for the rare giant buffer).  A cap bounds the bytes mapped: allocating beyond it reports
// kWouldBlock -- never a hang, never a silent fallback to memory a device cannot reach --
// and wait() tells a MemoryWaiter when blocks come back.  At the cap, a region of another
// class whose blocks are all free is unmapped to make room (memory freed in one class
// serves another); free blocks in other threads' caches are not reclaimed.
//
// Threading: allocate(), a slice's release, stats(), wait() and cancel_wait() are
// thread-safe.  Each thread keeps a small cache of free blocks per class, so the common
// allocate/free pair touches no lock; the shared free lists take a mutex.
// Lifetime: the pool is held by shared_ptr, and a block handed out keeps it alive: slices
// may outlive every other reference (the pool, its regions and its registrars then go with
// the last slice).
// fork(): see docs/MEMORY.md -- a child that execs leaves the parent's registrations and
// queue pairs intact; a child that does not exec gets a private copy of the pool's pages
// (Linux >= 5.13 copies pinned pages at fork) and must not use the parent's verbs objects.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/memory/buffer.h"
#include "conduit/memory/registrar.h"

namespace conduit::memory {

struct PoolOptions {
  // Block sizes, ascending powers of two.  Default: 4 KiB .. 4 MiB (brpc's 8 KiB block is
  // among them; the rdma transport's default 1 MiB receive buffer is one block).
  std::vector<size_t> classes = {4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1 << 20, 2 << 20, 4 << 20};
  size_t region_bytes = 2 << 20;  // mapping and registration unit (at least the class size)
  // Classes of at least this many bytes get a region of exactly one block, so a block's
  // registration covers that block and nothing else (what a transport needs to hand a peer
  // a key for one block where keys are bounded only by their region, as rxe's memory
  // windows are).  0: none; otherwise a multiple of 4096.  Costs one registration per block.
  size_t solo_bytes = 0;
  size_t cap_bytes = size_t{1} << 30;  // all regions together; beyond it allocate() would-blocks
  bool hugepages = true;               // try MAP_HUGETLB first
  size_t thread_cache_bytes = 1 << 20;  // per thread and class (at least 2 blocks; 0: no cache)
  std::string name = "pool";            // for logs and stats
};

struct ClassStats {
  size_t block_size = 0;
  size_t regions = 0;
  size_t in_use = 0;  // blocks held by slices
  size_t free = 0;    // blocks in the shared free list (not counting thread caches)
};

struct PoolStats {
  size_t regions = 0;           // mapped regions (large ones included)
  size_t hugepage_regions = 0;  // of which on MAP_HUGETLB pages
  size_t bytes_mapped = 0;
  size_t bytes_registered = 0;  // summed over registrars
  size_t bytes_in_use = 0;      // capacity of the blocks held by slices
  uint64_t registrations = 0;   // registrar calls that succeeded
  uint64_t register_ns = 0;     // time spent in them
  uint64_t cache_hits = 0;      // allocations served by a thread cache
  uint64_t cache_misses = 0;    // ... that took the shared lists
  uint64_t would_block = 0;     // allocations refused at the cap
  uint64_t regions_reclaimed = 0;  // free regions unmapped at the cap to serve another class
  std::vector<ClassStats> classes;
  std::vector<std::string> registrars;
};

// Told once that memory came back after an allocation would-blocked.  Runs on the thread
// that released the memory, outside the pool's lock: it must be thread-safe and cheap
// (post to an event loop).  One-shot: wait() again if still short.
class MemoryWaiter {
 public:
  virtual void on_memory_available() = 0;

 protected:
  ~MemoryWaiter() = default;
};

class BlockPool : public std::enable_shared_from_this<BlockPool> {
 public:
  static Result<std::shared_ptr<BlockPool>> create(PoolOptions options = {});
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Registers every region, present and future, with `r`; returns its domain index (the
  // argument of Slice::keys).  Fails (and leaves the pool unchanged) if a region cannot be
  // registered or kMaxDomains registrars are attached.  Slow: registers all regions now.
  Result<unsigned> add_registrar(std::shared_ptr<Registrar> r);

  // A slice of `size` bytes (1 .. cap) from the smallest class that holds it; capacity is
  // the class size, headroom 0.  kWouldBlock when the cap is reached; then wait().
  Result<Slice> allocate(size_t size);
  // A chain of `size` bytes in blocks of at most `max_block` bytes each.
  Result<Chain> allocate_chain(size_t size, size_t max_block = 64 * 1024);

  // Tells `w` (once) when memory comes back; at once if an allocate(`size`) may succeed
  // already (size 0: if any block of any class is free).
  void wait(MemoryWaiter* w, size_t size = 0);
  void cancel_wait(MemoryWaiter* w);

  // Maps and registers regions ahead of demand until the class that holds `size` has at
  // least `blocks` blocks not in use (in its shared list or a thread's cache: a block freed
  // on the loop thread waits in that thread's cache, and counting only the shared list made
  // the keeper register a region whenever it ran while the cache held the spares), so that
  // the allocations that follow register nothing.  The slow part (mmap, registration) runs
  // outside the pool's lock: allocations on other threads go on meanwhile, and the cap
  // holds throughout.  Never reclaims another class's regions: kWouldBlock at the cap;
  // kInvalidArgument if no class holds `size`.  Thread-safe; slow (a registration per
  // region), so meant for a background thread (SpareKeeper) or start-up.
  Status reserve(size_t size, size_t blocks);
  // Free blocks of the class that holds `size` in the shared list (0 if no class does).
  // Thread-safe; takes the pool's lock.
  size_t free_blocks(size_t size) const;
  PoolStats stats() const;
  const PoolOptions& options() const { return options_; }
  size_t largest_class() const { return options_.classes.back(); }
  uint64_t id() const { return id_; }

  // Internals shared with the per-thread caches (pool.cc).
  struct Region;
  struct ClassState;
  void release_block(detail::Storage* s);  // a slice's last reference went
  void return_shared(detail::Storage* s);  // a free block into the shared list

 private:
  explicit BlockPool(PoolOptions options);
  // One block of class `cls`, and up to `refill_max` more into *refill (a thread cache),
  // under one lock.
  Result<detail::Storage*> take_shared(size_t cls, std::vector<detail::Storage*>* refill, size_t refill_max);
  Result<Region*> map_region(size_t cls, size_t bytes);  // mu_ held
  // At the cap: unmaps regions of other classes whose blocks are all free in the shared
  // lists until `bytes` fit; true if they do.  mu_ held.
  bool reclaim_for(size_t bytes, int keep_cls);
  size_t unused_blocks_locked(int cls) const;  // mu_ held
  bool region_free(const Region& r) const;  // mu_ held
  // What a new region for class `cls` with blocks of `bytes` (a large block: cls -1) maps.
  size_t region_bytes_for(int cls, size_t bytes) const;
  void flush_thread_cache();                // this thread's free blocks into the shared lists
  Status register_region(Region& r);                     // mu_ held
  Status register_with(const std::vector<std::shared_ptr<Registrar>>& registrars, size_t first, Region& r,
                       uint64_t* count, uint64_t* ns) const;
  Result<std::unique_ptr<Region>> map_pages(size_t bytes) const;
  Region* adopt_region(std::unique_ptr<Region> r, size_t cls);  // mu_ held
  void unmap_region(Region& r);                          // mu_ held
  Result<Slice> allocate_large(size_t size);
  void notify_waiters();
  int class_of(size_t size) const;
  bool cache_block(detail::Storage* s, size_t cls);
  void note_in_use(size_t capacity);
  void note_released(size_t capacity);  // may destroy the pool (the last block of an orphan)
  void orphan();                        // the last shared_ptr went: delete now or with the last block

  PoolOptions options_;
  uint64_t id_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Region>> regions_;
  std::vector<std::unique_ptr<ClassState>> classes_;
  std::vector<std::shared_ptr<Registrar>> registrars_;
  size_t bytes_mapped_ = 0;
  std::vector<MemoryWaiter*> waiters_;
  std::atomic<bool> pressure_{false};  // someone waits: frees bypass the thread caches
  std::atomic<size_t> in_use_blocks_{0};
  std::atomic<size_t> bytes_in_use_{0};
  std::atomic<uint64_t> cache_hits_{0}, cache_misses_{0}, would_block_{0};
  uint64_t reclaimed_ = 0;  // mu_
  uint64_t registrations_ = 0, register_ns_ = 0;
  // Set when the last shared_ptr went while blocks were out: the last release deletes the
  // pool.  (Checked with one load when the count of blocks out reaches zero.)
  std::atomic<bool> orphaned_{false};
  std::atomic<bool> deleting_{false};
};

}  // namespace conduit::memory
