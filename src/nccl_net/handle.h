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

inline void put_be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
inline uint64_t get_be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

inline void Handle::encode(uint8_t* out) const {
  std::memset(out, 0, kSize);
  put_be(out + 0, kMagic, 4);
  put_be(out + 4, kVersion, 2);
  put_be(out + 8, nonce, 8);
  put_be(out + 16, port, 2);
  put_be(out + 20, ipv4, 4);
  put_be(out + kStageOffset, stage, 8);
  std::memcpy(out + kUrlOffset, url.data(), std::min(url.size(), kUrlBytes - 1));
}

inline void Handle::set_stage(uint8_t* h, uint64_t stage) { put_be(h + kStageOffset, stage, 8); }

inline Result<Handle> Handle::decode(const uint8_t* in) {
  if (get_be(in, 4) != kMagic) return Status(Code::kInvalidArgument, "nccl net handle: bad magic (not a conduit handle)");
  if (get_be(in + 4, 2) != kVersion)
    return Status(Code::kInvalidArgument, "nccl net handle: version " + std::to_string(get_be(in + 4, 2)) + ", want 1");
  if (get_be(in + 6, 2) != 0 || get_be(in + 18, 2) != 0)
    return Status(Code::kInvalidArgument, "nccl net handle: reserved bytes not zero");
  const void* nul = std::memchr(in + kUrlOffset, 0, kUrlBytes);
  if (nul == nullptr) return Status(Code::kInvalidArgument, "nccl net handle: URL not NUL-terminated");
  Handle h;
  h.nonce = get_be(in + 8, 8);
  h.port = static_cast<uint16_t>(get_be(in + 16, 2));
  h.ipv4 = static_cast<uint32_t>(get_be(in + 20, 4));
  h.stage = get_be(in + kStageOffset, 8);
  h.url.assign(reinterpret_cast<const char*>(in + kUrlOffset));
  if (h.port == 0) return Status(Code::kInvalidArgument, "nccl net handle: bootstrap port 0");
  if (h.url.find("://") == std::string::npos) return Status(Code::kInvalidArgument, "nccl net handle: URL '" + h.url + "' has no scheme");
  return h;
}

}  // namespace conduit::nccl_net
