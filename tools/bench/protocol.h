// conduit-bench's wire protocol over any Conduit stream connection.
//
// The client drives; the server only answers.  A session is
//   client: Hello                      server: Hello (same version, accepted max size)
//   client: PingPong(size) + messages  server: echoes every message as it completes
//   client: Stream(size)   + messages  server: consumes them; after the last, StreamAck
//   ...                                 (any number of phases, any order)
//   client: Bye                        server: closes
// Every message of a phase is exactly `size` bytes; its first byte is a flag: 0 = more
// follow, 1 = the last message of the phase (so a phase needs no count up front and a
// duration-bounded run ends on a message boundary without an extra round trip).  After a
// phase's last message the next bytes are a header again.
//
// Header, 24 bytes, little-endian:
//   off  0  u32 magic    kMagic ("CDBN")
//   off  4  u8  version  kVersion
//   off  5  u8  op       Op
//   off  6  u16 flags    Stream: kStreamTouch | kStreamInPlace; else 0
//   off  8  u32 size     Hello: largest message the client will send; phases: message size
//   off 12  u32 reserved 0
//   off 16  u64 value    StreamAck: payload bytes received in the phase; else 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace conduit::bench {

inline constexpr uint32_t kMagic = 0x4e424443;  // "CDBN" as little-endian bytes
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kMaxMessage = 64u << 20;

enum class Op : uint8_t { kHello = 1, kPingPong = 2, kStream = 3, kStreamAck = 4, kBye = 5 };

inline constexpr uint8_t kMoreFlag = 0;
inline constexpr uint8_t kLastFlag = 1;

// Stream phase flags.  Touch: messages are filled as touch.h says, and the server checksums
// each one and ends the session on a mismatch.  In place: the server reads with
// peek()/consume() (the client chose reserve()/commit()).
inline constexpr uint16_t kStreamTouch = 1;
inline constexpr uint16_t kStreamInPlace = 2;

struct Header {
  Op op = Op::kHello;
  uint32_t size = 0;
  uint64_t value = 0;
  uint16_t flags = 0;
};

void encode(const Header& h, uint8_t out[kHeaderBytes]);
// nullopt on a wrong magic, version or op.
std::optional<Header> decode(const uint8_t in[kHeaderBytes]);

}  // namespace conduit::bench
