// The READ rendezvous' bookkeeping (src/transport/rdma/rendezvous.h) on the host: every
// rule PROTOCOL.md "Rendezvous (bit 2)" gives the writer's offer slots and the reader's
// sequencer, hostile offers included.
#include "rdma/rendezvous.h"

#include <gtest/gtest.h>

#include <memory>

namespace conduit::transport::rdma {
namespace {

CtrlMsg offer(uint32_t tag, uint32_t len, uint64_t pos) { return CtrlMsg::read_offer(tag, 0x1000, len, 0x77, pos); }

TEST(RdmaOfferSlots, TagsUpToTheLimitThenNone) {
  OfferSlots<std::unique_ptr<int>> s(3);
  EXPECT_EQ(s.limit(), 3u);
  EXPECT_EQ(s.take(10, std::make_unique<int>(0)), 0u);
  EXPECT_EQ(s.take(20, std::make_unique<int>(1)), 1u);
  EXPECT_EQ(s.take(30, std::make_unique<int>(2)), 2u);
  EXPECT_EQ(s.take(40, std::make_unique<int>(3)), std::nullopt);  // the caller goes in-band
  EXPECT_EQ(s.outstanding(), 3u);
  EXPECT_EQ(s.outstanding_bytes(), 60u);
  auto h = s.done(1, 20);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(**h, 1);
  EXPECT_EQ(s.take(50, std::make_unique<int>(4)), 1u);  // the freed tag is reused
  EXPECT_EQ(s.outstanding_bytes(), 90u);
}

TEST(RdmaOfferSlots, LimitIsClampedAndZeroNeverOffers) {
  EXPECT_EQ(OfferSlots<int>(100).limit(), static_cast<uint32_t>(kMaxReadDepth));
  OfferSlots<int> none(0);
  EXPECT_EQ(none.take(1, 0), std::nullopt);
}

TEST(RdmaOfferSlots, ABadReadDoneIsAProtocolErrorAndChangesNothing) {
  OfferSlots<int> s(2);
  ASSERT_EQ(s.take(100, 7), 0u);
  auto unknown = s.done(1, 100);
  EXPECT_EQ(unknown.status().code(), Code::kProtocolError);
  EXPECT_NE(unknown.status().message().find("no offer outstanding"), std::string::npos);
  EXPECT_EQ(s.done(5, 100).status().code(), Code::kProtocolError);  // beyond the limit
  auto wrong = s.done(0, 99);
  EXPECT_EQ(wrong.status().code(), Code::kProtocolError);
  EXPECT_NE(wrong.status().message().find("the offer had 100"), std::string::npos);
  EXPECT_EQ(s.outstanding(), 1u);
  auto ok = s.done(0, 100);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 7);
  EXPECT_EQ(s.done(0, 100).status().code(), Code::kProtocolError);  // only once
}

TEST(RdmaOfferSlots, DrainHandsBackEverythingOutstandingOnce) {
  OfferSlots<int> s(4);
  ASSERT_EQ(s.take(1, 10), 0u);
  ASSERT_EQ(s.take(2, 11), 1u);
  ASSERT_EQ(s.take(3, 12), 2u);
  ASSERT_TRUE(s.done(1, 2).ok());
  EXPECT_EQ(s.drain(), (std::vector<int>{10, 12}));
  EXPECT_EQ(s.outstanding(), 0u);
  EXPECT_EQ(s.outstanding_bytes(), 0u);
  EXPECT_TRUE(s.drain().empty());
}

TEST(RdmaOfferSequencer, OffersSitBetweenTheInbandBytesInStreamOrder) {
  OfferSequencer q(4);
  q.on_inband(100);
  ASSERT_TRUE(q.on_offer(offer(0, 5000, 100), kMaxRendezvous).ok());
  q.on_inband(30);  // written after the offer
  ASSERT_TRUE(q.on_offer(offer(1, 7000, 5130), kMaxRendezvous).ok());
  EXPECT_EQ(q.position(), 12130u);
  EXPECT_EQ(q.inband_received(), 130u);
  EXPECT_EQ(q.pending_bytes(), 12000u);
  // In-band bytes up to the first offer only.
  EXPECT_EQ(q.inband_limit(), 100u);
  EXPECT_EQ(q.deliverable(100), nullptr);  // not read yet
  // READs in order, both may be posted (limit 4).
  const auto* r0 = q.next_to_read();
  ASSERT_NE(r0, nullptr);
  EXPECT_EQ(r0->tag, 0u);
  ASSERT_TRUE(q.read_posted(0).ok());
  ASSERT_EQ(q.next_to_read()->tag, 1u);
  ASSERT_TRUE(q.read_posted(1).ok());
  EXPECT_EQ(q.next_to_read(), nullptr);
  // The second READ completes first: still nothing past the first offer.
  ASSERT_TRUE(q.read_completed(1).ok());
  EXPECT_EQ(q.deliverable(100), nullptr);
  ASSERT_TRUE(q.read_completed(0).ok());
  EXPECT_EQ(q.deliverable(99), nullptr);  // in-band bytes before it come first
  const auto* d = q.deliverable(100);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->tag, 0u);
  EXPECT_EQ(d->length, 5000u);
  q.pop_head();
  EXPECT_EQ(q.inband_limit(), 130u);  // the 30 bytes written between the offers
  ASSERT_NE(q.deliverable(130), nullptr);
  q.pop_head();
  EXPECT_EQ(q.inband_limit(), UINT64_MAX);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pending_bytes(), 0u);
}

