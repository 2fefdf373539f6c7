// Pure ring arithmetic: wraparound, full/empty, partial extents, peer validation, credits.
#include "ring/ring_cursor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace conduit::transport::ring {
namespace {

TEST(RingGeometry, ValidCapacity) {
  EXPECT_TRUE(RingGeometry::valid_capacity(2));
  EXPECT_TRUE(RingGeometry::valid_capacity(4096));
  EXPECT_TRUE(RingGeometry::valid_capacity(uint64_t{1} << 30));
  EXPECT_FALSE(RingGeometry::valid_capacity(0));
  EXPECT_FALSE(RingGeometry::valid_capacity(1));
  EXPECT_FALSE(RingGeometry::valid_capacity(3));
  EXPECT_FALSE(RingGeometry::valid_capacity(4097));
  EXPECT_FALSE(RingGeometry::valid_capacity(uint64_t{1} << 63));
}

TEST(RingGeometry, ExtentsWrap) {
  const RingGeometry g(16);
  Extents e = g.extents(0, 16);
  EXPECT_EQ(e.first.offset, 0u);
  EXPECT_EQ(e.first.len, 16u);
  EXPECT_EQ(e.second.len, 0u);

  e = g.extents(12, 10);  // 4 at the end, 6 from the start
  EXPECT_EQ(e.first.offset, 12u);
  EXPECT_EQ(e.first.len, 4u);
  EXPECT_EQ(e.second.offset, 0u);
  EXPECT_EQ(e.second.len, 6u);
  EXPECT_EQ(e.total(), 10u);

  e = g.extents(16 * 1000 + 5, 3);  // positions are free-running
  EXPECT_EQ(e.first.offset, 5u);
  EXPECT_EQ(e.first.len, 3u);
  EXPECT_EQ(e.second.len, 0u);

  e = g.extents(16, 0);
  EXPECT_EQ(e.total(), 0u);
}

TEST(RingCursor, EmptyAndFull) {
  const RingGeometry g(8);
  ProducerCursor p(g);
  ConsumerCursor c(g);
  EXPECT_EQ(p.free_space(), 8u);
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.readable(100).total(), 0u);

  EXPECT_EQ(p.writable(100).total(), 8u);  // clipped to free space
  p.produce(8);
  EXPECT_EQ(p.free_space(), 0u);
  EXPECT_EQ(p.writable(1).total(), 0u);

  ASSERT_TRUE(c.update_produced(p.head()));
  EXPECT_EQ(c.available(), 8u);
  c.consume(3);
  ASSERT_TRUE(p.update_consumed(c.tail()));
  EXPECT_EQ(p.free_space(), 3u);

  // The three free bytes are at offsets 0..2 (the ring wrapped).
  const Extents w = p.writable(3);
  EXPECT_EQ(w.first.offset, 0u);
  EXPECT_EQ(w.first.len, 3u);
  EXPECT_EQ(w.second.len, 0u);
}

TEST(RingCursor, PartialSpansAcrossWrap) {
  const RingGeometry g(8);
  ProducerCursor p(g);
  ConsumerCursor c(g);
  p.produce(6);
  ASSERT_TRUE(c.update_produced(6));
  c.consume(6);
  ASSERT_TRUE(p.update_consumed(6));
  // Write 5 from position 6: offsets 6,7 then 0,1,2.
  Extents w = p.writable(5);
  EXPECT_EQ(w.first.offset, 6u);
  EXPECT_EQ(w.first.len, 2u);
  EXPECT_EQ(w.second.offset, 0u);
  EXPECT_EQ(w.second.len, 3u);
  p.produce(5);
  ASSERT_TRUE(c.update_produced(p.head()));
  // Read only 1, then the rest.
  Extents r = c.readable(1);
  EXPECT_EQ(r.first.offset, 6u);
  EXPECT_EQ(r.first.len, 1u);
  EXPECT_EQ(r.second.len, 0u);
  c.consume(1);
  r = c.readable(100);
  EXPECT_EQ(r.first.offset, 7u);
  EXPECT_EQ(r.first.len, 1u);
  EXPECT_EQ(r.second.offset, 0u);
  EXPECT_EQ(r.second.len, 3u);
}

TEST(RingCursor, CountersWrap2To64) {
  const RingGeometry g(16);
  const uint64_t start = std::numeric_limits<uint64_t>::max() - 5;  // 6 bytes before 2^64
  ProducerCursor p(g, start);
  ConsumerCursor c(g, start);
  p.produce(10);  // head wraps past 2^64
  EXPECT_EQ(p.head(), 4u);
  EXPECT_EQ(p.in_flight(), 10u);
  EXPECT_EQ(p.free_space(), 6u);
  ASSERT_TRUE(c.update_produced(p.head()));
  EXPECT_EQ(c.available(), 10u);
  const Extents r = c.readable(10);
  EXPECT_EQ(r.first.offset, 10u);  // (2^64 - 6) mod 16
  EXPECT_EQ(r.first.len, 6u);
  EXPECT_EQ(r.second.len, 4u);
  c.consume(10);
  ASSERT_TRUE(p.update_consumed(c.tail()));
  EXPECT_EQ(p.free_space(), 16u);
}

