// A latency histogram safe to update from many threads: log-linear buckets (8 per power of
// two, ~9% wide) over 1 ns .. 2^40 ns, relaxed atomic counters.  Cost: one relaxed
// fetch_add per sample; quantiles walk 320 buckets.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace conduit::rpc::detail {

class Histogram {
 public:
  static constexpr int kSub = 8;
  static constexpr int kBuckets = 41 * kSub;
  void add(uint64_t ns) { b_[index(ns)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t count() const;
  // q in (0, 1]: the upper edge of the bucket holding that quantile, in ns (0 when empty).
  double quantile(double q) const;

 private:
  static int index(uint64_t ns);
  static double upper(int i);
  std::array<std::atomic<uint64_t>, kBuckets> b_{};
};

}  // namespace conduit::rpc::detail
