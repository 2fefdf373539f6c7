#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>

#include "conduit/verbs/wr.h"

namespace conduit::verbs {
namespace {

TEST(SignalTracker, SignalsEveryInterval) {
  SignalTracker t(16, 4);
  int signaled = 0;
  for (int i = 0; i < 16; ++i) signaled += t.on_post() ? 1 : 0;
  EXPECT_EQ(signaled, 4);
  EXPECT_EQ(t.available(), 0u);
  EXPECT_FALSE(t.can_post(1));
  t.on_signaled_completion();  // frees WRs 0..3
  EXPECT_EQ(t.available(), 4u);
}

TEST(SignalTracker, WantedSignalRestartsTheRun) {
  SignalTracker t(8, 4);
  EXPECT_FALSE(t.on_post());
  EXPECT_TRUE(t.on_post(true));
  EXPECT_FALSE(t.on_post());
  EXPECT_FALSE(t.on_post());
  EXPECT_FALSE(t.on_post());
  EXPECT_TRUE(t.on_post());
  EXPECT_EQ(t.signals_in_flight(), 2u);
}

TEST(SignalTracker, LastSignaledSaysWhetherOneCompletionCoversEverything) {
  SignalTracker t(8, 4);
  EXPECT_FALSE(t.last_signaled());  // nothing outstanding
  EXPECT_FALSE(t.on_post());
  EXPECT_FALSE(t.last_signaled());
  EXPECT_TRUE(t.on_post(true));
  EXPECT_TRUE(t.last_signaled());
  EXPECT_FALSE(t.on_post());
  EXPECT_FALSE(t.last_signaled());
  EXPECT_TRUE(t.on_post(true));
  t.on_signaled_completion();
  EXPECT_TRUE(t.last_signaled());
  t.on_signaled_completion();
  EXPECT_FALSE(t.last_signaled());
  EXPECT_EQ(t.outstanding(), 0u);
}

TEST(SignalTracker, MustSignalAsksWithoutAccounting) {
  // Check, post, then account: a post that fails after must_signal() leaves no trace.
  SignalTracker t(8, 2);
  EXPECT_FALSE(t.must_signal());
  EXPECT_FALSE(t.must_signal());  // asking twice changes nothing
  EXPECT_EQ(t.outstanding(), 0u);
  t.on_posted(false);
  EXPECT_TRUE(t.must_signal());  // the run would reach the interval
  EXPECT_TRUE(t.must_signal(true));
  t.on_posted(true);
  EXPECT_EQ(t.outstanding(), 2u);
  EXPECT_EQ(t.signals_in_flight(), 1u);
  EXPECT_TRUE(t.last_signaled());
  EXPECT_FALSE(t.must_signal());
}

TEST(SignalTracker, ResetFreesEverything) {
  SignalTracker t(4, 2);
  for (int i = 0; i < 4; ++i) t.on_post();
  t.reset();
  EXPECT_EQ(t.available(), 4u);
  EXPECT_EQ(t.signals_in_flight(), 0u);
}

// A simulated NIC: posts go to a FIFO, signaled ones complete in order at random times.
// The tracker must never let the queue exceed its depth, and a full queue must always have
// a signaled WR in it (otherwise the poster would wait forever).
TEST(SignalTracker, RandomizedNeverOverflowsNorStalls) {
  std::mt19937 rng(12345);
  for (uint32_t depth : {1u, 2u, 3u, 16u, 64u, 255u}) {
    for (uint32_t interval : {1u, depth / 2 + 1, depth}) {
      SignalTracker t(depth, interval);
      std::deque<bool> sq;  // true = signaled
      uint64_t posted = 0;
      for (int step = 0; step < 20000; ++step) {
        if (rng() % 3 != 0) {
          const uint32_t n = 1 + rng() % 8;
          if (!t.can_post(n)) continue;
          for (uint32_t i = 0; i < n; ++i) sq.push_back(t.on_post(rng() % 50 == 0));
          posted += n;
          ASSERT_LE(sq.size(), depth);
          ASSERT_EQ(t.outstanding(), sq.size());
        } else {
          // The "NIC" retires the oldest WRs up to and including the first signaled one.
          auto it = std::find(sq.begin(), sq.end(), true);
          if (it == sq.end()) {
            ASSERT_LT(sq.size(), depth) << "queue full with no signaled WR: poster would stall";
            continue;
          }
          sq.erase(sq.begin(), it + 1);
          t.on_signaled_completion();
          ASSERT_EQ(t.outstanding(), sq.size());
        }
      }
      EXPECT_GT(posted, 1000u) << "depth " << depth << " interval " << interval;
    }
  }
}

}  // namespace
}  // namespace conduit::verbs
