// rdma://host:port — the RDMA stream transport (Valkey's RDMA protocol, see
// docs/PROTOCOL.md), driven by the reactor.  host is an IP address on an RDMA-capable
// netdev; rdma_cm resolves it to a device.
//
// Options (URL query; defaults in brackets; the table in docs/TRANSPORTS.md):
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
//   features=all           Conduit extensions offered: all | none | a mask (bit 0 ring,
//                          bit 1 solicited; docs/PROTOCOL.md) [all]
//   credit_bytes=0         ring mode: return space to the writer in steps of this many
//                          consumed bytes [0 = rx_buffer / 4]
//   device=NAME            require rdma_cm to pick this device (e.g. rxe0)
//   srq=0                  take receives from one shared receive queue per event loop and
//                          device (srq_depth slots of 32 bytes, one registered buffer)
//                          instead of posting recv_depth per connection; meant for servers
//                          with many connections.  Receiver-local: no wire change, works
//                          against any peer.  recv_depth is then unused [off]
//   srq_depth=4096         receives in that shared queue, 16..16384 (and the device's
//                          max_srq_wr); connections with different depths get different
//                          queues [4096]
#pragma once

#include <cstdint>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::transport {
Transport* rdma_transport();

namespace rdma {
// Diagnostics: one shared receive queue (srq=1) of an event loop.
struct SrqStats {
  uint32_t depth = 0;             // slots
  uint32_t posted = 0;            // slots in the SRQ; == depth when no completion is pending
  uint32_t attached = 0;          // QPs using it (connections and graceful closes)
  uint64_t completions = 0;       // receive completions delivered or reclaimed
  uint64_t low_water_events = 0;  // times fewer than depth/8 were posted
};
// The SRQs of `loop`'s RDMA context (empty if it has none).  Loop thread only.
std::vector<SrqStats> srq_stats(reactor::EventLoop& loop);
}  // namespace rdma
}  // namespace conduit::transport
