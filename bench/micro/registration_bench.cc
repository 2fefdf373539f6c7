// Registration: ibv_reg_mr + ibv_dereg_mr of a range against a RegistrationCache hit on the
// same range -- what the cache saves an application that sends from the same buffers again
// and again.  Needs an RDMA device (CONDUIT_RDMA_DEVICE, or the first active one): run it in
// the Soft-RoCE guest (bench/memory_micro.sh does).  Without one every case reports
// "no RDMA device" and is skipped.
//
//   BM_Reg_RegDereg/<bytes>       ibv_reg_mr (IBV_ACCESS_LOCAL_WRITE) + ibv_dereg_mr
//   BM_Reg_CacheHit/<bytes>       RegistrationCache::acquire of a cached range, handle dropped
//   BM_Reg_CacheSlice/<bytes>     RegistrationCache::slice of a cached range, slice dropped
//   BM_Reg_CacheMiss/<bytes>      acquire + invalidate: registration per operation through the cache
//   BM_Reg_ForkExec/<MiB>         fork + exec /bin/true + waitpid with <MiB> registered: since
//                                 Linux 5.9 fork copies every pinned page for the child
//   BM_Reg_ForkExecUnregistered/<MiB>  the same with <MiB> touched but not registered (the
//                                 control: page tables are copied, pages are shared)
//   BM_Reg_Spawn/<MiB>            posix_spawn of /bin/true + waitpid (glibc: clone(CLONE_VM|
//                                 CLONE_VFORK), nothing copied) with the same registration
//
// The registrar is the benchmark's own (tests/memory/verbs_registrar.h, one ibv_reg_mr per
// call on a PD of conduit::verbs), not the rdma transport's.
#include <benchmark/benchmark.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "conduit/memory/registration_cache.h"
#include "conduit/verbs/verbs.h"
#include "memory/verbs_registrar.h"

namespace {

using conduit::memory::RegistrationCache;
using conduit::memory::testing::VerbsRegistrar;

struct Device {
  std::shared_ptr<conduit::verbs::ProtectionDomain> pd;
  std::shared_ptr<VerbsRegistrar> registrar;
  std::string error;
};

const Device& device() {
  static Device d = [] {
    Device out;
    const char* name = std::getenv("CONDUIT_RDMA_DEVICE");
    auto ctx = conduit::verbs::Context::open(name ? name : "");
    if (!ctx.ok()) {
      out.error = "no RDMA device (" + ctx.status().to_string() + "); run in the testbed";
      return out;
    }
    auto pd = conduit::verbs::ProtectionDomain::create(*ctx);
    if (!pd.ok()) {
      out.error = pd.status().to_string();
      return out;
    }
    out.pd = *pd;
    out.registrar = std::make_shared<VerbsRegistrar>(out.pd, IBV_ACCESS_LOCAL_WRITE);
    return out;
  }();
  return d;
}

// Page-aligned, touched memory (registration of untouched pages would also count faults).
struct Buffer {
  explicit Buffer(size_t n) : bytes(n), p(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) & ~size_t{4095}))) {
    if (p) std::memset(p, 0x5a, n);
  }
  ~Buffer() { std::free(p); }
  size_t bytes;
  uint8_t* p;
};

#define CONDUIT_BENCH_DEVICE_OR_SKIP(state)                \
  const Device& dev = device();                            \
  if (!dev.registrar) {                                    \
    (state).SkipWithError(dev.error.c_str());              \
    return;                                                \
  }

void BM_Reg_RegDereg(benchmark::State& state) {
  CONDUIT_BENCH_DEVICE_OR_SKIP(state);
  Buffer buf(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto r = dev.registrar->register_memory(buf.p, buf.bytes);
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      return;
    }
    dev.registrar->deregister(*r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.bytes));
}

