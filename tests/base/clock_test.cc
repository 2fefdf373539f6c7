#include "conduit/base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace conduit {
namespace {

TEST(Clock, MonotonicAdvances) {
  const uint64_t a = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const uint64_t b = monotonic_ns();
  EXPECT_GE(b - a, 2'000'000u);
}

TEST(Clock, TscAgreesWithMonotonicClock) {
  const double mhz = Tsc::cycles_per_us();
  EXPECT_GT(mhz, 10.0);
  const uint64_t c0 = read_tsc();
  const uint64_t t0 = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double tsc_ns = Tsc::to_ns(read_tsc() - c0);
  const double mono_ns = static_cast<double>(monotonic_ns() - t0);
  EXPECT_NEAR(tsc_ns / mono_ns, 1.0, 0.05);
}

}  // namespace
}  // namespace conduit
