// Clocks for protocol timers and latency tools.
//
// monotonic_ns(): CLOCK_MONOTONIC in nanoseconds (vDSO, ~20 ns).  Use for timers and
// anything that must be correct.
// Tsc: raw cycle counter with a calibrated ns conversion, for latency tools that time
// millions of round trips; falls back to monotonic_ns on machines without an invariant TSC.
#pragma once

#include <cstdint>

namespace conduit {

uint64_t monotonic_ns();

inline uint64_t read_tsc() {
#if defined(__x86_64__) || defined(__i386__)
  uint32_t lo, hi;
  __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
  return (static_cast<uint64_t>(hi) << 32) | lo;
#else
  return monotonic_ns();
#endif
}

// Cycle-counter calibration, measured once per process (~10 ms on first use).  Thread-safe.
class Tsc {
 public:
  // Cycles per microsecond (MHz), as perftest prints it.
  static double cycles_per_us();
  static double to_ns(uint64_t cycles) { return static_cast<double>(cycles) * 1e3 / cycles_per_us(); }
  static double to_us(uint64_t cycles) { return static_cast<double>(cycles) / cycles_per_us(); }
};

}  // namespace conduit
