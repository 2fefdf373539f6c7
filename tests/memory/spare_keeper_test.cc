// BlockPool::reserve (regions mapped and registered ahead of demand, outside the pool's
// lock) and SpareKeeper (a thread that keeps spares topped up: pool blocks, and any
// SpareKeeper::Stock, as the rdma transport's spare queue pairs).  In the TSan build too: the
// keeper's thread reserves while the test's threads allocate and free.
#include "conduit/memory/spare_keeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "conduit/memory/pool.h"
#include "test_registrar.h"

namespace conduit::memory {
namespace {

using testing::RecordingRegistrar;

constexpr size_t kMiB = 1 << 20;

std::shared_ptr<BlockPool> make_pool(size_t cap = size_t{64} << 20) {
  PoolOptions o;
  o.hugepages = false;
  o.cap_bytes = cap;
  o.thread_cache_bytes = 0;  // every free block in the shared list: counts are exact
  auto p = BlockPool::create(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return std::move(p).value();
}

// Waits (bounded) until the keeper has finished the rounds it was poked for.
bool settle(const SpareKeeper& k) {
  for (int i = 0; i < 5000; ++i) {
    if (k.idle()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(BlockPool, ReserveRegistersAheadSoThatAllocationsRegisterNothing) {
  auto pool = make_pool();
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  ASSERT_TRUE(pool->reserve(kMiB, 3).ok());
  // 1 MiB blocks in 2 MiB regions: two regions hold the three.
  EXPECT_EQ(reg->registrations(), 2u);
  EXPECT_EQ(pool->free_blocks(kMiB), 4u);
  EXPECT_EQ(pool->free_blocks(700 << 10), 4u) << "the class that holds the size";
  std::vector<Slice> held;
  for (int i = 0; i < 4; ++i) {
    auto s = pool->allocate(kMiB);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE(reg->covers(s->keys(0).lkey, s->data(), s->capacity())) << "a reserved block carries its keys";
    held.push_back(std::move(*s));
  }
  EXPECT_EQ(reg->registrations(), 2u) << "allocations from reserved regions register nothing";
  EXPECT_EQ(pool->free_blocks(kMiB), 0u);
  EXPECT_TRUE(pool->reserve(kMiB, 0).ok()) << "nothing to do";
  const PoolStats st = pool->stats();
  EXPECT_EQ(st.registrations, 2u);
  EXPECT_EQ(st.bytes_mapped, 4 * kMiB);
  EXPECT_EQ(st.classes[8].regions, 2u);
}

// Blocks freed on a thread wait in its cache, out of the shared list: they are still
// spares, and reserve() must not register a region for what is already there.
TEST(BlockPool, ReserveCountsBlocksWaitingInAThreadCache) {
  PoolOptions o;
  o.hugepages = false;
  o.thread_cache_bytes = 2 * kMiB;  // two 1 MiB blocks fit in this thread's cache
  auto created = BlockPool::create(std::move(o));
  ASSERT_TRUE(created.ok());
  auto pool = std::move(created).value();
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  {
    auto a = pool->allocate(kMiB);
    auto b = pool->allocate(kMiB);
    ASSERT_TRUE(a.ok() && b.ok());
  }
  EXPECT_EQ(reg->registrations(), 1u);
  EXPECT_EQ(pool->free_blocks(kMiB), 0u) << "both blocks went to this thread's cache";
  ASSERT_TRUE(pool->reserve(kMiB, 2).ok());
  EXPECT_EQ(reg->registrations(), 1u) << "reserve registered a region although two blocks were free";
  ASSERT_TRUE(pool->reserve(kMiB, 3).ok());
  EXPECT_EQ(reg->registrations(), 2u) << "a third spare needs a region";
}

// thread_cache_bytes = 0: no cache, a freed block is in the shared list at once.
TEST(BlockPool, NoThreadCacheWhenItsBytesAreZero) {
  auto pool = make_pool();
  { ASSERT_TRUE(pool->allocate(kMiB).ok()); }
  EXPECT_EQ(pool->free_blocks(kMiB), 2u);
}

TEST(BlockPool, ReserveHoldsTheCapAndRefusesSizesNoClassHolds) {
  auto pool = make_pool(4 * kMiB);
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  Status s = pool->reserve(kMiB, 10);
  EXPECT_TRUE(s.would_block()) << s.to_string();
  EXPECT_EQ(pool->stats().bytes_mapped, 4 * kMiB) << "reserved up to the cap, not beyond";
  EXPECT_EQ(pool->free_blocks(kMiB), 4u);
  EXPECT_EQ(pool->reserve(0, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool->reserve(pool->largest_class() + 1, 1).code(), Code::kInvalidArgument);
}

TEST(BlockPool, AFailedReserveGivesItsBytesBack) {
  auto pool = make_pool(4 * kMiB);
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  reg->fail_next(1);
  Status s = pool->reserve(kMiB, 1);
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.to_string();
  EXPECT_EQ(pool->stats().bytes_mapped, 0u);
  EXPECT_EQ(reg->live(), 0u);
  // The whole cap is still there.
  ASSERT_TRUE(pool->reserve(kMiB, 4).ok());
  EXPECT_EQ(pool->stats().bytes_mapped, 4 * kMiB);
}

struct Flag final : MemoryWaiter {
  std::atomic<int> calls{0};
  void on_memory_available() override { calls.fetch_add(1); }
};

// At the cap a reserve reclaims nothing for its class (unlike an allocation): the region
// freed by the release stays mapped, and the waiter was told by the release itself.
TEST(BlockPool, ReserveAtTheCapReclaimsNoOtherClass) {
  auto pool = make_pool(2 * kMiB);
  auto a = pool->allocate(2 * kMiB);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool->allocate(kMiB).status().would_block());
  Flag w;
  pool->wait(&w, kMiB);
  EXPECT_EQ(w.calls.load(), 0);
  *a = Slice();
  EXPECT_EQ(w.calls.load(), 1) << "the release told the waiter";
  EXPECT_TRUE(pool->reserve(kMiB, 1).would_block());
  EXPECT_EQ(pool->free_blocks(kMiB), 0u);
  EXPECT_EQ(pool->stats().regions_reclaimed, 0u);
}

TEST(SpareKeeper, TopsUpInTheBackgroundAfterEachTake) {
  auto pool = make_pool();
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  SpareKeeper keeper;
  EXPECT_TRUE(keeper.idle());
  keeper.keep(pool, kMiB, 2);
  ASSERT_TRUE(settle(keeper));
  EXPECT_GE(pool->free_blocks(kMiB), 2u);
  std::vector<Slice> held;
  for (int i = 0; i < 6; ++i) {
    const uint64_t before = reg->registrations();
    auto s = pool->allocate(kMiB);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(reg->registrations(), before) << "take " << i << " found a spare";
    held.push_back(std::move(*s));
    keeper.poke();
    ASSERT_TRUE(settle(keeper));
    EXPECT_GE(pool->free_blocks(kMiB), 2u) << "topped up after take " << i;
  }
  EXPECT_GE(keeper.rounds(), 7u);
  // Spares are bounded: 6 in use + at most 2 spare + the rest of a region.
  EXPECT_LE(pool->stats().bytes_mapped, 10 * kMiB);
}

TEST(SpareKeeper, BoundsWhatItKeepsAndDropsPoolsThatWent) {
  SpareKeeper keeper;
  auto pool = make_pool(8 * kMiB);
  keeper.keep(pool, kMiB, 1000);  // clamped to kMaxBlocks, and the cap holds anyway
  ASSERT_TRUE(settle(keeper));
  EXPECT_LE(pool->stats().bytes_mapped, 8 * kMiB);
  EXPECT_LE(pool->free_blocks(kMiB), SpareKeeper::kMaxBlocks);
  {
    auto gone = make_pool();
    keeper.keep(gone, 4096, 1);
    ASSERT_TRUE(settle(keeper));
    EXPECT_GE(gone->free_blocks(4096), 1u);
  }
  keeper.poke();  // the pool that went is dropped, not touched
  ASSERT_TRUE(settle(keeper));
  keeper.keep(pool, kMiB, 0);  // ignored
  keeper.keep(nullptr, kMiB, 1);
  SUCCEED();
}

TEST(SpareKeeper, KeepsUpWhileOtherThreadsAllocateAndFree) {
  auto pool = make_pool(size_t{256} << 20);
  auto reg = std::make_shared<RecordingRegistrar>();
  ASSERT_TRUE(pool->add_registrar(reg).ok());
  SpareKeeper keeper;
  keeper.keep(pool, kMiB, 4);
  keeper.keep(pool, 64 << 10, 4);
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&, t] {
      std::vector<Slice> mine;
      for (int i = 0; i < 200; ++i) {
        auto s = pool->allocate((i + t) % 2 ? kMiB : 64 << 10);
        if (!s.ok()) {
          failures.fetch_add(1);
          continue;
        }
        s->writable_data()[0] = static_cast<uint8_t>(i);
        mine.push_back(std::move(*s));
        keeper.poke();
        if (mine.size() > 8) mine.erase(mine.begin());
      }
    });
  }
  for (auto& th : ts) th.join();
  ASSERT_TRUE(settle(keeper));
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(pool->free_blocks(kMiB), 4u);
  EXPECT_GE(pool->free_blocks(64 << 10), 4u);
}

// A stock of plain tokens: what the rdma transport's QpStock is with queue pairs.
class TokenStock final : public SpareKeeper::Stock {
 public:
  explicit TokenStock(int want) : want_(want) {}
  void top_up() override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_NE(std::this_thread::get_id(), taker_) << "top_up runs on the keeper's thread";
    while (ready_ < want_) ++ready_, ++made_;
  }
  bool take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_ == 0) return false;
    --ready_;
    return true;
  }
  int ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ready_;
  }
  int made() const {
    std::lock_guard<std::mutex> lock(mu_);
    return made_;
  }

 private:
  mutable std::mutex mu_;
  const int want_;
  int ready_ = 0;
  int made_ = 0;
  const std::thread::id taker_ = std::this_thread::get_id();
};

