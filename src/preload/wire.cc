#include "wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace conduit::preload {
namespace {

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t get32(const uint8_t* p) { return (static_cast<uint32_t>(get16(p)) << 16) | get16(p + 2); }

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

}  // namespace

std::string_view msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::kAnnounce: return "announce";
    case MsgType::kAck: return "ack";
    case MsgType::kAccept: return "accept";
    case MsgType::kReject: return "reject";
    case MsgType::kCommit: return "commit";
  }
  return "?";
}

std::string_view reject_name(Reject r) {
  switch (r) {
    case Reject::kNone: return "none";
    case Reject::kNotListening: return "the server process has no listener for that address";
    case Reject::kDuplicate: return "another announce holds the same 4-tuple";
    case Reject::kAddressMismatch: return "the announce names another address than the channel comes from";
    case Reject::kPolicy: return "the server's rules do not select this connection";
    case Reject::kInternal: return "the server could not set the connection up";
  }
  return "unknown reason";
}

bool normalise_address(const sockaddr* sa, uint8_t* family, uint8_t addr[16], uint16_t* port) {
  std::memset(addr, 0, 16);
  if (sa->sa_family == AF_INET) {
    const auto* s4 = reinterpret_cast<const sockaddr_in*>(sa);
    *family = 4;
    std::memcpy(addr, &s4->sin_addr, 4);
    *port = ntohs(s4->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    *port = ntohs(s6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
      *family = 4;
      std::memcpy(addr, s6->sin6_addr.s6_addr + 12, 4);
    } else {
      *family = 6;
      std::memcpy(addr, s6->sin6_addr.s6_addr, 16);
    }
    return true;
  }
  return false;
}

std::string address_text(uint8_t family, const uint8_t addr[16], uint16_t port) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, buf, sizeof buf);
  return family == 4 ? std::string(buf) + ":" + std::to_string(port)
                     : "[" + std::string(buf) + "]:" + std::to_string(port);
}

FourTuple FourTuple::from(const sockaddr* client, const sockaddr* server) {
  FourTuple t;
  uint8_t fc = 0, fs = 0;
  normalise_address(client, &fc, t.client, &t.client_port);
  normalise_address(server, &fs, t.server, &t.server_port);
  t.family = fs != 0 ? fs : fc;
  return t;
}

std::string FourTuple::client_text() const { return address_text(family, client, client_port); }
std::string FourTuple::server_text() const { return address_text(family, server, server_port); }

void encode(const Msg& m, uint8_t out[kWireSize]) {
  std::memset(out, 0, kWireSize);
  put32(out, kWireMagic);
  out[4] = kWireVersion;
  out[5] = static_cast<uint8_t>(m.type);
  put16(out + 6, static_cast<uint16_t>(m.reason));
  put16(out + 8, m.tuple.client_port);
  put16(out + 10, m.tuple.server_port);
  out[12] = m.tuple.family;
  std::memcpy(out + 16, m.tuple.client, 16);
  std::memcpy(out + 32, m.tuple.server, 16);
  put32(out + 48, m.pid);
}

Result<Msg> decode(const uint8_t in[kWireSize]) {
  if (get32(in) != kWireMagic) return Status(Code::kProtocolError, "preload negotiation: bad magic");
  if (in[4] != kWireVersion)
    return Status(Code::kNotSupported, "preload negotiation: version " + std::to_string(in[4]) + " (we speak 1)");
  Msg m;
  if (in[5] < 1 || in[5] > 5) return Status(Code::kProtocolError, "preload negotiation: unknown message type " + std::to_string(in[5]));
  m.type = static_cast<MsgType>(in[5]);
  const uint16_t reason = get16(in + 6);
  if (reason > static_cast<uint16_t>(Reject::kInternal) || (reason != 0) != (m.type == MsgType::kReject))
    return Status(Code::kProtocolError, "preload negotiation: reason " + std::to_string(reason) + " on a " +
                                            std::string(msg_type_name(m.type)));
  m.reason = static_cast<Reject>(reason);
  m.tuple.client_port = get16(in + 8);
  m.tuple.server_port = get16(in + 10);
  m.tuple.family = in[12];
  if (m.tuple.family != 4 && m.tuple.family != 6)
    return Status(Code::kProtocolError, "preload negotiation: address family " + std::to_string(in[12]));
  std::memcpy(m.tuple.client, in + 16, 16);
  std::memcpy(m.tuple.server, in + 32, 16);
  if (m.tuple.family == 4 && (!all_zero(in + 20, 12) || !all_zero(in + 36, 12)))
    return Status(Code::kProtocolError, "preload negotiation: IPv4 address with bytes past the fourth");
  m.pid = get32(in + 48);
  if (!all_zero(in + 13, 3) || !all_zero(in + 52, 12))
    return Status(Code::kProtocolError, "preload negotiation: reserved bytes are not zero");
  return m;
}

}  // namespace conduit::preload
