// Helpers for ring and shm tests: a reproducible byte stream to send and verify, and sizes
// scaled down under sanitizers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conduit::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Byte i of the stream is byte (i % 8) of splitmix64(i / 8): any position can be produced or
// checked independently, and a dropped, repeated or reordered byte is caught.
class ByteStream {
 public:
  uint64_t position() const { return pos_; }
  void fill(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = next();
  }
  // Returns the index of the first byte that differs from the stream, or n.
  size_t check(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (p[i] != next()) return i;
    return n;
  }

 private:
  static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  uint8_t next() {
    if ((pos_ & 7) == 0) word_ = mix(pos_ >> 3);
    const auto b = static_cast<uint8_t>(word_ >> ((pos_ & 7) * 8));
    ++pos_;
    return b;
  }
  uint64_t pos_ = 0;
  uint64_t word_ = 0;
};

// Small deterministic PRNG for message sizes.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed | 1) {}
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  // Uniform in [lo, hi].
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }

 private:
  uint64_t s_;
};

}  // namespace conduit::testing
