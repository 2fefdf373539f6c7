// The engine: the event loop the fast channels live on, the rendezvous listeners, the
// negotiation state machines (negotiate.cc), the waits that merge the program's fds with the
// fast channels' readiness (wait.cc), a progress thread that keeps timers and deferred work
// moving while the program is busy elsewhere, and the status file (status.cc).
//
// Threading: every method runs under EngineLock (the loop is adopted by whichever thread
// holds it), except the progress thread's own loop, which takes the lock with try_lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "process.h"

namespace conduit::preload {

// One port's way in for announces: an shm:// listener (same-host clients) and an rdma://
// listener (clients on other hosts, or this one with mode=rdma), shared by every listening
// socket of this process on that port.
struct Rendezvous {
  uint16_t port = 0;
  std::unique_ptr<transport::Listener> shm;
  std::unique_ptr<transport::Listener> rdma;
  std::string offers;  // "shm,rdma", or why nothing is offered
  int users = 0;
};

// A fast channel a rendezvous accepted: first waiting for its ANNOUNCE, then registered
// (ACK sent) until the program accepts the TCP connection the announce names.
struct Announce {
  uint64_t id = 0;
  Mode mode = Mode::kNone;
  uint16_t port = 0;
  std::unique_ptr<transport::Connection> conn;
  uint8_t in[kWireSize] = {};
  size_t in_len = 0;
  bool registered = false;
  FourTuple tuple;
  uint32_t pid = 0;
  reactor::TimerId expiry = 0;
};

// Registers the exit handler that closes fast channels and rendezvous cleanly (once).
void register_exit_handler();

class Engine {
 public:
  // Under the lock.  Null (with the reason logged once) if the loop cannot be created.
  static Engine* get();
  // Never destroyed: abandoned in fork children, left alone at exit (the program may still
  // call into it from other threads or atexit handlers).

  reactor::EventLoop& loop() { return *loop_; }
  int backend_fd() const { return loop_->backend_fd(); }
  // The value that marks the backend fd in a program's epoll instance (never a pointer a
  // program could hold: the top bits are not a canonical x86-64 address).
  uint64_t marker() const { return marker_; }
  static bool is_marker(uint64_t data) { return (data >> 32) == kMarkerTag; }
  // The waiters' bell: an eventfd every kernel wait of ours includes (poll sets directly, the
  // program's epoll instances under bell_marker()).  See drive().
  int bell_fd() const { return bell_.get(); }
  uint64_t bell_marker() const { return marker_ | 0x80000000ull; }
  // Around each kernel wait (under the lock): counts the waiter, and after it clears the bell
  // once every thread that was waiting when it rang has come back.
  uint64_t begin_wait() {
    ++waiters;
    return ring_gen_;
  }
  // True while the bell still rings for threads that were waiting before this one began: a
  // poll-set wait starting now leaves the bell out (it would return at once, again and
  // again) and sleeps in 1 ms slices instead until they have come back.
  bool bell_stale() const { return unanswered_ > 0; }
  void end_wait(uint64_t gen);

  // One non-blocking iteration of the loop, after installing the handlers that sockets
  // asked for; wakes the other waiting threads if a handler of ours ran.  A busy wait's
  // rounds pass may_skip_kernel: then only every kKernelEvery-th such drive asks the kernel
  // for the loop's fd events while the loop's last iteration was busy (its hooks still
  // poll: EventLoop::last_iteration_busy), every kKernelEveryArmed-th once they have armed
  // for events (an rdma CQ then announces a completion through its channel only; an shm
  // ring is still read by its hook); the others run EventLoop::poll_once() (posted work,
  // hooks, timers; no system call).  A wait that sleeps includes backend_fd(), so an fd
  // event skipped here wakes it at once.
  void drive(bool may_skip_kernel = false);
  static constexpr unsigned kKernelEvery = 8;
  static constexpr unsigned kKernelEveryArmed = 2;
  // How long a wait may block before drive() is due again (-1: until an fd event).  Timers
  // are counted from loop_now_ns(): call it right after drive().
  int poll_timeout_ms();
  // The loop's clock as the last drive() read it (EventLoop::now_ns()).
  uint64_t loop_now_ns() const { return loop_->now_ns(); }
  // Threads blocked in a kernel wait that includes backend_fd() (wait.cc keeps count).
  int waiters = 0;

