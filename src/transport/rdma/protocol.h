// The RDMA stream protocol's control messages: Valkey's RDMA transport, byte for byte.
//
// Every control message is exactly 32 bytes, big-endian, carried by IBV_WR_SEND into
// 32-byte pre-posted receives.  Layouts (offsets in bytes):
//
//   Feature (GetServerFeature = 0, SetClientFeature = 1)
//     0  u16 opcode | 2 u16 select | 4..23 reserved | 24 u64 features
//   Keepalive (2)
//     0  u16 opcode | 2..31 reserved
//   RegisterXferMemory (3)
//     0  u16 opcode | 2..15 reserved | 16 u64 addr | 24 u32 length | 28 u32 rkey
//   Credit (0x8001, Conduit ring extension; only after kFeatureRing was negotiated)
//     0  u16 opcode | 2..23 reserved | 24 u64 bytes consumed since the last Credit
//   ReadOffer (0x8002, rendezvous; writer -> reader, only after kFeatureRendezvous)
//     0  u16 opcode | 2..3 reserved | 4 u32 tag | 8 u64 addr | 16 u32 length | 20 u32 rkey
//     24 u64 position (stream bytes written before this message)
//   ReadDone (0x8003, rendezvous; reader -> writer)
//     0  u16 opcode | 2..3 reserved | 4 u32 tag | 8..23 reserved | 24 u64 length read
//   HalfClose (0x8004, Conduit half-close extension; only after kFeatureHalfClose)
//     0  u16 opcode | 2..23 reserved | 24 u64 stream bytes written before it (where EOF falls)
//   (offsets: the k*Off constants below, checked by static_asserts)
//
// Refusal (Conduit extension, private data of rdma_reject, 8 bytes; not a control message)
//     0  u32 magic 'CDRJ' | 4 u8 reason (1 = handshakes full, 2 = not admitted) | 5..7 reserved
//   A client that finds it reports kResourceExhausted (the listener exists and said no);
//   any other reject is kUnavailable (no listener, or a peer that is not Conduit).
//
// Hello (Conduit extension, private data of rdma_connect and rdma_accept, 16 bytes; not a
// control message; URL option `cm_features`)
//     0  u32 magic 'CDHL' | 4 u8 version (1) | 5..7 reserved (0) | 8 u64 features (select 0)
//   The client's request carries the bits it offers; a Conduit server that offers any answers
//   in its reply with the bits both offer, and from ESTABLISHED both sides run them: neither
//   sends GetServerFeature nor SetClientFeature.  A reply without a Hello (Valkey, whose
//   reply's private data is zeroes; a Conduit server with features=none or cm_features=false)
//   leaves the client to ask with GetServerFeature as before.  A server that finds no Hello
//   in the request (Valkey clients send none) never sends one.
//
// Conduit's own opcodes start at 0x8000, clear of any the Valkey protocol may add.
//
// Version: the protocol has no version field; capabilities beyond the baseline are
// negotiated through the feature words (select 0 = feature bits 0..63).  A Valkey peer
// answers features = 0 and treats non-zero SetClientFeature as an error, so Conduit only
// sends SetClientFeature when the server advertised the bits it selects.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "conduit/base/status.h"

