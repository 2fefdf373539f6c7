#include "conduit/memory/registration_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_registrar.h"

namespace conduit::memory {
namespace {

using testing::RecordingRegistrar;

struct RegistrationCacheTest : ::testing::Test {
  std::shared_ptr<RecordingRegistrar> reg = std::make_shared<RecordingRegistrar>();
  alignas(4096) static inline uint8_t mem[64 * 4096];
};

TEST_F(RegistrationCacheTest, HitsReuseTheRegistration) {
  RegistrationCache cache(reg);
  auto a = cache.acquire(mem + 100, 1000);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->base(), reinterpret_cast<uintptr_t>(mem)) << "rounded out to pages";
  EXPECT_EQ(a->length(), 4096u);
  auto b = cache.acquire(mem + 2000, 2000);  // inside the same page
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->keys().lkey, a->keys().lkey);
  EXPECT_EQ(reg->registrations(), 1u);
  CacheStats st = cache.stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.bytes_registered, 4096u);
}

TEST_F(RegistrationCacheTest, OverlappingAndAdjacentRangesMergeIntoOne) {
  RegistrationCache cache(reg);
  ASSERT_TRUE(cache.acquire(mem, 4096).ok());             // page 0
  ASSERT_TRUE(cache.acquire(mem + 2 * 4096, 4096).ok());  // page 2
  EXPECT_EQ(cache.stats().entries, 2u);
  auto all = cache.acquire(mem + 4096, 4096);  // page 1 touches both: one entry for 0..2
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->base(), reinterpret_cast<uintptr_t>(mem));
  EXPECT_EQ(all->length(), 3u * 4096);
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(reg->live(), 1u) << "the unpinned pieces were deregistered";
  EXPECT_EQ(cache.stats().merges, 2u);
  auto inside = cache.acquire(mem + 100, 3 * 4096 - 200);
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(RegistrationCacheTest, LruEvictionUnderTheCapSparesPinnedEntries) {
  CacheOptions o;
  o.byte_cap = 2 * 4096;
  RegistrationCache cache(reg, o);
  auto pinned = cache.acquire(mem, 4096);  // held: must survive
  ASSERT_TRUE(pinned.ok());
  ASSERT_TRUE(cache.acquire(mem + 2 * 4096, 4096).ok());  // released at once: evictable
  ASSERT_TRUE(cache.acquire(mem + 4 * 4096, 4096).ok());  // over the cap: the LRU unpinned one goes
  CacheStats st = cache.stats();
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_EQ(st.bytes_registered, 2u * 4096);
  EXPECT_TRUE(reg->covers(pinned->keys().lkey, mem, 4096)) << "the pinned entry is still registered";
  auto again = cache.acquire(mem + 4 * 4096, 100);  // the newest stayed
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.stats().hits, 1u);
}

// A moved-from handle must not look like a registration: it no longer pins one, so a caller
// that trusted current() on it could use a region the cache has since deregistered.
TEST_F(RegistrationCacheTest, AMovedFromHandleIsEmpty) {
  RegistrationCache cache(reg);
  auto h = cache.acquire(mem, 100);
  ASSERT_TRUE(h.ok());
  RegistrationCache::Handle kept = std::move(*h);
  EXPECT_FALSE(h->valid());
  EXPECT_FALSE(h->current());
  EXPECT_FALSE(h->covers(mem, 1));
  EXPECT_TRUE(kept.current());
  RegistrationCache::Handle other;
  other = std::move(kept);
  EXPECT_FALSE(kept.valid());
  EXPECT_TRUE(other.current());
  EXPECT_TRUE(other.covers(mem, 4096));
  RegistrationCache::Handle copy = other;  // a copy shares the pin
  other = RegistrationCache::Handle();
  EXPECT_TRUE(copy.current());
  EXPECT_EQ(reg->live(), 1u);
  copy = RegistrationCache::Handle();
  EXPECT_EQ(cache.invalidate(mem, 1), 0u) << "nothing pins it any more";
  EXPECT_EQ(reg->live(), 0u);
}

