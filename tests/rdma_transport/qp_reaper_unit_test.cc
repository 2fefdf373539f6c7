// QpReaper's hand-over between the loop thread and its own, without a device: resources
// with no verbs objects go through give -> destroy_qp on the reaper's thread -> wake ->
// take_done, in order and all of them, and stop() waits for what is still queued.  Runs
// in the ThreadSanitizer build too (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "rdma/qp_reaper.h"

namespace conduit::transport::rdma {
namespace {

std::unique_ptr<QpResources> resources(uint32_t qpn) {
  auto r = std::make_unique<QpResources>();
  r->qpn = qpn;
  return r;
}

TEST(QpReaperUnit, EverythingGivenComesBackInOrderAfterAWake) {
  std::atomic<int> wakes{0};
  QpReaper reaper([&] { wakes.fetch_add(1); });
  EXPECT_FALSE(reaper.busy());
  constexpr uint32_t kN = 200;
  for (uint32_t i = 0; i < kN; ++i) reaper.give(resources(i));
  EXPECT_TRUE(reaper.busy());
  EXPECT_EQ(reaper.given(), kN);
  std::vector<uint32_t> back;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (back.size() < kN && std::chrono::steady_clock::now() < deadline) {
    if (wakes.load() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    for (auto& r : reaper.take_done()) back.push_back(r->qpn);
  }
  ASSERT_EQ(back.size(), kN);
  for (uint32_t i = 0; i < kN; ++i) EXPECT_EQ(back[i], i);
  EXPECT_FALSE(reaper.busy());
  EXPECT_EQ(reaper.outstanding(), 0u);
  EXPECT_GE(wakes.load(), 1);
}

TEST(QpReaperUnit, StopWaitsForWhatIsStillQueued) {
  QpReaper::set_delay_for_tests(20);
  std::atomic<int> wakes{0};
  QpReaper reaper([&] { wakes.fetch_add(1); });
  for (uint32_t i = 0; i < 5; ++i) reaper.give(resources(i));
  const auto start = std::chrono::steady_clock::now();
  reaper.stop();
  QpReaper::set_delay_for_tests(0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(80)) << "stop did not wait";
  auto done = reaper.take_done();
  EXPECT_EQ(done.size(), 5u);
  EXPECT_FALSE(reaper.busy());
}

TEST(QpReaperUnit, AReaperNeverGivenAnythingStartsNoThreadAndStopsAtOnce) {
  QpReaper reaper([] {});
  reaper.stop();
  EXPECT_TRUE(reaper.take_done().empty());
  EXPECT_EQ(reaper.given(), 0u);
}

}  // namespace
}  // namespace conduit::transport::rdma