TEST(RingCursor, RejectsImpossiblePeerCounters) {
  const RingGeometry g(16);
  ProducerCursor p(g, 100);
  p.produce(10);                       // head 110, acked 100
  EXPECT_FALSE(p.update_consumed(99));  // backwards
  EXPECT_FALSE(p.update_consumed(111));  // beyond head
  EXPECT_EQ(p.acked(), 100u);           // unchanged on failure
  EXPECT_TRUE(p.update_consumed(105));
  EXPECT_TRUE(p.update_consumed(105));  // same value again is fine
  EXPECT_TRUE(p.update_consumed(110));

  ConsumerCursor c(g, 100);
  EXPECT_FALSE(c.update_produced(117));  // more than a ring's worth
  EXPECT_FALSE(c.update_produced(99));   // backwards
  EXPECT_TRUE(c.update_produced(116));   // exactly full
  c.consume(4);
  EXPECT_FALSE(c.update_produced(115));  // backwards from 116
  EXPECT_TRUE(c.update_produced(120));   // 4 freed, 4 more
  EXPECT_FALSE(c.add_produced(1));       // full again
}

TEST(RingCursor, IncrementalCredits) {
  // The rdma shape: the consumer learns byte counts, returns credits by message.
  const RingGeometry g(64);
  ProducerCursor p(g);
  ConsumerCursor c(g);
  p.produce(40);
  ASSERT_TRUE(c.add_produced(40));
  c.consume(10);
  EXPECT_EQ(c.unreturned(), 10u);
  EXPECT_FALSE(c.credits_due(16));
  c.consume(10);
  EXPECT_TRUE(c.credits_due(16));
  const uint64_t credits = c.take_credits();
  EXPECT_EQ(credits, 20u);
  EXPECT_EQ(c.unreturned(), 0u);
  EXPECT_EQ(p.free_space(), 24u);
  ASSERT_TRUE(p.add_credits(credits));
  EXPECT_EQ(p.free_space(), 44u);
  EXPECT_FALSE(p.add_credits(21));  // only 20 in flight
  EXPECT_TRUE(p.add_credits(20));
  EXPECT_EQ(p.free_space(), 64u);
  EXPECT_FALSE(c.add_produced(65));
}

TEST(RingGeometry, AnyCapacityUsesModulo) {
  // An RDMA peer's buffer may have any length: 100 000 bytes here.
  EXPECT_FALSE(RingGeometry::valid_capacity(100000));
  EXPECT_TRUE(RingGeometry::valid_any_capacity(100000));
  EXPECT_FALSE(RingGeometry::valid_any_capacity(0));
  const RingGeometry g(100000);
  EXPECT_EQ(g.offset(100000), 0u);
  EXPECT_EQ(g.offset(250001), 50001u);
  const Extents e = g.extents(99990, 30);
  EXPECT_EQ(e.first.offset, 99990u);
  EXPECT_EQ(e.first.len, 10u);
  EXPECT_EQ(e.second.offset, 0u);
  EXPECT_EQ(e.second.len, 20u);
  ProducerCursor p(g);
  p.produce(100000);
  EXPECT_EQ(p.free_space(), 0u);
  EXPECT_EQ(p.writable(10).total(), 0u);
  ASSERT_TRUE(p.add_credits(30));
  const Extents w = p.writable(64);
  EXPECT_EQ(w.first.offset, 0u);  // wrapped to the start
  EXPECT_EQ(w.first.len, 30u);
}

TEST(RingCursor, ProducedMustFitTheGrantedSpace) {
  // Consumed-but-unreturned bytes are not the producer's to reuse yet.
  const RingGeometry g(64);
  ConsumerCursor c(g);
  ASSERT_TRUE(c.add_produced(64));
  c.consume(64);
  EXPECT_EQ(c.available(), 0u);
  EXPECT_EQ(c.granted(), 0u);
  EXPECT_FALSE(c.add_produced(1));  // nothing returned yet
  EXPECT_EQ(c.take_credits(), 64u);
  EXPECT_EQ(c.granted(), 64u);
  EXPECT_TRUE(c.add_produced(64));
  EXPECT_FALSE(c.add_produced(1));
}

}  // namespace
}  // namespace conduit::transport::ring
