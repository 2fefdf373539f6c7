#include "fast_io.h"

#include <limits.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "conduit/base/log.h"
#include "engine.h"
#include "wait.h"

namespace conduit::preload {
namespace {

constexpr size_t kStagingMax = 256 * 1024;  // read-ahead for MSG_PEEK and FIONREAD

// A mutable copy of an iovec array that can be advanced past bytes already moved.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int n) : v_(iov, iov + n) { skip_empty(); }
  bool done() const { return i_ == v_.size(); }
  std::span<uint8_t> current() const {
    return {static_cast<uint8_t*>(v_[i_].iov_base) + off_, v_[i_].iov_len - off_};
  }
  void advance(size_t n) {
    while (n > 0 && !done()) {
      const size_t left = v_[i_].iov_len - off_;
      const size_t k = std::min(left, n);
      off_ += k;
      n -= k;
      if (off_ == v_[i_].iov_len) {
        ++i_;
        off_ = 0;
      }
    }
    skip_empty();
  }
  // The rest as iovecs (for writev).
  std::vector<iovec> rest() const {
    std::vector<iovec> out;
    for (size_t j = i_; j < v_.size(); ++j) {
      iovec x = v_[j];
      if (j == i_) {
        x.iov_base = static_cast<uint8_t*>(x.iov_base) + off_;
        x.iov_len -= off_;
      }
      if (x.iov_len != 0) out.push_back(x);
    }
    return out;
  }

 private:
  void skip_empty() {
    while (i_ < v_.size() && v_[i_].iov_len == off_) {
      ++i_;
      off_ = 0;
    }
  }
  std::vector<iovec> v_;
  size_t i_ = 0, off_ = 0;
};

Engine* engine() { return process().engine; }

// The channel said "nothing now": its readiness is unknown until a handler says otherwise.
void lost_rx(Socket& s) {
  if (!s.rx_ready) return;
  s.rx_ready = false;
  if (Engine* e = engine()) e->want_rx(s);
}
void lost_tx(Socket& s) {
  if (!s.tx_ready) return;
  s.tx_ready = false;
  if (Engine* e = engine()) e->want_tx(s);
}

// The channel failed or ended: every waiter must hear it, edge-triggered ones included.
void channel_ended(Socket& s, bool failed) {
  if (failed) s.failed = true;
  else s.eof = true;
  s.rx_ready = true;
  if (failed) s.tx_ready = true;
  ++s.rx_gen;
  if (failed) ++s.tx_gen;
}

// One read from the channel into buf.  >0 bytes; 0 = nothing now (would block); -1 = end of
// stream or failure (recorded in s).
ssize_t channel_read(Socket& s, std::span<uint8_t> buf) {
  if (s.eof || s.failed) return -1;
  Result<size_t> r = s.conn->read(buf);
  if (r.ok()) {
    if (*r == 0) {
      channel_ended(s, false);
      return -1;
    }
    s.bytes_in += *r;
    // Whether more is there is unknown until the channel says so: its read handler, installed
    // at the next drive, runs at once if data remains.  (Level-triggered waits stay exact.)
    lost_rx(s);
    return static_cast<ssize_t>(*r);
  }
  if (r.status().would_block()) {
    lost_rx(s);
    return 0;
  }
  CONDUIT_LOG(kDebug) << "conduit-preload: fd " << (s.fds.empty() ? -1 : s.fds.front()) << " read: " << r.status().to_string();
  channel_ended(s, true);
  return -1;
}

// Reads ahead into the staging buffer: up to `want` bytes staged in total.
void fill_staging(Socket& s, size_t want) {
  want = std::min(want, kStagingMax);
  if (s.staging_off > 0 && s.staging_off == s.staging.size()) {
    s.staging.clear();
    s.staging_off = 0;
  }
  while (s.staged() < want) {
    const size_t have = s.staging.size();
    const size_t ask = want - s.staged();
    s.staging.resize(have + ask);
    const ssize_t n = channel_read(s, std::span<uint8_t>(s.staging.data() + have, ask));
    s.staging.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n <= 0) break;
  }
}

// Moves staged bytes into the cursor (consuming them unless peek).
size_t take_staged(Socket& s, IovCursor& cur, bool peek) {
  size_t moved = 0;
  size_t off = s.staging_off;
  while (!cur.done() && off < s.staging.size()) {
    std::span<uint8_t> dst = cur.current();
    const size_t k = std::min(dst.size(), s.staging.size() - off);
    std::memcpy(dst.data(), s.staging.data() + off, k);
    cur.advance(k);
    off += k;
    moved += k;
  }
  if (!peek) {
    s.staging_off = off;
    if (s.staging_off == s.staging.size()) {
      s.staging.clear();
      s.staging_off = 0;
    }
  }
  return moved;
}

bool nonblocking(const Socket& s, int flags) { return s.nonblock || (flags & MSG_DONTWAIT) != 0; }

