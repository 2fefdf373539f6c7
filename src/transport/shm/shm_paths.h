// Where shm:// sockets live and who is on the other end: socket paths, the UNIX-socket
// calls around them, and peer credentials.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <string>
#include <string_view>

#include "conduit/base/status.h"

namespace conduit::transport::shm {

// The sockaddr of `path`; false if it does not fit.
bool make_addr(const std::string& path, sockaddr_un* addr);
// connect(2), retried on EINTR; returns its result (errno set on failure).
int connect_unix(int fd, const sockaddr_un& addr);

// A socket file that exists but has no listener (ECONNREFUSED) is left over from a crashed
// server and is removed; anything else at the path is kept (kUnavailable).
Status remove_stale_socket(const std::string& path, const sockaddr_un& addr);

std::string pid_string(pid_t pid);
// "pid:<n>" of the process on the other end of a connected UNIX socket.
std::string peer_pid_of(int fd);

}  // namespace conduit::transport::shm
