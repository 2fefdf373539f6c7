// The tagged layer's wire formats (docs/PROTOCOL.md, "rma tagged"), big-endian, version 1:
// the 80-byte hello, the 288-byte FIFO slot the receiver writes into the sender's FIFO, the
// 16-byte completion record the sender writes into the receiver's completion area, and the
// 32-bit immediates that announce them.  Decoders validate every field.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "conduit/rma/tagged.h"
#include "wire.h"

namespace conduit::rma::tagged_wire {

constexpr uint32_t kHelloMagic = 0x43544147;  // "CTAG"
constexpr uint8_t kVersion = 1;
constexpr uint64_t kDoneMark = ~uint64_t{0};  // Req::lengths: this element's record arrived
constexpr uint32_t kMaxSlots = TaggedEndpoint::kMaxSlots;
constexpr uint32_t kMaxGroup = TaggedEndpoint::kMaxGroup;
constexpr size_t kFifoSlotBytes = TaggedEndpoint::kFifoSlotBytes;
constexpr size_t kRecordBytes = TaggedEndpoint::kRecordBytes;

// Hello: magic u32 @0, version u8 @4, reserved u8 @5, slots u16 @6, reserved u64 @8,
// FIFO descriptor @16 (32 bytes), completion-area descriptor @48 (32 bytes).
namespace hello_off {
constexpr size_t kMagic = 0, kVersion = 4, kSlots = 6, kReserved = 8, kFifo = 16, kCmpl = 48, kEnd = 80;
}
static_assert(hello_off::kCmpl + Descriptor::kWireSize == hello_off::kEnd);
static_assert(hello_off::kEnd == TaggedEndpoint::kHelloSize);

// FIFO slot: header (32 bytes: version u8 @0, count u8 @1 (1..8), reserved u16 @2, seq u32
// @4, 24 reserved bytes @8), then kMaxGroup elements of 32 bytes at 32 + 32 * i: addr u64 @0,
// length u64 @8, key u32 @16, generation u32 @20, tag u32 @24, reserved u32 @28.  Elements
// past count are zero.
namespace slot_off {
constexpr size_t kVersion = 0, kCount = 1, kSeq = 4, kHeader = 32, kElem = 32;
constexpr size_t kAddr = 0, kLength = 8, kKey = 16, kGeneration = 20, kTag = 24, kElemReserved = 28;
}
static_assert(slot_off::kHeader + kMaxGroup * slot_off::kElem == kFifoSlotBytes);
static_assert(slot_off::kElemReserved + 4 == slot_off::kElem);

// Completion record: version u8 @0, status u8 @1 (0 ok, 1 the message was larger than the
// buffer: nothing written), reserved u16 @2, seq u32 @4 (the group's), size u64 @8 (the
// message's bytes).  It lands at (slot * 8 + element) * 16 of the completion area.
namespace record_off {
constexpr size_t kVersion = 0, kStatus = 1, kReserved = 2, kSeq = 4, kSize = 8, kEnd = 16;
}
static_assert(record_off::kEnd == kRecordBytes);
constexpr uint8_t kRecordOk = 0, kRecordTooLarge = 1;

// Immediates: bit 31 set = a FIFO post, slot in bits 0..15; bit 31 clear = a completion
// record, slot in bits 3..15, element in bits 0..2.  Bits 16..30 are 0.
enum class ImmKind { kFifoPost, kRecord, kBad };
constexpr uint32_t kFifoBit = 1u << 31;
static_assert(kMaxSlots << 3 <= 0x10000, "slot bits of a record immediate");
static_assert(kMaxGroup == 8, "element bits of a record immediate");
inline uint32_t fifo_imm(uint32_t slot) { return kFifoBit | slot; }
inline uint32_t record_imm(uint32_t slot, uint32_t index) { return (slot << 3) | index; }
inline ImmKind imm_kind(uint32_t imm) {
  if ((imm & 0x7fff0000u) != 0) return ImmKind::kBad;
  return (imm & kFifoBit) != 0 ? ImmKind::kFifoPost : ImmKind::kRecord;
}
inline uint32_t fifo_imm_slot(uint32_t imm) { return imm & 0xffffu; }
inline uint32_t record_imm_slot(uint32_t imm) { return (imm & 0xffffu) >> 3; }
inline uint32_t record_imm_index(uint32_t imm) { return imm & 7u; }

inline Status too_large_status(uint32_t tag, uint64_t size, uint64_t buffer) {
  return Status(Code::kResourceExhausted, "rma tagged: the message of " + std::to_string(size) +
                                       " bytes (tag " + std::to_string(tag) + ") is larger than the posted buffer of " +
                                       std::to_string(buffer) + " bytes; nothing was written");
}

struct Hello {
  uint32_t slots = 0;
  Descriptor fifo, cmpl;
};
inline std::array<uint8_t, hello_off::kEnd> encode_hello(uint32_t slots, const Descriptor& fifo,
                                                         const Descriptor& cmpl) {
  std::array<uint8_t, hello_off::kEnd> h{};
  wire::put32(h.data() + hello_off::kMagic, kHelloMagic);
  h[hello_off::kVersion] = kVersion;
  wire::put16(h.data() + hello_off::kSlots, static_cast<uint16_t>(slots));
  const auto f = fifo.encode(), c = cmpl.encode();
  std::memcpy(h.data() + hello_off::kFifo, f.data(), f.size());
  std::memcpy(h.data() + hello_off::kCmpl, c.data(), c.size());
  return h;
}
inline Result<Hello> decode_hello(std::span<const uint8_t> h) {
  if (h.size() != hello_off::kEnd)
    return Status(Code::kProtocolError, "rma tagged hello: " + std::to_string(h.size()) + " bytes, not 80");
  if (wire::get32(h.data()) != kHelloMagic) return Status(Code::kProtocolError, "rma tagged hello: bad magic");
  if (h[hello_off::kVersion] != kVersion)
    return Status(Code::kProtocolError, "rma tagged hello: version " + std::to_string(h[hello_off::kVersion]));
  if (h[5] != 0 || wire::get64(h.data() + hello_off::kReserved) != 0)
    return Status(Code::kProtocolError, "rma tagged hello: reserved bytes are not zero");
  Hello out;
  out.slots = wire::get16(h.data() + hello_off::kSlots);
  if (out.slots < 1 || out.slots > kMaxSlots) return Status(Code::kProtocolError, "rma tagged hello: slots out of range");
  CONDUIT_ASSIGN_OR_RETURN(out.fifo, Descriptor::decode(h.subspan(hello_off::kFifo, Descriptor::kWireSize)));
  CONDUIT_ASSIGN_OR_RETURN(out.cmpl, Descriptor::decode(h.subspan(hello_off::kCmpl, Descriptor::kWireSize)));
  if (!contains(out.fifo.rights, Rights::kWrite) || !contains(out.cmpl.rights, Rights::kWrite))
    return Status(Code::kProtocolError, "rma tagged hello: the areas are not writable");
  return out;
}

struct FifoElem {
  uint64_t addr = 0, length = 0;
  uint32_t key = 0, generation = 0, tag = 0;
};
struct FifoSlot {
  uint32_t seq = 0, count = 0;
  std::array<FifoElem, kMaxGroup> elems{};
};
inline void encode_fifo_slot(const FifoSlot& s, std::span<uint8_t> out) {
  std::memset(out.data(), 0, kFifoSlotBytes);
  out[slot_off::kVersion] = kVersion;
  out[slot_off::kCount] = static_cast<uint8_t>(s.count);
  wire::put32(out.data() + slot_off::kSeq, s.seq);
  for (uint32_t i = 0; i < s.count; ++i) {
    uint8_t* e = out.data() + slot_off::kHeader + i * slot_off::kElem;
    wire::put64(e + slot_off::kAddr, s.elems[i].addr);
    wire::put64(e + slot_off::kLength, s.elems[i].length);
    wire::put32(e + slot_off::kKey, s.elems[i].key);
    wire::put32(e + slot_off::kGeneration, s.elems[i].generation);
    wire::put32(e + slot_off::kTag, s.elems[i].tag);
  }
}
inline Result<FifoSlot> decode_fifo_slot(std::span<const uint8_t> in) {
  if (in.size() != kFifoSlotBytes) return Status(Code::kProtocolError, "FIFO slot of the wrong size");
  if (in[slot_off::kVersion] != kVersion) return Status(Code::kProtocolError, "FIFO slot version " + std::to_string(in[0]));
  FifoSlot s;
  s.count = in[slot_off::kCount];
  if (s.count < 1 || s.count > kMaxGroup) return Status(Code::kProtocolError, "FIFO slot count " + std::to_string(s.count));
  s.seq = wire::get32(in.data() + slot_off::kSeq);
  for (size_t i = 2; i < slot_off::kHeader; ++i)
    if ((i < slot_off::kSeq || i >= slot_off::kSeq + 4) && in[i] != 0)
      return Status(Code::kProtocolError, "FIFO slot reserved bytes are not zero");
  for (uint32_t i = 0; i < kMaxGroup; ++i) {
    const uint8_t* e = in.data() + slot_off::kHeader + i * slot_off::kElem;
    if (i >= s.count) {
      for (size_t b = 0; b < slot_off::kElem; ++b)
        if (e[b] != 0) return Status(Code::kProtocolError, "FIFO slot: bytes past the last element are not zero");
      continue;
    }
    FifoElem& x = s.elems[i];
    x.addr = wire::get64(e + slot_off::kAddr);
    x.length = wire::get64(e + slot_off::kLength);
    x.key = wire::get32(e + slot_off::kKey);
    x.generation = wire::get32(e + slot_off::kGeneration);
    x.tag = wire::get32(e + slot_off::kTag);
    if (wire::get32(e + slot_off::kElemReserved) != 0)
      return Status(Code::kProtocolError, "FIFO element reserved bytes are not zero");
    if (x.length > 0 && x.addr + x.length < x.addr) return Status(Code::kProtocolError, "FIFO element range wraps");
  }
  return s;
}

struct Record {
  uint8_t status = 0;
  uint32_t seq = 0;
  uint64_t size = 0;
};
inline void encode_record(uint8_t* out, uint8_t status, uint32_t seq, uint64_t size) {
  std::memset(out, 0, kRecordBytes);
  out[record_off::kVersion] = kVersion;
  out[record_off::kStatus] = status;
  wire::put32(out + record_off::kSeq, seq);
  wire::put64(out + record_off::kSize, size);
}
inline Result<Record> decode_record(std::span<const uint8_t> in) {
  if (in.size() != kRecordBytes) return Status(Code::kProtocolError, "completion record of the wrong size");
  if (in[record_off::kVersion] != kVersion)
    return Status(Code::kProtocolError, "completion record version " + std::to_string(in[0]));
  Record r;
  r.status = in[record_off::kStatus];
  if (r.status > kRecordTooLarge) return Status(Code::kProtocolError, "completion record status " + std::to_string(r.status));
  if (wire::get16(in.data() + record_off::kReserved) != 0)
    return Status(Code::kProtocolError, "completion record reserved bytes are not zero");
  r.seq = wire::get32(in.data() + record_off::kSeq);
  r.size = wire::get64(in.data() + record_off::kSize);
  return r;
}

}  // namespace conduit::rma::tagged_wire