int forked_error(const Socket& s) {
  static bool logged = false;
  if (!logged) {
    logged = true;
    CONDUIT_LOG(kWarn) << "conduit-preload[" << process().pid << "]: fd " << (s.fds.empty() ? -1 : s.fds.front())
                       << " is an accelerated connection of the parent process; a forked child cannot use it "
                          "(ENOTCONN; see docs/PRELOAD.md)";
  }
  return ENOTCONN;
}

// Waits for a negotiating socket's outcome.  kForwardToLibc once it is plain TCP; 0 once it
// is fast; -1 with e->err on EINTR (or EAGAIN for a non-blocking call).
ssize_t await_decision(EngineLock& lk, const std::shared_ptr<Socket>& s, int flags, IoError* e) {
  while (negotiating(s->phase)) {
    if (nonblocking(*s, flags)) {
      e->err = EAGAIN;
      return -1;
    }
    const int w = wait_socket(lk, s, 0, -1);
    if (w < 0) {
      e->err = errno;
      return -1;
    }
  }
  if (s->closed()) {
    e->err = EBADF;
    return -1;
  }
  if (s->phase == Phase::kTcp) return kForwardToLibc;
  return 0;
}

}  // namespace

uint32_t readiness(Socket& s, bool want_rdhup) {
  switch (s.phase) {
    case Phase::kForked: return EPOLLIN | EPOLLRDNORM | EPOLLOUT | EPOLLWRNORM | EPOLLERR | EPOLLHUP;
    case Phase::kFast: break;
    default: return 0;
  }
  if (want_rdhup && s.rx_ready && s.staged() == 0 && !s.eof && !s.failed) fill_staging(s, 4096);
  uint32_t ev = 0;
  if (s.staged() > 0 || s.rx_ready || s.shut_rd || s.eof || s.failed) ev |= EPOLLIN | EPOLLRDNORM;
  if (s.eof || s.shut_rd) ev |= EPOLLRDHUP;
  if (s.tx_ready || s.shut_wr || s.failed) ev |= EPOLLOUT | EPOLLWRNORM;
  if (s.failed) ev |= EPOLLERR | EPOLLHUP | EPOLLRDHUP;
  if (s.eof && s.shut_wr) ev |= EPOLLHUP;
  return ev;
}

int readable_bytes(Socket& s) {
  if (s.phase != Phase::kFast) return 0;
  fill_staging(s, kStagingMax);
  return static_cast<int>(std::min<size_t>(s.staged(), INT_MAX));
}

ssize_t sock_recv(EngineLock& lk, const std::shared_ptr<Socket>& s, const iovec* iov, int iovcnt, int flags,
                  IoError* e) {
  if (iovcnt < 0 || iovcnt > IOV_MAX) return e->err = EINVAL, -1;
  if (flags & MSG_OOB) return e->err = EINVAL, -1;        // no urgent data on a fast channel
  if (flags & MSG_ERRQUEUE) return e->err = EAGAIN, -1;  // nor an error queue
  if (s->phase == Phase::kForked) return e->err = forked_error(*s), -1;
  if (negotiating(s->phase)) {
    const ssize_t d = await_decision(lk, s, flags, e);
    if (d != 0) return d;
  }
  if (s->phase == Phase::kTcp) return kForwardToLibc;
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total == 0) return 0;
  const bool peek = (flags & MSG_PEEK) != 0;
  const bool waitall = (flags & MSG_WAITALL) != 0 && !peek && !nonblocking(*s, flags);
  const bool discard = (flags & MSG_TRUNC) != 0;  // TCP: MSG_TRUNC throws the bytes away
  std::vector<uint8_t> scratch;
  iovec scratch_iov{};
  if (discard) {
    scratch.resize(std::min<size_t>(total, kStagingMax));
    scratch_iov = {scratch.data(), scratch.size()};
    iov = &scratch_iov;
    iovcnt = 1;
    total = scratch.size();
  }
  IovCursor cur(iov, iovcnt);
  size_t got = 0;
  for (;;) {
    if (s->closed()) return e->err = EBADF, -1;
    if (s->phase != Phase::kFast) return e->err = ENOTCONN, -1;
    if (s->shut_rd) return static_cast<ssize_t>(got);
    if (peek) {
      fill_staging(*s, total);
      got = take_staged(*s, cur, true);
    } else {
      got += take_staged(*s, cur, false);
      while (!cur.done()) {
        std::span<uint8_t> dst = cur.current();
        const ssize_t n = channel_read(*s, dst);
        if (n <= 0) break;
        cur.advance(static_cast<size_t>(n));
        got += static_cast<size_t>(n);
        if (static_cast<size_t>(n) < dst.size()) break;
      }
    }
    if (got > 0 && (!waitall || got == total)) return static_cast<ssize_t>(got);
    if (s->staged() == 0) {
      if (s->failed) {
        if (got > 0) return static_cast<ssize_t>(got);
        if (!s->reset_reported) {
          s->reset_reported = true;
          return e->err = ECONNRESET, -1;
        }
        return 0;
      }
      if (s->eof) return static_cast<ssize_t>(got);
    }
    if (nonblocking(*s, flags)) {
      if (got > 0) return static_cast<ssize_t>(got);
      return e->err = EAGAIN, -1;
    }
    const int w = wait_socket(lk, s, EPOLLIN, s->rcvtimeo_ms);
    if (w <= 0) {
      if (got > 0) return static_cast<ssize_t>(got);
      e->err = w == 0 ? EAGAIN : errno;
      return -1;
    }
  }
}

