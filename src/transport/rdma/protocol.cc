#include "protocol.h"

#include "conduit/base/big_endian.h"

namespace conduit::transport::rdma {
namespace {
using namespace big_endian;  // put16/32/64, get16/32/64
bool zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}
}  // namespace

std::string_view opcode_name(uint16_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kGetServerFeature: return "GetServerFeature";
    case Opcode::kSetClientFeature: return "SetClientFeature";
    case Opcode::kKeepalive: return "Keepalive";
    case Opcode::kRegisterXferMemory: return "RegisterXferMemory";
    case Opcode::kCredit: return "Credit";
    case Opcode::kReadOffer: return "ReadOffer";
    case Opcode::kReadDone: return "ReadDone";
    case Opcode::kHalfClose: return "HalfClose";
  }
  return "unknown";
}

void CtrlMsg::encode(uint8_t (&out)[kCtrlSize]) const {
  std::memset(out, 0, sizeof out);
  put16(out, opcode);
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kGetServerFeature:
    case Opcode::kSetClientFeature:
      put16(out + kSelectOff, select);
      put64(out + kFeaturesOff, features);
      break;
    case Opcode::kRegisterXferMemory:
      put64(out + kXferAddrOff, addr);
      put32(out + kXferLengthOff, length);
      put32(out + kXferRkeyOff, rkey);
      break;
    case Opcode::kCredit:
      put64(out + kCreditBytesOff, bytes);
      break;
    case Opcode::kHalfClose:
      put64(out + kHalfCloseBytesOff, bytes);
      break;
    case Opcode::kReadOffer:
      put32(out + kRvTagOff, tag);
      put64(out + kRvAddrOff, addr);
      put32(out + kRvLengthOff, length);
      put32(out + kRvRkeyOff, rkey);
      put64(out + kRvPositionOff, position);
      break;
    case Opcode::kReadDone:
      put32(out + kRvTagOff, tag);
      put64(out + kRvDoneLengthOff, bytes);
      break;
    case Opcode::kKeepalive:
      break;
  }
}

Result<CtrlMsg> CtrlMsg::decode(const uint8_t* in, uint32_t byte_len) {
  if (byte_len != kCtrlSize)
    return Status(Code::kProtocolError, "control message of " + std::to_string(byte_len) + " bytes (expected 32)");
  CtrlMsg m;
  m.opcode = get16(in);
  switch (static_cast<Opcode>(m.opcode)) {
    case Opcode::kGetServerFeature:
    case Opcode::kSetClientFeature:
      m.select = get16(in + kSelectOff);
      m.features = get64(in + kFeaturesOff);
      return m;
    case Opcode::kKeepalive:
      return m;
    case Opcode::kRegisterXferMemory:
      m.addr = get64(in + kXferAddrOff);
      m.length = get32(in + kXferLengthOff);
      m.rkey = get32(in + kXferRkeyOff);
      if (m.length < kMinRxBuffer || m.length > kMaxRxBuffer)
        return Status(Code::kProtocolError, "RegisterXferMemory length " + std::to_string(m.length) +
                                                " outside 64 KiB..16 MiB");
      if (m.addr == 0) return Status(Code::kProtocolError, "RegisterXferMemory with a null address");
      return m;
    case Opcode::kCredit:
      m.bytes = get64(in + kCreditBytesOff);
      if (m.bytes == 0 || m.bytes > kMaxRxBuffer)
        return Status(Code::kProtocolError, "Credit of " + std::to_string(m.bytes) + " bytes");
      return m;
    case Opcode::kReadOffer:
      if (!zero(in + 2, kRvTagOff - 2)) return Status(Code::kProtocolError, "ReadOffer with non-zero reserved bytes");
      m.tag = get32(in + kRvTagOff);
      m.addr = get64(in + kRvAddrOff);
      m.length = get32(in + kRvLengthOff);
      m.rkey = get32(in + kRvRkeyOff);
      m.position = get64(in + kRvPositionOff);
      if (m.length == 0 || m.length > kMaxRendezvous)
        return Status(Code::kProtocolError, "ReadOffer length " + std::to_string(m.length) + " outside 1..16 MiB");
      return m;
    case Opcode::kReadDone:
      if (!zero(in + 2, kRvTagOff - 2) || !zero(in + kRvTagOff + 4, kRvDoneLengthOff - kRvTagOff - 4))
        return Status(Code::kProtocolError, "ReadDone with non-zero reserved bytes");
      m.tag = get32(in + kRvTagOff);
      m.bytes = get64(in + kRvDoneLengthOff);
      if (m.bytes == 0 || m.bytes > kMaxRendezvous)
        return Status(Code::kProtocolError, "ReadDone length " + std::to_string(m.bytes) + " outside 1..16 MiB");
      return m;
    case Opcode::kHalfClose:
      // Any position is well-formed (0: nothing was written); the connection checks it
      // against what it received.
      m.bytes = get64(in + kHalfCloseBytesOff);
      return m;
  }
  return Status(Code::kProtocolError, "unknown control opcode " + std::to_string(m.opcode));
}

