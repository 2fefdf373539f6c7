// The two ends of a conduit-bench session (protocol.h), each driven by an EventLoop on the
// calling thread.  Neither blocks without a bound: every wait has the --timeout silence
// limit, and every phase ends by duration or count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "options.h"
#include "protocol.h"
#include "report.h"

namespace conduit::bench {

class ServerSession;

// The sum of ConnStats::wakeups over this process's server sessions, as last seen by their
// read handlers.  Loopback mode reads it around a measured stream phase.  Thread-safe.
std::atomic<uint64_t>& server_wakeups();

// Listens and serves sessions until `sessions` have ended.  Loop thread only.
class Server {
 public:
  // log_clients: print each client's connection on stderr (two-process mode).
  static Result<std::unique_ptr<Server>> listen(reactor::EventLoop& loop, const std::string& url, uint32_t sessions,
                                                bool log_clients);
  ~Server();
  std::string url() const { return listener_->url(); }
  // Runs the loop until `sessions` sessions ended (OK, or the first session's error), or
  // no client came for `wait_for_client_s`, or connected clients were silent for
  // `silence_s` (they are then dropped), or request_stop().
  Status serve(double wait_for_client_s, double silence_s);
  // Thread-safe.
  void request_stop();

 private:
  Server(reactor::EventLoop& loop, uint32_t sessions);
  void on_accept(std::unique_ptr<transport::Connection> c);

  reactor::EventLoop& loop_;
  uint32_t sessions_;
  bool log_clients_ = false;
  uint32_t ended_ = 0;
  uint64_t activity_ = 0;
  size_t last_active_ = 0;
  std::atomic<bool> stop_{false};
  Status first_error_;
  std::unique_ptr<transport::Listener> listener_;
  std::vector<std::unique_ptr<ServerSession>> active_;
};

// Shows progress on stderr (when enabled), at most twice a second.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { clear(); }
  // "stream 65536 B: 1.5/2.0 s, 23000 messages" (count shown against `count_target` when > 0).
  void update(const char* phase, uint32_t size, double elapsed_s, double total_s, uint64_t count,
              uint64_t count_target, const char* unit);
  void clear();

 private:
  bool enabled_;
  bool shown_ = false;
  uint64_t last_ns_ = 0;
};

// The client: connects, then runs phases one at a time.  Loop thread only.
class Client {
 public:
  Client(reactor::EventLoop& loop, const Options& opts);
  ~Client();
  // Connects and exchanges Hello (the server learns the largest size).
  Status connect(const std::string& url);
  Result<PingPongResult> pingpong(uint32_t size);
  Result<StreamResult> stream(uint32_t size);
  // Says goodbye and closes.
  void finish();
  const transport::Connection& connection() const { return *conn_; }

 private:
  // Runs the loop until done(), a failure, or --timeout of silence from the peer.
  Status drive(const std::function<bool()>& done, const char* what);
  Result<Header> read_header(const char* what);
  Status run_pingpong_phase(uint32_t size, double seconds, uint64_t iters, std::vector<double>* samples,
                            double* elapsed_s);
  Status run_stream_phase(uint32_t size, double seconds, uint64_t iters, uint64_t* messages, uint64_t* bytes,
                          double* elapsed_s);
  // Writes now what the connection takes and queues the rest behind the write handler
  // (control messages, and the tail of a large ping).
  void send_control(const uint8_t* p, size_t n);
  bool flush_pending();  // true when nothing is left queued

  reactor::EventLoop& loop_;
  const Options& opts_;
  std::unique_ptr<transport::Connection> conn_;
  Progress progress_;
  std::function<void()> on_progress_;
  uint64_t activity_ = 0;  // bumped on every byte moved; drive()'s silence detector
  Status failure_;
  std::vector<uint8_t> msg_, resp_, pending_;
  size_t pending_off_ = 0;
};

}  // namespace conduit::bench
