// tcp://host:port — non-blocking TCP sockets on the reactor.
//
// Options (URL query):
//   nodelay=1      TCP_NODELAY (default on: Conduit batches writes itself)
//   backlog=511    listen(2) backlog (listener only), 1..65535
//   sndbuf=0       SO_SNDBUF in bytes, K/M/G suffixes allowed (0 = kernel default)
//   rcvbuf=0       SO_RCVBUF in bytes, K/M/G suffixes allowed (0 = kernel default)
//   connect_timeout_ms=10000  outbound connect bound
#pragma once

#include "conduit/transport/connection.h"

namespace conduit::transport {
Transport* tcp_transport();
}
