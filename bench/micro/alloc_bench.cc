// Allocate/free: conduit::memory::BlockPool against glibc malloc/free and mimalloc
// (mi_malloc/mi_free called explicitly -- not a global override, see mimalloc_dl.h -- so the
// pool, the "malloc" rows and the benchmark's own bookkeeping use glibc).  Every allocation's first byte is written,
// so an allocator that hands out fresh pages pays the page fault it would cost a real user.
//
//   BM_Alloc_Pair/<alloc>/<size>       allocate, touch, free -- one thread, or Threads(n)
//                                      each doing the same on its own (the shared pool)
//   BM_Alloc_Batch/<alloc>/<size>      allocate 32, then free them oldest first (more than a
//                                      thread cache holds at the large sizes)
//   BM_Alloc_CrossThread/<alloc>/<size> allocate batches of 32 on the benchmark thread, free
//                                      them on a second thread (a single-producer/single-consumer
//                                      ring between them)
//
// The pool is the default PoolOptions (4 KiB .. 4 MiB classes, 2 MiB regions, hugepages when
// the system has them, 1 MiB of blocks per thread and class): a 64 B request gets a 4 KiB
// block.  No registrar is attached: registration happens once per region, not per block, and
// is measured in the registration benchmarks.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/memory/pool.h"
#include "mimalloc_dl.h"