std::string CtrlMsg::to_string() const {
  std::string s(opcode_name(opcode));
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kGetServerFeature:
    case Opcode::kSetClientFeature:
      s += " select=" + std::to_string(select) + " features=" + std::to_string(features);
      break;
    case Opcode::kRegisterXferMemory:
      s += " length=" + std::to_string(length) + " rkey=" + std::to_string(rkey);
      break;
    case Opcode::kCredit:
      s += " bytes=" + std::to_string(bytes);
      break;
    case Opcode::kReadOffer:
      s += " tag=" + std::to_string(tag) + " length=" + std::to_string(length) + " rkey=" + std::to_string(rkey) +
           " position=" + std::to_string(position);
      break;
    case Opcode::kReadDone:
      s += " tag=" + std::to_string(tag) + " length=" + std::to_string(bytes);
      break;
    case Opcode::kHalfClose:
      s += " at=" + std::to_string(bytes);
      break;
    default:
      break;
  }
  return s;
}

void encode_refusal(Refusal why, uint8_t (&out)[kRefusalSize]) {
  std::memset(out, 0, sizeof out);
  out[0] = static_cast<uint8_t>(kRefusalMagic >> 24);
  out[1] = static_cast<uint8_t>(kRefusalMagic >> 16);
  out[2] = static_cast<uint8_t>(kRefusalMagic >> 8);
  out[3] = static_cast<uint8_t>(kRefusalMagic);
  out[4] = static_cast<uint8_t>(why);
}

std::optional<Refusal> decode_refusal(std::span<const uint8_t> pd) {
  if (pd.size() < kRefusalSize) return std::nullopt;
  const uint32_t magic = uint32_t{pd[0]} << 24 | uint32_t{pd[1]} << 16 | uint32_t{pd[2]} << 8 | pd[3];
  if (magic != kRefusalMagic) return std::nullopt;
  if (pd[4] != static_cast<uint8_t>(Refusal::kHandshakesFull) && pd[4] != static_cast<uint8_t>(Refusal::kNotAdmitted))
    return std::nullopt;
  return static_cast<Refusal>(pd[4]);
}

void encode_hello(uint64_t features, uint8_t (&out)[kHelloSize]) {
  std::memset(out, 0, sizeof out);
  put32(out, kHelloMagic);
  out[kHelloVersionOff] = kHelloVersion;
  put64(out + kHelloFeaturesOff, features);
}

std::optional<uint64_t> decode_hello(std::span<const uint8_t> pd) {
  if (pd.size() < kHelloSize) return std::nullopt;
  if (get32(pd.data()) != kHelloMagic || pd[kHelloVersionOff] != kHelloVersion) return std::nullopt;
  return get64(pd.data() + kHelloFeaturesOff);
}

std::string_view refusal_name(Refusal why) {
  switch (why) {
    case Refusal::kHandshakesFull:
      return "too many handshakes in progress (max_handshakes)";
    case Refusal::kNotAdmitted:
      return "not admitted";
  }
  return "refused";
}

}  // namespace conduit::transport::rdma
