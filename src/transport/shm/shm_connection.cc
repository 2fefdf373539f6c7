// shm:// data path -- see README.md for the design.  In short: a sealed memfd with two SPSC
// rings (ring/spsc_ring.h); one eventfd doorbell per side, written by the peer only after
// this side announced sleep; the UNIX socket of the handshake stays open for noticing peer
// death.  The announcement protocol (flag, seq_cst fence, re-check; publish, fence, check
// flag) is argued in ring/spsc_ring.h and README.md; arm()/disarm() below are its sleeper
// half and the *_needs_wakeup() calls in read/write/close its waker half.
#include "shm/shm_connection.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::transport::shm {
namespace {

using ring::RingReader;
using ring::RingWriter;

}  // namespace

ShmConnection::ShmConnection(reactor::EventLoop& loop, UniqueFd sock, ConnState state, const ShmOptions& options,
                             std::string path)
    : loop_(loop), options_(options), state_(state), path_(std::move(path)), sock_(std::move(sock)) {}

Result<size_t> ShmConnection::read(std::span<uint8_t> buf) {
  if (state_ != ConnState::kConnected) return not_connected();
  peeked_ = 0;
  if (buf.empty()) return size_t{0};
  const uint64_t room = read_room();
  if (room == 0) return hold_blocked();
  if (buf.size() > room) buf = buf.first(static_cast<size_t>(room));
  size_t n = rx_.copy_out(buf);
  // The producer sets its close flag after its last data: look again once the flag is seen.
  if (n == 0 && rx_.writer_closed()) n = rx_.copy_out(buf);
  if (n == 0) return read_status();
  note_read(n);
  publish_rx();
  return n;
}

// Nothing was readable: end of stream (0), the peer's death or corruption (the error), or
// would-block.
Result<size_t> ShmConnection::read_status() {
  if (rx_.corrupt()) return fail(corrupt_status("head"));
  if (rx_.writer_closed()) return size_t{0};
  if (peer_hup_)
    return fail(Status(Code::kClosed, "shm: peer " + peer_ + " went away without closing the connection"));
  ++stats_.read_would_block;
  return Status::WouldBlock();
}

void ShmConnection::note_read(size_t n) {
  stats_.bytes_read += n;
  ++stats_.reads;
}

// The consumer's half of the space protocol, after reading or a release: publish the end of
// what was read and is not held (ring/hold_tracker.h), then fence and wake a producer that
// waits for space.  The check runs even when nothing new could be published (the bytes
// read are held): having read everything is itself a reason to wake a waiting producer if
// any space is free (ring/spsc_ring.h, producer_needs_wakeup).
void ShmConnection::publish_rx() {
  const uint64_t pos = holds_.releasable(rx_.position());
  if (pos != rx_.published()) rx_.publish(pos);
  if (rx_.producer_needs_wakeup(rx_.capacity() / 4)) ring_peer();
}

// While slices are held, the ring from the oldest held byte to the read position is kept
// from the writer, whatever way the bytes after that hold were read (a copy behind a held
// slice cannot be given back before it).  hold_bytes bounds that stretch: this is what is
// left of it to read (unbounded while nothing is held).
uint64_t ShmConnection::read_room() const {
  if (holds_.empty()) return UINT64_MAX;
  const uint64_t pinned = rx_.position() - holds_.releasable(rx_.position());
  return hold_cap_ > pinned ? hold_cap_ - pinned : 0;
}

// A read found no room (read_room() == 0): would-block while there is data -- and no read
// handler until a release (read_ready) -- else what an empty ring says.
Result<size_t> ShmConnection::hold_blocked() {
  if (!rx_.has_data()) return read_status();
  hold_blocked_ = true;
  ++stats_.read_would_block;
  return Status::WouldBlock();
}

Result<size_t> ShmConnection::write(std::span<const uint8_t> data) {
  const iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
  return writev(std::span<const iovec>(&iov, 1));
}

Status ShmConnection::check_writable() {
  if (state_ != ConnState::kConnected) return not_connected().status();
  reserved_ = 0;
  if (write_shut_) return Status(Code::kClosed, "shm: write side was shut down");
  if (peer_hup_ || tx_.reader_closed()) return fail(Status(Code::kClosed, "shm: peer " + peer_ + " closed the connection"));
  return {};
}

