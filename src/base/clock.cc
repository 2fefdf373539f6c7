#include "conduit/base/clock.h"

#include <ctime>

namespace conduit {

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {
double calibrate() {
#if defined(__x86_64__) || defined(__i386__)
  // Spin for ~10 ms against the monotonic clock; good to well under 0.1%.
  const uint64_t t0 = monotonic_ns();
  const uint64_t c0 = read_tsc();
  uint64_t t1 = t0;
  while (t1 - t0 < 10'000'000) t1 = monotonic_ns();
  const uint64_t c1 = read_tsc();
  const double mhz = static_cast<double>(c1 - c0) * 1e3 / static_cast<double>(t1 - t0);
  return mhz > 0 ? mhz : 1e3;
#else
  return 1e3;  // read_tsc() returns nanoseconds: 1000 "cycles" per microsecond.
#endif
}
}  // namespace

double Tsc::cycles_per_us() {
  static const double mhz = calibrate();
  return mhz;
}

}  // namespace conduit
