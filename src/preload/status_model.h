// What a preloaded process publishes about its connections, for `conduit-run --list` (and,
// later, for Conduit's status service, which can serve these records as they are).
//
// The data model is two flat records (below), one process and its sockets.  On disk each
// process has one file, <status_dir()>/<pid>.status, replaced atomically (rename) when
// something changes, at most every 50 ms; removed at exit.  The format is one record per
// line, fields tab-separated as key=value (values never contain tabs or newlines):
//
//   conduit-preload-status   v=1
//   process  pid=  exe=  name=  mode=  started_ms=  fast=  tcp=  fallback=  io_uring=
//   socket   fd=  role=  phase=  mode=  local=  peer=  bytes_in=  bytes_out=  age_ms=  reason=
//            [ch.<key>=  ...]
//
// A socket with a fast channel also carries the channel's transport::ConnSnapshot, each of
// its fields (transport::snapshot_fields) prefixed "ch." -- the data model rpc's status
// service serves too, so conduit-stat reads both alike.  While a process has fast channels,
// its file is also rewritten every second, so that their counters and QP state stay fresh.
// Unknown keys are ignored by readers, so fields can be added without breaking them.
// Thread-safe (pure functions); the directory functions do file I/O.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/transport/connection.h"

namespace conduit::preload {

struct SocketStatus {
  int fd = -1;           // the lowest fd number naming it
  std::string role;      // client, server, listener
  std::string phase;     // fast, tcp, listening, announcing, ... (Phase names)
  std::string mode;      // shm, rdma, tcp; a listener: what its rendezvous offers
  std::string local, peer;
  uint64_t bytes_in = 0, bytes_out = 0;  // over the fast channel
  uint64_t age_ms = 0;   // since the socket was made
  std::string reason;    // tcp: why not fast; listener: what it offers or why nothing
  bool has_channel = false;         // the fast channel's snapshot below is filled
  transport::ConnSnapshot channel;  // the fast channel (Connection::snapshot)
};

struct ProcessStatus {
  pid_t pid = 0;
  std::string exe;       // /proc/self/exe when written (a reader drops files whose pid now runs another program)
  std::string name;      // the process' name (comm), e.g. redis-server
  std::string mode;      // the policy (auto, shm, rdma, tcp)
  uint64_t started_ms = 0;  // unix time the engine started
  uint64_t fast = 0, tcp = 0, fallback = 0;  // decisions so far: fast, plain TCP, of which fallbacks
  bool io_uring = false;  // the program set up an io_uring (new connections stay TCP)
  std::vector<SocketStatus> sockets;
};

std::string format_status(const ProcessStatus& p);
Result<ProcessStatus> parse_status(std::string_view text);

// The per-user directory: $XDG_RUNTIME_DIR/conduit-preload when XDG_RUNTIME_DIR is a private
// directory of ours, else ${TMPDIR:-/tmp}/conduit-preload-<euid>.  create: make it (0700).
// Fails if it exists but is not a directory of ours with mode 0700.
Result<std::string> status_dir(bool create);
// Every live process' status, oldest pid first; files of processes that are gone (or whose
// pid now runs another program) are removed.
std::vector<ProcessStatus> read_all_status();

// The table conduit-run --list prints (smcss-like), and its --json form.
std::string render_table(const std::vector<ProcessStatus>& all);
std::string render_json(const std::vector<ProcessStatus>& all);

}  // namespace conduit::preload
