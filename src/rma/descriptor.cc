// Descriptor wire codec (docs/PROTOCOL.md, "rma descriptor").
#include "conduit/rma/descriptor.h"

#include <cstdio>

#include "wire.h"

namespace conduit::rma {

std::string rights_name(Rights r) {
  if (r == Rights::kNone) return "none";
  std::string s;
  auto add = [&](Rights bit, const char* name) {
    if (!contains(r, bit)) return;
    if (!s.empty()) s += '|';
    s += name;
  };
  add(Rights::kRead, "read");
  add(Rights::kWrite, "write");
  add(Rights::kAtomic, "atomic");
  if ((static_cast<uint8_t>(r) & ~static_cast<uint8_t>(kAllRights)) != 0) s += s.empty() ? "?" : "|?";
  return s;
}

// Layout (big-endian), 32 bytes:
//   0 u8 version (1)   1 u8 rights   2 u16 reserved (0)   4 u32 key
//   8 u64 addr   16 u64 length   24 u32 generation   28 u32 reserved (0)
std::array<uint8_t, Descriptor::kWireSize> Descriptor::encode() const {
  std::array<uint8_t, kWireSize> w{};
  w[0] = kWireVersion;
  w[1] = static_cast<uint8_t>(rights);
  wire::put32(&w[4], key);
  wire::put64(&w[8], addr);
  wire::put64(&w[16], length);
  wire::put32(&w[24], generation);
  return w;
}

Result<Descriptor> Descriptor::decode(std::span<const uint8_t> w) {
  if (w.size() < kWireSize)
    return Status(Code::kInvalidArgument, "rma descriptor: " + std::to_string(w.size()) + " bytes, need 32");
  if (w[0] != kWireVersion)
    return Status(Code::kProtocolError, "rma descriptor: version " + std::to_string(w[0]) + ", this side speaks 1");
  if ((w[1] & ~static_cast<uint8_t>(kAllRights)) != 0)
    return Status(Code::kProtocolError, "rma descriptor: unknown rights bits " + std::to_string(w[1]));
  if (wire::get16(&w[2]) != 0 || wire::get32(&w[28]) != 0)
    return Status(Code::kProtocolError, "rma descriptor: reserved bytes are not zero");
  Descriptor d;
  d.rights = static_cast<Rights>(w[1]);
  d.key = wire::get32(&w[4]);
  d.addr = wire::get64(&w[8]);
  d.length = wire::get64(&w[16]);
  d.generation = wire::get32(&w[24]);
  if (d.length == 0) return Status(Code::kProtocolError, "rma descriptor: zero length");
  if (d.addr + d.length < d.addr) return Status(Code::kProtocolError, "rma descriptor: range wraps around");
  return d;
}

std::string Descriptor::to_string() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "rma[0x%llx+%llu key=0x%x gen=%u %s]", static_cast<unsigned long long>(addr),
                static_cast<unsigned long long>(length), key, generation, rights_name(rights).c_str());
  return buf;
}

}  // namespace conduit::rma
