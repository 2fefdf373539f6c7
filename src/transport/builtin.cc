#include "builtin.h"

#include "auto/auto.h"
#include "rdma/rdma.h"
#include "shm/shm.h"
#include "tcp/tcp.h"

namespace conduit::transport {

std::vector<Transport*> builtin_transports() {
  return {tcp_transport(), shm_transport(), rdma_transport(), auto_transport()};
}

}  // namespace conduit::transport