namespace {

using conduit::memory::BlockPool;
using conduit::memory::Slice;

std::shared_ptr<BlockPool> shared_pool() {
  static std::shared_ptr<BlockPool> pool = [] {
    auto p = BlockPool::create({});
    if (!p.ok()) {
      std::fprintf(stderr, "BlockPool::create: %s\n", p.status().to_string().c_str());
      std::abort();
    }
    return std::move(p).value();
  }();
  return pool;
}

inline void touch(void* p) {
  static_cast<volatile uint8_t*>(p)[0] = 1;
  benchmark::DoNotOptimize(p);
}

struct MallocAlloc {
  using Handle = void*;
  static constexpr const char* kName = "malloc";
  static bool get(size_t n, Handle& h) {
    h = std::malloc(n);
    if (h == nullptr) return false;
    touch(h);
    return true;
  }
  static void put(Handle& h) { std::free(h); }
};

struct MimallocAlloc {
  using Handle = void*;
  static constexpr const char* kName = "mimalloc";
  static bool get(size_t n, Handle& h) {
    h = conduit::bench::mimalloc().malloc(n);
    if (h == nullptr) return false;
    touch(h);
    return true;
  }
  static void put(Handle& h) { conduit::bench::mimalloc().free(h); }
};

struct PoolAlloc {
  using Handle = Slice;
  static constexpr const char* kName = "pool";
  static bool get(size_t n, Handle& h) {
    static thread_local BlockPool* pool = shared_pool().get();
    auto r = pool->allocate(n);
    if (!r.ok()) return false;
    h = std::move(*r);
    touch(h.writable_data());
    return true;
  }
  static void put(Handle& h) { h = Slice(); }
};

// Skips the case when the allocator cannot run (mimalloc not loadable).
template <typename A>
bool available(benchmark::State& state) {
  if constexpr (std::is_same_v<A, MimallocAlloc>) {
    if (!conduit::bench::mimalloc().error.empty()) {
      state.SkipWithError(conduit::bench::mimalloc().error.c_str());
      return false;
    }
  }
  return true;
}

template <typename A>
void BM_Alloc_Pair(benchmark::State& state) {
  if (!available<A>(state)) return;
  const size_t n = static_cast<size_t>(state.range(0));
  typename A::Handle h{};
  for (auto _ : state) {
    if (!A::get(n, h)) {
      state.SkipWithError("allocation failed");
      break;
    }
    A::put(h);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

template <typename A>
void BM_Alloc_Batch(benchmark::State& state) {
  if (!available<A>(state)) return;
  constexpr size_t kBatch = 32;
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<typename A::Handle> hs(kBatch);
  for (auto _ : state) {
    for (auto& h : hs)
      if (!A::get(n, h)) {
        state.SkipWithError("allocation failed");
        return;
      }
    for (auto& h : hs) A::put(h);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

// Single producer, single consumer; the producer spins (yielding) when full, the consumer
// when empty.  Capacity is a power of two.
template <typename H>
class Ring {
 public:
  explicit Ring(size_t cap) : slots_(cap), mask_(cap - 1) {}
  bool push(H& h) {
    const size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_.load(std::memory_order_acquire) == slots_.size()) return false;
    slots_[t & mask_] = std::move(h);
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }
  bool pop(H& h) {
    const size_t hd = head_.load(std::memory_order_relaxed);
    if (hd == tail_.load(std::memory_order_acquire)) return false;
    h = std::move(slots_[hd & mask_]);
    head_.store(hd + 1, std::memory_order_release);
    return true;
  }

 private:
  std::vector<H> slots_;
  size_t mask_;
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
};

// The producer (the benchmark thread) allocates batches of kBatch and pushes them into the
// ring; the consumer pops what is there and frees it.  Besides the wall-clock throughput, each
// side times only its allocator calls with the cycle counter (alloc_ns, free_ns: ns per call),
// which stays meaningful on a loaded machine where the hand-off itself mostly measures the
// scheduler.
template <typename A>
void BM_Alloc_CrossThread(benchmark::State& state) {
  if (!available<A>(state)) return;
  constexpr size_t kBatch = 32;
  const size_t n = static_cast<size_t>(state.range(0));
  Ring<typename A::Handle> ring(64);  // at 1 MiB: 128 MiB in flight at most (ring + two batches)
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> freed{0}, free_cycles{0};
  std::thread consumer([&] {
    std::vector<typename A::Handle> got(kBatch);
    uint64_t local = 0, cycles = 0;
    for (;;) {
      size_t k = 0;
      while (k < kBatch && ring.pop(got[k])) ++k;
      if (k > 0) {
        const uint64_t t0 = conduit::read_tsc();
        for (size_t i = 0; i < k; ++i) A::put(got[i]);
        cycles += conduit::read_tsc() - t0;
        local += k;
        continue;
      }
      if (stop.load(std::memory_order_acquire)) {
        typename A::Handle h{};
        while (ring.pop(h)) A::put(h), ++local;
        break;
      }
      std::this_thread::yield();
    }
    free_cycles.store(cycles, std::memory_order_relaxed);
    freed.store(local, std::memory_order_release);
  });
  std::vector<typename A::Handle> batch(kBatch);
  uint64_t alloc_cycles = 0, allocated = 0;
  bool failed = false;
  for (auto _ : state) {
    const uint64_t t0 = conduit::read_tsc();
    for (auto& h : batch)
      if (!A::get(n, h)) failed = true;
    alloc_cycles += conduit::read_tsc() - t0;
    if (failed) break;
    allocated += kBatch;
    for (auto& h : batch)
      while (!ring.push(h)) std::this_thread::yield();
  }
  stop.store(true, std::memory_order_release);
  consumer.join();
  if (failed) {
    for (auto& h : batch) A::put(h);  // the ones that did come (null/empty handles are no-ops)
    state.SkipWithError("allocation failed");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(freed.load()));
  state.counters["alloc_ns"] = conduit::Tsc::to_ns(alloc_cycles) / static_cast<double>(std::max<uint64_t>(allocated, 1));
  state.counters["free_ns"] =
      conduit::Tsc::to_ns(free_cycles.load()) / static_cast<double>(std::max<uint64_t>(freed.load(), 1));
}

constexpr int64_t kSizes[] = {64, 4096, 65536, 1 << 20};

template <typename A>
void register_alloc() {
  const std::string a = A::kName;
  auto sizes = [](benchmark::internal::Benchmark* b) {
    for (int64_t s : kSizes) b->Arg(s);
  };
  benchmark::RegisterBenchmark(("BM_Alloc_Pair/" + a).c_str(), BM_Alloc_Pair<A>)
      ->Apply(sizes)
      ->Threads(1)
      ->Threads(2)
      ->Threads(4)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("BM_Alloc_Batch/" + a).c_str(), BM_Alloc_Batch<A>)
      ->Apply(sizes)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
  benchmark::RegisterBenchmark(("BM_Alloc_CrossThread/" + a).c_str(), BM_Alloc_CrossThread<A>)
      ->Apply(sizes)
      ->UseRealTime();
}

[[maybe_unused]] const bool registered = [] {
  register_alloc<PoolAlloc>();
  register_alloc<MallocAlloc>();
  register_alloc<MimallocAlloc>();
  return true;
}();

}  // namespace
