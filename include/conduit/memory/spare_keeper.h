// SpareKeeper: keeps a few free, registered blocks ready in pools ahead of demand, so that
// the allocation on a latency-critical path (a connection's setup) finds one and registers
// nothing.  Registration is slow -- milliseconds per MiB under Soft-RoCE, where it was most
// of an rdma:// connection's setup -- and BlockPool::reserve() does it without holding the
// pool's lock, so a background thread can do it while the owner's thread goes on.
//
//   keeper.keep(pool, 1 << 20, 2);   // from now on: >= 2 free 1 MiB blocks in `pool`
//   auto s = pool->allocate(1 << 20);
//   keeper.poke();                   // cheap: the thread tops the pool up again
//   keeper.keep(stock);              // anything else with a top_up() (SpareKeeper::Stock)
//
// What it costs: the spare blocks themselves (pinned memory: at most the wants' sizes x
// their counts, and never beyond a pool's cap -- at the cap the keeper stops quietly), and a
// thread, started on the first keep() and joined by the destructor.  It moves registration
// off the caller's path, it does not remove it: the CPU time is the same, on another core
// (the thread runs at nice 19, so it yields to the threads serving connections).
// Threading: keep() and poke() are thread-safe.  The keeper holds the pools weakly (a pool
// that went is dropped from its wants).  In a fork()ed child, which has the object but not
// the thread, wants are recorded and never topped up, and the destructor does not wait.
// Owned by whoever owns the pools' users (the rdma transport: one per event loop and
// device, in its arena).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "conduit/memory/pool.h"

namespace conduit::memory {

class SpareKeeper {
 public:
  // At most this many (pool, size) wants, and this many spare blocks per want: a bound on
  // what a keeper pins whatever its callers ask.
  static constexpr size_t kMaxWants = 8;
  static constexpr size_t kMaxBlocks = 16;

  SpareKeeper() = default;
  ~SpareKeeper();  // stops and joins the thread (a reserve() in progress finishes first)
  SpareKeeper(const SpareKeeper&) = delete;
  SpareKeeper& operator=(const SpareKeeper&) = delete;

  // From now on keeps at least `blocks` (clamped to kMaxBlocks) free blocks of the class that
  // holds `size` in `pool`, and tops up at once.  The same (pool, size) again keeps the
  // larger count; blocks 0 or a new want beyond kMaxWants is ignored.  Cheap when the want is
  // known already (a lock and a scan of kMaxWants).
  void keep(const std::shared_ptr<BlockPool>& pool, size_t size, size_t blocks);
  // Something other than pool blocks kept ahead of demand on the same thread (the rdma
  // transport's spare queue pairs): top_up() runs on the keeper's thread in every round,
  // after the pools, outside the keeper's lock.  Held weakly, like the pools.
  class Stock {
   public:
    virtual void top_up() = 0;

   protected:
    ~Stock() = default;
  };
  // From now on tops `stock` up in every round, and at once.  At most kMaxWants stocks
  // (more are ignored); the same stock again changes nothing.
  void keep(const std::shared_ptr<Stock>& stock);
  // Some block was taken: the thread checks every want and tops it up.  Cheap (a lock and a
  // notify); coalesces.
  void poke();

  // For tests and stats: top-up rounds finished, and whether the thread is idle (nothing
  // poked since its last round ended).
  uint64_t rounds() const;
  bool idle() const;

 private:
  struct Want {
    std::weak_ptr<BlockPool> pool;
    size_t size = 0;
    size_t blocks = 0;
  };
  void run();

  void start_locked();  // mu_ held: marks work and starts the thread on first use

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Want> wants_;
  std::vector<std::weak_ptr<Stock>> stocks_;
  bool poked_ = false;
  bool busy_ = false;
  bool stop_ = false;
  uint64_t rounds_ = 0;
  int started_by_ = 0;  // the process that started the thread (a fork()ed child must not join it)
  std::thread thread_;
};

}  // namespace conduit::memory
