#include "shm/shm_handshake.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "conduit/base/log.h"
#include "shm/shm_connection.h"
#include "shm/shm_paths.h"

namespace conduit::transport::shm {

Status send_hello(int fd, const Hello& h, const int* fds, size_t nfds) {
  iovec iov{const_cast<Hello*>(&h), sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  if (nfds > 3) return Status(Code::kInternal, "shm send hello: more than 3 descriptors");
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    std::memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof h)) return {};
    if (n < 0 && errno == EINTR) continue;
    // A fresh socket always has room for 32 bytes; anything else means it is gone.
    if (n < 0) return Status::FromErrnoAuto(errno == EAGAIN ? ENOBUFS : errno, "shm send hello");
    return Status(Code::kIoError, "shm send hello: short write");
  }
}

Hello reject_hello(RejectReason why) {
  Hello r;
  r.type = static_cast<uint16_t>(HelloType::kReject);
  r.reason = static_cast<uint32_t>(why);
  return r;
}

std::string reject_text(uint32_t reason) {
  switch (static_cast<RejectReason>(reason)) {
    case RejectReason::kVersion: return "unsupported protocol version";
    case RejectReason::kRingSize: return "ring size refused";
    case RejectReason::kResources: return "server out of resources";
    case RejectReason::kMalformed: return "malformed hello";
    case RejectReason::kPermission: return "our uid is not allowed (the server's allow_uids option)";
    case RejectReason::kNone: break;
  }
  return "reason " + std::to_string(reason);
}

Code reject_code(uint32_t reason) {
  switch (static_cast<RejectReason>(reason)) {
    case RejectReason::kRingSize: return Code::kInvalidArgument;
    case RejectReason::kResources: return Code::kResourceExhausted;
    case RejectReason::kVersion: return Code::kNotSupported;
    case RejectReason::kPermission: return Code::kPermissionDenied;
    case RejectReason::kMalformed:
    case RejectReason::kNone: break;
  }
  return Code::kProtocolError;
}

// --- ShmConnection: both halves of the handshake ---------------------------------------

Status ShmConnection::begin_connect(ConnectCallback cb) {
  on_connect_ = std::move(cb);
  is_client_ = true;
  local_ = pid_string(::getpid());
  peer_ = path_;
  return begin_handshake();
}

// Client whose connect(2) already failed: the failure is reported like any other, from
// the loop through the callback.
void ShmConnection::begin_failed_connect(ConnectCallback cb, Status why) {
  on_connect_ = std::move(cb);
  is_client_ = true;
  local_ = pid_string(::getpid());
  peer_ = path_;
  handshake_timer_ = loop_.run_after(0, [this, why = std::move(why)] {
    handshake_timer_ = 0;
    finish_handshake(why);
  });
}

Status ShmConnection::begin_accept(Established cb) {
  on_established_ = std::move(cb);
  local_ = path_;
  peer_ = peer_pid_of(sock_.get());
  return begin_handshake();
}

Status ShmConnection::begin_handshake() {
  handshake_timer_ = loop_.run_after(options_.connect_timeout_ms * 1'000'000ull, [this] {
    handshake_timer_ = 0;
    finish_handshake(Status(Code::kTimedOut, "shm: handshake with " + path_ + " timed out after " +
                                                 std::to_string(options_.connect_timeout_ms) + " ms"));
  });
  return loop_.add(sock_.get(), reactor::kReadable, &sock_watch_);
}

// Reads what has arrived of the peer's hello.  The protocol defines exactly one set of
// descriptors: the three of the server's accept hello.  So the server reads without a
// control buffer -- the kernel then never installs what a client attaches, it drops it and
// flags MSG_CTRUNC, and we refuse that client at once -- and the client reads with room for
// exactly three, once: more are dropped by the kernel the same way, and any descriptor
// outside that one message is refused.  (Keeping whatever arrived until the handshake ends
// let one client exhaust a server's descriptors.)
// Returns OK with hs_len_ == sizeof(Hello) when complete, would-block when more must come.
Status ShmConnection::receive_hello() {
  while (hs_len_ < sizeof(Hello)) {
    iovec iov{hs_buf_ + hs_len_, sizeof(Hello) - hs_len_};
    alignas(cmsghdr) char control[CMSG_SPACE(kAcceptFds * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (is_client_) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
    }
    const ssize_t n = ::recvmsg(sock_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return Status::WouldBlock();
      return Status::FromErrnoAuto(errno, "shm handshake recv");
    }
    size_t got = 0;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        hs_fds_.emplace_back(fd);  // owned from here: closed with the connection if refused
        ++got;
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || (got != 0 && (got != kAcceptFds || hs_fds_.size() != kAcceptFds))) {
      hs_fds_.clear();
      if (!is_client_) {
        reject(RejectReason::kMalformed);
        return Status(Code::kProtocolError,
                      "shm accept: client " + peer_ + " attached descriptors to its hello (the protocol defines none)");
      }
      return Status(Code::kProtocolError, "shm connect: " + path_ + " sent descriptors the protocol does not define");
    }
    if (n == 0) return Status(Code::kClosed, "shm handshake: " + peer_ + " closed the socket before its hello");
    hs_len_ += static_cast<size_t>(n);
  }
  return {};
}

