// One end of an shm:// connection: its handshake (client and server halves) and its data
// path over the two rings.  See README.md for the design; shm_connection.cc says why each
// step is ordered as it is, shm_inplace.cc does the in-place and owned-buffer calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "conduit/base/fd.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "conduit/base/adaptive_spin.h"
#include "poll/spin_group.h"
#include "ring/hold_tracker.h"
#include "ring/spsc_ring.h"
#include "shm/shm_options.h"
#include "shm/shm_region.h"
#include "shm/shm_wire.h"

namespace conduit::transport::shm {

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

// What the slices of read_owned() share with their connection: the mapping they point
// into (kept mapped until the last slice is gone, even after close) and the way back to the
// connection's loop.  `conn` is cleared (under `mu`) when the connection closes; a release
// after that only drops its reference.
struct RxShare {
  std::shared_ptr<Mapping> region;
  std::mutex mu;
  ShmConnection* conn = nullptr;  // written on the loop thread, under mu
  reactor::EventLoop* loop = nullptr;
};

class ShmConnection final : public Connection, private poll::SpinGroup::Member {
 public:
  // Server side: called once when the handshake of an accepted connection ends.  Must be
  // the last thing that touches the connection: the callee may destroy it.
  using Established = std::function<void(ShmConnection*, Status)>;

  ShmConnection(reactor::EventLoop& loop, UniqueFd sock, ConnState state, const ShmOptions& options,
                std::string path);
  ~ShmConnection() override { close(); }

  // Client: the hello is sent; waits for the answer.
  Status begin_connect(ConnectCallback cb);
  // Client whose connect(2) already failed: the failure is reported like any other, from
  // the loop through the callback.
  void begin_failed_connect(ConnectCallback cb, Status why);
  // Server: waits for the client's hello.
  Status begin_accept(Established cb);

  // Connection ---------------------------------------------------------------------------
  ConnState state() const override { return state_; }
  const Status& error() const override { return error_; }
  Result<size_t> read(std::span<uint8_t> buf) override;
  Result<size_t> write(std::span<const uint8_t> data) override;
  Result<size_t> writev(std::span<const iovec> iov) override;
  // In place: reserve() is free space in the outbound ring itself, peek() the inbound ring's
  // unread bytes (both one span however they fall across the wrap: the rings are mapped
  // twice, shm_region.h).  write_owned() copies the chain into the ring (one copy, as
  // writev) and releases its slices at once.  read_owned() hands out views of the inbound
  // ring (no copy) whose space the peer gets back only when they are released, from any
  // thread and in any order.  While slices are held, at most `hold_bytes` of the ring from
  // the oldest of them on may be read (by any call); then reads would-block until a release.
  Result<std::span<uint8_t>> reserve(size_t min, size_t max) override;
  Status commit(size_t n) override;
  Result<std::span<const uint8_t>> peek() override;
  Status consume(size_t n) override;
  Result<size_t> write_owned(memory::Chain& chain) override;
  Result<size_t> read_owned(memory::Chain& out, size_t max) override;
  void set_read_handler(Handler h) override;
  void set_write_handler(Handler h) override;
  bool has_pending_data() const override;
  void process_pending() override;
  Status shutdown_write() override;
  void close() override;
  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  Caps caps() const override;
  const ConnStats& stats() const override { return stats_; }
  // credits: the outbound ring's free space as this side last saw it (no reload).
  ConnSnapshot snapshot() const override {
    ConnSnapshot s = Connection::snapshot();
    s.credits = state_ == ConnState::kConnected ? static_cast<int64_t>(tx_.free_space()) : 0;
    return s;
  }
  reactor::EventLoop& loop() const override { return loop_; }

 private:
  friend class FdWatch;