  // A socket needs its channel's read/write handler installed (its readiness is unknown).
  void want_rx(Socket& s);
  void want_tx(Socket& s);

  // --- negotiation (negotiate.cc) ----------------------------------------------------
  // Client connect(): starts the negotiation if the rules select the connection; false if
  // they do not (the caller connects the plain socket; s.reason says why).
  bool start_client(Socket& s, const sockaddr* dest, socklen_t len);
  // listen(): attaches the port's rendezvous if the rules select it (s.reason says what).
  void attach_listener(Socket& s);
  // listen() failed after attach_listener: gives the port's rendezvous back.
  void detach_listener(Socket& s);
  // accept(): decides an accepted socket of listener `l`: kAwaitCommit or kTcp.
  void classify_accepted(Socket& l, Socket& s);
  // The last fd naming s is gone: close its channel, detach its rendezvous.
  void socket_closed(Socket& s);
  // Closes a channel (from anywhere, its own handlers included) and frees it later.
  void retire(std::unique_ptr<transport::Connection> c);

  // --- status (status.cc) -------------------------------------------------------------
  void status_changed();  // rewrite the status file soon (throttled)
  void write_status_now();
  void remove_status_file();

 private:
  // Drops s's use of its port's rendezvous (the last user closes it).
  void release_rendezvous(Socket& s);
  friend struct TcpWatch;
  static constexpr uint64_t kMarkerTag = 0xC0DCF00Dull;
  Engine(std::unique_ptr<reactor::EventLoop> loop, UniqueFd bell);

  // negotiate.cc
  void fast_connected(Socket& s, Status st);
  void on_client_readable(Socket& s);
  void on_tcp_connected(Socket& s);
  void on_deadline(Socket& s);
  void fallback(Socket& s, std::string reason);
  void issue_tcp_connect(Socket& s);
  bool send_msg(Socket& s, const Msg& m);
  bool flush_msg_out(Socket& s);
  bool go_fast(Socket& s);
  void on_server_readable(Socket& s);
  void on_rendezvous_accept(uint16_t port, Mode mode, std::unique_ptr<transport::Connection> c);
  void on_announce_readable(Announce& a);
  void drop_announce(uint64_t id);
  std::shared_ptr<Rendezvous> rendezvous_for(Socket& listener);
  bool is_local_address(const sockaddr* sa);
  bool accepts_address(uint16_t port, const FourTuple& t);

  void start_progress_thread();
  void progress_main();

  std::unique_ptr<reactor::EventLoop> loop_;
  uint64_t marker_ = 0;
  std::vector<Socket*> rx_wanted_, tx_wanted_;
  uint64_t handler_runs_ = 0;  // our handlers bump it: drive() rings the bell when it moved
  UniqueFd bell_;
  uint64_t ring_gen_ = 0;      // rings so far
  int unanswered_ = 0;         // waiters of the last ring that have not come back yet
  uint64_t last_drive_ns_ = 0;
  unsigned kernel_skips_ = 0;  // drives since the last one that asked the kernel
  std::map<uint16_t, std::weak_ptr<Rendezvous>> rendezvous_;
  std::map<uint64_t, std::unique_ptr<Announce>> announces_;  // by id
  std::map<FourTuple, uint64_t> registered_;                  // announced 4-tuples -> id
  uint64_t next_announce_id_ = 1;
  std::vector<std::vector<uint8_t>> local_addrs_;  // normalised (family byte + 16) addresses of this host
  bool local_addrs_loaded_ = false;
  int live_rdma_ = 0;      // rdma channels open: the progress thread keeps their deferred posts moving
  int negotiations_ = 0;   // sockets in a negotiating phase
  // Progress thread.
  std::thread progress_;
  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
  bool progress_stop_ = false;
  // Status file.
  reactor::TimerId status_timer_ = 0;
  reactor::TimerId refresh_timer_ = 0;  // the once-a-second rewrite while fast channels exist
  std::string status_path_;
  uint64_t started_unix_ms_ = 0;

 public:
  // For the interposers' exit handler: stops the progress thread; then (under the lock)
  // closes every fast channel (the peers read EOF, as after a TCP close), the rendezvous
  // listeners (their socket files go) and removes the status file.
  void stop_progress_thread();
  void shutdown_at_exit();
  void count_negotiation(int delta) { negotiations_ += delta; }
  void count_rdma(int delta) { live_rdma_ += delta; }
};

}  // namespace conduit::preload
