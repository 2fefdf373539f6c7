// The negotiation messages, carried on the fast channel (the shm:// or rdma:// connection a
// client opens to the server's rendezvous) before any application byte.  Nothing is ever
// written to the TCP connection itself.  See README.md, "Negotiation".
//
//   client                                   server (the process that owns the listener)
//   ANNOUNCE(4-tuple it will connect from) ->
//                                          <- ACK            (the announce is registered)
//   connect(2) the TCP socket              -> accept(2) finds the announce by 4-tuple
//                                          <- DECISION(accept) or DECISION(reject, reason)
//   COMMIT                                 ->                (accept only; the client may
//   application bytes                     <-> application bytes   also just close: TCP)
//
// Every message is 64 bytes, big-endian:
//   off  size  field
//     0     4  magic 'CDPL' (0x4344504c)
//     4     1  version (1)
//     5     1  type (MsgType)
//     6     2  reason (Reject) for DECISION(reject), else 0
//     8     2  client port      10  2  server port
//    12     1  address family (4 or 6; IPv4-mapped IPv6 addresses travel as 4)
//    13     3  reserved (0)
//    16    16  client address (IPv4: first 4 bytes)
//    32    16  server address
//    48     4  sender pid (for listings only)
//    52    12  reserved (0)
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "conduit/base/status.h"

namespace conduit::preload {

inline constexpr uint32_t kWireMagic = 0x4344504c;  // "CDPL"
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kWireSize = 64;

enum class MsgType : uint8_t { kAnnounce = 1, kAck = 2, kAccept = 3, kReject = 4, kCommit = 5 };
std::string_view msg_type_name(MsgType t);

// Why a server turned an announced connection down (the client stays on TCP and lists it).
enum class Reject : uint16_t {
  kNone = 0,
  kNotListening = 1,   // no listening socket of this process takes that address and port
  kDuplicate = 2,      // another announce holds the same 4-tuple
  kAddressMismatch = 3,  // rdma: the announce names another client address than the channel's
  kPolicy = 4,         // the server's rules do not select this connection
  kInternal = 5,       // the server could not set the connection up
};
std::string_view reject_name(Reject r);

// A TCP connection's endpoints, normalised: IPv4-mapped IPv6 becomes IPv4, so that an
// AF_INET6 client and an AF_INET server name the same connection the same way.
struct FourTuple {
  uint8_t family = 4;  // 4 or 6
  uint8_t client[16] = {};
  uint8_t server[16] = {};
  uint16_t client_port = 0, server_port = 0;

  static FourTuple from(const sockaddr* client, const sockaddr* server);
  std::string client_text() const;  // "127.0.0.1:40000", "[::1]:40000"
  std::string server_text() const;
  auto operator<=>(const FourTuple&) const = default;
};
// One side of a FourTuple as a normalised (family, address) pair; false if not IP.
bool normalise_address(const sockaddr* sa, uint8_t* family, uint8_t addr[16], uint16_t* port);
std::string address_text(uint8_t family, const uint8_t addr[16], uint16_t port);

struct Msg {
  MsgType type = MsgType::kAnnounce;
  Reject reason = Reject::kNone;
  FourTuple tuple;
  uint32_t pid = 0;
};

void encode(const Msg& m, uint8_t out[kWireSize]);
// Checks magic, version, type, reason, family and the reserved bytes.
Result<Msg> decode(const uint8_t in[kWireSize]);

}  // namespace conduit::preload