  // --- handshake (shm_connection.cc) ---------------------------------------------------------
  Status begin_handshake();
  Status receive_hello();
  void on_sock_events(uint32_t events);
  void reject(RejectReason why);
  Status serve_hello(const Hello& h);
  Status take_reply(const Hello& h);
  Status establish(Mapping region, uint64_t ring, UniqueFd own_bell, UniqueFd peer_bell);
  void finish_handshake(Status s);

  // --- readiness, handlers and sleeping ----------------------------------------------------
  // At the hold cap (hold_blocked_) nothing makes the read handler runnable until a release:
  // its reads would only would-block again.
  bool read_ready() {
    return !hold_blocked_ && (rx_.has_data() || rx_.writer_closed() || peer_hup_ || rx_.corrupt());
  }
  bool write_ready() { return tx_.has_space(want_space_) || tx_.reader_closed() || peer_hup_ || tx_.corrupt(); }
  bool work_ready() { return (read_on_ && read_ready()) || (write_on_ && write_ready()); }
  void call_read_handler();
  void call_write_handler();
  enum class Dispatch { kIdle, kRan, kPending };
  Dispatch dispatch();
  bool arm();
  void disarm();
  bool before_sleep();
  bool spin_poll(uint64_t now) override;
  uint64_t spin_deadline() const override;
  void spin_preempted(uint64_t now) override { spin_.on_preempted(now); }
  void handler_installed();
  void became_runnable();
  void on_bell_events(uint32_t);
  void ring_peer();

  // --- in place (shm_inplace.cc) -------------------------------------------------------------
  Status check_writable();
  Result<size_t> read_status();  // why nothing can be read: 0 = EOF, would-block, or the error
  void note_read(size_t n);
  void publish_rx();             // gives the peer back what is read and released
  uint64_t read_room() const;
  Result<size_t> hold_blocked();
  void on_released(ring::HoldTracker::Ticket t);
  static void release_slice(const std::shared_ptr<RxShare>& share, ring::HoldTracker::Ticket t);
  void detach_share();

  // --- errors and teardown -------------------------------------------------------------------
  Result<size_t> not_connected() const;
  Status corrupt_status(const char* counter) const;
  Status fail(Status s);
  void unwatch();
  void teardown();

  reactor::EventLoop& loop_;
  ShmOptions options_;
  ConnState state_;
  Status error_;
  std::string path_;
  std::string local_, peer_;

  // Resources in creation order (teardown() releases them in reverse).
  UniqueFd sock_;
  std::vector<UniqueFd> hs_fds_;
  std::shared_ptr<Mapping> region_;  // shared with the slices read_owned() handed out
  std::shared_ptr<RxShare> rx_share_;
  UniqueFd doorbell_;   // we sleep on it; the peer writes it
  UniqueFd peer_bell_;  // we write it to wake the peer
  ring::RingWriter tx_;
  ring::RingReader rx_;
  FdWatch sock_watch_{this, &ShmConnection::on_sock_events};
  FdWatch bell_watch_{this, &ShmConnection::on_bell_events};
  reactor::EventLoop::HookId hook_ = 0;
  reactor::TimerId handshake_timer_ = 0;
  reactor::TimerId pass_timer_ = 0;
  AdaptiveSpin spin_;
  std::shared_ptr<poll::SpinGroup> spin_group_;  // while connected, if spin_ is enabled

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

  // In-place state.  A reserve()d or peek()ed span is good until the next I/O call.
  size_t reserved_ = 0;     // size of the span the last reserve() returned (0: none)
  size_t peeked_ = 0;       // size of the span the last peek() returned (0: none)
  uint64_t want_space_ = 1;  // write readiness: free bytes a would-blocked reserve(min) needs
  ring::HoldTracker holds_;  // read_owned() slices not yet given back
  uint64_t hold_cap_ = 0;
  bool hold_blocked_ = false;  // a read would-blocked at the cap; cleared by a release

  uint8_t hs_buf_[sizeof(Hello)] = {};
  size_t hs_len_ = 0;
  ConnStats stats_;
};

}  // namespace conduit::transport::shm
