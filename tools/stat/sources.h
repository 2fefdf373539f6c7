// Where conduit-stat's rows come from: a conduit::rpc server's status service (GetStatus),
// and the preload's per-process status files (src/preload/status_model.h).  Both carry the
// same record, transport::ConnSnapshot; a Row adds who holds the connection.
// Blocking calls, any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/transport/connection.h"

namespace conduit::stat {

struct Row {
  std::string source;  // "pid 1234 redis-server" or the server's URL
  pid_t pid = 0;       // preload rows
  int fd = -1;         // preload rows: the program's socket
  std::string role;    // client, server, listener (preload); "server" for rpc
  // Preload sockets that stayed TCP (or listen) have no channel: the snapshot then holds
  // the socket's own fields (transport "tcp", state = its phase, fallback = why not fast).
  transport::ConnSnapshot conn;
  std::string note;    // a listener: what its rendezvous offers, or why nothing
};

// The connections of the rpc server at `url` (kUnavailable / kTimedOut / ... with the
// server's answer when the call fails; kInvalidArgument for a URL that does not parse).
Result<std::vector<Row>> rpc_rows(const std::string& url, int64_t timeout_ms);

// The sockets of preloaded processes of this user: all of them (pid 0), or of one pid
// (kNotFound, saying why, if that process has no status file).  Listeners only if asked.
Result<std::vector<Row>> preload_rows(pid_t pid, bool listeners);

}  // namespace conduit::stat