namespace conduit::transport::rdma {

inline constexpr size_t kCtrlSize = 32;

enum class Opcode : uint16_t {
  kGetServerFeature = 0,
  kSetClientFeature = 1,
  kKeepalive = 2,
  kRegisterXferMemory = 3,
  kCredit = 0x8001,     // Conduit extension (ring mode)
  kReadOffer = 0x8002,  // Conduit extension (rendezvous)
  kReadDone = 0x8003,   // Conduit extension (rendezvous)
  kHalfClose = 0x8004,  // Conduit extension (half-close)
};
std::string_view opcode_name(uint16_t op);

// Conduit extension bits (select 0).  A Valkey peer advertises none of them.
//   ring       the receiver returns space incrementally with Credit messages, and the
//              writer wraps around the end of the buffer (a ring) instead of waiting for
//              the whole buffer to drain and be re-registered.
//   solicited  the writer sets IBV_SEND_SOLICITED on every control SEND and on the last
//              data write of each batch (a zero-length WRITE_WITH_IMM if need be), so the
//              receiver may arm its CQ for solicited completions only and wake once per
//              batch instead of once per write.
inline constexpr uint64_t kFeatureRing = 1ull << 0;
inline constexpr uint64_t kFeatureSolicited = 1ull << 1;
//   rendezvous owned writes of large pool slices are pulled by the reader with RDMA READ
//              (ReadOffer / ReadDone; docs/PROTOCOL.md "Rendezvous"; connection_rendezvous.cc).
//              Offered only with rendezvous_min > 0, memory windows and READ resources.
inline constexpr uint64_t kFeatureRendezvous = 1ull << 2;
//   half-close shutdown_write() sends HalfClose after the last data WR on the same send
//              queue, carrying the stream position where EOF falls; the reader returns EOF
//              once it has read that far, and may still write.  RC ordering delivers every
//              earlier WRITE_WITH_IMM's receive completion before the HalfClose's.
inline constexpr uint64_t kFeatureHalfClose = 1ull << 3;
// The bits this build implements and offers.
inline constexpr uint64_t kFeatureKnownMask = kFeatureRing | kFeatureSolicited | kFeatureRendezvous | kFeatureHalfClose;

// Field offsets (the layouts above, docs/PROTOCOL.md draws them).
inline constexpr size_t kOpcodeOff = 0, kSelectOff = 2, kFeaturesOff = 24;
inline constexpr size_t kXferAddrOff = 16, kXferLengthOff = 24, kXferRkeyOff = 28;
inline constexpr size_t kCreditBytesOff = 24;
inline constexpr size_t kHalfCloseBytesOff = 24;
static_assert(kFeaturesOff + 8 == kCtrlSize && kSelectOff == kOpcodeOff + 2, "Feature layout");
static_assert(kXferAddrOff + 8 == kXferLengthOff && kXferLengthOff + 4 == kXferRkeyOff && kXferRkeyOff + 4 == kCtrlSize,
              "RegisterXferMemory layout");
static_assert(kCreditBytesOff + 8 == kCtrlSize, "Credit layout");
static_assert(kHalfCloseBytesOff + 8 == kCtrlSize && kHalfCloseBytesOff >= kOpcodeOff + 2, "HalfClose layout");
inline constexpr size_t kRvTagOff = 4, kRvAddrOff = 8, kRvLengthOff = 16, kRvRkeyOff = 20, kRvPositionOff = 24;
inline constexpr size_t kRvDoneLengthOff = 24;
static_assert(kRvTagOff >= 2 + 2 && kRvAddrOff == kRvTagOff + 4 && kRvLengthOff == kRvAddrOff + 8 &&
                  kRvRkeyOff == kRvLengthOff + 4 && kRvPositionOff == kRvRkeyOff + 4 &&
                  kRvPositionOff + 8 == kCtrlSize,
              "ReadOffer fields are contiguous after the opcode and fill the 32 bytes");
static_assert(kRvDoneLengthOff + 8 == kCtrlSize && kRvTagOff + 4 <= kRvDoneLengthOff, "ReadDone layout");
// RDMA READ resources every connection reserves at setup (rdma_cm initiator_depth /
// responder_resources, clamped to the device's), and the bound on outstanding ReadOffers.
inline constexpr int kMaxReadDepth = 16;
// Largest rendezvous message (one offer): the RX buffer's upper bound.
inline constexpr uint32_t kMaxRendezvous = 16 * 1024 * 1024;

// RX buffer limits (the Valkey transport's: 64 KiB .. 16 MiB).
inline constexpr uint32_t kMinRxBuffer = 64 * 1024;
inline constexpr uint32_t kMaxRxBuffer = 16 * 1024 * 1024;

struct CtrlMsg {
  uint16_t opcode = 0;
  uint16_t select = 0;     // feature messages
  uint64_t features = 0;   // feature messages
  uint64_t addr = 0;       // RegisterXferMemory
  uint32_t length = 0;     // RegisterXferMemory
  uint32_t rkey = 0;       // RegisterXferMemory
  uint64_t bytes = 0;      // Credit; ReadDone: length read; HalfClose: stream bytes before it
  uint32_t tag = 0;        // ReadOffer / ReadDone: the writer's offer slot
  uint64_t position = 0;   // ReadOffer: stream bytes written before it

