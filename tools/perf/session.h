// One conduit-perf connection: rdma_cm setup with the parameter exchange, the verbs
// resources every test uses, the control channel that keeps both sides in step, and the
// watchdog that turns a vanished peer into an error instead of a hang.
//
// Control protocol (messages in wire.h), per message size ("row"):
//   server: reset its buffers, send READY(row) -> run its side of the row -> DONE(row)
//   client: wait READY(row) -> run the row -> send DONE(row, its measurement)
// After the last row the server sends FIN; the client disconnects; both wait for
// DISCONNECTED, so neither side tears down while the other still needs it.
//
// Threading: one thread per Session.  The data-path accessors are for the test loops; they
// never allocate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/base/status.h"
#include "conduit/verbs/verbs.h"
#include "options.h"
#include "report.h"
#include "wire.h"

namespace conduit::perf {

struct RemoteBuffer {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
};

class Session;

// Bounds one wait on the peer: fails once `deadline_ns` (monotonic_ns) passes, or as soon as
// rdma_cm reports the peer disconnected.  tick() is for spin loops: on most calls it costs an
// increment and a branch, on every 1024th a read_tsc(); only every ~10 ms does it make
// system calls (the clock, one non-blocking read of the rdma_cm channel).  The cycle counter
// gates the slow path because clock_gettime is a system call on guests whose clocksource
// is not vDSO-readable (the TCG testbed uses the HPET).
class Watchdog {
 public:
  Watchdog(Session& session, uint64_t deadline_ns, const char* what);
  // True when the wait must end; status() says why.
  bool tick() {
    if ((++spins_ & 1023u) != 0) [[likely]]
      return false;
    if (read_tsc() < next_check_tsc_) [[likely]]
      return false;
    return check();
  }
  bool check();
  const Status& status() const { return status_; }

 private:
  Session* session_;
  uint64_t deadline_ns_;
  uint64_t next_check_tsc_ = 0;
  uint64_t check_interval_tsc_;
  const char* what_;
  uint32_t spins_ = 0;
  Status status_;
};

class Session {
 public:
  // Server (opts.server empty): listens on opts.port, accepts one client whose test, size and
  // -a match, adopting the client's -n/-D.  Client: connects to opts.server:opts.port,
  // retrying while nobody listens, until --timeout.  Both fail with a message that says
  // what did not match when the other side rejects.
  static Result<std::unique_ptr<Session>> establish(const Options& opts);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Options& opts() const { return opts_; }
  LinkInfo link_info() const;

  // --- data path ---------------------------------------------------------------------
  verbs::QueuePair& qp() const { return *qp_; }
  verbs::CompletionQueue& send_cq() const { return *send_cq_; }
  verbs::CompletionQueue& recv_cq() const { return *recv_cq_; }
  // The local buffer: [0, unit) for one-buffer tests; the ping-pong tests (write_lat,
  // send_lat) send from [0, unit) and receive into [half, half + unit).
  uint8_t* buf() const { return buf_->data(); }
  uint64_t buf_addr() const { return reinterpret_cast<uintptr_t>(buf_->data()); }
  uint32_t lkey() const { return buf_->mr().lkey(); }
  uint32_t half() const { return half_; }
  // The peer's advertised region (its receive half for the ping-pong tests).
  const RemoteBuffer& remote() const { return remote_; }

  // Re-posts n receives (in chains of up to 32, one doorbell each).  Every posted receive
  // of a side is alike: the whole receive region for a side that receives SENDs, no
  // scatter entry otherwise.
  Status repost_recvs(int n);
  // The latency loops' form of repost_recvs(1): posts one pre-built receive, no chain.
  Status repost_recv() { return qp_->post_recv(single_recv_); }
  // Receives this side keeps posted (the rx depth of a side that receives SENDs).
  uint32_t recv_count() const { return recv_count_; }
  // A receive completion that carries a control message rather than SEND data.
  static bool is_ctrl(const verbs::Completion& wc) { return wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM; }
  // Decodes the control message a completion announced (its receive is not re-posted).
  Result<CtrlMsg> read_ctrl(const verbs::Completion& wc) const;

  // --- control channel (between rows; not while data WRs are in flight) -----------------
  // Writes `msg` into the peer's inbox and waits for the completion.
  Status send_ctrl(const CtrlMsg& msg, uint64_t deadline_ns);
  // Sleeps (completion channel + rdma_cm fd) until the next control message arrives.
  Result<CtrlMsg> wait_ctrl(uint64_t deadline_ns, const char* what);
  // Non-blocking: kClosed once rdma_cm reported that the peer disconnected.
  Status check_peer();
  // The final handshake (FIN, disconnect, DISCONNECTED on both sides).
  Status finish(uint64_t deadline_ns);

 private:
  explicit Session(const Options& opts) : opts_(opts) {}
  Status accept_client(uint64_t deadline_ns);
  // *retry is set when nobody listened (yet): the only failure worth another attempt.
  Status connect_server(uint64_t deadline_ns, bool* retry);
  Status check_device();
  Status create_resources();
  Status set_min_rnr_timer();
  ConnParams local_params() const;
  void adopt_remote(const ConnParams& peer);
  Result<verbs::CmEvent> next_cm_event(uint64_t deadline_ns, const char* what);

  Options opts_;
  // Declared in creation order, so teardown runs in reverse: buffers, CQs and PD are
  // released before the id (whose QP holds the last references to them) is destroyed.
  std::shared_ptr<verbs::EventChannel> channel_;
  std::unique_ptr<verbs::CmId> listener_;
  std::unique_ptr<verbs::CmId> id_;
  std::shared_ptr<verbs::Context> ctx_;
  std::shared_ptr<verbs::ProtectionDomain> pd_;
  std::shared_ptr<verbs::CompletionChannel> recv_channel_;
  std::shared_ptr<verbs::CompletionQueue> send_cq_;
  std::shared_ptr<verbs::CompletionQueue> recv_cq_;
  std::unique_ptr<verbs::RegisteredBuffer> buf_;
  std::unique_ptr<verbs::RegisteredBuffer> ctrl_;
  verbs::QueuePair* qp_ = nullptr;  // owned by id_

  uint32_t unit_ = 0;  // bytes per message region (largest size, rounded up)
  uint32_t half_ = 0;  // offset of the receive half (ping-pong tests), else 0
  RemoteBuffer remote_;
  RemoteBuffer remote_ctrl_;
  bool data_recvs_ = false;  // this side receives SENDs
  uint32_t recv_count_ = 0;
  ibv_sge recv_sge_{};
  std::vector<verbs::RecvWr> recv_wrs_;  // identical templates, chained for re-posting
  verbs::RecvWr single_recv_;            // the same template, never chained
  uint32_t ctrl_seq_ = 0;
  bool peer_gone_ = false;
};

// monotonic_ns() deadline `seconds` from now.
uint64_t deadline_in(double seconds);

// The error for a failed work completion in `what`, saying so when the peer has gone.
Status completion_error(Session& s, const verbs::Completion& wc, std::string_view what);

}  // namespace conduit::perf