void BM_Reg_CacheHit(benchmark::State& state) {
  CONDUIT_BENCH_DEVICE_OR_SKIP(state);
  Buffer buf(static_cast<size_t>(state.range(0)));
  RegistrationCache cache(dev.registrar);
  auto first = cache.acquire(buf.p, buf.bytes);  // the miss, outside the timing
  if (!first.ok()) {
    state.SkipWithError(first.status().to_string().c_str());
    return;
  }
  for (auto _ : state) {
    auto h = cache.acquire(buf.p, buf.bytes);
    benchmark::DoNotOptimize(h->keys());
  }
  if (cache.stats().misses != 1) state.SkipWithError("the cache missed inside the loop");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.bytes));
}

void BM_Reg_CacheSlice(benchmark::State& state) {
  CONDUIT_BENCH_DEVICE_OR_SKIP(state);
  Buffer buf(static_cast<size_t>(state.range(0)));
  RegistrationCache cache(dev.registrar);
  auto first = cache.acquire(buf.p, buf.bytes);
  if (!first.ok()) {
    state.SkipWithError(first.status().to_string().c_str());
    return;
  }
  for (auto _ : state) {
    auto s = cache.slice(buf.p, buf.bytes);
    benchmark::DoNotOptimize(s->keys(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.bytes));
}

void BM_Reg_CacheMiss(benchmark::State& state) {
  CONDUIT_BENCH_DEVICE_OR_SKIP(state);
  Buffer buf(static_cast<size_t>(state.range(0)));
  RegistrationCache cache(dev.registrar);
  for (auto _ : state) {
    {
      auto h = cache.acquire(buf.p, buf.bytes);
      if (!h.ok()) {
        state.SkipWithError(h.status().to_string().c_str());
        return;
      }
    }
    cache.invalidate(buf.p, buf.bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.bytes));
}

extern "C" char** environ;

// Starting a child that execs, with `MiB` touched (and, with kRegister, registered) in the parent.
template <bool kSpawn, bool kRegister>
void BM_Reg_Child(benchmark::State& state) {
  CONDUIT_BENCH_DEVICE_OR_SKIP(state);
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  Buffer buf(bytes == 0 ? 4096 : bytes);
  conduit::memory::Registrar::Registration reg{};
  if (kRegister && bytes != 0) {
    auto r = dev.registrar->register_memory(buf.p, bytes);
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      return;
    }
    reg = *r;
  }
  char arg0[] = "true";
  char* argv[] = {arg0, nullptr};
  for (auto _ : state) {
    pid_t pid = -1;
    if constexpr (kSpawn) {
      if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) pid = -1;
    } else {
      pid = fork();
      if (pid == 0) {
        execv("/bin/true", argv);
        _exit(127);
      }
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      state.SkipWithError("starting /bin/true failed");
      break;
    }
  }
  if (kRegister && bytes != 0) dev.registrar->deregister(reg);
}
void child_sizes(benchmark::internal::Benchmark* b) { b->Arg(0)->Arg(16)->Arg(256)->UseRealTime(); }
BENCHMARK_TEMPLATE(BM_Reg_Child, false, true)->Name("BM_Reg_ForkExec")->Apply(child_sizes);
BENCHMARK_TEMPLATE(BM_Reg_Child, false, false)->Name("BM_Reg_ForkExecUnregistered")->Apply(child_sizes);
BENCHMARK_TEMPLATE(BM_Reg_Child, true, true)->Name("BM_Reg_Spawn")->Apply(child_sizes);

// 4 KiB .. 16 MiB, and 2 MiB (a pool region).
void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t s : {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20, int64_t{2} << 20, int64_t{16} << 20})
    b->Arg(s);
}
BENCHMARK(BM_Reg_RegDereg)->Apply(sizes);
BENCHMARK(BM_Reg_CacheHit)->Apply(sizes);
BENCHMARK(BM_Reg_CacheSlice)->Apply(sizes);
BENCHMARK(BM_Reg_CacheMiss)->Apply(sizes);

}  // namespace
