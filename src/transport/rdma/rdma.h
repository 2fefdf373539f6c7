// rdma://host:port — the RDMA stream transport (Valkey's RDMA protocol, see
// docs/PROTOCOL.md), driven by the reactor.  host is an IP address on an RDMA-capable
// netdev; rdma_cm resolves it to a device.
//
// Options (URL query; defaults in brackets):
//   rx_buffer=1048576      bytes of the receive buffer advertised to the peer [1 MiB],
//                          65536..16777216
//   send_depth=256         send queue depth (WRITE_WITH_IMM + control SENDs) [256]
//   recv_depth=256         pre-posted 32-byte receives (control + imm writes) [256]
//   inline=64              inline threshold in bytes (provider may grant less) [64]
//   flush_bytes=65536      post pending data at once when this much is buffered; smaller
//                          runs are posted once per loop iteration (event aggregation) [64 KiB]
//   keepalive_ms=3000      Keepalive interval, 0 = never send [3000]
//   keepalive_timeout_ms=10000  close a peer that has sent keepalives (or negotiated
//                          Conduit features) but then stays silent this long; 0 = off
//   connect_timeout_ms=10000    bound on address/route resolution and connection setup
//   linger_ms=5000         close() with writes still on the wire keeps the QP up (after the
//                          caller's object is gone) until the peer's NIC has acknowledged
//                          them, at most this long; then disconnects.  0 = no bound [5000]
//   backlog=1024           listener: connection requests rdma_cm may hold before they are
//                          accepted; beyond it requests are dropped and the client's CM
//                          retries seconds later (the kernel caps it, default 1024) [1024]
//   busy_poll_us=0         while a handler is installed, poll the CQ from the loop's
//                          before-sleep hook instead of sleeping until this long passes
//                          without a completion (costs a core; under TCG an event-driven
//                          completion costs milliseconds) [0 = off]
//   features=all           Conduit extensions offered: all | none | a number [all]
//   device=NAME            require rdma_cm to pick this device (e.g. rxe0)
#pragma once

#include "conduit/transport/connection.h"

namespace conduit::transport {
Transport* rdma_transport();
}
