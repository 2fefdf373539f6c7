#include "protocol.h"

namespace conduit::bench {
namespace {

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

void encode(const Header& h, uint8_t out[kHeaderBytes]) {
  put_le(out + 0, kMagic, 4);
  out[4] = kVersion;
  out[5] = static_cast<uint8_t>(h.op);
  put_le(out + 6, h.flags, 2);
  put_le(out + 8, h.size, 4);
  put_le(out + 12, 0, 4);
  put_le(out + 16, h.value, 8);
}

std::optional<Header> decode(const uint8_t in[kHeaderBytes]) {
  if (get_le(in, 4) != kMagic || in[4] != kVersion) return std::nullopt;
  const uint8_t op = in[5];
  if (op < static_cast<uint8_t>(Op::kHello) || op > static_cast<uint8_t>(Op::kBye)) return std::nullopt;
  Header h;
  h.op = static_cast<Op>(op);
  h.flags = static_cast<uint16_t>(get_le(in + 6, 2));
  h.size = static_cast<uint32_t>(get_le(in + 8, 4));
  h.value = get_le(in + 16, 8);
  return h;
}

}  // namespace conduit::bench
