// registered_memory(): the public view of what the transports keep registered per loop
// (only rdma:// registers anything; its arenas, rdma/arena.h).
#include "conduit/transport/registered_memory.h"

#include "rdma/rdma.h"

namespace conduit::transport {

std::vector<RegisteredMemory> registered_memory(reactor::EventLoop& loop) {
  std::vector<RegisteredMemory> out;
  for (auto& a : rdma::arena_stats(loop))
    out.push_back(RegisteredMemory{"rdma", std::move(a.device), std::move(a.pool), std::move(a.rx),
                                   std::move(a.rx_shared)});
  return out;
}

}  // namespace conduit::transport
