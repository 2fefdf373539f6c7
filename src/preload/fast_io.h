// The data path of a socket of ours that the preload serves (fast, negotiating, forked):
// recv/send in all their forms, readiness for poll and epoll, FIONREAD.  Under the lock.
//
// Cost on a fast socket with data (or room) ready: no system call -- the channel's read or
// write touches shared memory (shm) or the registered staging area (rdma, posted later by
// the loop) and nothing else.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>

#include "process.h"

namespace conduit::preload {

class EngineLock;

// Returned when the socket turned out to be plain TCP (a negotiation fell back while the
// call waited): the caller must make the libc call itself.
inline constexpr ssize_t kForwardToLibc = -2;

struct IoError {
  int err = 0;
  bool sigpipe = false;  // raise SIGPIPE once the lock is released (send without MSG_NOSIGNAL)
};

ssize_t sock_recv(EngineLock& lk, const std::shared_ptr<Socket>& s, const iovec* iov, int iovcnt, int flags,
                  IoError* e);
ssize_t sock_send(EngineLock& lk, const std::shared_ptr<Socket>& s, const iovec* iov, int iovcnt, int flags,
                  IoError* e);

// EPOLL* bits that hold now (EPOLLIN/RDNORM, OUT/WRNORM, RDHUP, HUP, ERR).  With
// `want_rdhup`, a socket known readable is read ahead into its staging buffer to learn
// whether that readability is an end of stream.
uint32_t readiness(Socket& s, bool want_rdhup = false);
// Bytes readable now without blocking (FIONREAD/SIOCINQ): reads the channel ahead into the
// staging buffer, up to its size.
int readable_bytes(Socket& s);
// shutdown(2) on a fast socket.
int sock_shutdown(Socket& s, int how, int* err);

}  // namespace conduit::preload
