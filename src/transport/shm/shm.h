// shm://name — same-host connections over two shared-memory SPSC rings (see README.md).
//
//   shm://my-service          socket ${XDG_RUNTIME_DIR:-/tmp}/conduit-my-service.sock
//   shm:///run/app/kv.sock    an absolute socket path, used as is
//
// Options (URL query): the table kShmOptions in shm_options.h is the one place they are
// written -- name, default, range, side and meaning -- and what they are parsed with;
// docs/TRANSPORTS.md shows it rendered (a test keeps the two equal).  Unknown keys are
// rejected.  Both sides accept every key, so one URL serves both.
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
