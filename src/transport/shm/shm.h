// shm://name — same-host connections over two shared-memory SPSC rings (see README.md).
//
//   shm://my-service          socket ${XDG_RUNTIME_DIR:-/tmp}/conduit-my-service.sock
//   shm:///run/app/kv.sock    an absolute socket path, used as is
//
// Options (URL query):
//   ring=1M                  bytes per direction (K/M/G suffixes), a power of two in 4K..1G.  The
//                            listener's value is the default for its clients; a client that
//                            gives ring= asks the server for that size instead.
//   busy_poll_us=0           spin on the rings for up to this long without work before
//                            announcing sleep (0 = announce at once and block in epoll)
//   mode=0600                listener: octal permissions of the socket file
//   connect_timeout_ms=10000 bound on the handshake (client connect, server accept), 1..3600000
// Unknown keys are rejected.  Both sides accept every key, so one URL serves both.
#pragma once

#include <string>
#include <string_view>

#include "conduit/transport/connection.h"

namespace conduit::transport {

Transport* shm_transport();

// The socket path an shm address names (absolute paths as is; other names must be
// [A-Za-z0-9._-]+ and map to ${XDG_RUNTIME_DIR:-/tmp}/conduit-<name>.sock).
Result<std::string> shm_socket_path(std::string_view name);

}  // namespace conduit::transport
