#include "conduit/memory/pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "test_registrar.h"

namespace conduit::memory {
namespace {

using testing::RecordingRegistrar;

std::shared_ptr<BlockPool> make_pool(PoolOptions o = {}) {
  o.hugepages = false;  // deterministic in tests; the hugepage path is exercised by bench/
  auto p = BlockPool::create(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return std::move(p).value();
}

TEST(BlockPool, SizeClassesRegionsAndKeys) {
  auto pool = make_pool();
  auto reg = std::make_shared<RecordingRegistrar>();
  auto d = pool->add_registrar(reg);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, 0u);
  auto a = pool->allocate(100);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->size(), 100u);
  EXPECT_EQ(a->capacity(), 4096u);
  ASSERT_TRUE(a->registered(0));
  EXPECT_TRUE(reg->covers(a->keys(0).lkey, a->data(), a->capacity())) << "the slice's keys cover its memory";
  EXPECT_EQ(a->owner(), pool.get());
  auto b = pool->allocate(5000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->capacity(), 8192u);
  EXPECT_EQ(reg->registrations(), 2u) << "one registration per region, not per block";
  auto c = pool->allocate(4000);  // same class as a: same region
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(reg->registrations(), 2u);
  EXPECT_EQ(c->keys(0).lkey, a->keys(0).lkey);
  PoolStats st = pool->stats();
  EXPECT_EQ(st.regions, 2u);
  EXPECT_EQ(st.bytes_mapped, 4u << 20);
  EXPECT_EQ(st.bytes_registered, 4u << 20);
  EXPECT_EQ(st.classes[0].in_use, 2u);
  EXPECT_EQ(st.classes[1].in_use, 1u);
  EXPECT_EQ(st.bytes_in_use, 4096u * 2 + 8192u);
  EXPECT_EQ(st.registrations, 2u);
}

TEST(BlockPool, FreedBlocksComeBackThroughTheThreadCache) {
  auto pool = make_pool();
  const uint8_t* first;
  {
    auto a = pool->allocate(64);
    ASSERT_TRUE(a.ok());
    first = a->data();
  }
  auto again = pool->allocate(64);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  EXPECT_GE(pool->stats().cache_hits, 1u);
}

struct CountingWaiter final : MemoryWaiter {
  std::atomic<int> told{0};
  void on_memory_available() override { ++told; }
};

// Blocks released and allocated from an atexit handler, after exit() destroyed the main
// thread's cache (thread-local destructors run first): they go to the shared lists.
// Regression: the destroyed cache's vector grew again and was freed twice ("double free" at
// the exit of a preloaded program that closed its rdma channels from its exit handler).
std::shared_ptr<BlockPool>* g_exit_pools[2];
Slice* g_exit_slice;
void release_at_exit() {
  *g_exit_slice = Slice();  // into pool 0, whose cache entry existed
  auto s = (*g_exit_pools[1])->allocate(200);  // pool 1: never cached on this thread
  if (!s.ok()) std::_Exit(3);
  *s = Slice();
  std::fflush(stdout);
}

TEST(BlockPool, ReleaseAndAllocateAfterTheThreadCacheIsGone) {
  EXPECT_EXIT(
      {
        g_exit_pools[0] = new std::shared_ptr<BlockPool>(make_pool());
        g_exit_pools[1] = new std::shared_ptr<BlockPool>(make_pool());
        auto a = (*g_exit_pools[0])->allocate(100);
        if (!a.ok()) std::_Exit(2);
        g_exit_slice = new Slice(std::move(a).value());
        std::atexit(release_at_exit);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(BlockPool, TheCapIsBackpressureAndWaitersAreToldWhenBlocksReturn) {
  PoolOptions o;
  o.cap_bytes = 2 << 20;  // one region
  auto pool = make_pool(o);
  std::vector<Slice> held;
  for (;;) {
    auto s = pool->allocate(1 << 20);
    if (!s.ok()) {
      EXPECT_TRUE(s.status().would_block()) << s.status().to_string();
      break;
    }
    held.push_back(std::move(*s));
    ASSERT_LE(held.size(), 2u) << "the cap must hold";
  }
  EXPECT_EQ(held.size(), 2u);
  EXPECT_LE(pool->stats().bytes_mapped, o.cap_bytes);
  EXPECT_TRUE(pool->allocate(100).status().would_block()) << "no room for another class's region either";
  CountingWaiter w;
  pool->wait(&w);
  EXPECT_EQ(w.told, 0) << "nothing came back yet";
  held.pop_back();
  EXPECT_EQ(w.told, 1);
  auto again = pool->allocate(1 << 20);
  EXPECT_TRUE(again.ok()) << "the block that came back is allocatable";
  pool->wait(&w);
  pool->cancel_wait(&w);
  held.clear();
  EXPECT_EQ(w.told, 1) << "a cancelled waiter is not told";
  EXPECT_GE(pool->stats().would_block, 2u);
}

// At the cap, memory freed in one class serves another: a region whose blocks are all free
// is unmapped (and deregistered) to make room; a partly free one is not.  A waiter for a
// size is told at once only when that size can be served -- free blocks of another class in
// a partly used region do not count (telling then would have it retry and fail in a loop:
// the rdma rendezvous reader spun that way, a 2 MiB READ behind freed 1 MiB blocks).
TEST(BlockPool, AtTheCapFreeRegionsOfOneClassServeAnother) {
  PoolOptions o;
  o.cap_bytes = 4 << 20;  // two regions
  auto pool = make_pool(o);
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  std::vector<Slice> held;
  for (int i = 0; i < 4; ++i) {
    auto s = pool->allocate(1 << 20);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    held.push_back(std::move(*s));
  }
  ASSERT_TRUE(pool->allocate(2 << 20).status().would_block());
  // One 1 MiB block back: its region is still half used, so 2 MiB cannot be served.
  held.pop_back();
  CountingWaiter w;
  pool->wait(&w, 2 << 20);
  EXPECT_EQ(w.told, 0) << "told although a 2 MiB block cannot be had";
  EXPECT_TRUE(pool->allocate(2 << 20).status().would_block());
  pool->cancel_wait(&w);
  // Its region's other block back too (wherever the blocks went: the thread cache or the
  // shared lists): now the region is free and is reclaimed for the 2 MiB class.
  held.pop_back();
  CountingWaiter w2;
  pool->wait(&w2, 2 << 20);
  EXPECT_EQ(w2.told, 1) << "not told although a whole region is free";
  const uint64_t registrations = reg->registrations();
  auto big = pool->allocate(2 << 20);
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(pool->stats().regions_reclaimed, 1u);
  EXPECT_EQ(reg->registrations(), registrations + 1) << "the new region was not registered";
  EXPECT_EQ(reg->live(), 2u) << "the reclaimed region was not deregistered";
  EXPECT_LE(pool->stats().bytes_mapped, o.cap_bytes);
  // The 1 MiB blocks still held are untouched.
  for (Slice& s : held) {
    std::memset(s.writable_data(), 0x5a, s.size());
    EXPECT_EQ(s.data()[s.size() - 1], 0x5a);
  }
  EXPECT_TRUE(pool->allocate(1 << 20).status().would_block()) << "the cap must hold";
}

TEST(BlockPool, LargeBlocksGetTheirOwnRegionAndAreDeregisteredOnRelease) {
  auto pool = make_pool();
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  {
    auto big = pool->allocate(9 << 20);
    ASSERT_TRUE(big.ok()) << big.status().to_string();
    EXPECT_GE(big->capacity(), 9u << 20);
    EXPECT_TRUE(reg->covers(big->keys(0).lkey, big->data(), big->size()));
    EXPECT_EQ(reg->live(), 1u);
  }
  EXPECT_EQ(reg->live(), 0u);
  EXPECT_EQ(pool->stats().bytes_mapped, 0u);
  PoolOptions o;
  o.cap_bytes = 4 << 20;
  EXPECT_EQ(make_pool(o)->allocate(5 << 20).status().code(), Code::kInvalidArgument) << "larger than the cap";
}

// From solo_bytes up a class's region is exactly one block, so a block's keys open that
// block and nothing else; smaller classes still share 2 MiB regions.
TEST(BlockPool, SoloClassesGetARegionPerBlock) {
  PoolOptions o;
  o.solo_bytes = 256 << 10;
  auto pool = make_pool(o);
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  auto a = pool->allocate(1 << 20);
  auto b = pool->allocate(1 << 20);
  auto c = pool->allocate(300 << 10);  // the 512 KiB class
  auto d = pool->allocate(128 << 10);  // below solo_bytes: a 2 MiB region of 16 blocks
  auto e = pool->allocate(128 << 10);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok() && e.ok());
  for (const Slice* s : {&*a, &*b, &*c}) {
    EXPECT_EQ(reg->length_of(s->keys(0).lkey), s->capacity()) << "a solo block's registration is the block";
    EXPECT_TRUE(reg->covers(s->keys(0).lkey, s->data(), s->capacity()));
  }
  EXPECT_NE(a->keys(0).lkey, b->keys(0).lkey);
  EXPECT_EQ(c->capacity(), 512u << 10);
  EXPECT_EQ(d->keys(0).lkey, e->keys(0).lkey) << "classes below solo_bytes share regions";
  EXPECT_EQ(reg->length_of(d->keys(0).lkey), 2u << 20);
  PoolStats st = pool->stats();
  EXPECT_EQ(st.regions, 4u);
  EXPECT_EQ(st.bytes_mapped, (2u << 20) + (512u << 10) + (2u << 20));
  // A freed solo block is reused, not registered again.
  const uint64_t before = reg->registrations();
  const uint32_t key = a->keys(0).lkey;
  { Slice gone = std::move(*a); }
  auto again = pool->allocate(1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(reg->registrations(), before);
  EXPECT_EQ(again->keys(0).lkey, key);
  o.solo_bytes = 1000;
  EXPECT_EQ(BlockPool::create(o).status().code(), Code::kInvalidArgument) << "solo_bytes not a multiple of 4096";
}

TEST(BlockPool, RegistrarsAddedLaterCoverExistingBlocksAndFailuresUndo) {
  auto pool = make_pool();
  auto a = pool->allocate(100);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->registered(0));
  auto r1 = std::make_shared<RecordingRegistrar>("one");
  ASSERT_TRUE(pool->add_registrar(r1).ok());
  EXPECT_TRUE(a->registered(0)) << "existing blocks gain the new domain's keys";
  auto b = pool->allocate(100 << 10);  // a new region, registered with r1
  ASSERT_TRUE(b.ok());
  auto r2 = std::make_shared<RecordingRegistrar>("two");
  r2->fail_next(2);  // the second region fails: the first must be undone
  auto bad = pool->add_registrar(r2);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(r2->live(), 0u);
  EXPECT_FALSE(a->registered(1));
  r1->fail_next(1);
  auto c = pool->allocate(1 << 20);  // a new class: its region's registration fails
  EXPECT_EQ(c.status().code(), Code::kResourceExhausted) << c.status().to_string();
  EXPECT_NE(c.status().to_string().find("one"), std::string::npos) << "names the registrar";
  EXPECT_EQ(pool->stats().regions, 2u) << "the failed region is unmapped";
}

TEST(BlockPool, ASliceKeepsItsPoolAliveAndTheLastOneLetsItGo) {
  auto reg = std::make_shared<RecordingRegistrar>();
  Slice s;
  std::weak_ptr<BlockPool> weak;
  {
    auto pool = make_pool();
    ASSERT_TRUE(pool->add_registrar(reg).ok());
    auto got = pool->allocate(1000);
    ASSERT_TRUE(got.ok());
    s = std::move(*got);
    weak = pool;
  }
  EXPECT_TRUE(weak.expired()) << "no shared_ptr is left...";
  EXPECT_EQ(reg->live(), 1u) << "...but the pool lives on with its block: its region is still registered";
  std::memset(s.writable_data(), 1, s.size());
  s = Slice();
  EXPECT_EQ(reg->live(), 0u) << "the last block let the pool go, and its regions were deregistered";
}

TEST(BlockPool, ChainsOfBlocks) {
  auto pool = make_pool();
  auto c = pool->allocate_chain(200000, 65536);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 200000u);
  EXPECT_EQ(c->count(), 4u);
}

// Many threads allocating and freeing, also each other's blocks; run under TSan in the
// small thread-sanitizer build.
TEST(BlockPool, ThreadsAllocateAndFreeConcurrently) {
  PoolOptions o;
  o.cap_bytes = 64 << 20;
  o.thread_cache_bytes = 64 << 10;
  auto pool = make_pool(o);
  constexpr int kThreads = 4, kRounds = 3000;
  std::vector<std::vector<Slice>> handoff(kThreads);
  std::vector<std::mutex> mus(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<Slice> mine;
      for (int i = 0; i < kRounds; ++i) {
        auto s = pool->allocate(64u << (rng() % 8));
        if (!s.ok()) {
          ++failures;
          continue;
        }
        std::memset(s->writable_data(), t, s->size());
        mine.push_back(std::move(*s));
        if (mine.size() > 16) {
          // Give some to a neighbour to free on its thread.
          std::lock_guard<std::mutex> lock(mus[(t + 1) % kThreads]);
          for (int k = 0; k < 8; ++k) {
            handoff[(t + 1) % kThreads].push_back(std::move(mine.back()));
            mine.pop_back();
          }
        }
        if (rng() % 4 == 0 && !mine.empty()) mine.erase(mine.begin());
        std::lock_guard<std::mutex> lock(mus[t]);
        handoff[t].clear();
      }
    });
  }
  for (auto& th : ts) th.join();
  handoff.clear();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace conduit::memory
