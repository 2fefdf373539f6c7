// The rpc wire format (docs/PROTOCOL.md "RPC frames"): a fixed 40-byte big-endian header,
// then the metadata section, the protobuf body and the attachment.  Standard library and
// base/status only, so the fuzzer builds it alone (tests/rpc/fuzz).
//
//  0        4    5    6         8                16        20        24        28        32                40
//  +--------+----+----+---------+----------------+---------+---------+---------+---------+-----------------+
//  | magic  |ver |type| flags   | call id (u64)  | code    | meta len| body len| att len | arg (u64)       |
//  | "CRPC" | 1  |    | (u16)   |                | (u32)   | (u32)   | (u32)   | (u32)   |                 |
//  +--------+----+----+---------+----------------+---------+---------+---------+---------+-----------------+
//
// code: REQUEST = method id (FNV-1a of "pkg.Service/Method"); RESPONSE, GOAWAY = ErrorCode.
// arg:  HELLO = per-stream receive window granted to the peer (bytes); REQUEST = timeout in
//       microseconds (0 = none); WINDOW = credit returned (bytes); PING/PONG = opaque.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "conduit/base/status.h"

namespace conduit::rpc::wire {

inline constexpr uint32_t kMagic = 0x43525043;  // "CRPC"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 40;

enum class FrameType : uint8_t {
  kHello = 1,      // first frame each way: version check, stream window, limits (meta)
  kRequest = 2,    // opens a call: method, deadline, metadata, request (or nothing: client stream)
  kResponse = 3,   // ends a call: status, trailing metadata, response message
  kMessage = 4,    // one stream message, either direction
  kHalfClose = 5,  // the sender will send no more messages on this call
  kCancel = 6,     // client -> server: abandon the call
  kWindow = 7,     // flow-control credit for a stream (arg bytes)
  kPing = 8,
  kPong = 9,
  kGoaway = 10,    // no new calls on this connection (shutdown or protocol error: code + message)
};
std::string_view frame_type_name(FrameType t);
bool valid_frame_type(uint8_t t);

// Flags (u16).  Undefined bits must be zero.
inline constexpr uint16_t kFlagEndStream = 1u << 0;   // REQUEST/MESSAGE: last thing the sender sends
inline constexpr uint16_t kFlagIdempotent = 1u << 1;  // REQUEST: safe to retry elsewhere
inline constexpr uint16_t kFlagMask = kFlagEndStream | kFlagIdempotent;

struct FrameHeader {
  uint8_t version = kVersion;
  FrameType type = FrameType::kPing;
  uint16_t flags = 0;
  uint64_t call_id = 0;
  uint32_t code = 0;
  uint32_t meta_len = 0;
  uint32_t body_len = 0;
  uint32_t attach_len = 0;
  uint64_t arg = 0;

  uint64_t payload() const { return uint64_t{meta_len} + body_len + attach_len; }
  std::string describe() const;  // "REQUEST call 7 code 0x1234 meta 12 body 64 att 0"
};

void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]);

// Checks of the header alone.  The connection's limits decide the rest.
struct Limits {
  uint32_t max_meta = 64 << 10;       // metadata section
  uint64_t max_payload = 128ull << 20;  // body + attachment: larger frames are oversized
};

// Decodes and validates the 40 bytes.  Errors (protocol-error): bad magic, unknown type,
// reserved flag bits, metadata larger than limits.max_meta.  A different version is
// reported as kNotSupported with the peer's version in the message, so the caller can
// answer with a GOAWAY the peer understands before closing.
Result<FrameHeader> decode_header(std::span<const uint8_t> in, const Limits& limits);

// Metadata: key/value pairs.  Each entry: u16 key length, u32 value length (big-endian),
// key bytes, value bytes.  Keys: 1..255 bytes of printable ASCII without spaces; keys
// starting with ':' are reserved for the protocol (":message" = the error text).
using Metadata = std::vector<std::pair<std::string, std::string>>;
size_t meta_size(const Metadata& m, std::string_view message = {});
// Writes `m` (and ":message" when non-empty) into out (size meta_size()).
void encode_meta(const Metadata& m, std::string_view message, uint8_t* out);
// Validates and decodes; ":message" goes to *message, other ':' keys are rejected.
Status decode_meta(std::span<const uint8_t> in, Metadata* m, std::string* message);
bool valid_meta_key(std::string_view k);

// FNV-1a 32-bit of "pkg.Service/Method": the REQUEST's method id.
uint32_t method_id(std::string_view full_name);

// Incremental frame splitter over a byte stream (the fuzz target).  Feed it what is
// readable; it reports one complete frame at a time, or how many more bytes it needs.
class FrameParser {
 public:
  explicit FrameParser(Limits limits) : limits_(limits) {}
  enum class Kind { kNeedMore, kFrame, kOversized, kError };
  struct Event {
    Kind kind = Kind::kNeedMore;
    FrameHeader header;
    size_t frame_bytes = 0;  // header + payload (kFrame, kOversized)
    size_t need = 0;         // kNeedMore: total bytes wanted from the start of `in`
    Status error;            // kError
  };
  // Looks at the start of `in` (never consumes).  kOversized: a well-formed header whose
  // body + attachment exceed limits.max_payload; the caller discards frame_bytes (it may
  // do so piecewise) and answers with resource-exhausted.
  Event next(std::span<const uint8_t> in) const;
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
};

// Big-endian helpers.
inline void put_u16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }
inline void put_u32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24); p[1] = uint8_t(v >> 16); p[2] = uint8_t(v >> 8); p[3] = uint8_t(v);
}
inline void put_u64(uint8_t* p, uint64_t v) { put_u32(p, uint32_t(v >> 32)); put_u32(p + 4, uint32_t(v)); }
inline uint16_t get_u16(const uint8_t* p) { return uint16_t((p[0] << 8) | p[1]); }
inline uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint64_t get_u64(const uint8_t* p) { return (uint64_t{get_u32(p)} << 32) | get_u32(p + 4); }

}  // namespace conduit::rpc::wire
