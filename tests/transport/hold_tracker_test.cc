// ring::HoldTracker: which consumed ranges are still held, and the contiguous released
// prefix a consumer may publish -- releases in any order, reads by copy in between, 2^64
// wrap, bad tickets; plus a randomised check against a byte-by-byte model.
#include "ring/hold_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace conduit::transport::ring {
namespace {

TEST(HoldTracker, NothingHeldReleasesEverythingRead) {
  HoldTracker h;
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.releasable(0), 0u);
  EXPECT_EQ(h.releasable(12345), 12345u);
  EXPECT_EQ(h.held_bytes(), 0u);
}

TEST(HoldTracker, InOrderRelease) {
  HoldTracker h;
  const auto a = h.hold(0, 100);
  const auto b = h.hold(100, 50);
  EXPECT_EQ(h.held_bytes(), 150u);
  EXPECT_EQ(h.releasable(150), 0u);
  EXPECT_TRUE(h.release(a));
  EXPECT_EQ(h.releasable(150), 100u);
  EXPECT_EQ(h.held_bytes(), 50u);
  EXPECT_TRUE(h.release(b));
  EXPECT_EQ(h.releasable(150), 150u);
  EXPECT_TRUE(h.empty());
}

TEST(HoldTracker, OutOfOrderReleaseWaitsForThePrefix) {
  HoldTracker h;
  const auto a = h.hold(0, 10);
  const auto b = h.hold(10, 10);
  const auto c = h.hold(20, 10);
  EXPECT_TRUE(h.release(c));
  EXPECT_TRUE(h.release(b));
  EXPECT_EQ(h.releasable(30), 0u) << "a still holds the front";
  EXPECT_EQ(h.held_bytes(), 10u);
  EXPECT_EQ(h.outstanding(), 3u);
  EXPECT_TRUE(h.release(a));
  EXPECT_EQ(h.releasable(30), 30u);
  EXPECT_EQ(h.outstanding(), 0u);
}

TEST(HoldTracker, BytesReadByCopyBetweenHoldsAreFree) {
  HoldTracker h;
  const auto a = h.hold(0, 10);
  // [10, 40) read by copy, then a hold at 40
  const auto b = h.hold(40, 10);
  EXPECT_EQ(h.releasable(60), 0u);
  EXPECT_TRUE(h.release(a));
  EXPECT_EQ(h.releasable(60), 40u) << "up to the next held byte";
  EXPECT_TRUE(h.release(b));
  EXPECT_EQ(h.releasable(60), 60u) << "[50, 60) was read by copy after b";
}

TEST(HoldTracker, DoubleOrUnknownReleaseIsRefused) {
  HoldTracker h;
  const auto a = h.hold(0, 10);
  const auto b = h.hold(10, 10);
  EXPECT_TRUE(h.release(b));
  EXPECT_FALSE(h.release(b)) << "released already, behind a";
  EXPECT_EQ(h.held_bytes(), 10u);
  EXPECT_TRUE(h.release(a));
  EXPECT_FALSE(h.release(a)) << "released and popped";
  EXPECT_FALSE(h.release(a + 100)) << "never handed out";
  EXPECT_EQ(h.held_bytes(), 0u);
  EXPECT_EQ(h.releasable(20), 20u);
}

TEST(HoldTracker, PositionsWrap2To64) {
  HoldTracker h;
  const uint64_t start = ~uint64_t{0} - 15;  // 16 bytes before the wrap
  const auto a = h.hold(start, 10);
  const auto b = h.hold(start + 10, 20);  // crosses 2^64
  EXPECT_EQ(h.releasable(start + 30), start);
  EXPECT_TRUE(h.release(a));
  EXPECT_EQ(h.releasable(start + 30), start + 10);
  EXPECT_TRUE(h.release(b));
  EXPECT_EQ(h.releasable(start + 30), start + 30);
  EXPECT_EQ(start + 30, 14u);
}

// Random holds, copies and releases against a model that remembers every byte's state.
TEST(HoldTracker, MatchesAByteModel) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    HoldTracker h;
    std::vector<int> state;  // per byte: 0 read by copy or released, 1 held
    std::vector<std::pair<HoldTracker::Ticket, std::pair<uint64_t, uint64_t>>> live;
    uint64_t pos = 0;
    for (int step = 0; step < 400; ++step) {
      const int what = static_cast<int>(rng() % 3);
      if (what == 0) {  // hold
        const uint64_t len = 1 + rng() % 20;
        live.push_back({h.hold(pos, len), {pos, len}});
        state.resize(pos + len, 0);
        std::fill(state.begin() + static_cast<long>(pos), state.end(), 1);
        pos += len;
      } else if (what == 1) {  // read by copy
        const uint64_t len = rng() % 20;
        state.resize(pos + len, 0);
        pos += len;
      } else if (!live.empty()) {  // release a random live hold
        const size_t i = rng() % live.size();
        ASSERT_TRUE(h.release(live[i].first));
        const auto [b, len] = live[i].second;
        std::fill(state.begin() + static_cast<long>(b), state.begin() + static_cast<long>(b + len), 0);
        live.erase(live.begin() + static_cast<long>(i));
      }
      uint64_t expect = 0;
      while (expect < pos && state[expect] == 0) ++expect;
      ASSERT_EQ(h.releasable(pos), expect) << "round " << round << " step " << step;
      uint64_t held = 0;
      for (int s : state) held += static_cast<uint64_t>(s);
      ASSERT_EQ(h.held_bytes(), held);
    }
  }
}

}  // namespace
}  // namespace conduit::transport::ring
