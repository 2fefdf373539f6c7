// Big-endian (network order) fields in byte buffers: every wire format and handle Conduit
// defines (rdma control messages, the verbs bootstrap, rma descriptors and frames, the NCCL
// net plugin's handle) stores its integers this way.  Unaligned access is fine: the bytes
// are copied.  Pure functions, any thread; each compiles to a load or store plus a bswap.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace conduit::big_endian {

// Host order <-> big-endian (the identity on a big-endian host).
inline uint16_t swap(uint16_t v) { return std::endian::native == std::endian::big ? v : __builtin_bswap16(v); }
inline uint32_t swap(uint32_t v) { return std::endian::native == std::endian::big ? v : __builtin_bswap32(v); }
inline uint64_t swap(uint64_t v) { return std::endian::native == std::endian::big ? v : __builtin_bswap64(v); }

inline void put16(uint8_t* p, uint16_t v) {
  v = swap(v);
  std::memcpy(p, &v, 2);
}
inline void put32(uint8_t* p, uint32_t v) {
  v = swap(v);
  std::memcpy(p, &v, 4);
}
inline void put64(uint8_t* p, uint64_t v) {
  v = swap(v);
  std::memcpy(p, &v, 8);
}
inline uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return swap(v);
}
inline uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swap(v);
}
inline uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return swap(v);
}

}  // namespace conduit::big_endian
