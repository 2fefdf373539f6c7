// Out-of-band QP setup over TCP, as NCCL and TensorFlow do it: both sides exchange a
// fixed 48-byte record (QP number, PSN, LID, GID, and optionally one memory window)
// over a connected TCP socket, then drive INIT -> RTR -> RTS by hand.
//
// Wire record (version 1), all integers big-endian:
//   offset  size  field
//        0     4  magic "CDQP"
//        4     1  version (1)
//        5     1  reserved (0)
//        6     2  lid
//        8     4  qp_num
//       12     4  psn (low 24 bits)
//       16    16  gid
//       32     8  addr    (a remote-accessible buffer, or 0)
//       40     4  rkey
//       44     4  length
// A record with another magic or version is rejected (kProtocolError).
#pragma once

#include <cstdint>
#include <string_view>

#include "conduit/base/fd.h"
#include "conduit/base/status.h"
#include "conduit/verbs/qp.h"

namespace conduit::verbs {

struct BootstrapInfo {
  QpEndpoint endpoint;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  friend bool operator==(const BootstrapInfo&, const BootstrapInfo&) = default;
};

inline constexpr size_t kBootstrapRecordSize = 48;
void encode_bootstrap(const BootstrapInfo& info, uint8_t (&out)[kBootstrapRecordSize]);
Result<BootstrapInfo> decode_bootstrap(const uint8_t (&in)[kBootstrapRecordSize]);

// Blocking TCP helpers for bootstrapping (setup path only).
// Listens on host:port ("" = any address); port 0 picks a free port (see bound_port()).
Result<UniqueFd> tcp_listen(std::string_view host, uint16_t port, int backlog = 16);
Result<uint16_t> bound_port(int fd);
Result<UniqueFd> tcp_accept(int listen_fd, int timeout_ms);
// Retries refused connections until the timeout (the peer may not listen yet).
Result<UniqueFd> tcp_connect(std::string_view host, uint16_t port, int timeout_ms);

// Sends `local`, receives the peer's record.  Both sides call it; order does not matter.
Result<BootstrapInfo> exchange_bootstrap(int fd, const BootstrapInfo& local, int timeout_ms);

}  // namespace conduit::verbs
