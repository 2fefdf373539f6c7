// A uniformly random element of a std::unordered_{map,set} in O(1) expected time: a random
// bucket, kept with probability size/8 (rejection sampling, so every element is equally
// likely while buckets hold at most 8, which the load factor <= 1 makes near certain), then
// a random element in it.  Used by SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and
// RANDOMKEY-like sampling.  The container must not be empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace conduit::kv {

template <typename K>
const K& pick_key(const K& k) { return k; }
template <typename K, typename V>
const K& pick_key(const std::pair<const K, V>& kv) { return kv.first; }

template <typename Container, typename Rng>
typename Container::iterator random_pick(Container& c, Rng&& rng) {
  constexpr size_t kMaxBucket = 8;
  const size_t bc = c.bucket_count();
  for (;;) {
    const size_t b = static_cast<size_t>(rng() % bc);
    const size_t n = c.bucket_size(b);
    if (n == 0) continue;
    if (n < kMaxBucket && static_cast<size_t>(rng() % kMaxBucket) >= n) continue;
    size_t k = static_cast<size_t>(rng() % n);
    auto lit = c.begin(b);
    while (k-- > 0) ++lit;
    return c.find(pick_key(*lit));
  }
}

}  // namespace conduit::kv
