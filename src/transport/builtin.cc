#include "builtin.h"

#include "tcp/tcp.h"

namespace conduit::transport {

std::vector<Transport*> builtin_transports() {
  return {tcp_transport()};
}

}  // namespace conduit::transport
