// shm://name — same-host connections over two shared-memory SPSC rings (see README.md).
//
//   shm://my-service          socket <private dir>/conduit-my-service.sock, where the private
//                             dir is $XDG_RUNTIME_DIR when sane, else ${TMPDIR:-/tmp}/conduit-<euid>
//                             (0700, ownership checked): only this uid can bind or reach it
//   shm:///run/app/kv.sock    an absolute socket path, used as is (its `mode` option lets
//                             others in; allow_uids on both sides says whom to accept)
//
// Both sides check the other's uid (SO_PEERCRED): our own effective uid, plus allow_uids.
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

// The socket path an shm address names: absolute paths as is; other names must be
// [A-Za-z0-9._-]+ and map to <private dir>/conduit-<name>.sock (see above), the private
// directory created when `create_dir` (listeners) and always checked (kPermissionDenied
// when another user could control it).
Result<std::string> shm_socket_path(std::string_view name, bool create_dir = false);

}  // namespace conduit::transport
