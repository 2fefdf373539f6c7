// tcp://host:port — non-blocking TCP sockets on the reactor.
//
// Options (URL query):
//   nodelay=1      TCP_NODELAY (default on: Conduit batches writes itself)
//   backlog=511    listen(2) backlog (listener only), 1..65535
//   sndbuf=0       SO_SNDBUF in bytes, K/M/G suffixes allowed (0 = kernel default)
//   rcvbuf=0       SO_RCVBUF in bytes, K/M/G suffixes allowed (0 = kernel default)
//   connect_timeout_ms=10000  outbound connect bound
//   reuseport=0    SO_REUSEPORT on the listening socket (listener only; default off).  Every
//                  listener bound to the same address and port with reuseport=1 (by processes
//                  of the same effective uid) gets a share of the incoming connections, by a
//                  kernel hash of the 4-tuple: one listener per EventLoop spreads connections
//                  over loops.  Any same-uid process can join the group, so leave it off
//                  unless you want that.  Closing one listener resets the connections still
//                  queued on it.
#pragma once

#include "conduit/transport/connection.h"

namespace conduit::transport {
Transport* tcp_transport();
}