  static CtrlMsg feature(Opcode op, uint64_t bits) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(op);
    m.features = bits;
    return m;
  }
  static CtrlMsg keepalive() {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kKeepalive);
    return m;
  }
  static CtrlMsg credit(uint64_t bytes) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kCredit);
    m.bytes = bytes;
    return m;
  }
  // HalfClose: the sender wrote `stream_bytes` in all (over every buffer registration)
  // before it, and writes nothing more.
  static CtrlMsg half_close(uint64_t stream_bytes) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kHalfClose);
    m.bytes = stream_bytes;
    return m;
  }
  static CtrlMsg register_xfer(uint64_t addr, uint32_t length, uint32_t rkey) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kRegisterXferMemory);
    m.addr = addr;
    m.length = length;
    m.rkey = rkey;
    return m;
  }

  // ReadOffer: `length` bytes at `addr` (window or region key `rkey`) follow `position`
  // stream bytes; `length` is carried in the u32 field.
  static CtrlMsg read_offer(uint32_t tag, uint64_t addr, uint32_t length, uint32_t rkey, uint64_t position) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kReadOffer);
    m.tag = tag;
    m.addr = addr;
    m.length = length;
    m.rkey = rkey;
    m.position = position;
    return m;
  }
  static CtrlMsg read_done(uint32_t tag, uint64_t length) {
    CtrlMsg m;
    m.opcode = static_cast<uint16_t>(Opcode::kReadDone);
    m.tag = tag;
    m.bytes = length;
    return m;
  }

  void encode(uint8_t (&out)[kCtrlSize]) const;
  // Decodes and validates: unknown opcodes, out-of-range RegisterXferMemory lengths, and
  // rendezvous messages with non-zero reserved bytes or a length of 0 or above
  // kMaxRendezvous are protocol errors (whether the bit was negotiated is the connection's
  // check).  `byte_len` is what the receive completion reported.
  static Result<CtrlMsg> decode(const uint8_t* in, uint32_t byte_len);
  std::string to_string() const;
};

// Why a listener refused a connection request (the Refusal record above).
enum class Refusal : uint8_t { kHandshakesFull = 1, kNotAdmitted = 2 };
inline constexpr size_t kRefusalSize = 8;
inline constexpr uint32_t kRefusalMagic = 0x4344524a;  // "CDRJ"
void encode_refusal(Refusal why, uint8_t (&out)[kRefusalSize]);
// The reason carried by a reject's private data, or nullopt when it is not a Refusal.
std::optional<Refusal> decode_refusal(std::span<const uint8_t> private_data);
std::string_view refusal_name(Refusal why);

// The Hello record above: the feature bits (select 0) of a connect request or its reply.
inline constexpr size_t kHelloSize = 16;
inline constexpr uint32_t kHelloMagic = 0x4344484c;  // "CDHL"
inline constexpr uint8_t kHelloVersion = 1;
inline constexpr size_t kHelloVersionOff = 4;
inline constexpr size_t kHelloFeaturesOff = 8;
static_assert(kHelloFeaturesOff + sizeof(uint64_t) == kHelloSize);
static_assert(kHelloSize <= 56, "must fit a connect request's private data (rdma_connect(3))");
void encode_hello(uint64_t features, uint8_t (&out)[kHelloSize]);
// The features a connect request's or reply's private data offers, or nullopt when it holds
// no Hello of this version (zeroes, another magic, too short).
std::optional<uint64_t> decode_hello(std::span<const uint8_t> private_data);

}  // namespace conduit::transport::rdma