Result<size_t> ShmConnection::writev(std::span<const iovec> iov) {
  CONDUIT_RETURN_IF_ERROR(check_writable());
  size_t total = 0;
  for (const iovec& v : iov) total += v.iov_len;
  if (total == 0) return size_t{0};
  const size_t n = tx_.write(iov, total);
  want_space_ = 1;
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

void ShmConnection::set_read_handler(Handler h) {
  read_handler_ = std::move(h);
  read_on_ = static_cast<bool>(read_handler_);
  read_replaced_ = true;
  if (read_on_) handler_installed();
}
void ShmConnection::set_write_handler(Handler h) {
  write_handler_ = std::move(h);
  write_on_ = static_cast<bool>(write_handler_);
  write_replaced_ = true;
  if (write_on_) handler_installed();
}

bool ShmConnection::has_pending_data() const {
  return state_ == ConnState::kConnected && read_on_ && !hold_blocked_ &&
         (rx_.has_data_now() || rx_.writer_closed() || peer_hup_ || rx_.corrupt());
}
void ShmConnection::process_pending() {
  if (!has_pending_data()) return;
  disarm();
  call_read_handler();
}

Status ShmConnection::shutdown_write() {
  if (state_ != ConnState::kConnected) return not_connected().status();
  if (write_shut_) return {};
  write_shut_ = true;
  tx_.close();
  if (tx_.consumer_needs_wakeup()) ring_peer();
  return {};
}

void ShmConnection::close() {
  if (closed_) return;
  closed_ = true;
  detach_share();  // held slices stay readable; their releases no longer reach us
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

Caps ShmConnection::caps() const {
  Caps c;
  c.transport = "shm";
  c.zero_copy = true;  // reserve/commit, peek/consume and read_owned work in the rings themselves
  c.half_close = true;
  c.cross_host = false;
  return c;
}
// Handlers are moved out while they run (no copy, no allocation) and put back unless the
// handler replaced or removed itself.  A re-entrant call (process_pending from inside the
// read handler) finds the slot empty and does nothing.
void ShmConnection::call_read_handler() {
  if (!read_handler_) return;
  Handler h = std::move(read_handler_);
  read_handler_ = nullptr;
  read_replaced_ = false;
  h(*this);
  if (!read_replaced_) read_handler_ = std::move(h);
}
void ShmConnection::call_write_handler() {
  if (!write_handler_) return;
  Handler h = std::move(write_handler_);
  write_handler_ = nullptr;
  write_replaced_ = false;
  h(*this);
  if (!write_replaced_) write_handler_ = std::move(h);
}

// Runs each handler whose condition holds; kPending if one still holds afterwards.
ShmConnection::Dispatch ShmConnection::dispatch() {
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
bool ShmConnection::arm() {
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
void ShmConnection::disarm() {
  if (rx_armed_) rx_.cancel_sleep();
  if (tx_armed_) tx_.cancel_wait();
  rx_armed_ = tx_armed_ = false;
}

// The loop's before-sleep hook: where data-driven handlers run, since the peer rings the
// doorbell only when we said we sleep.  Returns true ("don't block") also when it merely
// ran a handler: then run_once() returns after this iteration, as it does after fd
// handlers, so that `while (!done) loop.run_once(-1)` sees what the handler did instead of
// blocking with it done.  (Costs one non-blocking epoll_wait after a burst of work.)
//
// Polling (poll_us, busy_poll_us): while our window is open (conduit/base/adaptive_spin.h) we do
// not announce sleep; the loop's SpinGroup spins for us and the loop's other polling
// connections, running handlers as work appears, and yields to the loop every slice.  Only
// once the window closed without work do we arm, so that while we poll the peer sees no
// sleep flag and neither side makes a system call.
bool ShmConnection::before_sleep() {
  hook_iteration_ = loop_.iterations();
  const Dispatch d = dispatch();
  if (state_ != ConnState::kConnected) return false;
  if (!spin_.enabled() || !(read_on_ || write_on_)) {
    // The handler that ran may have removed itself (a one-shot handler, as the preload's):
    // the idle gap still ended here, or the policy would keep timing it from a stale start.
    if (d != Dispatch::kIdle && spin_.enabled()) spin_.on_work(monotonic_ns());
    return d != Dispatch::kIdle || !arm();
  }
  // The iteration's reading (one clock read per iteration, however many connections poll):
  // stale by this iteration's handlers at most.
  const uint64_t now = loop_.about_now_ns();
  if (d != Dispatch::kIdle)
    spin_.on_work(now);
  else
    spin_.on_idle(now);
  if (spin_.deadline() > now) {
    if (!spin_group_) spin_group_ = poll::SpinGroup::of(loop_);
    const bool pending = spin_group_->spin(this, now);
    if (state_ != ConnState::kConnected) return false;
    if (pending || d != Dispatch::kIdle) return true;
  } else if (d != Dispatch::kIdle) {
    return true;
  }
  spin_.on_sleep();
  return !arm();
}

// SpinGroup::Member: one poll while the loop spins.
bool ShmConnection::spin_poll(uint64_t now) {
  if (state_ != ConnState::kConnected) return false;
  if (!work_ready()) {
    spin_.on_idle(now);
    return false;
  }
  const bool ran = dispatch() != Dispatch::kIdle;
  if (ran) spin_.on_work(now);
  return ran;
}

uint64_t ShmConnection::spin_deadline() const {
  if (state_ != ConnState::kConnected || !(read_on_ || write_on_)) return 0;
  return spin_.deadline();
}

// A handler was installed from outside our own dispatch.  If our hook already ran in this
// loop iteration (we are called from a later hook, an fd handler or a timer), the loop may
// block before the hook runs again: arm now, and if the handler is runnable already, keep
// the loop from blocking with a zero-delay timer (no syscall).  Outside run_once() (an
// embedder such as the preload installs handlers between iterations) the next iteration
// runs our hook before it can block: nothing is announced, so the peer keeps writing
// without a doorbell while our hook polls.
void ShmConnection::handler_installed() {
  if (state_ != ConnState::kConnected || in_dispatch_ || hook_iteration_ != loop_.iterations() ||
      !loop_.in_iteration())
    return;
  if (arm() || pass_timer_ != 0) return;
  pass_timer_ = loop_.run_after(0, [this] { pass_timer_ = 0; });
}

void ShmConnection::on_bell_events(uint32_t) {
  disarm();  // the peer consumed at least one announcement
  if (dispatch() != Dispatch::kIdle && spin_.enabled()) spin_.on_work(monotonic_ns());
}

// Something made a handler runnable from outside the loop's view (a release of held
// slices).  Like handler_installed(): if our hook already ran in this iteration, keep the
// loop from blocking before it runs again.
void ShmConnection::became_runnable() {
  if (state_ != ConnState::kConnected || in_dispatch_ || hook_iteration_ != loop_.iterations()) return;
  if (!work_ready() || pass_timer_ != 0) return;
  pass_timer_ = loop_.run_after(0, [this] { pass_timer_ = 0; });
}

void ShmConnection::ring_peer() {
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

Result<size_t> ShmConnection::not_connected() const {
  if (state_ == ConnState::kError) return error_;
  if (state_ == ConnState::kClosed) return Status(Code::kClosed, "shm: connection is closed");
  return Status(Code::kInvalidArgument, std::string("shm: connection is ") + std::string(conn_state_name(state_)));
}

Status ShmConnection::corrupt_status(const char* counter) const {
  return Status(Code::kProtocolError, std::string("shm: peer ") + peer_ + " published an impossible ring " + counter);
}

Status ShmConnection::fail(Status s) {
  CONDUIT_LOG(kDebug) << "shm " << local_ << "->" << peer_ << ": " << s.to_string();
  error_ = s;
  state_ = ConnState::kError;
  unwatch();
  return s;
}

// Stops every loop registration (fds, hook, timers); keeps fds and mapping.
void ShmConnection::unwatch() {
  if (spin_group_) spin_group_->leave(this);
  spin_group_.reset();
  if (handshake_timer_ != 0) loop_.cancel(handshake_timer_);
  handshake_timer_ = 0;
  if (pass_timer_ != 0) loop_.cancel(pass_timer_);
  pass_timer_ = 0;
  if (hook_ != 0) loop_.remove_before_sleep(hook_);
  hook_ = 0;
  if (sock_ && loop_.watching(sock_.get())) (void)loop_.remove(sock_.get());
  if (doorbell_ && loop_.watching(doorbell_.get())) (void)loop_.remove(doorbell_.get());
}

void ShmConnection::teardown() {
  unwatch();
  tx_ = RingWriter();
  rx_ = RingReader();
  region_.reset();
  peer_bell_.reset();
  doorbell_.reset();
  sock_.reset();
  hs_fds_.clear();
}

}  // namespace conduit::transport::shm
