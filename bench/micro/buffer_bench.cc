// What the buffer types cost: copying a Slice (a reference, not the bytes), taking a
// sub-view, building and consuming a Chain, filling iovec / scatter-gather arrays from one;
// and, as the yardstick, memcpy of the bytes a zero-copy path does not copy.
//
//   BM_Slice_Copy                 copy + destroy a Slice (one atomic increment, one decrement)
//   BM_Slice_Sub                  sub-view of a Slice (the same, plus bounds)
//   BM_Chain_AppendConsume/<n>    a new Chain, n slices appended, all consumed; per slice
//   BM_Chain_Reused/<n>           the same on one Chain kept across iterations (no vector
//                                 allocation after the first)
//   BM_Chain_ToIovec/<n>          n slices into an iovec array (no allocation)
//   BM_Chain_ToSg/<n>             n registered slices into SgEntry (ibv_sge) array
//   BM_Memcpy/<bytes>             memcpy of 4 KiB and 64 KiB between two warm buffers
#include <benchmark/benchmark.h>
#include <sys/uio.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "conduit/memory/buffer.h"
#include "conduit/memory/pool.h"

namespace {

using conduit::memory::BlockPool;
using conduit::memory::Chain;
using conduit::memory::kMaxDomains;
using conduit::memory::RegionKeys;
using conduit::memory::SgEntry;
using conduit::memory::Slice;

Slice pool_slice(size_t n) {
  static std::shared_ptr<BlockPool> pool = std::move(BlockPool::create({})).value();
  auto r = pool->allocate(n);
  if (!r.ok()) std::abort();
  return std::move(*r);
}

void BM_Slice_Copy(benchmark::State& state) {
  Slice s = pool_slice(4096);
  for (auto _ : state) {
    Slice c(s);
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_Slice_Copy);

void BM_Slice_Sub(benchmark::State& state) {
  Slice s = pool_slice(4096);
  for (auto _ : state) {
    Slice c = s.sub(100, 1000);
    benchmark::DoNotOptimize(c.data());
  }
}
BENCHMARK(BM_Slice_Sub);

void BM_Chain_AppendConsume(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Slice s = pool_slice(4096);
  for (auto _ : state) {
    Chain c;
    for (int i = 0; i < n; ++i) c.append(s);
    benchmark::DoNotOptimize(c.size());
    c.consume(c.size());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Chain_AppendConsume)->Arg(1)->Arg(8)->Arg(64);

void BM_Chain_Reused(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Slice s = pool_slice(4096);
  Chain c;
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) c.append(s);
    benchmark::DoNotOptimize(c.size());
    c.consume(c.size());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Chain_Reused)->Arg(1)->Arg(8)->Arg(64);

void BM_Chain_ToIovec(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Slice s = pool_slice(4096);
  Chain c;
  for (int i = 0; i < n; ++i) c.append(s);
  std::array<iovec, 64> iov{};
  for (auto _ : state) {
    size_t bytes = 0;
    benchmark::DoNotOptimize(c.to_iovec(iov, 0, SIZE_MAX, &bytes));
    benchmark::DoNotOptimize(bytes);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Chain_ToIovec)->Arg(1)->Arg(8)->Arg(64);

void BM_Chain_ToSg(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  // Memory with keys, as a transport's receive area hands it out (Slice::foreign); the
  // benchmark measures to_sg's own walk, not a device.
  static uint8_t mem[4096];
  static const RegionKeys keys[kMaxDomains] = {{0x1234, 0x5678}};
  Slice s = Slice::foreign(mem, sizeof mem, {}, keys, 1);
  Chain c;
  for (int i = 0; i < n; ++i) c.append(s);
  std::array<SgEntry, 64> sg{};
  for (auto _ : state) {
    size_t bytes = 0;
    benchmark::DoNotOptimize(c.to_sg(sg, 0, 0, SIZE_MAX, &bytes));
    benchmark::DoNotOptimize(bytes);
    benchmark::ClobberMemory();
  }
  if (c.to_sg(sg, 0) != static_cast<size_t>(n)) state.SkipWithError("to_sg stopped early");
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Chain_ToSg)->Arg(1)->Arg(8)->Arg(64);

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> a(n, 1), b(n, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Memcpy)->Arg(4096)->Arg(65536);

}  // namespace
