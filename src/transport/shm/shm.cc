// shm:// — see README.md for the design.  In short: a UNIX socket for the handshake and
// for noticing peer death; a sealed memfd with two SPSC rings (ring/spsc_ring.h); one
// eventfd doorbell per side, written by the peer only after this side announced sleep.
// The announcement protocol (flag, seq_cst fence, re-check; publish, fence, check flag) is
// argued in ring/spsc_ring.h and README.md; arm()/disarm() below are its sleeper half and
// the *_needs_wakeup() calls in read/write/close its waker half.
#include "shm/shm.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/base/fd.h"
#include "conduit/base/log.h"
#include "ring/spsc_ring.h"
#include "shm/shm_wire.h"

namespace conduit::transport {
namespace {

using ring::RingControl;
using ring::RingReader;
using ring::RingWriter;
using shm::Hello;
using shm::HelloType;
using shm::RegionHeader;
using shm::RejectReason;

constexpr uint64_t kDefaultRing = uint64_t{1} << 20;
constexpr uint64_t kMinRing = 4096;
constexpr uint64_t kMaxRing = uint64_t{1} << 30;
// While busy polling, a connection serves itself from shared memory for at most this long
// before handing the thread back to the loop (which polls the other fds with a syscall).
constexpr uint64_t kSpinSliceNs = 50'000;
constexpr int kBacklog = SOMAXCONN;

struct ShmOptions {
  uint64_t ring = kDefaultRing;
  bool ring_given = false;
  uint64_t busy_poll_us = 0;
  mode_t mode = 0600;
  uint64_t connect_timeout_ms = 10000;
};

Result<ShmOptions> parse_options(const Endpoint& ep) {
  OptionReader r(ep);
  ShmOptions o;
  o.ring_given = ep.options.count("ring") != 0;
  CONDUIT_ASSIGN_OR_RETURN(o.ring, r.get_bytes("ring", kDefaultRing, kMinRing, kMaxRing));
  if ((o.ring & (o.ring - 1)) != 0)
    return Status(Code::kInvalidArgument, "shm option ring=" + std::to_string(o.ring) + ": not a power of two");
  CONDUIT_ASSIGN_OR_RETURN(o.busy_poll_us, r.get_u64("busy_poll_us", 0, 0, 1'000'000));
  CONDUIT_ASSIGN_OR_RETURN(std::string mode, r.get_string("mode", "0600"));
  unsigned m = 0;
  bool mode_ok = !mode.empty() && mode.size() <= 4;
  for (char c : mode) {
    if (c < '0' || c > '7') mode_ok = false;
    m = m * 8 + static_cast<unsigned>(c - '0');
  }
  if (!mode_ok || m > 0777)
    return Status(Code::kInvalidArgument, "shm option mode='" + mode + "': expected octal permissions such as 0660");
  o.mode = static_cast<mode_t>(m);
  CONDUIT_ASSIGN_OR_RETURN(o.connect_timeout_ms, r.get_u64("connect_timeout_ms", 10000, 1, 3'600'000));
  CONDUIT_RETURN_IF_ERROR(r.finish());
  return o;
}

bool make_addr(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

int connect_unix(int fd, const sockaddr_un& addr) {
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

std::string pid_string(pid_t pid) { return "pid:" + std::to_string(pid); }

std::string peer_pid_of(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return "pid:?";
  return pid_string(cr.pid);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One mmap()ed range; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(static_cast<uint8_t*>(p)), n_(n) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() {
    if (p_ != nullptr && ::munmap(p_, n_) != 0) CONDUIT_LOG(kWarn) << "shm munmap: " << std::strerror(errno);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

RingControl* ring_control(const Mapping& m, int index) {
  return reinterpret_cast<RingControl*>(m.data() + shm::kRingControlOffset + index * sizeof(RingControl));
}
uint8_t* ring_data(const Mapping& m, uint64_t ring_bytes, int index) {
  return m.data() + shm::kRegionHeaderBytes + static_cast<uint64_t>(index) * ring_bytes;
}

// Server side: a fresh sealed memfd holding the region, mapped.
Result<Mapping> create_region(uint64_t ring_bytes, UniqueFd* memfd_out) {
  const uint64_t size = shm::region_bytes_for(ring_bytes);
  UniqueFd mfd(::memfd_create("conduit-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mfd) return Status::FromErrnoAuto(errno, "shm memfd_create");
  if (::ftruncate(mfd.get(), static_cast<off_t>(size)) != 0) return Status::FromErrnoAuto(errno, "shm ftruncate");
  // The client checks these seals: without them we could shrink the file under its mapping
  // and kill it with SIGBUS.
  if (::fcntl(mfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Status::FromErrnoAuto(errno, "shm seal memfd");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd.get(), 0);
  if (p == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm mmap");
  Mapping m(p, size);
  auto* hdr = new (m.data()) RegionHeader{};
  hdr->magic = shm::kRegionMagic;
  hdr->version = shm::kProtocolVersion;
  hdr->ring_bytes = ring_bytes;
  hdr->region_bytes = size;
  new (ring_control(m, 0)) RingControl{};
  new (ring_control(m, 1)) RingControl{};
  *memfd_out = std::move(mfd);
  return m;
}

// Client side: checks and maps the region the server sent.
Result<Mapping> map_region(int memfd, uint64_t ring_bytes, uint64_t region_bytes) {
  struct stat st{};
  if (::fstat(memfd, &st) != 0) return Status::FromErrnoAuto(errno, "shm fstat region");
  if (static_cast<uint64_t>(st.st_size) != region_bytes)
    return Status(Code::kProtocolError, "shm: region is " + std::to_string(st.st_size) + " bytes, server announced " +
                                            std::to_string(region_bytes));
  const int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return Status(Code::kProtocolError, "shm: region memfd is not sealed against resizing");
  void* p = ::mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm mmap");
  Mapping m(p, region_bytes);
  const auto* hdr = reinterpret_cast<const RegionHeader*>(m.data());
  if (hdr->magic != shm::kRegionMagic || hdr->version != shm::kProtocolVersion || hdr->ring_bytes != ring_bytes ||
      hdr->region_bytes != region_bytes)
    return Status(Code::kProtocolError, "shm: region header does not match the server's hello");
  return m;
}

Status send_hello(int fd, const Hello& h, const int* fds, size_t nfds) {
  iovec iov{const_cast<Hello*>(&h), sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
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

std::string reject_text(uint32_t reason) {
  switch (static_cast<RejectReason>(reason)) {
    case RejectReason::kVersion: return "unsupported protocol version";
    case RejectReason::kRingSize: return "ring size refused";
    case RejectReason::kResources: return "server out of resources";
    case RejectReason::kMalformed: return "malformed hello";
    case RejectReason::kNone: break;
  }
  return "reason " + std::to_string(reason);
}

// ---------------------------------------------------------------------------------------

class ShmConnection;

// Forwards one fd's events to a member function (a connection watches two fds).
class FdWatch final : public reactor::FdHandler {
 public:
  using Fn = void (ShmConnection::*)(uint32_t);
  FdWatch(ShmConnection* c, Fn fn) : c_(c), fn_(fn) {}
  void on_events(uint32_t events) override { (c_->*fn_)(events); }

 private:
  ShmConnection* c_;
  Fn fn_;
};

class ShmConnection final : public Connection {
 public:
  // Server side: called once when the handshake of an accepted connection ends.  Must be
  // the last thing that touches the connection: the callee may destroy it.
  using Established = std::function<void(ShmConnection*, Status)>;

  ShmConnection(reactor::EventLoop& loop, UniqueFd sock, ConnState state, const ShmOptions& options,
                std::string path)
      : loop_(loop), options_(options), state_(state), path_(std::move(path)), sock_(std::move(sock)) {}

  ~ShmConnection() override { close(); }

  Status begin_connect(ConnectCallback cb) {
    on_connect_ = std::move(cb);
    is_client_ = true;
    local_ = pid_string(::getpid());
    peer_ = path_;
    return begin_handshake();
  }
  // Client whose connect(2) already failed: the failure is reported like any other, from
  // the loop through the callback.
  void begin_failed_connect(ConnectCallback cb, Status why) {
    on_connect_ = std::move(cb);
    is_client_ = true;
    local_ = pid_string(::getpid());
    peer_ = path_;
    handshake_timer_ = loop_.run_after(0, [this, why = std::move(why)] {
      handshake_timer_ = 0;
      finish_handshake(why);
    });
  }
  Status begin_accept(Established cb) {
    on_established_ = std::move(cb);
    local_ = path_;
    peer_ = peer_pid_of(sock_.get());
    return begin_handshake();
  }

  // Connection ---------------------------------------------------------------------------
  ConnState state() const override { return state_; }
  const Status& error() const override { return error_; }

  Result<size_t> read(std::span<uint8_t> buf) override {
    if (state_ != ConnState::kConnected) return not_connected();
    if (buf.empty()) return size_t{0};
    size_t n = rx_.read(buf);
    // The producer sets its close flag after its last data: look again once the flag is seen.
    if (n == 0 && rx_.writer_closed()) n = rx_.read(buf);
    if (n > 0) {
      stats_.bytes_read += n;
      ++stats_.reads;
      if (rx_.producer_needs_wakeup(rx_.capacity() / 4)) ring_peer();
      return n;
    }
    if (rx_.corrupt()) return fail(corrupt_status("head"));
    if (rx_.writer_closed()) return size_t{0};
    if (peer_hup_)
      return fail(Status(Code::kClosed, "shm: peer " + peer_ + " went away without closing the connection"));
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }

  Result<size_t> write(std::span<const uint8_t> data) override {
    const iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    return writev(std::span<const iovec>(&iov, 1));
  }

  Result<size_t> writev(std::span<const iovec> iov) override {
    if (state_ != ConnState::kConnected) return not_connected();
    if (write_shut_) return Status(Code::kClosed, "shm: write side was shut down");
    if (peer_hup_ || tx_.reader_closed()) return fail(Status(Code::kClosed, "shm: peer " + peer_ + " closed the connection"));
    size_t total = 0;
    for (const iovec& v : iov) total += v.iov_len;
    if (total == 0) return size_t{0};
    const size_t n = tx_.write(iov, total);
    if (n == 0) {
      if (tx_.corrupt()) return fail(corrupt_status("tail"));
      ++stats_.write_would_block;
      return Status::WouldBlock();
    }
    stats_.bytes_written += n;
    ++stats_.writes;
    if (tx_.consumer_needs_wakeup()) ring_peer();
    return n;
  }

  void set_read_handler(Handler h) override {
    read_handler_ = std::move(h);
    read_on_ = static_cast<bool>(read_handler_);
    read_replaced_ = true;
    if (read_on_) handler_installed();
  }
  void set_write_handler(Handler h) override {
    write_handler_ = std::move(h);
    write_on_ = static_cast<bool>(write_handler_);
    write_replaced_ = true;
    if (write_on_) handler_installed();
  }

  bool has_pending_data() const override {
    return state_ == ConnState::kConnected && read_on_ &&
           (rx_.has_data_now() || rx_.writer_closed() || peer_hup_ || rx_.corrupt());
  }
  void process_pending() override {
    if (!has_pending_data()) return;
    disarm();
    call_read_handler();
  }

  Status shutdown_write() override {
    if (state_ != ConnState::kConnected) return not_connected().status();
    if (write_shut_) return {};
    write_shut_ = true;
    tx_.close();
    if (tx_.consumer_needs_wakeup()) ring_peer();
    return {};
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (region_) {
      // Tell the peer before the socket hangup does: reads there end with EOF after our data,
      // writes there fail.
      tx_.close();
      rx_.close();
      ring::wakeup_fence();
      const bool wake_reader = tx_.check_consumer_sleeping();
      const bool wake_writer = rx_.check_producer_waiting();
      if (wake_reader || wake_writer) ring_peer();
    }
    teardown();
    if (state_ != ConnState::kError) state_ = ConnState::kClosed;
    read_handler_ = nullptr;
    write_handler_ = nullptr;
    read_on_ = write_on_ = false;
    read_replaced_ = write_replaced_ = true;
    on_connect_ = nullptr;
    on_established_ = nullptr;
  }

  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  Caps caps() const override {
    Caps c;
    c.transport = "shm";
    c.half_close = true;
    c.cross_host = false;
    return c;
  }
  const ConnStats& stats() const override { return stats_; }
  reactor::EventLoop& loop() const override { return loop_; }

 private:
  // --- handshake -------------------------------------------------------------------------

  Status begin_handshake() {
    handshake_timer_ = loop_.run_after(options_.connect_timeout_ms * 1'000'000ull, [this] {
      handshake_timer_ = 0;
      finish_handshake(Status(Code::kTimedOut, "shm: handshake with " + path_ + " timed out after " +
                                                   std::to_string(options_.connect_timeout_ms) + " ms"));
    });
    return loop_.add(sock_.get(), reactor::kReadable, &sock_watch_);
  }

  // Reads what has arrived of the peer's hello (and, on the client, its descriptors).
  // Returns OK with hs_len_ == sizeof(Hello) when complete, would-block when more must come.
  Status receive_hello() {
    while (hs_len_ < sizeof(Hello)) {
      iovec iov{hs_buf_ + hs_len_, sizeof(Hello) - hs_len_};
      alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(sock_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return Status::WouldBlock();
        return Status::FromErrnoAuto(errno, "shm handshake recv");
      }
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
          hs_fds_.emplace_back(fd);
        }
      }
      if ((msg.msg_flags & MSG_CTRUNC) != 0)
        return Status(Code::kProtocolError, "shm handshake: peer sent more descriptors than expected");
      if (n == 0) return Status(Code::kClosed, "shm handshake: " + peer_ + " closed the socket before its hello");
      hs_len_ += static_cast<size_t>(n);
    }
    return {};
  }

  void on_sock_events(uint32_t events) {
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

  void reject(RejectReason why) {
    Hello r;
    r.type = static_cast<uint16_t>(HelloType::kReject);
    r.reason = static_cast<uint32_t>(why);
    (void)send_hello(sock_.get(), r, nullptr, 0);
  }

  // Server: check the client's hello, build the region, answer with it.
  Status serve_hello(const Hello& h) {
    if (h.magic != shm::kHelloMagic || h.type != static_cast<uint16_t>(HelloType::kClientHello)) {
      reject(RejectReason::kMalformed);
      return Status(Code::kProtocolError, "shm accept: " + peer_ + " is not a Conduit shm client (bad hello)");
    }
    if (h.version != shm::kProtocolVersion) {
      reject(RejectReason::kVersion);
      return Status(Code::kNotSupported, "shm accept: client " + peer_ + " speaks protocol version " +
                                             std::to_string(h.version) + ", this server " +
                                             std::to_string(shm::kProtocolVersion));
    }
    const uint64_t ring = h.ring_bytes != 0 ? h.ring_bytes : options_.ring;
    if (ring < kMinRing || ring > kMaxRing || (ring & (ring - 1)) != 0) {
      reject(RejectReason::kRingSize);
      return Status(Code::kInvalidArgument, "shm accept: client " + peer_ + " asked for ring=" + std::to_string(ring));
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
    r.region_bytes = shm::region_bytes_for(ring);
    const int fds[3] = {memfd.get(), own_bell.get(), peer_bell.get()};
    CONDUIT_RETURN_IF_ERROR(send_hello(sock_.get(), r, fds, 3));
    return establish(std::move(region).value(), ring, std::move(own_bell), std::move(peer_bell));
  }

  // Client: check the server's answer and map the region it sent.
  Status take_reply(const Hello& h) {
    if (h.magic != shm::kHelloMagic)
      return Status(Code::kProtocolError, "shm connect: " + path_ + " is not a Conduit shm listener (bad hello)");
    if (h.version != shm::kProtocolVersion)
      return Status(Code::kNotSupported, "shm connect: server " + path_ + " speaks protocol version " +
                                             std::to_string(h.version) + ", this client " +
                                             std::to_string(shm::kProtocolVersion));
    if (h.type == static_cast<uint16_t>(HelloType::kReject)) {
      const Code code = h.reason == static_cast<uint32_t>(RejectReason::kRingSize)    ? Code::kInvalidArgument
                        : h.reason == static_cast<uint32_t>(RejectReason::kResources) ? Code::kResourceExhausted
                        : h.reason == static_cast<uint32_t>(RejectReason::kVersion)   ? Code::kNotSupported
                                                                                       : Code::kProtocolError;
      return Status(code, "shm connect: server " + path_ + " refused: " + reject_text(h.reason));
    }
    const uint64_t ring = h.ring_bytes;
    if (h.type != static_cast<uint16_t>(HelloType::kAccept) || hs_fds_.size() != 3 || ring < kMinRing ||
        ring > kMaxRing || (ring & (ring - 1)) != 0 || h.region_bytes != shm::region_bytes_for(ring))
      return Status(Code::kProtocolError, "shm connect: malformed answer from " + path_);
    if (options_.ring_given && ring != options_.ring)
      return Status(Code::kProtocolError, "shm connect: asked for ring=" + std::to_string(options_.ring) +
                                              ", server " + path_ + " gave " + std::to_string(ring));
    CONDUIT_ASSIGN_OR_RETURN(Mapping region, map_region(hs_fds_[0].get(), ring, h.region_bytes));
    // The server's doorbell is the one we ring; ours is the one we sleep on.
    UniqueFd server_bell = std::move(hs_fds_[1]);
    UniqueFd client_bell = std::move(hs_fds_[2]);
    return establish(std::move(region), ring, std::move(client_bell), std::move(server_bell));
  }

  Status establish(Mapping region, uint64_t ring, UniqueFd own_bell, UniqueFd peer_bell) {
    const bool client = is_client_;
    // Ring 0 carries client -> server, ring 1 server -> client.
    const int tx = client ? 0 : 1;
    const int rx = 1 - tx;
    tx_ = RingWriter(ring_control(region, tx), ring_data(region, ring, tx), ring);
    rx_ = RingReader(ring_control(region, rx), ring_data(region, ring, rx), ring);
    region_ = std::move(region);
    doorbell_ = std::move(own_bell);
    peer_bell_ = std::move(peer_bell);
    hs_fds_.clear();
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
  void finish_handshake(Status s) {
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

  // --- readiness and handlers --------------------------------------------------------------

  // A read handler has something to do: data, end of stream, or an error to report.
  bool read_ready() { return rx_.has_data() || rx_.writer_closed() || peer_hup_ || rx_.corrupt(); }
  // A write handler has something to do: space, or an error to report.
  bool write_ready() { return tx_.has_space() || tx_.reader_closed() || peer_hup_ || tx_.corrupt(); }
  bool work_ready() { return (read_on_ && read_ready()) || (write_on_ && write_ready()); }

  // Handlers are moved out while they run (no copy, no allocation) and put back unless the
  // handler replaced or removed itself.  A re-entrant call (process_pending from inside the
  // read handler) finds the slot empty and does nothing.
  void call_read_handler() {
    if (!read_handler_) return;
    Handler h = std::move(read_handler_);
    read_handler_ = nullptr;
    read_replaced_ = false;
    h(*this);
    if (!read_replaced_) read_handler_ = std::move(h);
  }
  void call_write_handler() {
    if (!write_handler_) return;
    Handler h = std::move(write_handler_);
    write_handler_ = nullptr;
    write_replaced_ = false;
    h(*this);
    if (!write_replaced_) write_handler_ = std::move(h);
  }

  enum class Dispatch { kIdle, kRan, kPending };
  // Runs each handler whose condition holds; kPending if one still holds afterwards.
  Dispatch dispatch() {
    if (state_ != ConnState::kConnected) return Dispatch::kIdle;
    bool ran = false;
    in_dispatch_ = true;
    if (read_on_ && read_ready()) {
      disarm();
      ran = true;
      call_read_handler();
    }
    if (state_ == ConnState::kConnected && write_on_ && write_ready()) {
      disarm();
      ran = true;
      call_write_handler();
    }
    in_dispatch_ = false;
    if (state_ != ConnState::kConnected || !ran) return Dispatch::kIdle;
    return work_ready() ? Dispatch::kPending : Dispatch::kRan;
  }

  // Announces on the rings what we would wait for, then re-checks (the sleeper's half of the
  // protocol in ring/spsc_ring.h).  True if the loop may block: whatever would make a
  // handler runnable now rings our doorbell (or hangs up the socket).
  bool arm() {
    const bool want_rx = read_on_ && !rx_armed_;
    const bool want_tx = write_on_ && !tx_armed_;
    if (!want_rx && !want_tx) return true;  // announced already, and nothing was runnable then
    if (want_rx) rx_.announce_sleep();
    if (want_tx) tx_.announce_wait();
    ring::wakeup_fence();
    rx_armed_ = rx_armed_ || want_rx;
    tx_armed_ = tx_armed_ || want_tx;
    return !work_ready();
  }
  // Withdraws the announcements while we are awake, so that the peer does not ring for
  // nothing.  Safe at any time: arm() runs again before the loop blocks.
  void disarm() {
    if (rx_armed_) rx_.cancel_sleep();
    if (tx_armed_) tx_.cancel_wait();
    rx_armed_ = tx_armed_ = false;
  }

  // The loop's before-sleep hook: where data-driven handlers run, since the peer rings the
  // doorbell only when we said we sleep.  Returns true ("don't block") also when it merely
  // ran a handler: then run_once() returns after this iteration, as it does after fd
  // handlers, so that `while (!done) loop.run_once(-1)` sees what the handler did instead of
  // blocking with it done.  (Costs one non-blocking epoll_wait after a burst of work.)
  bool before_sleep() {
    hook_iteration_ = loop_.iterations();
    const Dispatch d = dispatch();
    if (state_ != ConnState::kConnected) return false;
    if (options_.busy_poll_us == 0 || !(read_on_ || write_on_)) return d != Dispatch::kIdle || !arm();
    const uint64_t now = monotonic_ns();
    if (d != Dispatch::kIdle || idle_since_ == 0) idle_since_ = now;
    return spin(now, d != Dispatch::kIdle);
  }

  // Busy polling: serve this connection from shared memory alone (no syscalls) for a slice,
  // then return true so the loop polls its fds and timers and calls us again.  Announce
  // sleep only after busy_poll_us without work (and not in a call that ran handlers).
  bool spin(uint64_t now, bool ran) {
    const uint64_t budget = options_.busy_poll_us * 1000;
    const uint64_t slice_end = now + kSpinSliceNs;
    for (uint32_t i = 1;; ++i) {
      if (work_ready()) {
        (void)dispatch();
        if (state_ != ConnState::kConnected) return false;
        now = monotonic_ns();
        idle_since_ = now;
        ran = true;
      } else {
        cpu_relax();
        if ((i & 15) == 0) now = monotonic_ns();
      }
      if (now - idle_since_ >= budget) break;
      if (now >= slice_end) return true;
    }
    if (ran) return true;  // the next call finds the budget spent and arms
    idle_since_ = 0;       // the next wakeup starts a new polling window
    return !arm();
  }

  // A handler was installed from outside our own dispatch.  If our hook already ran in this
  // loop iteration (we are called from a later hook, an fd handler or a timer), the loop may
  // block before the hook runs again: arm now, and if the handler is runnable already, keep
  // the loop from blocking with a zero-delay timer (no syscall).
  void handler_installed() {
    if (state_ != ConnState::kConnected || in_dispatch_ || hook_iteration_ != loop_.iterations()) return;
    if (arm() || pass_timer_ != 0) return;
    pass_timer_ = loop_.run_after(0, [this] { pass_timer_ = 0; });
  }

  void on_bell_events(uint32_t) {
    disarm();  // the peer consumed at least one announcement
    idle_since_ = 0;
    (void)dispatch();
  }

  void ring_peer() {
    const uint64_t one = 1;
    ssize_t n;
    do {
      n = ::write(peer_bell_.get(), &one, sizeof one);
    } while (n < 0 && errno == EINTR);
    // EAGAIN: the counter is saturated, so the peer has a wakeup pending anyway.
    if (n < 0 && errno != EAGAIN) CONDUIT_LOG(kDebug) << "shm doorbell write: " << std::strerror(errno);
    ++stats_.wakeups;
  }

  // --- errors and teardown -----------------------------------------------------------------

  Result<size_t> not_connected() const {
    if (state_ == ConnState::kError) return error_;
    if (state_ == ConnState::kClosed) return Status(Code::kClosed, "shm: connection is closed");
    return Status(Code::kInvalidArgument, std::string("shm: connection is ") + std::string(conn_state_name(state_)));
  }

  Status corrupt_status(const char* counter) const {
    return Status(Code::kProtocolError, std::string("shm: peer ") + peer_ + " published an impossible ring " + counter);
  }

  Status fail(Status s) {
    CONDUIT_LOG(kDebug) << "shm " << local_ << "->" << peer_ << ": " << s.to_string();
    error_ = s;
    state_ = ConnState::kError;
    unwatch();
    return s;
  }

  // Stops every loop registration (fds, hook, timers); keeps fds and mapping.
  void unwatch() {
    if (handshake_timer_ != 0) loop_.cancel(handshake_timer_);
    handshake_timer_ = 0;
    if (pass_timer_ != 0) loop_.cancel(pass_timer_);
    pass_timer_ = 0;
    if (hook_ != 0) loop_.remove_before_sleep(hook_);
    hook_ = 0;
    if (sock_ && loop_.watching(sock_.get())) (void)loop_.remove(sock_.get());
    if (doorbell_ && loop_.watching(doorbell_.get())) (void)loop_.remove(doorbell_.get());
  }

  void teardown() {
    unwatch();
    tx_ = RingWriter();
    rx_ = RingReader();
    region_.reset();
    peer_bell_.reset();
    doorbell_.reset();
    sock_.reset();
    hs_fds_.clear();
  }

  reactor::EventLoop& loop_;
  ShmOptions options_;
  ConnState state_;
  Status error_;
  std::string path_;
  std::string local_, peer_;

  // Resources in creation order (teardown() releases them in reverse).
  UniqueFd sock_;
  std::vector<UniqueFd> hs_fds_;
  Mapping region_;
  UniqueFd doorbell_;   // we sleep on it; the peer writes it
  UniqueFd peer_bell_;  // we write it to wake the peer
  RingWriter tx_;
  RingReader rx_;
  FdWatch sock_watch_{this, &ShmConnection::on_sock_events};
  FdWatch bell_watch_{this, &ShmConnection::on_bell_events};
  reactor::EventLoop::HookId hook_ = 0;
  reactor::TimerId handshake_timer_ = 0;
  reactor::TimerId pass_timer_ = 0;

  Handler read_handler_;
  Handler write_handler_;
  ConnectCallback on_connect_;
  Established on_established_;
  bool read_on_ = false, write_on_ = false;              // a handler is installed
  bool read_replaced_ = false, write_replaced_ = false;  // set_*_handler ran during the call
  bool in_dispatch_ = false;
  bool is_client_ = false;
  bool rx_armed_ = false, tx_armed_ = false;  // our sleep/wait announcement may be up
  bool peer_hup_ = false;
  bool write_shut_ = false;
  bool closed_ = false;
  uint64_t hook_iteration_ = 0;
  uint64_t idle_since_ = 0;

  uint8_t hs_buf_[sizeof(Hello)] = {};
  size_t hs_len_ = 0;
  ConnStats stats_;
};

// ---------------------------------------------------------------------------------------

// A socket file that exists but has no listener (ECONNREFUSED) is left over from a crashed
// server and may be replaced; anything else at the path is kept.
Status remove_stale_socket(const std::string& path, const sockaddr_un& addr) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status() : Status::FromErrnoAuto(errno, "shm stat " + path);
  if (!S_ISSOCK(st.st_mode))
    return Status(Code::kUnavailable, "shm listen: " + path + " exists and is not a socket; not replacing it");
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return Status::FromErrnoAuto(errno, "shm socket");
  if (connect_unix(probe.get(), addr) == 0 || errno == EAGAIN)
    return Status(Code::kUnavailable, "shm listen: address in use: a server is listening on " + path);
  if (errno != ECONNREFUSED) return Status::FromErrnoAuto(errno, "shm listen: probing " + path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrnoAuto(errno, "shm unlink stale " + path);
  CONDUIT_LOG(kInfo) << "shm listen: replaced stale socket " << path;
  return {};
}

class ShmListener final : public Listener, public reactor::FdHandler {
 public:
  ShmListener(reactor::EventLoop& loop, UniqueFd fd, const ShmOptions& options, std::string path,
              AcceptCallback cb)
      : loop_(loop), fd_(std::move(fd)), options_(options), path_(std::move(path)), on_accept_(std::move(cb)) {}
  ~ShmListener() override { close(); }

  Status start() {
    struct stat st{};
    if (::lstat(path_.c_str(), &st) == 0) {
      dev_ = st.st_dev;
      ino_ = st.st_ino;
    }
    return loop_.add(fd_.get(), reactor::kReadable, this);
  }

  std::string url() const override { return "shm://" + path_; }

  void close() override {
    if (resume_timer_ != 0) loop_.cancel(resume_timer_);
    resume_timer_ = 0;
    if (!fd_) return;
    if (loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
    fd_.reset();
    // Unlink only our own file: once we stopped listening, another server may already have
    // replaced it as stale.
    struct stat st{};
    if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(path_.c_str());
    handshaking_.clear();
  }

  void pause_accepting() {
    if (resume_timer_ != 0 || !fd_) return;
    (void)loop_.modify(fd_.get(), 0);
    resume_timer_ = loop_.run_after(100'000'000ull, [this] {
      resume_timer_ = 0;
      if (fd_) (void)loop_.modify(fd_.get(), reactor::kReadable);
    });
  }

  void on_events(uint32_t) override {
    // A bounded batch per wakeup so one busy listener can't starve the loop.
    for (int i = 0; i < 64 && fd_; ++i) {
      UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!c) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        CONDUIT_LOG(kWarn) << "shm accept on " << path_ << ": " << std::strerror(errno);
        // Out of fds or memory: the pending connection stays queued and the listener stays
        // readable, so back off instead of spinning on it.
        pause_accepting();
        return;
      }
      handshaking_.push_back(
          std::make_unique<ShmConnection>(loop_, std::move(c), ConnState::kAccepting, options_, path_));
      ShmConnection* conn = handshaking_.back().get();
      if (Status s = conn->begin_accept([this](ShmConnection* done, Status st) { handshake_done(done, std::move(st)); });
          !s.ok()) {
        CONDUIT_LOG(kWarn) << "shm accept: " << s.to_string();
        handshaking_.pop_back();
      }
    }
  }

 private:
  void handshake_done(ShmConnection* c, Status s) {
    auto it = std::find_if(handshaking_.begin(), handshaking_.end(), [c](const auto& p) { return p.get() == c; });
    if (it == handshaking_.end()) return;
    std::unique_ptr<ShmConnection> conn = std::move(*it);
    handshaking_.erase(it);
    if (!s.ok()) {
      // We are inside the connection's own handler.
      loop_.destroy_later(std::move(conn));
      return;
    }
    AcceptCallback cb = on_accept_;  // the callee may close or destroy the listener
    cb(std::move(conn));
  }

  reactor::EventLoop& loop_;
  UniqueFd fd_;
  ShmOptions options_;
  std::string path_;
  AcceptCallback on_accept_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::vector<std::unique_ptr<ShmConnection>> handshaking_;
  reactor::TimerId resume_timer_ = 0;
};

class ShmTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "shm"; }

  Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, const Endpoint& ep,
                                           AcceptCallback on_accept) override {
    if (!on_accept) return Status(Code::kInvalidArgument, "shm listen: null accept callback");
    CONDUIT_ASSIGN_OR_RETURN(ShmOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(std::string path, shm_socket_path(ep.address));
    sockaddr_un addr;
    (void)make_addr(path, &addr);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "shm socket");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      if (errno != EADDRINUSE) return Status::FromErrnoAuto(errno, "shm bind " + path);
      CONDUIT_RETURN_IF_ERROR(remove_stale_socket(path, addr));
      if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
        return Status::FromErrnoAuto(errno, "shm bind " + path);
    }
    // Permissions before listen(): nobody can connect before the mode is right.
    if (::chmod(path.c_str(), o.mode) != 0 || ::listen(fd.get(), kBacklog) != 0) {
      Status s = Status::FromErrnoAuto(errno, "shm listen " + path);
      ::unlink(path.c_str());
      return s;
    }
    auto l = std::make_unique<ShmListener>(loop, std::move(fd), o, path, std::move(on_accept));
    CONDUIT_RETURN_IF_ERROR(l->start());
    return std::unique_ptr<Listener>(std::move(l));
  }

  Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, const Endpoint& ep,
                                              ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(ShmOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(std::string path, shm_socket_path(ep.address));
    sockaddr_un addr;
    (void)make_addr(path, &addr);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "shm socket");
    // A UNIX-domain connect completes (or fails) at once; only a full backlog says EAGAIN.
    // An unreachable peer is not an error of connect() itself: like every transport, we
    // return a connecting connection and report the failure through the callback.
    Status unreachable;
    if (connect_unix(fd.get(), addr) != 0) {
      const int err = errno;
      if (err == ENOENT)
        unreachable = Status(Code::kNotFound,
                             "shm connect: no listener for shm://" + ep.address + " (" + path + " does not exist)",
                             DetailKind::kErrno, err);
      else if (err == ECONNREFUSED)
        unreachable = Status(Code::kUnavailable,
                             "shm connect: nobody is listening on " + path + " (stale socket file?)",
                             DetailKind::kErrno, err);
      else if (err == EAGAIN)
        unreachable = Status(Code::kUnavailable, "shm connect: listener " + path + " has a full backlog",
                             DetailKind::kErrno, err);
      else
        unreachable = Status::FromErrnoAuto(err, "shm connect " + path);
    } else {
      Hello h;
      h.type = static_cast<uint16_t>(HelloType::kClientHello);
      h.ring_bytes = o.ring_given ? o.ring : 0;
      unreachable = send_hello(fd.get(), h, nullptr, 0);
    }
    auto c = std::make_unique<ShmConnection>(loop, std::move(fd), ConnState::kConnecting, o, path);
    if (!unreachable.ok())
      c->begin_failed_connect(std::move(on_connect), std::move(unreachable));
    else
      CONDUIT_RETURN_IF_ERROR(c->begin_connect(std::move(on_connect)));
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

Result<std::string> shm_socket_path(std::string_view name) {
  std::string path;
  if (!name.empty() && name.front() == '/') {
    path = std::string(name);
  } else {
    const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
             c == '_';
    });
    if (!ok)
      return Status(Code::kInvalidArgument, "shm name '" + std::string(name) +
                                                "': use letters, digits, '.', '-', '_' or an absolute socket path");
    const char* dir = std::getenv("XDG_RUNTIME_DIR");
    path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/conduit-" + std::string(name) + ".sock";
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    return Status(Code::kInvalidArgument, "shm socket path '" + path + "' is longer than " +
                                              std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  return path;
}

Transport* shm_transport() {
  static ShmTransport t;
  return &t;
}

}  // namespace conduit::transport
