// rdma://host:port — the RDMA stream transport (Valkey's RDMA protocol, see
// docs/PROTOCOL.md), driven by the reactor.  host is an IP address on an RDMA-capable
// netdev; rdma_cm resolves it to a device.
//
// Options: the table in options.cc (printed in docs/TRANSPORTS.md, checked by a test).
// Layout of this folder (README.md): options, the per-loop context, the SRQ pool, the
// closer, the connection (setup/control and data path) and the listener.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conduit/memory/pool.h"
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

// Diagnostics: the registered arena of each device `loop`'s connections use (arena.h):
// `pool` for control slots, staging and applications, `rx` for receive areas (scope=mw),
// `rx_shared` for those of scope=shared.  The public face: conduit/transport/registered_memory.h.
struct ArenaStats {
  std::string device;
  memory::PoolStats pool;
  memory::PoolStats rx;
  memory::PoolStats rx_shared;
  bool spares_idle = true;  // the spare keeper has nothing left to register (tests wait on it)
};
std::vector<ArenaStats> arena_stats(reactor::EventLoop& loop);

// Diagnostics: the spare queue pairs of `loop` (qp_stock.h), one entry per device and
// shape in use.  Loop thread only.
struct QpStockStats {
  uint64_t created = 0;  // spares made by the keeper
  uint64_t taken = 0;    // ... handed to connections
  uint64_t missed = 0;   // a connection found none and made its own QP
  uint64_t failed = 0;   // creations that failed (logged once per stock)
  size_t ready = 0;      // spares waiting now
};
std::vector<QpStockStats> qp_stock_stats(reactor::EventLoop& loop);

// Diagnostics: the teardown of closed connections, which runs on after close(): graceful
// closes still waiting for their data to be acknowledged (closer.h) and QPs being
// destroyed off the loop thread (qp_reaper.h).  The loop's context, and its descriptors,
// live until both are done.  All zero when the loop has no RDMA context.
struct ReaperStats {
  uint64_t closers = 0;      // graceful closes in progress
  uint64_t given = 0;        // QPs handed to the reaper since the loop's context was made
  uint64_t outstanding = 0;  // ... whose resources are not released yet
  uint64_t slowest_ns = 0;   // the longest one destroy took
};
ReaperStats reaper_stats(reactor::EventLoop& loop);
// Fault injection for tests: every QP destroy off the loop first sleeps `ms` (0 = off).
void set_qp_destroy_delay_for_tests(uint32_t ms);
}  // namespace rdma
}  // namespace conduit::transport