TEST(SpareKeeper, KeepsAStockToppedUpOnItsThreadAndDropsItWhenItGoes) {
  SpareKeeper keeper;
  auto stock = std::make_shared<TokenStock>(3);
  keeper.keep(stock);
  keeper.keep(stock);  // the same stock again: still one
  ASSERT_TRUE(settle(keeper));
  EXPECT_EQ(stock->ready(), 3);
  std::vector<std::thread> takers;
  std::atomic<int> took{0};
  for (int t = 0; t < 2; ++t) {
    takers.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (stock->take()) took.fetch_add(1);
        keeper.poke();
        std::this_thread::yield();
      }
    });
  }
  for (auto& th : takers) th.join();
  ASSERT_TRUE(settle(keeper));
  EXPECT_EQ(stock->ready(), 3) << "topped up again after the takes";
  EXPECT_EQ(stock->made(), 3 + took.load()) << "made exactly what was taken, plus the first three";
  EXPECT_GT(took.load(), 0);
  std::weak_ptr<TokenStock> weak = stock;
  stock.reset();  // the keeper holds it weakly: it goes now, and is dropped from the rounds
  EXPECT_TRUE(weak.expired());
  keeper.poke();
  ASSERT_TRUE(settle(keeper));
  keeper.keep(std::shared_ptr<SpareKeeper::Stock>());  // ignored
  // At most kMaxWants stocks; more are ignored, not kept.
  std::vector<std::shared_ptr<TokenStock>> many;
  for (size_t i = 0; i < SpareKeeper::kMaxWants + 2; ++i) {
    many.push_back(std::make_shared<TokenStock>(1));
    keeper.keep(many.back());
  }
  ASSERT_TRUE(settle(keeper));
  for (size_t i = 0; i < many.size(); ++i)
    EXPECT_EQ(many[i]->ready(), i < SpareKeeper::kMaxWants ? 1 : 0) << "stock " << i;
}

}  // namespace
}  // namespace conduit::memory
