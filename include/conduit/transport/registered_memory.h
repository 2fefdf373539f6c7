// What the transports keep registered with the NIC on one event loop, for servers to report
// (conduit-kv's INFO memory): memory that malloc's counters never see and that stays
// registered (pinned) while the loop lives, however many connections come and go.
//
// rdma:// keeps one arena per (event loop, protection domain), i.e. per device the loop's
// connections used (src/transport/rdma/arena.h): `pool` holds the control slots and send
// staging of every connection and is the `Connection::pool()` applications send from
// without a copy; `rx` holds the receive areas peers write into under a memory window
// (scope=mw, the default where the device has windows), `rx_shared` those of scope=shared.
// A scope=private receive buffer is registered per connection instead and is counted in
// its ConnStats::pinned_bytes, not here.  Other transports register nothing.
#pragma once

#include <string>
#include <vector>

#include "conduit/memory/pool.h"
#include "conduit/reactor/event_loop.h"

namespace conduit::transport {

struct RegisteredMemory {
  std::string transport;        // "rdma"
  std::string device;           // e.g. "rxe0"
  memory::PoolStats pool;       // control slots, staging, Connection::pool()
  memory::PoolStats rx;         // receive areas under memory windows (scope=mw)
  memory::PoolStats rx_shared;  // receive areas under the region's own key (scope=shared)
};

// One entry per arena of `loop` (empty if no rdma connection was ever set up on it).
// Loop thread only: a loop's arenas are created on its thread.  Cost: each pool's stats()
// (its lock and a walk over its size classes); fine for INFO, not for a data path.
std::vector<RegisteredMemory> registered_memory(reactor::EventLoop& loop);

}  // namespace conduit::transport
