#include "histogram.h"

#include <bit>
#include <cmath>

namespace conduit::rpc::detail {

int Histogram::index(uint64_t ns) {
  if (ns < kSub) return static_cast<int>(ns);
  const int e = 63 - std::countl_zero(ns);  // ns in [2^e, 2^(e+1))
  const int sub = static_cast<int>((ns >> (e - 3)) & (kSub - 1));
  const int i = (e - 2) * kSub + sub;
  return i < kBuckets ? i : kBuckets - 1;
}

double Histogram::upper(int i) {
  if (i < kSub) return i + 1;
  const int e = i / kSub + 2;
  const int sub = i % kSub;
  return std::ldexp(1.0 + (sub + 1) / static_cast<double>(kSub), e);
}

uint64_t Histogram::count() const {
  uint64_t n = 0;
  for (const auto& c : b_) n += c.load(std::memory_order_relaxed);
  return n;
}

double Histogram::quantile(double q) const {
  uint64_t counts[kBuckets];
  uint64_t n = 0;
  for (int i = 0; i < kBuckets; ++i) n += counts[i] = b_[i].load(std::memory_order_relaxed);
  if (n == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[i];
    if (seen >= rank && counts[i] != 0) return upper(i);
  }
  return upper(kBuckets - 1);
}

}  // namespace conduit::rpc::detail
