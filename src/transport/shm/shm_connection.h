// One end of an shm:// connection: its handshake (client and server halves) and its data
// path over the two rings.  See README.md for the design; shm_connection.cc says why each
// step is ordered as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "conduit/base/fd.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
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

class ShmConnection final : public Connection {
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
  bool read_ready() { return rx_.has_data() || rx_.writer_closed() || peer_hup_ || rx_.corrupt(); }
  bool write_ready() { return tx_.has_space() || tx_.reader_closed() || peer_hup_ || tx_.corrupt(); }
  bool work_ready() { return (read_on_ && read_ready()) || (write_on_ && write_ready()); }
  void call_read_handler();
  void call_write_handler();
  enum class Dispatch { kIdle, kRan, kPending };
  Dispatch dispatch();
  bool arm();
  void disarm();
  bool before_sleep();
  bool spin(uint64_t now, bool ran);
  void handler_installed();
  void on_bell_events(uint32_t);
  void ring_peer();

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
  Mapping region_;
  UniqueFd doorbell_;   // we sleep on it; the peer writes it
  UniqueFd peer_bell_;  // we write it to wake the peer
  ring::RingWriter tx_;
  ring::RingReader rx_;
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

}  // namespace conduit::transport::shm
