// The 128-byte connection handle that listen() fills and NCCL hands to the connecting rank
// (docs/PROTOCOL.md, "nccl net handle").  Big-endian fields; version 1.
//
//   0  magic u32 'CNNT'        4  version u16 (1)        6  reserved u16 (0)
//   8  nonce u64: the listener's; the connector presents it on the bootstrap socket
//  16  bootstrap port u16     18  reserved u16 (0)      20  bootstrap IPv4 u32
//  24  stage u64: connector-local id of a connect in progress (0 on the wire; NCCL retries
//      connect() with the same buffer, so the plugin keeps its place there, as NCCL's own
//      IB plugin does)
//  32  rma endpoint URL, NUL-terminated, 96 bytes
//
// Threading: plain values.  Cost: encode/decode copy 128 bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "conduit/base/big_endian.h"
#include "conduit/base/status.h"

namespace conduit::nccl_net {

struct Handle {
  static constexpr uint32_t kMagic = 0x434e4e54;  // "CNNT"
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kSize = 128;
  static constexpr size_t kStageOffset = 24;
  static constexpr size_t kUrlOffset = 32;
  static constexpr size_t kUrlBytes = kSize - kUrlOffset;

  uint64_t nonce = 0;
  uint16_t port = 0;
  uint32_t ipv4 = 0;  // host byte order
  uint64_t stage = 0;
  std::string url;

  void encode(uint8_t* out) const;
  static Result<Handle> decode(const uint8_t* in);  // kInvalidArgument, naming the bad field
  static void set_stage(uint8_t* h, uint64_t stage);
};
static_assert(Handle::kUrlOffset + Handle::kUrlBytes == Handle::kSize);
static_assert(Handle::kSize <= 128, "NCCL_NET_HANDLE_MAXSIZE");

inline void Handle::encode(uint8_t* out) const {
  std::memset(out, 0, kSize);
  big_endian::put32(out + 0, static_cast<uint32_t>(kMagic));
  big_endian::put16(out + 4, static_cast<uint16_t>(kVersion));
  big_endian::put64(out + 8, nonce);
  big_endian::put16(out + 16, static_cast<uint16_t>(port));
  big_endian::put32(out + 20, static_cast<uint32_t>(ipv4));
  big_endian::put64(out + kStageOffset, stage);
  std::memcpy(out + kUrlOffset, url.data(), std::min(url.size(), kUrlBytes - 1));
}

inline void Handle::set_stage(uint8_t* h, uint64_t stage) { big_endian::put64(h + kStageOffset, stage); }

inline Result<Handle> Handle::decode(const uint8_t* in) {
  if (big_endian::get32(in) != kMagic) return Status(Code::kInvalidArgument, "nccl net handle: bad magic (not a conduit handle)");
  if (big_endian::get16(in + 4) != kVersion)
    return Status(Code::kInvalidArgument, "nccl net handle: version " + std::to_string(big_endian::get16(in + 4)) + ", want 1");
  if (big_endian::get16(in + 6) != 0 || big_endian::get16(in + 18) != 0)
    return Status(Code::kInvalidArgument, "nccl net handle: reserved bytes not zero");
  const void* nul = std::memchr(in + kUrlOffset, 0, kUrlBytes);
  if (nul == nullptr) return Status(Code::kInvalidArgument, "nccl net handle: URL not NUL-terminated");
  Handle h;
  h.nonce = big_endian::get64(in + 8);
  h.port = static_cast<uint16_t>(big_endian::get16(in + 16));
  h.ipv4 = static_cast<uint32_t>(big_endian::get32(in + 20));
  h.stage = big_endian::get64(in + kStageOffset);
  h.url.assign(reinterpret_cast<const char*>(in + kUrlOffset));
  if (h.port == 0) return Status(Code::kInvalidArgument, "nccl net handle: bootstrap port 0");
  if (h.url.find("://") == std::string::npos) return Status(Code::kInvalidArgument, "nccl net handle: URL '" + h.url + "' has no scheme");
  return h;
}

}  // namespace conduit::nccl_net