void ShmConnection::on_sock_events(uint32_t events) {
  if (state_ == ConnState::kConnecting || state_ == ConnState::kAccepting) {
    Status s = receive_hello();
    if (s.would_block()) return;
    if (!s.ok()) return finish_handshake(std::move(s));
    Hello h;
    std::memcpy(&h, hs_buf_, sizeof h);
    return finish_handshake(state_ == ConnState::kAccepting ? serve_hello(h) : take_reply(h));
  }
  if (state_ != ConnState::kConnected) return;
  // Nothing is sent on the socket after the handshake, and we only watch for hangup: the
  // peer closed it or its process died.  Its ring data stays readable.
  (void)events;
  peer_hup_ = true;
  if (loop_.watching(sock_.get())) (void)loop_.remove(sock_.get());
  (void)dispatch();
}

void ShmConnection::reject(RejectReason why) { (void)send_hello(sock_.get(), reject_hello(why), nullptr, 0); }

// Server: check the client's hello, build the region, answer with it.
Status ShmConnection::serve_hello(const Hello& h) {
  if (h.magic != kHelloMagic || h.type != static_cast<uint16_t>(HelloType::kClientHello)) {
    reject(RejectReason::kMalformed);
    return Status(Code::kProtocolError, "shm accept: " + peer_ + " is not a Conduit shm client (bad hello)");
  }
  if (h.version != kProtocolVersion) {
    reject(RejectReason::kVersion);
    return Status(Code::kNotSupported, "shm accept: client " + peer_ + " speaks protocol version " +
                                           std::to_string(h.version) + ", this server " +
                                           std::to_string(kProtocolVersion));
  }
  const uint64_t ring = h.ring_bytes != 0 ? h.ring_bytes : options_.ring;
  if (ring < kMinRing || ring > kMaxRing || (ring & (ring - 1)) != 0 || ring > options_.max_ring) {
    // The client chooses the size and we hold 2 * ring of shared memory for it: cap it.
    Hello r = reject_hello(RejectReason::kRingSize);
    r.ring_bytes = options_.max_ring;
    (void)send_hello(sock_.get(), r, nullptr, 0);
    return Status(Code::kInvalidArgument, "shm accept: client " + peer_ + " asked for ring=" + std::to_string(ring) +
                                              " (allowed: a power of two in " + std::to_string(kMinRing) + ".." +
                                              std::to_string(options_.max_ring) + ", max_ring)");
  }
  UniqueFd memfd;
  Result<Mapping> region = create_region(ring, &memfd);
  UniqueFd own_bell(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  UniqueFd peer_bell(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!region.ok() || !own_bell || !peer_bell) {
    reject(RejectReason::kResources);
    if (!region.ok()) return region.status().annotate("shm accept");
    return Status::FromErrnoAuto(errno, "shm accept: eventfd");
  }
  Hello r;
  r.type = static_cast<uint16_t>(HelloType::kAccept);
  r.ring_bytes = ring;
  r.region_bytes = region_bytes_for(ring);
  const int fds[kAcceptFds] = {memfd.get(), own_bell.get(), peer_bell.get()};
  CONDUIT_RETURN_IF_ERROR(send_hello(sock_.get(), r, fds, kAcceptFds));
  return establish(std::move(region).value(), ring, std::move(own_bell), std::move(peer_bell));
}

// Client: check the server's answer and map the region it sent.
Status ShmConnection::take_reply(const Hello& h) {
  if (h.magic != kHelloMagic)
    return Status(Code::kProtocolError, "shm connect: " + path_ + " is not a Conduit shm listener (bad hello)");
  if (h.version != kProtocolVersion)
    return Status(Code::kNotSupported, "shm connect: server " + path_ + " speaks protocol version " +
                                           std::to_string(h.version) + ", this client " +
                                           std::to_string(kProtocolVersion));
  if (h.type == static_cast<uint16_t>(HelloType::kReject)) {
    std::string why = reject_text(h.reason);
    if (h.reason == static_cast<uint32_t>(RejectReason::kRingSize) && h.ring_bytes != 0)
      why += ": asked for " + (options_.ring_given ? "ring=" + std::to_string(options_.ring) : "its default") +
             ", it allows at most " + std::to_string(h.ring_bytes) + " bytes per direction (its max_ring)";
    return Status(reject_code(h.reason), "shm connect: server " + path_ + " refused: " + why);
  }
  const uint64_t ring = h.ring_bytes;
  if (h.type != static_cast<uint16_t>(HelloType::kAccept) || hs_fds_.size() != kAcceptFds || ring < kMinRing ||
      ring > kMaxRing || (ring & (ring - 1)) != 0 || h.region_bytes != region_bytes_for(ring))
    return Status(Code::kProtocolError, "shm connect: malformed answer from " + path_);
  if (options_.ring_given && ring != options_.ring)
    return Status(Code::kProtocolError, "shm connect: asked for ring=" + std::to_string(options_.ring) +
                                            ", server " + path_ + " gave " + std::to_string(ring));
  CONDUIT_RETURN_IF_ERROR(check_eventfd(hs_fds_[1].get(), "server doorbell"));
  CONDUIT_RETURN_IF_ERROR(check_eventfd(hs_fds_[2].get(), "client doorbell"));
  CONDUIT_ASSIGN_OR_RETURN(Mapping region, map_region(hs_fds_[0].get(), ring, h.region_bytes));
  // The server's doorbell is the one we ring; ours is the one we sleep on.
  UniqueFd server_bell = std::move(hs_fds_[1]);
  UniqueFd client_bell = std::move(hs_fds_[2]);
  return establish(std::move(region), ring, std::move(client_bell), std::move(server_bell));
}

Status ShmConnection::establish(Mapping region, uint64_t ring, UniqueFd own_bell, UniqueFd peer_bell) {
  const bool client = is_client_;
  // Ring 0 carries client -> server, ring 1 server -> client.
  const int tx = client ? 0 : 1;
  const int rx = 1 - tx;
  // Both rings are mapped mirrored (shm_region.h): in-place spans never stop at the wrap.
  tx_ = ring::RingWriter(ring_control(region, tx), ring_data(region, ring, tx), ring, /*mirrored=*/true);
  rx_ = ring::RingReader(ring_control(region, rx), ring_data(region, ring, rx), ring, /*mirrored=*/true);
  region_ = std::make_shared<Mapping>(std::move(region));
  rx_share_ = std::make_shared<RxShare>();
  rx_share_->region = region_;
  rx_share_->conn = this;
  rx_share_->loop = &loop_;
  hold_cap_ = options_.hold_bytes != 0 ? std::min(options_.hold_bytes, ring) : ring / 2;
  spin_ = options_.busy_poll_us != 0 ? AdaptiveSpin::fixed(options_.busy_poll_us * 1000)
                                     : AdaptiveSpin::adaptive(options_.poll_us * 1000);
  doorbell_ = std::move(own_bell);
  peer_bell_ = std::move(peer_bell);
  hs_fds_.clear();
  stats_.pinned_bytes = region_bytes_for(ring);  // the memory; the mirrored mapping spans more address space
  CONDUIT_RETURN_IF_ERROR(loop_.modify(sock_.get(), 0));
  // Edge-triggered: each ring of the doorbell is one event, so it is never read (one
  // system call less per wakeup).  The counter cannot realistically saturate (2^64 - 2).
  CONDUIT_RETURN_IF_ERROR(loop_.add(doorbell_.get(), reactor::kReadable | reactor::kEdgeTriggered, &bell_watch_));
  hook_ = loop_.add_before_sleep([this] { return before_sleep(); });
  state_ = ConnState::kConnected;
  return {};
}

// Ends the handshake; the callback it calls may destroy the connection, so callers return
// right after.
void ShmConnection::finish_handshake(Status s) {
  if (handshake_timer_ != 0) loop_.cancel(handshake_timer_);
  handshake_timer_ = 0;
  const bool client = is_client_;
  if (!s.ok()) {
    CONDUIT_LOG(kDebug) << s.to_string();
    error_ = s;
    state_ = ConnState::kError;
    teardown();
  }
  if (client) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    if (cb) cb(*this, s);
  } else {
    Established cb = std::move(on_established_);
    on_established_ = nullptr;
    if (cb) cb(this, s);
  }
}

}  // namespace conduit::transport::shm
