// Where shm:// sockets live and who is on the other end: socket paths, the UNIX-socket
// calls around them, and peer credentials.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"

namespace conduit::transport::shm {

// The sockaddr of `path`; false if it does not fit.
bool make_addr(const std::string& path, sockaddr_un* addr);
// connect(2), retried on EINTR; returns its result (errno set on failure).
int connect_unix(int fd, const sockaddr_un& addr);

// A socket file that exists but has no listener (ECONNREFUSED) is left over from a crashed
// server and is removed; anything else at the path is kept (kUnavailable).
Status remove_stale_socket(const std::string& path, const sockaddr_un& addr);

// The directory bare names (shm://NAME) live in, private to this effective uid:
// $XDG_RUNTIME_DIR when it is set and sane (absolute, a directory -- not a symlink -- owned
// by us with no group or other permissions), else ${TMPDIR:-/tmp}/conduit-<euid>, created
// 0700 when `create` (the listener) and in every case checked, not trusted: it must be a
// directory owned by us with no group or other permissions, in a parent others cannot
// rename it out of (not writable by others, or sticky like /tmp).  Otherwise another user
// could have created it first and could then bind our names or answer in our place:
// kPermissionDenied, naming what is wrong.  A directory that does not exist yet is fine
// for a client (its connect then finds no listener).
Result<std::string> private_socket_dir(bool create);

// Who is on the other end of a connected UNIX socket, from SO_PEERCRED (set by the kernel
// at connect/listen time, so a peer cannot forge it).
struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
};
Result<PeerCred> peer_credentials(int fd);
// OK when the peer's uid is our effective uid or one of `allowed` (the allow_uids option);
// else kPermissionDenied naming `who`, the peer's uid and pid.
Status check_peer_uid(const PeerCred& peer, const std::vector<uid_t>& allowed, const std::string& who);

std::string pid_string(pid_t pid);
// "pid:<n>" of the process on the other end of a connected UNIX socket.
std::string peer_pid_of(int fd);

}  // namespace conduit::transport::shm