ssize_t sock_send(EngineLock& lk, const std::shared_ptr<Socket>& s, const iovec* iov, int iovcnt, int flags,
                  IoError* e) {
  if (iovcnt < 0 || iovcnt > IOV_MAX) return e->err = EINVAL, -1;
  if (flags & MSG_OOB) return e->err = EOPNOTSUPP, -1;  // documented: no urgent data
  if (s->phase == Phase::kForked) return e->err = forked_error(*s), -1;
  if (negotiating(s->phase)) {
    const ssize_t d = await_decision(lk, s, flags, e);
    if (d != 0) return d;
  }
  if (s->phase == Phase::kTcp) return kForwardToLibc;
  auto broken_pipe = [&]() -> ssize_t {
    e->err = EPIPE;
    e->sigpipe = (flags & MSG_NOSIGNAL) == 0;
    return -1;
  };
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  IovCursor cur(iov, iovcnt);
  size_t sent = 0;
  for (;;) {
    if (s->closed()) return e->err = EBADF, -1;
    if (s->phase != Phase::kFast) return e->err = ENOTCONN, -1;
    if (s->shut_wr) return sent > 0 ? static_cast<ssize_t>(sent) : broken_pipe();
    if (s->failed) {
      if (sent > 0) return static_cast<ssize_t>(sent);
      if (!s->reset_reported) {
        s->reset_reported = true;
        return e->err = ECONNRESET, -1;
      }
      return broken_pipe();
    }
    if (total == 0) return 0;
    const std::vector<iovec> rest = cur.rest();
    Result<size_t> r = s->conn->writev(std::span<const iovec>(rest.data(), rest.size()));
    if (r.ok()) {
      s->bytes_out += *r;
      sent += *r;
      cur.advance(*r);
      if (sent == total) return static_cast<ssize_t>(sent);
      lost_tx(*s);
    } else if (r.status().would_block()) {
      lost_tx(*s);
    } else {
      // The peer closed (orderly: EPIPE, as TCP gives once the peer's RST is back) or died.
      const bool died = s->conn->state() == transport::ConnState::kError;
      CONDUIT_LOG(kDebug) << "conduit-preload: fd " << (s->fds.empty() ? -1 : s->fds.front())
                          << " write: " << r.status().to_string();
      if (died) {
        channel_ended(*s, true);
        continue;
      }
      s->tx_ready = true;
      if (sent > 0) return static_cast<ssize_t>(sent);
      return broken_pipe();
    }
    if (nonblocking(*s, flags)) {
      if (sent > 0) return static_cast<ssize_t>(sent);
      return e->err = EAGAIN, -1;
    }
    const int w = wait_socket(lk, s, EPOLLOUT, s->sndtimeo_ms);
    if (w <= 0) {
      if (sent > 0) return static_cast<ssize_t>(sent);
      e->err = w == 0 ? EAGAIN : errno;
      return -1;
    }
  }
}

int sock_shutdown(Socket& s, int how, int* err) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return *err = EINVAL, -1;
  if (s.phase == Phase::kForked) return *err = ENOTCONN, -1;
  if (s.phase != Phase::kFast) return *err = ENOTCONN, -1;
  // Both directions closed (our FIN sent, the peer's read) or reset: TCP says ENOTCONN.
  if ((s.shut_wr && s.eof) || s.failed) return *err = ENOTCONN, -1;
  if (how == SHUT_RD || how == SHUT_RDWR) {
    s.shut_rd = true;
    ++s.rx_gen;
  }
  if ((how == SHUT_WR || how == SHUT_RDWR) && !s.shut_wr) {
    s.shut_wr = true;
    ++s.tx_gen;
    if (!s.failed) {
      // The transport's half-close: the peer reads every byte written so far, then EOF.  A
      // connection without one (rdma:// whose peer did not negotiate it; warned once per
      // process when the connection went fast, negotiate.cc) gives the peer EOF only at close.
      if (Status st = s.conn->shutdown_write(); !st.ok())
        CONDUIT_LOG(kDebug) << "conduit-preload: fd " << (s.fds.empty() ? -1 : s.fds.front())
                            << " shutdown(SHUT_WR): " << st.to_string();
    }
  }
  return 0;
}

}  // namespace conduit::preload
