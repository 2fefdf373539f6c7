// What the two sides of an shm:// connection exchange: the hello messages on the UNIX
// socket and the layout of the shared region.  Native byte order throughout: both ends are
// on one host by construction (a foreign-endian peer would fail the magic check anyway).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ring/spsc_ring.h"

namespace conduit::transport::shm {

inline constexpr uint32_t kHelloMagic = 0x4d485343;   // "CSHM" in memory on little-endian
inline constexpr uint32_t kRegionMagic = 0x52485343;  // "CSHR"
inline constexpr uint16_t kProtocolVersion = 1;

enum class HelloType : uint16_t { kClientHello = 1, kAccept = 2, kReject = 3 };
enum class RejectReason : uint32_t { kNone = 0, kVersion = 1, kRingSize = 2, kResources = 3, kMalformed = 4,
                                      kPermission = 5 };  // kPermission: the client's uid is not allowed

// Hello, 32 bytes, both directions.  The client sends kClientHello; the server answers
// kAccept with three descriptors attached (SCM_RIGHTS, in this order: the region memfd, the
// server's doorbell eventfd, the client's doorbell eventfd) or kReject without any.
//   off  0  u32 magic         kHelloMagic
//   off  4  u16 version       kProtocolVersion of the sender
//   off  6  u16 type          HelloType
//   off  8  u64 ring_bytes    client: requested ring size per direction (0 = server's default)
//                             server, kAccept: the ring size of each direction
//                             server, kReject kRingSize: the largest ring it allows (its
//                             max_ring); older servers sent 0 here
//   off 16  u64 region_bytes  server: size of the memfd (kRegionHeaderBytes + 2 * ring); client: 0
//   off 24  u32 reason        kReject: RejectReason; else 0
//   off 28  u32 reserved      0
inline constexpr size_t kAcceptFds = 3;  // descriptors attached to kAccept; no other hello carries any

struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint64_t ring_bytes = 0;
  uint64_t region_bytes = 0;
  uint32_t reason = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(Hello) == 32);
static_assert(offsetof(Hello, ring_bytes) == 8 && offsetof(Hello, reason) == 24);

// The shared region (one memfd, sealed against shrinking and growing):
//   off    0  RegionHeader (64 B)
//   off   64  RingControl of ring 0, client -> server (128 B)
//   off  192  RingControl of ring 1, server -> client (128 B)
//   off 4096  data of ring 0 (ring_bytes)
//   off 4096 + ring_bytes  data of ring 1 (ring_bytes)
// ring_bytes is a power of two >= 4096, so both data areas are page aligned.
struct RegionHeader {
  alignas(64) uint32_t magic;  // kRegionMagic
  uint16_t version;            // kProtocolVersion
  uint16_t reserved;
  uint64_t ring_bytes;
  uint64_t region_bytes;
};
static_assert(sizeof(RegionHeader) == 64);

inline constexpr size_t kRingControlOffset = 64;
inline constexpr size_t kRegionHeaderBytes = 4096;
static_assert(kRingControlOffset + 2 * sizeof(ring::RingControl) <= kRegionHeaderBytes);

inline constexpr uint64_t region_bytes_for(uint64_t ring_bytes) { return kRegionHeaderBytes + 2 * ring_bytes; }

}  // namespace conduit::transport::shm