TEST(RdmaOfferSequencer, AtMostLimitReadsPostedTheRestQueueInOrder) {
  OfferSequencer q(2);
  uint64_t pos = 0;
  for (uint32_t t = 0; t < 2; ++t, pos += 10) ASSERT_TRUE(q.on_offer(offer(t, 10, pos), kMaxRendezvous).ok());
  ASSERT_TRUE(q.read_posted(q.next_to_read()->tag).ok());
  ASSERT_TRUE(q.read_posted(q.next_to_read()->tag).ok());
  EXPECT_EQ(q.next_to_read(), nullptr);
  // A third offer before any ReadDone exceeds the negotiated limit.
  EXPECT_EQ(q.on_offer(offer(0, 10, pos), kMaxRendezvous).code(), Code::kProtocolError);
  ASSERT_TRUE(q.read_completed(0).ok());  // ReadDone(0) goes out: tag 0 is free again
  ASSERT_TRUE(q.on_offer(offer(0, 10, pos), kMaxRendezvous).ok());
  EXPECT_EQ(q.queued(), 3u);
  ASSERT_NE(q.next_to_read(), nullptr);
  EXPECT_EQ(q.next_to_read()->position, pos);  // the new one, behind the two posted
}

TEST(RdmaOfferSequencer, HostileOffersAreRefusedAndChangeNothing) {
  OfferSequencer q(2);
  q.on_inband(64);
  struct Case {
    CtrlMsg m;
    uint32_t max;
    const char* says;
  } cases[] = {
      {offer(0, 100, 63), kMaxRendezvous, "at stream position 63, but 64"},   // lost/reordered
      {offer(0, 100, 65), kMaxRendezvous, "but 64 bytes came before it"},
      {offer(2, 100, 64), kMaxRendezvous, "tag beyond the negotiated 2"},
      {offer(0, 4097, 64), 4096, "larger than this side's 4096"},             // oversized
  };
  for (const Case& c : cases) {
    Status s = q.on_offer(c.m, c.max);
    EXPECT_EQ(s.code(), Code::kProtocolError) << c.says;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
  EXPECT_EQ(q.position(), 64u);
  EXPECT_TRUE(q.empty());
  ASSERT_TRUE(q.on_offer(offer(1, 100, 64), kMaxRendezvous).ok());
  Status dup = q.on_offer(offer(1, 100, 164), kMaxRendezvous);
  EXPECT_EQ(dup.code(), Code::kProtocolError);
  EXPECT_NE(dup.message().find("tag already outstanding"), std::string::npos);
  // Completions the reader never asked for are its own bug, not the peer's.
  EXPECT_EQ(q.read_completed(1).code(), Code::kInternal);
  EXPECT_EQ(q.read_posted(0).code(), Code::kInternal);
}

TEST(RdmaOfferSequencer, PositionsWrapModulo2To64) {
  OfferSequencer q(1);
  q.on_inband(UINT64_MAX - 9);
  ASSERT_TRUE(q.on_offer(offer(0, 20, UINT64_MAX - 9), kMaxRendezvous).ok());
  EXPECT_EQ(q.position(), 10u);
}

TEST(RdmaOfferSequencer, DrainReturnsWhatWasNeverDeliveredHeadFirst) {
  OfferSequencer q(3);
  ASSERT_TRUE(q.on_offer(offer(0, 10, 0), kMaxRendezvous).ok());
  ASSERT_TRUE(q.on_offer(offer(1, 20, 10), kMaxRendezvous).ok());
  ASSERT_TRUE(q.read_posted(0).ok());
  ASSERT_TRUE(q.read_completed(0).ok());
  auto lost = q.drain();
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].tag, 0u);
  EXPECT_EQ(lost[0].state, OfferSequencer::State::kRead);
  EXPECT_EQ(lost[1].length, 20u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.unfinished(), 0u);
  EXPECT_EQ(q.next_to_read(), nullptr);
}

}  // namespace
}  // namespace conduit::transport::rdma
