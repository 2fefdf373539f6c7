// Remote memory descriptors: what a peer needs to reach a region another endpoint exposed.
//
// A Descriptor names [addr, addr + length) of the exposing side's memory, the key that
// opens it (an rkey over rdma, a table key in the tcp/shm emulation), the rights granted
// (nothing by default) and the exposure's generation (bumped by every expose on that
// endpoint, so a descriptor of revoked memory never matches a later exposure of the same
// bytes).  It is a plain value: serialise it with encode() and hand it to the peer by any
// channel (a Connection, an RPC); decode() validates every field.  The wire layout (32
// bytes, big-endian, versioned) is in docs/PROTOCOL.md, "rma descriptor".
//
// Threading: plain values; any thread.  Cost: encode/decode copy 32 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "conduit/base/status.h"

namespace conduit::rma {

// What a peer may do with an exposed region; combine with |.
enum class Rights : uint8_t {
  kNone = 0,
  kRead = 1u << 0,    // RDMA READ
  kWrite = 1u << 1,   // RDMA WRITE, WRITE with immediate
  kAtomic = 1u << 2,  // fetch-and-add, compare-and-swap
};
inline constexpr Rights kAllRights = static_cast<Rights>(7);
constexpr Rights operator|(Rights a, Rights b) {
  return static_cast<Rights>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
// Every bit of `want` is in `set` (kNone is always contained).
constexpr bool contains(Rights set, Rights want) {
  return (static_cast<uint8_t>(set) & static_cast<uint8_t>(want)) == static_cast<uint8_t>(want);
}
std::string rights_name(Rights r);  // "read|write", "none"

struct Descriptor {
  static constexpr size_t kWireSize = 32;
  static constexpr uint8_t kWireVersion = 1;

  uint64_t addr = 0;    // the exposing process' virtual address of the first byte
  uint64_t length = 0;  // bytes
  uint32_t key = 0;
  Rights rights = Rights::kNone;
  uint32_t generation = 0;

  std::array<uint8_t, kWireSize> encode() const;
  // kProtocolError naming the field for a wrong version, unknown rights bits, non-zero
  // reserved bytes, a zero length or a range that wraps; kInvalidArgument for a short buffer.
  static Result<Descriptor> decode(std::span<const uint8_t> wire);
  std::string to_string() const;  // "rma[0x7f..+4096 key=0x1234 gen=3 read|write]"
  friend bool operator==(const Descriptor&, const Descriptor&) = default;
};

}  // namespace conduit::rma