TEST_F(RegistrationCacheTest, InvalidationDropsEntriesAndDefersPinnedOnes) {
  RegistrationCache cache(reg);
  auto held = cache.acquire(mem, 4096);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(cache.acquire(mem + 8 * 4096, 4096).ok());
  EXPECT_EQ(cache.invalidate(mem + 8 * 4096 - 1, 2), 0u) << "one unpinned entry overlaps";
  EXPECT_EQ(reg->live(), 1u);
  EXPECT_EQ(cache.invalidate(mem + 5000, 1), 0u) << "nothing there";
  EXPECT_EQ(cache.invalidate(mem, 10), 1u) << "the pinned entry leaves the index but stays registered";
  EXPECT_EQ(reg->live(), 1u);
  EXPECT_EQ(cache.stats().entries, 0u);
  auto fresh = cache.acquire(mem, 4096);  // a new registration, not the invalidated one
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->keys().lkey, held->keys().lkey);
  *held = RegistrationCache::Handle();
  EXPECT_EQ(reg->live(), 1u) << "the invalidated entry went with its last handle";
}

// What a caller that keeps a handle (rma's last local operand) relies on to skip acquire():
// covers() is the registered range, current() turns false when acquire() would no longer
// return that registration -- invalidated, or merged into a larger one.
TEST_F(RegistrationCacheTest, AKeptHandleSaysWhatItCoversAndWhetherItIsStillCurrent) {
  RegistrationCache cache(reg);
  RegistrationCache::Handle none;
  EXPECT_FALSE(none.current());
  EXPECT_FALSE(none.covers(mem, 1));
  auto h = cache.acquire(mem + 4096 + 10, 100);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->current());
  EXPECT_TRUE(h->covers(mem + 4096, 4096)) << "the whole page is registered";
  EXPECT_TRUE(h->covers(mem + 8191, 1));
  EXPECT_FALSE(h->covers(mem + 8191, 2)) << "one byte past the page";
  EXPECT_FALSE(h->covers(mem + 4095, 1)) << "one byte before it";
  EXPECT_FALSE(h->covers(mem + 3 * 4096, 0)) << "an empty range elsewhere is not covered";
  // A neighbour merges with it: the kept handle is no longer the cache's, though it still
  // pins its region (in-flight operations stay valid).
  auto wider = cache.acquire(mem + 2 * 4096, 10);
  ASSERT_TRUE(wider.ok());
  EXPECT_FALSE(h->current());
  EXPECT_TRUE(wider->current());
  EXPECT_EQ(reg->live(), 2u) << "the merged-away registration lives while the kept handle does";
  *h = RegistrationCache::Handle();
  EXPECT_EQ(reg->live(), 1u);
  // Invalidating the range makes the survivor stale too.
  cache.invalidate(mem + 2 * 4096, 1);
  EXPECT_FALSE(wider->current());
}

TEST_F(RegistrationCacheTest, SlicesPinTheirRegistrationAndHandlesOutliveTheCache) {
  Slice s;
  {
    RegistrationCache cache(reg);
    auto got = cache.slice(mem + 10, 20, 2);
    ASSERT_TRUE(got.ok());
    s = std::move(*got);
    EXPECT_TRUE(s.registered(2));
    EXPECT_FALSE(s.registered(0));
    EXPECT_TRUE(reg->covers(s.keys(2).lkey, s.data(), s.size()));
  }
  EXPECT_EQ(reg->live(), 1u) << "the slice still pins it after the cache is gone";
  s = Slice();
  EXPECT_EQ(reg->live(), 0u);
  RegistrationCache cache(reg);
  EXPECT_FALSE(cache.acquire(nullptr, 4).ok());
  EXPECT_FALSE(cache.acquire(mem, 0).ok());
  reg->fail_next(1);
  EXPECT_FALSE(cache.acquire(mem, 4).ok());
  EXPECT_EQ(cache.stats().entries, 0u);
}

}  // namespace
}  // namespace conduit::memory
