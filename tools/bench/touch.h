// The "real work" of a touching stream (--touch, --inplace) and of `memcpy --touch`: the
// writer fills every message, the reader checksums every byte and checks the sum, so a
// zero-copy path is measured doing what an application would do with the bytes, against
// a memcpy baseline that does the same (fill, copy, checksum) on one core.
//
// Message i of a phase: byte 0 is the more/last flag (protocol.h), every other byte is
// fill_value(i).  The checksum is the sum (mod 2^64) of the message read as little-endian
// 64-bit words, the last one zero-padded -- computed piece by piece as bytes arrive, at
// any offsets -- and its expected value is known in O(1), so checking costs no more than
// summing.  Cost: fill is memset; the sum runs at about a load per 8 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace conduit::bench {

inline uint8_t fill_value(uint64_t message_index) { return static_cast<uint8_t>(message_index * 131 + 7); }

// Writes bytes [off, off + n) of a message of fill value `v` and flag `flag` into p.
inline void fill_message(uint8_t* p, size_t off, size_t n, uint8_t v, uint8_t flag) {
  if (n == 0) return;
  if (off == 0) {
    p[0] = flag;
    ++p;
    --n;
  }
  std::memset(p, v, n);
}

// Sum of a message's bytes as little-endian u64 words, fed in pieces in order.
class Checksum {
 public:
  void reset() { sum_ = 0, pos_ = 0; }
  uint64_t value() const { return sum_; }
  void add(const uint8_t* p, size_t n) {
    while (n > 0 && (pos_ & 7) != 0) {  // up to a word boundary of the message
      sum_ += uint64_t{*p++} << (8 * (pos_++ & 7));
      --n;
    }
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      uint64_t w[4];
      std::memcpy(w, p + i, 32);
      a += w[0], b += w[1], c += w[2], d += w[3];
    }
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      a += w;
    }
    sum_ += a + b + c + d;
    pos_ += i;
    for (; i < n; ++i) sum_ += uint64_t{p[i]} << (8 * (pos_++ & 7));
  }

 private:
  uint64_t sum_ = 0;
  uint64_t pos_ = 0;  // message offset of the next byte
};

// What Checksum gives for a whole message of `size` bytes filled by fill_message.
inline uint64_t expected_checksum(size_t size, uint8_t v, uint8_t flag) {
  if (size == 0) return 0;
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  const uint64_t words = size / 8, rem = size % 8;
  uint64_t s = words * (kOnes * v);
  if (rem > 0) s += (kOnes >> (8 * (8 - rem))) * v;
  return s - v + flag;  // byte 0 holds the flag, not v
}

}  // namespace conduit::bench
