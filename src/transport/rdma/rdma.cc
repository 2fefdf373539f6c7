#include "rdma.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "conduit/verbs/verbs.h"
#include "protocol.h"
#include "ring/ring_cursor.h"

namespace conduit::transport {
namespace rdma {
namespace {

using namespace conduit::verbs;
using reactor::EventLoop;
using ring::ConsumerCursor;
using ring::Extent;
using ring::Extents;
using ring::ProducerCursor;
using ring::RingGeometry;

constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kCtrlSendSlots = 16;

// wr_id layout: kind in the top byte, slot index below.
enum WrKind : uint64_t { kWrRecv = 1, kWrCtrlSend = 2, kWrData = 3 };
constexpr uint64_t make_wr_id(WrKind k, uint64_t index) { return (static_cast<uint64_t>(k) << 56) | index; }
constexpr WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
constexpr uint32_t wr_index(uint64_t id) { return static_cast<uint32_t>(id & 0xffffffffu); }

struct RdmaOptions {
  uint32_t rx_buffer = 1u << 20;
  uint32_t send_depth = 256;
  uint32_t recv_depth = 256;
  uint32_t inline_bytes = 64;
  uint32_t flush_bytes = 64 * 1024;
  uint32_t credit_bytes = 0;  // ring mode: return space in steps of this (0 = rx_buffer / 4)
  uint64_t keepalive_ms = 3000;
  uint64_t keepalive_timeout_ms = 10000;
  uint64_t connect_timeout_ms = 10000;
  uint64_t linger_ms = 5000;
  uint32_t backlog = 1024;
  uint64_t busy_poll_us = 0;
  uint64_t features = kFeatureKnownMask;
  std::string device;
  bool srq = false;          // receives from the loop's shared receive queue (SrqPool)
  uint32_t srq_depth = 4096;
};

Result<RdmaOptions> parse_options(const Endpoint& ep) {
  OptionReader r(ep);
  RdmaOptions o;
  CONDUIT_ASSIGN_OR_RETURN(uint64_t rx, r.get_bytes("rx_buffer", o.rx_buffer, kMinRxBuffer, kMaxRxBuffer));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t sd, r.get_u64("send_depth", o.send_depth, 16, 16384));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t rd, r.get_u64("recv_depth", o.recv_depth, 16, 16384));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t inl, r.get_bytes("inline", o.inline_bytes, 0, 1024));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t fb, r.get_bytes("flush_bytes", o.flush_bytes, 1, kMaxRxBuffer));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t cb, r.get_bytes("credit_bytes", o.credit_bytes, 0, kMaxRxBuffer));
  CONDUIT_ASSIGN_OR_RETURN(o.keepalive_ms, r.get_u64("keepalive_ms", o.keepalive_ms, 0, 3'600'000));
  CONDUIT_ASSIGN_OR_RETURN(o.keepalive_timeout_ms,
                           r.get_u64("keepalive_timeout_ms", o.keepalive_timeout_ms, 0, 3'600'000));
  CONDUIT_ASSIGN_OR_RETURN(o.connect_timeout_ms, r.get_u64("connect_timeout_ms", o.connect_timeout_ms, 1, 3'600'000));
  CONDUIT_ASSIGN_OR_RETURN(o.linger_ms, r.get_u64("linger_ms", o.linger_ms, 0, 3'600'000));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t backlog, r.get_u64("backlog", o.backlog, 1, 65535));
  o.backlog = static_cast<uint32_t>(backlog);
  CONDUIT_ASSIGN_OR_RETURN(o.busy_poll_us, r.get_u64("busy_poll_us", o.busy_poll_us, 0, 1'000'000));
  CONDUIT_ASSIGN_OR_RETURN(std::string features, r.get_string("features", "all"));
  CONDUIT_ASSIGN_OR_RETURN(o.device, r.get_string("device", ""));
  CONDUIT_ASSIGN_OR_RETURN(o.srq, r.get_bool("srq", o.srq));
  CONDUIT_ASSIGN_OR_RETURN(uint64_t srq_depth, r.get_u64("srq_depth", o.srq_depth, 16, 16384));
  CONDUIT_RETURN_IF_ERROR(r.finish());
  o.srq_depth = static_cast<uint32_t>(srq_depth);
  if (features == "all") {
    o.features = kFeatureKnownMask;
  } else if (features == "none") {
    o.features = 0;
  } else {
    char* end = nullptr;
    o.features = std::strtoull(features.c_str(), &end, 0);
    if (end == features.c_str() || *end != '\0')
      return Status(Code::kInvalidArgument, "rdma option features='" + features + "': expected all, none or a number");
    o.features &= kFeatureKnownMask;
  }
  o.rx_buffer = static_cast<uint32_t>(rx);
  o.send_depth = static_cast<uint32_t>(sd);
  o.recv_depth = static_cast<uint32_t>(rd);
  o.inline_bytes = static_cast<uint32_t>(inl);
  o.flush_bytes = static_cast<uint32_t>(fb);
  o.credit_bytes = cb != 0 ? static_cast<uint32_t>(std::min(cb, rx)) : o.rx_buffer / 4;
  return o;
}

// Receives rdma_cm events routed by the per-loop context.
class CmSink {
 public:
  virtual ~CmSink() = default;
  virtual void on_cm_event(CmEvent& ev) = 0;
};

class RdmaConnection;
class Closer;

// srq=1: one shared receive queue per (event loop, PD, srq_depth) instead of recv_depth
// receives per connection.  It owns the SRQ, one registered buffer of srq_depth 32-byte
// slots (slot i is always wr_id kWrRecv|i) and a receive CQ that every attached QP uses as
// its recv_cq; send completions stay on each connection's own CQ.
//
// Why a shared receive CQ rather than each connection's own: with an SRQ nothing bounds how
// many receives one QP consumes before we poll (a peer can send zero-length WRITE_WITH_IMMs
// as fast as it likes), so a per-connection CQ would have to hold srq_depth entries or it
// could overflow, and an overflowed CQ loses the completions that say which slots were
// taken -- slots gone for every connection.  Here every CQE matches one WQE taken from the
// SRQ, so srq_depth entries can never overflow.
//
// Slot rules (each slot is posted, or held by us, never both; posted_[] says which):
// - a completion, successful or flushed, hands its slot to us; we deliver it to the QP's
//   connection (which decodes the message in place) and then re-post it, exactly once;
// - on QP error, receives still in the SRQ stay there: they are not flushed per QP the way
//   a private receive queue is (ibv_create_srq(3); rxe's check_resource() flushes only a
//   WQE the QP had already taken, e.g. mid multi-packet SEND, and returns);
// - completions of a QP handed to a Closer, or of one already destroyed, are not delivered:
//   their slots are re-posted.  QP numbers are reused, so detach() takes a destroyed QP's
//   completions out of the CQ before forgetting its number.
// The one window left: a WQE a QP took mid multi-packet SEND (only a hostile peer sends one
// to a 32-byte receive) and never flushed because the QP was destroyed first is lost.
//
// Exhaustion only stalls senders (RNR retry 7 = forever) until we re-post.  The SRQ limit is
// armed at srq_depth/8; it is checked (ibv_query_srq: 0 once fired) every srq_depth/4
// completions and logged as a warning -- no async-event fd is read.
class SrqPool final : public reactor::FdHandler {
 public:
  static Result<std::shared_ptr<SrqPool>> create(std::shared_ptr<ProtectionDomain> pd, uint32_t depth,
                                                 std::function<void()> wake);
  SrqPool(const SrqPool&) = delete;
  SrqPool& operator=(const SrqPool&) = delete;

  int fd() const { return channel_->fd(); }
  const std::shared_ptr<SharedReceiveQueue>& srq() const { return srq_; }
  const std::shared_ptr<CompletionQueue>& cq() const { return cq_; }
  const uint8_t* slot_data(uint32_t slot) const { return buf_->data() + static_cast<size_t>(slot) * kCtrlSize; }

  // Completions of `qpn` go to `c` from now on.
  void attach(uint32_t qpn, RdmaConnection* c) { qps_[qpn] = c; }
  // Its QP now belongs to a Closer: completions are re-posted, not delivered.
  void orphan(uint32_t qpn) { qps_[qpn] = nullptr; }
  // After the QP is destroyed: reclaims its completions still queued and forgets it.
  void detach(uint32_t qpn);
  // Polls the CQ and delivers in order; with `only`, delivers that QP's completions and
  // leaves the rest queued (the loop's hook delivers them).  Returns how many were polled.
  int process(std::optional<uint32_t> only = std::nullopt);
  bool has_backlog() const { return !backlog_.empty(); }
  SrqStats stats() const {
    return SrqStats{depth_, posted_count_, static_cast<uint32_t>(qps_.size()), completions_, low_water_events_};
  }

  void on_events(uint32_t) override;

 private:
  SrqPool(uint32_t depth, std::function<void()> wake) : depth_(depth), wake_(std::move(wake)) {}
  Status post(uint32_t slot);
  void give_back(uint32_t slot);
  int poll_all();
  void check_low_water();

  uint32_t depth_;
  std::function<void()> wake_;  // asks the loop to run its hook (queued completions remain)
  // Verbs objects in creation order; QPs hold the SRQ and CQ themselves, so these outlive
  // every QP attached to them (QPs before SRQ, SRQ and MR before PD).
  std::shared_ptr<ProtectionDomain> pd_;
  std::shared_ptr<CompletionChannel> channel_;
  std::shared_ptr<CompletionQueue> cq_;
  std::shared_ptr<SharedReceiveQueue> srq_;
  std::unique_ptr<RegisteredBuffer> buf_;
  std::vector<uint8_t> posted_;  // per slot: 1 = in the SRQ
  uint32_t posted_count_ = 0;
  std::map<uint32_t, RdmaConnection*> qps_;  // qp_num -> connection; nullptr = orphaned
  std::deque<Completion> backlog_;           // polled, not yet delivered (slots held)
  uint32_t low_water_ = 0;                   // armed limit; 0 = the device can't arm one
  uint32_t since_check_ = 0;
  uint64_t completions_ = 0;
  uint64_t low_water_events_ = 0;
  uint64_t last_warn_ns_ = 0;
  Completion wcs_[32];
};

// Per event loop: one rdma_cm event channel (in epoll), one PD per device, the set of
// connections with deferred work (data to post, data to deliver, writability to announce),
// serviced in a before-sleep hook, and the graceful closes still in progress (Closer).
// Reference-counted by its connections and listeners; it lives on while closers remain and
// is torn down with the loop at the latest.
class LoopContext final : public reactor::FdHandler {
 public:
  static Result<LoopContext*> acquire(EventLoop& loop);
  void release();

  // Takes over a closing connection's resources until its data is acknowledged.
  void adopt(std::unique_ptr<Closer> c);
  // A closer has finished (it may be inside its own handler): destroyed at the next hook.
  void retire(Closer* c);

  EventLoop& loop() { return loop_; }
  const std::shared_ptr<EventChannel>& channel() const { return channel_; }
  Result<std::shared_ptr<ProtectionDomain>> pd_for(CmId& id);
  // The shared receive queue for srq=1 connections on `pd` (created on first use, kept
  // until the context goes).
  Result<std::shared_ptr<SrqPool>> srq_for(const std::shared_ptr<ProtectionDomain>& pd, uint32_t depth);
  static std::vector<SrqStats> srq_stats(EventLoop& loop);
  void mark_pending(RdmaConnection* c) { pending_.insert(c); }
  void forget(RdmaConnection* c) { pending_.erase(c); }

  void on_events(uint32_t events) override;

 private:
  explicit LoopContext(EventLoop& loop) : loop_(loop) {}
  bool run_pending();
  void on_loop_teardown();
  void destroy_locked();  // mu_ held; deletes this

  EventLoop& loop_;
  std::shared_ptr<EventChannel> channel_;
  std::map<ibv_context*, std::shared_ptr<ProtectionDomain>> pds_;
  std::map<std::pair<ProtectionDomain*, uint32_t>, std::shared_ptr<SrqPool>> srqs_;
  std::set<RdmaConnection*> pending_;
  std::map<Closer*, std::unique_ptr<Closer>> closers_;
  std::vector<std::unique_ptr<Closer>> retired_;
  EventLoop::HookId hook_ = 0;
  EventLoop::HookId teardown_ = 0;
  bool loop_gone_ = false;
  bool tearing_down_ = false;
  int refs_ = 0;

  static std::mutex mu_;
  static std::map<EventLoop*, LoopContext*> contexts_;
};

std::mutex LoopContext::mu_;
std::map<EventLoop*, LoopContext*> LoopContext::contexts_;

// ---------------------------------------------------------------------------------------

class RdmaConnection final : public Connection, public reactor::FdHandler, public CmSink {
 public:
  // Outbound: starts address resolution.
  static Result<std::unique_ptr<RdmaConnection>> start_connect(EventLoop& loop, const Endpoint& ep,
                                                               const RdmaOptions& o, ConnectCallback cb);
  // Inbound: takes the id from CONNECT_REQUEST, sets up resources and accepts.
  static Result<std::unique_ptr<RdmaConnection>> start_accept(LoopContext* ctx, std::unique_ptr<CmId> id,
                                                              const RdmaOptions& o);

  ~RdmaConnection() override;

  // Connection
  ConnState state() const override { return state_; }
  const Status& error() const override { return error_; }
  Result<size_t> read(std::span<uint8_t> buf) override;
  Result<size_t> write(std::span<const uint8_t> data) override;
  Result<size_t> writev(std::span<const iovec> iov) override;
  void set_read_handler(Handler h) override {
    read_handler_ = std::move(h);
    if (read_handler_ && readable()) ctx_->mark_pending(this);
  }
  void set_write_handler(Handler h) override {
    write_handler_ = std::move(h);
    if (write_handler_ && writable()) ctx_->mark_pending(this);
  }
  bool has_pending_data() const override { return read_handler_ != nullptr && readable(); }
  void process_pending() override;
  Status shutdown_write() override {
    return Status(Code::kNotSupported, "rdma: the Valkey RDMA protocol has no half-close");
  }
  void close() override;
  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  Caps caps() const override {
    Caps c;
    c.transport = "rdma";
    c.max_inline = qp() ? qp()->max_inline() : 0;
    c.one_sided = true;
    c.half_close = false;
    static constexpr std::string_view kExt[] = {"", "ring", "solicited", "ring,solicited"};
    c.extensions = kExt[features_ & (kFeatureRing | kFeatureSolicited)];
    return c;
  }
  const ConnStats& stats() const override { return stats_; }
  EventLoop& loop() const override { return ctx_->loop(); }

  // FdHandler: the completion channel.
  void on_events(uint32_t events) override;
  // CmSink
  void on_cm_event(CmEvent& ev) override;

  // Called by the loop context's before-sleep hook.  Returns true if work remains.
  bool run_deferred();

  // SrqPool: a receive completion of this connection's QP (slot re-posted by the pool).
  void on_srq_completion(const Completion& wc);

  // For the listener: fires once when the accepted connection is established (or failed).
  std::function<void(RdmaConnection*, Status)> on_established_;
  uint64_t negotiated_features() const { return features_; }

 private:
  RdmaConnection(LoopContext* ctx, const RdmaOptions& o, ConnState st) : ctx_(ctx), options_(o), state_(st) {}

  QueuePair* qp() const { return id_ ? id_->qp() : nullptr; }
  bool readable() const {
    return state_ == ConnState::kConnected ? (rx_.available() > 0 || peer_closed_) : state_ == ConnState::kError;
  }
  // After the peer disconnected, writing is pointless but the write handler must still run
  // once more so the writer learns it (its write then fails, as TCP's would with EPIPE).
  bool writable() const {
    return state_ == ConnState::kConnected && (peer_closed_ || (tx_known_ && tx_.free_space() > 0));
  }
  bool tx_unposted() const { return tx_posted_ != tx_.head(); }
  bool ring() const { return (features_ & kFeatureRing) != 0; }
  bool solicited() const { return (features_ & kFeatureSolicited) != 0; }
  // Something we want to post may have to wait for a send completion (a send-queue slot or
  // a control slot): the CQ must then raise events for send completions too, which a CQ
  // armed for solicited completions only does not.
  bool needs_send_events() const { return tx_unposted() || credit_blocked_ || free_ctrl_slots_.empty(); }
  // Work for the before-sleep hook: buffered data to post, or a handler that should run
  // again (handlers are level-style: one that leaves data unread is called again).
  bool wants_service() const {
    if (state_ == ConnState::kConnected && (tx_unposted() || (unsolicited_tail_ && solicited()))) return true;
    if (write_handler_ && writable()) return true;
    return read_handler_ != nullptr && readable() && state_ != ConnState::kError &&
           !(peer_closed_ && eof_delivered_ && rx_.available() == 0);
  }
  bool linger();

  Status setup_resources();
  // Receive slots in ctrl_ (0 with an SRQ: ctrl_ then holds only send slots).
  uint32_t ctrl_recv_slots() const { return srq_ ? 0 : options_.recv_depth; }
  const uint8_t* recv_slot_data(uint32_t slot) const {
    return srq_ ? srq_->slot_data(slot) : ctrl_->data() + static_cast<size_t>(slot) * kCtrlSize;
  }
  Status post_recv_slot(uint32_t slot);
  void detach_srq();
  Status send_ctrl(const CtrlMsg& m);
  Status post_data(Extent e, bool solicit);
  Status flush(bool batch_end);
  void return_space();
  Status arm_cq();
  void ensure_send_events();
  Status process_cq(int* handled = nullptr);
  bool busy_poll();
  Status handle_completion(const Completion& wc);
  Status handle_ctrl(const CtrlMsg& m);
  void on_features();
  Status register_rx();
  void established();
  void finish_connect(Status s);
  void fail(Status s);
  void deliver();
  void arm_keepalive();
  void check_keepalive();
  void release_resources();

  LoopContext* ctx_;
  RdmaOptions options_;
  ConnState state_;
  Status error_;
  Handler read_handler_;
  Handler write_handler_;
  ConnectCallback on_connect_;
  ConnStats stats_;
  std::string local_, peer_;

  // Verbs objects, declared in creation order so destruction runs in reverse: the id (and
  // its QP) goes first, then MRs, then the CQ and channel, then the PD.
  std::shared_ptr<ProtectionDomain> pd_;
  std::shared_ptr<SrqPool> srq_;             // srq=1: receives come from here
  std::shared_ptr<CompletionChannel> channel_;
  std::shared_ptr<CompletionQueue> cq_;
  std::unique_ptr<RegisteredBuffer> ctrl_;    // recv slots (none with srq_), then send slots
  std::unique_ptr<RegisteredBuffer> rx_buf_;
  std::unique_ptr<RegisteredBuffer> tx_buf_;  // staging, mirrors the peer's RX buffer
  std::unique_ptr<CmId> id_;
  bool channel_watched_ = false;
  bool srq_attached_ = false;
  uint32_t qpn_ = 0;

  std::unique_ptr<SignalTracker> tracker_;
  std::vector<uint32_t> free_ctrl_slots_;

  // RX (our buffer, written by the peer): positions restart at 0 with every registration.
  // The peer's byte counts (immediate data) advance `produced`, read() advances `tail`, and
  // space goes back to the peer either all at once by re-registering the whole buffer once
  // it is consumed (baseline), or in credit_bytes steps by Credit messages (ring mode).
  ConsumerCursor rx_{RingGeometry(1)};
  // TX (the peer's RX buffer): write() copies to tx_buf_ at the producer's head -- the
  // staging buffer mirrors the peer's offset for offset -- and flush() posts [posted, head).
  // In the baseline no space comes back until the peer re-registers the buffer, so the
  // writer never wraps; in ring mode Credits return space and the writer wraps around.
  bool tx_known_ = false;
  uint64_t tx_addr_ = 0;
  uint32_t tx_rkey_ = 0;
  ProducerCursor tx_{RingGeometry(1)};
  uint64_t tx_posted_ = 0;
  bool write_blocked_ = false;
  bool error_told_writer_ = false;
  bool unsolicited_tail_ = false;  // the last data WR went out without IBV_SEND_SOLICITED
  bool credit_blocked_ = false;    // a Credit is due but no control slot was free
  bool armed_solicited_ = false;   // the CQ is armed for solicited completions only
  bool poll_again_ = false;        // re-armed for all completions: poll before sleeping

  bool client_side_ = false;
  bool awaiting_xfer_ = false;
  bool peer_closed_ = false;
  bool eof_delivered_ = false;
  bool disconnect_sent_ = false;
  bool peer_xfer_seen_ = false;
  bool peer_keepalive_seen_ = false;
  uint64_t features_ = 0;
  uint64_t last_rx_ns_ = 0;
  reactor::TimerId keepalive_timer_ = 0;
  reactor::TimerId connect_timer_ = 0;
  uint64_t busy_since_ns_ = 0;  // busy polling: last time the CQ had work (0 = not polling)
  Completion wcs_[32];
};

// ---------------------------------------------------------------------------------------
// Closer: the graceful half of close().  A connection closed (or destroyed) while its
// writes are still on the wire would lose them if it disconnected at once: rdma_disconnect
// moves the QP to the error state and every posted WR is flushed.  So close() hands its
// verbs objects to a Closer, which posts what was still buffered, makes sure the last WR is
// signaled (RC completes in order, so that one completion covers everything), and
// disconnects once it arrives: then every accepted byte is in the peer's memory and its
// receive completion is in the peer's CQ ahead of the DISCONNECTED event.  A peer
// disconnect, an error completion or linger_ms end it early; the loop's teardown ends it
// at the latest.  Receives are not re-posted: nothing more is read.  (With an SRQ the
// QP's receives are the pool's: its completions are re-posted there, not delivered, and the
// Closer detaches the QP from the pool once the QP is destroyed.)
class Closer final : public reactor::FdHandler, public CmSink {
 public:
  struct Wire {  // in creation order, so the defaulted destructor runs in reverse
    std::shared_ptr<ProtectionDomain> pd;
    std::shared_ptr<SrqPool> srq;  // may be null
    std::shared_ptr<CompletionChannel> channel;
    std::shared_ptr<CompletionQueue> cq;
    std::unique_ptr<RegisteredBuffer> ctrl, rx, tx;
    std::unique_ptr<CmId> id;
    std::unique_ptr<SignalTracker> tracker;
    uint32_t qpn = 0;  // id's QP number (SrqPool key)
  };
  struct Tx {  // the unposted tail [posted, head) of the peer's buffer
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t capacity = 1;
    uint64_t posted = 0;
    uint64_t head = 0;
  };

  Closer(LoopContext* ctx, Wire w, Tx tx, std::string peer)
      : ctx_(ctx), w_(std::move(w)), tx_(tx), peer_(std::move(peer)) {}
  ~Closer() override {
    if (w_.id) w_.id->set_user_data(nullptr);
    if (w_.srq) {
      w_.id.reset();  // QP first: after that no completion of it can be added to the pool's CQ
      w_.srq->detach(w_.qpn);
    }
  }

  // Takes over the completion channel and the CM events; false if it is already done.
  void start(uint64_t linger_ms) {
    w_.id->set_user_data(static_cast<CmSink*>(this));
    if (Status s = ctx_->loop().add(w_.channel->fd(), reactor::kReadable, this); !s.ok()) return finish(s.to_string());
    watched_ = true;
    // The connection may have armed the CQ for solicited completions only; the completion
    // we wait for is a send completion.  Re-arm for all and look at what is already there.
    if (Status s = w_.cq->arm(); !s.ok()) return finish(s.to_string());
    if (!poll()) return;
    if (linger_ms != 0)
      timer_ = ctx_->loop().run_after(linger_ms * kMs, [this, linger_ms] {
        timer_ = 0;
        finish("not acknowledged within linger_ms=" + std::to_string(linger_ms) + " ms; unsent data is lost");
      });
    pump();
  }

  void on_events(uint32_t) override {
    if (done_) return;
    Status s;
    auto events = w_.cq->consume_events();
    if (!events.ok()) s = events.status();
    if (s.ok()) s = w_.cq->arm();
    if (!s.ok()) return finish(s.to_string());
    if (poll()) pump();
  }

  void on_cm_event(CmEvent& ev) override {
    if (ev.type == RDMA_CM_EVENT_TIMEWAIT_EXIT) return;
    finish(std::string("peer event ") + ev.to_string());
  }

  // Takes every completion there is; false if that finished the close.
  bool poll() {
    for (bool more = true; more && !done_;) {
      auto n = w_.cq->poll(wcs_);
      if (!n.ok()) {
        finish(n.status().to_string());
        return false;
      }
      for (int i = 0; i < *n && !done_; ++i) {
        const Completion& wc = wcs_[i];
        if (!wc.ok()) {
          finish(wc.as_status().to_string());
          return false;
        }
        if (wr_kind(wc.wr_id) != kWrRecv) w_.tracker->on_signaled_completion();
      }
      more = *n == static_cast<int>(std::size(wcs_));
    }
    return !done_;
  }

  // The loop is being destroyed: give up now, touching only the verbs objects.
  void abandon() {
    done_ = true;
    if (w_.id) (void)w_.id->disconnect();
  }

 private:
  void pump() {
    if (done_) return;
    SignalTracker& t = *w_.tracker;
    // The unposted bytes wrap around the end of the peer's ring at most once.
    while (tx_.posted != tx_.head && t.can_post(1)) {
      const Extent e = RingGeometry(tx_.capacity).extents(tx_.posted, tx_.head - tx_.posted).first;
      const uint32_t len = static_cast<uint32_t>(e.len);
      ibv_sge sge = w_.tx->sge(e.offset, len);
      t.on_post(true);
      SendWr wr = SendWr::write_imm(&sge, 1, tx_.addr + e.offset, tx_.rkey, len)
                      .id(make_wr_id(kWrData, 0))
                      .signaled()
                      .solicited()
                      .inlined(len <= w_.id->qp()->max_inline());
      if (Status s = w_.id->qp()->post_send(wr); !s.ok()) return finish(s.to_string());
      tx_.posted += len;
    }
    if (tx_.posted == tx_.head && t.outstanding() > 0 && !t.last_signaled() && t.can_post(1)) {
      // The last data WR went unsignaled: a zero-length RDMA WRITE (invisible to the peer:
      // no immediate, no receive consumed) gets the completion that covers it.
      t.on_post(true);
      SendWr wr = SendWr::write(nullptr, 0, tx_.addr, tx_.rkey).id(make_wr_id(kWrData, 0)).signaled();
      if (Status s = w_.id->qp()->post_send(wr); !s.ok()) return finish(s.to_string());
    }
    if (tx_.posted == tx_.head && t.outstanding() == 0) finish("");
  }

  void finish(const std::string& why) {
    if (done_) return;
    done_ = true;
    if (!why.empty()) CONDUIT_LOG(kDebug) << "rdma: graceful close to " << peer_ << " cut short: " << why;
    if (timer_ != 0) ctx_->loop().cancel(timer_);
    timer_ = 0;
    if (watched_) (void)ctx_->loop().remove(w_.channel->fd());
    watched_ = false;
    (void)w_.id->disconnect();
    w_.id->set_user_data(nullptr);
    ctx_->retire(this);
  }

  LoopContext* ctx_;
  Wire w_;
  Tx tx_;
  std::string peer_;
  bool watched_ = false;
  bool done_ = false;
  reactor::TimerId timer_ = 0;
  Completion wcs_[32];
};

// ---------------------------------------------------------------------------------------
// SrqPool

Result<std::shared_ptr<SrqPool>> SrqPool::create(std::shared_ptr<ProtectionDomain> pd, uint32_t depth,
                                                 std::function<void()> wake) {
  std::shared_ptr<SrqPool> p(new SrqPool(depth, std::move(wake)));
  std::shared_ptr<Context> dev = pd->context();
  p->pd_ = std::move(pd);
  CONDUIT_ASSIGN_OR_RETURN(p->channel_, CompletionChannel::create(dev));
  // One CQE per WQE taken from the SRQ, and a slot is re-posted only after its CQE was
  // polled: depth entries can never overflow.
  CONDUIT_ASSIGN_OR_RETURN(p->cq_, CompletionQueue::create(dev, static_cast<int>(depth) + 16, p->channel_));
  auto srq = SharedReceiveQueue::create(p->pd_, depth);
  if (!srq.ok()) return srq.status().annotate("rdma option srq_depth=" + std::to_string(depth));
  p->srq_ = std::move(*srq);
  CONDUIT_ASSIGN_OR_RETURN(auto buf, RegisteredBuffer::create(p->pd_, static_cast<size_t>(depth) * kCtrlSize, kLocalOnly));
  p->buf_ = std::make_unique<RegisteredBuffer>(std::move(buf));
  p->posted_.assign(depth, 0);
  for (uint32_t i = 0; i < depth; ++i) CONDUIT_RETURN_IF_ERROR(p->post(i));
  p->low_water_ = std::max(1u, depth / 8);
  if (Status s = p->srq_->arm_limit(p->low_water_); !s.ok()) {
    CONDUIT_LOG(kDebug) << "rdma: SRQ low-water mark not armed: " << s.to_string();
    p->low_water_ = 0;
  }
  CONDUIT_RETURN_IF_ERROR(p->cq_->arm());
  return p;
}

Status SrqPool::post(uint32_t slot) {
  ibv_sge sge = buf_->sge(static_cast<size_t>(slot) * kCtrlSize, kCtrlSize);
  RecvWr wr = RecvWr::make(&sge, 1, make_wr_id(kWrRecv, slot));
  CONDUIT_RETURN_IF_ERROR(srq_->post_recv(wr));
  posted_[slot] = 1;
  ++posted_count_;
  return {};
}

void SrqPool::give_back(uint32_t slot) {
  if (posted_[slot]) {  // only polled slots reach here, each once: a bug, never the peer
    CONDUIT_LOG(kError) << "rdma: SRQ slot " << slot << " re-posted twice";
    return;
  }
  if (Status s = post(slot); !s.ok()) CONDUIT_LOG(kError) << "rdma: SRQ slot " << slot << " lost: " << s.to_string();
}

int SrqPool::poll_all() {
  int total = 0;
  for (;;) {
    auto n = cq_->poll(wcs_);
    if (!n.ok()) {
      CONDUIT_LOG(kError) << "rdma: polling the SRQ's CQ: " << n.status().to_string();
      return total;
    }
    for (int i = 0; i < *n; ++i) {
      const uint32_t slot = wr_index(wcs_[i].wr_id);
      if (wr_kind(wcs_[i].wr_id) != kWrRecv || slot >= depth_ || !posted_[slot]) {
        CONDUIT_LOG(kError) << "rdma: SRQ completion with wr_id " << wcs_[i].wr_id << " that is not outstanding";
        continue;
      }
      posted_[slot] = 0;
      --posted_count_;
      backlog_.push_back(wcs_[i]);
    }
    total += *n;
    if (*n < static_cast<int>(std::size(wcs_))) return total;
  }
}

int SrqPool::process(std::optional<uint32_t> only) {
  const int polled = poll_all();
  // Pop before delivering: a handler may close its connection, whose detach() edits the queue.
  for (;;) {
    auto it = !only ? backlog_.begin()
                    : std::find_if(backlog_.begin(), backlog_.end(),
                                   [q = *only](const Completion& wc) { return wc.qp_num == q; });
    if (it == backlog_.end()) break;
    const Completion wc = *it;
    backlog_.erase(it);
    ++completions_;
    auto c = qps_.find(wc.qp_num);
    if (c != qps_.end() && c->second != nullptr) c->second->on_srq_completion(wc);
    give_back(wr_index(wc.wr_id));
    if (++since_check_ >= std::max(1u, depth_ / 4)) check_low_water();
  }
  return polled;
}

void SrqPool::detach(uint32_t qpn) {
  (void)poll_all();
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    if (it->qp_num != qpn) {
      ++it;
      continue;
    }
    const uint32_t slot = wr_index(it->wr_id);
    it = backlog_.erase(it);
    give_back(slot);
  }
  qps_.erase(qpn);
  if (!backlog_.empty() && wake_) wake_();  // others' completions, polled here, still to deliver
}

void SrqPool::check_low_water() {
  since_check_ = 0;
  if (low_water_ == 0) return;
  auto limit = srq_->limit();
  if (!limit.ok() || *limit != 0) return;
  ++low_water_events_;
  // A warning at most every 10 s; an overloaded loop would otherwise log at every check.
  const uint64_t now = monotonic_ns();
  const bool warn = last_warn_ns_ == 0 || now - last_warn_ns_ > 10'000 * kMs;
  if (warn) last_warn_ns_ = now;
  const char* what = " posted receives (senders stall on RNR until the loop catches up; consider a larger srq_depth)";
  if (warn)
    CONDUIT_LOG(kWarn) << "rdma: shared receive queue fell below " << low_water_ << " of " << depth_ << what;
  else
    CONDUIT_LOG(kDebug) << "rdma: shared receive queue fell below " << low_water_ << " of " << depth_ << what;
  if (Status s = srq_->arm_limit(low_water_); !s.ok()) low_water_ = 0;
}

void SrqPool::on_events(uint32_t) {
  auto events = cq_->consume_events();
  Status s = events.ok() ? cq_->arm() : events.status();
  if (!s.ok()) CONDUIT_LOG(kError) << "rdma: SRQ completion channel: " << s.to_string();
  (void)process();
}

// ---------------------------------------------------------------------------------------
// LoopContext

Result<LoopContext*> LoopContext::acquire(EventLoop& loop) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = contexts_.find(&loop);
  if (it != contexts_.end()) {
    ++it->second->refs_;
    return it->second;
  }
  auto ctx = std::unique_ptr<LoopContext>(new LoopContext(loop));
  CONDUIT_ASSIGN_OR_RETURN(ctx->channel_, EventChannel::create());
  CONDUIT_RETURN_IF_ERROR(loop.add(ctx->channel_->fd(), reactor::kReadable, ctx.get()));
  LoopContext* raw = ctx.get();
  ctx->hook_ = loop.add_before_sleep([raw] { return raw->run_pending(); });
  ctx->teardown_ = loop.add_teardown([raw] { raw->on_loop_teardown(); });
  ctx->refs_ = 1;
  contexts_.emplace(&loop, raw);
  return ctx.release();
}

void LoopContext::release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--refs_ > 0 || !closers_.empty()) return;  // the last closer's retirement deletes it
  destroy_locked();
}

void LoopContext::destroy_locked() {
  if (!loop_gone_) {
    contexts_.erase(&loop_);
    for (auto& [key, pool] : srqs_) (void)loop_.remove(pool->fd());
    (void)loop_.remove(channel_->fd());
    loop_.remove_before_sleep(hook_);
    loop_.remove_teardown(teardown_);
  }
  delete this;
}

void LoopContext::adopt(std::unique_ptr<Closer> c) {
  Closer* raw = c.get();
  closers_.emplace(raw, std::move(c));
}

void LoopContext::retire(Closer* c) {
  auto it = closers_.find(c);
  if (it == closers_.end()) return;
  retired_.push_back(std::move(it->second));
  closers_.erase(it);
  loop_.wake();  // make sure the hook runs soon even if nothing else happens
}

void LoopContext::on_loop_teardown() {
  tearing_down_ = true;
  // Graceful closes still waiting are abandoned: the loop that would finish them is going.
  for (auto& [raw, c] : closers_) c->abandon();
  closers_.clear();
  retired_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (refs_ == 0) return destroy_locked();
  // Connections or listeners outlived their loop (a caller bug): never touch the loop again.
  CONDUIT_LOG(kWarn) << "rdma: event loop destroyed while " << refs_ << " RDMA connection(s)/listener(s) still use it";
  contexts_.erase(&loop_);
  for (auto& [key, pool] : srqs_) (void)loop_.remove(pool->fd());
  loop_gone_ = true;
}

Result<std::shared_ptr<ProtectionDomain>> LoopContext::pd_for(CmId& id) {
  std::shared_ptr<Context> dev = id.context();
  if (!dev) return Status(Code::kInternal, "rdma: cm id has no device");
  auto it = pds_.find(dev->native_handle());
  if (it != pds_.end()) return it->second;
  CONDUIT_ASSIGN_OR_RETURN(auto pd, ProtectionDomain::create(dev));
  pds_.emplace(dev->native_handle(), pd);
  return pd;
}

Result<std::shared_ptr<SrqPool>> LoopContext::srq_for(const std::shared_ptr<ProtectionDomain>& pd, uint32_t depth) {
  const auto key = std::make_pair(pd.get(), depth);
  auto it = srqs_.find(key);
  if (it != srqs_.end()) return it->second;
  CONDUIT_ASSIGN_OR_RETURN(auto pool, SrqPool::create(pd, depth, [this] {
                             if (!loop_gone_ && !tearing_down_) loop_.wake();
                           }));
  CONDUIT_RETURN_IF_ERROR(loop_.add(pool->fd(), reactor::kReadable, pool.get()));
  srqs_.emplace(key, pool);
  return pool;
}

std::vector<SrqStats> LoopContext::srq_stats(EventLoop& loop) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SrqStats> out;
  auto it = contexts_.find(&loop);
  if (it == contexts_.end()) return out;
  for (auto& [key, pool] : it->second->srqs_) out.push_back(pool->stats());
  return out;
}

void LoopContext::on_events(uint32_t) {
  // Bounded batch so a connection storm can't starve the loop.
  for (int i = 0; i < 64; ++i) {
    auto ev = CmId::next_event(channel_, 0);
    if (!ev.ok()) {
      if (ev.status().is_error()) CONDUIT_LOG(kWarn) << "rdma_cm: " << ev.status().to_string();
      return;
    }
    CmId* target = ev->owner;
    if (ev->type == RDMA_CM_EVENT_CONNECT_REQUEST && ev->listen_id != nullptr)
      target = static_cast<CmId*>(ev->listen_id->context);
    auto* sink = target ? static_cast<CmSink*>(target->user_data()) : nullptr;
    if (sink == nullptr) {
      CONDUIT_LOG(kDebug) << "rdma_cm: event " << ev->to_string() << " for an id nobody owns";
      continue;  // e.g. a CONNECT_REQUEST for a closed listener: new_id is destroyed = rejected
    }
    sink->on_cm_event(*ev);
  }
}

bool LoopContext::run_pending() {
  if (!retired_.empty()) {
    retired_.clear();
    if (refs_ == 0 && closers_.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      destroy_locked();
      return false;
    }
  }
  // Receive completions left queued by SrqPool::detach() or a per-QP drain.
  for (auto& [key, pool] : srqs_)
    if (pool->has_backlog()) (void)pool->process();
  if (pending_.empty()) return false;
  // Connections may close (and leave the set) from inside their handlers: work on a copy
  // and re-check membership before each call.
  std::vector<RdmaConnection*> batch(pending_.begin(), pending_.end());
  pending_.clear();
  for (RdmaConnection* c : batch) {
    if (c->run_deferred()) pending_.insert(c);
  }
  return !pending_.empty();
}

// ---------------------------------------------------------------------------------------
// RdmaConnection: setup

Result<std::unique_ptr<RdmaConnection>> RdmaConnection::start_connect(EventLoop& loop, const Endpoint& ep,
                                                                       const RdmaOptions& o, ConnectCallback cb) {
  CONDUIT_ASSIGN_OR_RETURN(auto hp, ep.host_port());
  CONDUIT_ASSIGN_OR_RETURN(SocketAddress dst, SocketAddress::resolve(hp.first, hp.second));
  CONDUIT_ASSIGN_OR_RETURN(LoopContext * ctx, LoopContext::acquire(loop));
  std::unique_ptr<RdmaConnection> c(new RdmaConnection(ctx, o, ConnState::kConnecting));
  c->peer_ = dst.to_string();
  c->client_side_ = true;
  c->on_connect_ = std::move(cb);
  CONDUIT_ASSIGN_OR_RETURN(c->id_, CmId::create(ctx->channel()));
  c->id_->set_user_data(static_cast<CmSink*>(c.get()));
  CONDUIT_RETURN_IF_ERROR(c->id_->resolve_addr(dst, static_cast<int>(o.connect_timeout_ms)));
  RdmaConnection* raw = c.get();
  c->connect_timer_ = loop.run_after(o.connect_timeout_ms * kMs, [raw] {
    raw->connect_timer_ = 0;
    raw->finish_connect(Status(Code::kTimedOut, "rdma connect to " + raw->peer_ + " timed out after " +
                                                    std::to_string(raw->options_.connect_timeout_ms) + " ms"));
  });
  return c;
}

Result<std::unique_ptr<RdmaConnection>> RdmaConnection::start_accept(LoopContext* ctx, std::unique_ptr<CmId> id,
                                                                      const RdmaOptions& o) {
  std::unique_ptr<RdmaConnection> c(new RdmaConnection(ctx, o, ConnState::kAccepting));
  // Each connection holds its own reference on the loop context.
  CONDUIT_ASSIGN_OR_RETURN(LoopContext * again, LoopContext::acquire(ctx->loop()));
  (void)again;
  c->id_ = std::move(id);
  c->id_->set_user_data(static_cast<CmSink*>(c.get()));
  c->peer_ = c->id_->peer_address().to_string();
  c->local_ = c->id_->local_address().to_string();
  CONDUIT_RETURN_IF_ERROR(c->setup_resources());
  CONDUIT_RETURN_IF_ERROR(c->id_->accept({}, 1, 1, 7));
  return c;
}

Status RdmaConnection::setup_resources() {
  if (!options_.device.empty()) {
    auto dev = id_->context();
    if (!dev || dev->name() != options_.device)
      return Status(Code::kUnavailable, "rdma: route uses device " + std::string(dev ? dev->name() : "?") +
                                            ", not the requested " + options_.device);
  }
  CONDUIT_ASSIGN_OR_RETURN(pd_, ctx_->pd_for(*id_));
  if (options_.srq) {
    CONDUIT_ASSIGN_OR_RETURN(srq_, ctx_->srq_for(pd_, options_.srq_depth));
  }
  std::shared_ptr<Context> dev = pd_->context();
  CONDUIT_ASSIGN_OR_RETURN(channel_, CompletionChannel::create(dev));
  // With an SRQ, receive completions go to the pool's CQ: this one carries sends only.
  const int cqe = static_cast<int>(options_.send_depth + ctrl_recv_slots()) + 16;
  CONDUIT_ASSIGN_OR_RETURN(cq_, CompletionQueue::create(dev, cqe, channel_));
  QpOptions qo;
  qo.max_send_wr = options_.send_depth;
  qo.max_recv_wr = options_.recv_depth;
  qo.max_send_sge = 1;
  qo.max_recv_sge = 1;
  qo.max_inline_data = options_.inline_bytes;
  CONDUIT_ASSIGN_OR_RETURN(QueuePair * qp, id_->create_qp(pd_, cq_, srq_ ? srq_->cq() : cq_, qo,
                                                          srq_ ? srq_->srq() : nullptr));
  if (srq_) {
    qpn_ = qp->qp_num();
    srq_->attach(qpn_, this);
    srq_attached_ = true;
  }
  // Never trust the provider to refuse overruns (rxe keeps spare slots): the tracker
  // enforces the depth it granted, signalling at least every quarter of it.
  const uint32_t depth = std::min(options_.send_depth, qp->options().max_send_wr);
  tracker_ = std::make_unique<SignalTracker>(depth, std::max(1u, depth / 4));

  const size_t ctrl_bytes = static_cast<size_t>(ctrl_recv_slots() + kCtrlSendSlots) * kCtrlSize;
  CONDUIT_ASSIGN_OR_RETURN(auto ctrl, RegisteredBuffer::create(pd_, ctrl_bytes, kLocalOnly));
  ctrl_ = std::make_unique<RegisteredBuffer>(std::move(ctrl));
  CONDUIT_ASSIGN_OR_RETURN(auto rx, RegisteredBuffer::create(pd_, options_.rx_buffer,
                                                             Access::kLocalWrite | Access::kRemoteWrite));
  rx_buf_ = std::make_unique<RegisteredBuffer>(std::move(rx));
  for (uint32_t i = 0; i < ctrl_recv_slots(); ++i) CONDUIT_RETURN_IF_ERROR(post_recv_slot(i));
  for (uint32_t i = 0; i < kCtrlSendSlots; ++i) free_ctrl_slots_.push_back(kCtrlSendSlots - 1 - i);
  CONDUIT_RETURN_IF_ERROR(arm_cq());
  CONDUIT_RETURN_IF_ERROR(ctx_->loop().add(channel_->fd(), reactor::kReadable, this));
  channel_watched_ = true;
  return {};
}

RdmaConnection::~RdmaConnection() {
  close();
  ctx_->forget(this);
  ctx_->release();
}

void RdmaConnection::release_resources() {
  if (keepalive_timer_ != 0) ctx_->loop().cancel(keepalive_timer_);
  if (connect_timer_ != 0) ctx_->loop().cancel(connect_timer_);
  keepalive_timer_ = connect_timer_ = 0;
  if (channel_watched_) (void)ctx_->loop().remove(channel_->fd());
  channel_watched_ = false;
  if (id_) id_->set_user_data(nullptr);
  // Order matters: id (QP) before MRs, CQ and channel (and before the SRQ, which the QP
  // keeps alive itself).
  id_.reset();
  detach_srq();
  tx_buf_.reset();
  rx_buf_.reset();
  ctrl_.reset();
  cq_.reset();
  channel_.reset();
  srq_.reset();
  pd_.reset();
}

// The QP is gone: the pool takes back the slots of its completions still queued.
void RdmaConnection::detach_srq() {
  if (!srq_attached_) return;
  srq_attached_ = false;
  srq_->detach(qpn_);
}

void RdmaConnection::on_srq_completion(const Completion& wc) {
  if (Status s = handle_completion(wc); !s.ok()) return fail(s);
  if (options_.busy_poll_us != 0 && state_ == ConnState::kConnected) busy_since_ns_ = monotonic_ns();
  ctx_->mark_pending(this);  // the hook flushes and runs the handlers, as on_events would
}

bool RdmaConnection::linger() {
  if (!id_ || !tracker_ || state_ != ConnState::kConnected || peer_closed_ || disconnect_sent_) return false;
  if (!tx_unposted() && tracker_->outstanding() == 0) return false;  // nothing on the wire
  if (keepalive_timer_ != 0) ctx_->loop().cancel(keepalive_timer_);
  if (connect_timer_ != 0) ctx_->loop().cancel(connect_timer_);
  keepalive_timer_ = connect_timer_ = 0;
  if (channel_watched_) (void)ctx_->loop().remove(channel_->fd());
  channel_watched_ = false;
  if (srq_attached_) srq_->orphan(qpn_);  // receives stay the pool's; the Closer reads none
  srq_attached_ = false;
  Closer::Wire w{std::move(pd_),     std::move(srq_),    std::move(channel_), std::move(cq_),      std::move(ctrl_),
                 std::move(rx_buf_), std::move(tx_buf_), std::move(id_),      std::move(tracker_), qpn_};
  Closer::Tx tx{tx_addr_, tx_rkey_, tx_.geometry().capacity(), tx_posted_, tx_.head()};
  auto closer = std::make_unique<Closer>(ctx_, std::move(w), tx, peer_);
  Closer* raw = closer.get();
  ctx_->adopt(std::move(closer));
  raw->start(options_.linger_ms);
  return true;
}

void RdmaConnection::close() {
  if (state_ == ConnState::kClosed && !id_) return;
  (void)linger();  // takes id_ and the rest if writes are still on the wire
  if (id_ && !disconnect_sent_ && (state_ == ConnState::kConnected || peer_closed_)) {
    disconnect_sent_ = true;
    (void)id_->disconnect();
  }
  release_resources();
  if (state_ != ConnState::kError) state_ = ConnState::kClosed;
  read_handler_ = nullptr;
  write_handler_ = nullptr;
  ctx_->forget(this);
}

void RdmaConnection::fail(Status s) {
  if (state_ == ConnState::kError || state_ == ConnState::kClosed) return;
  if (s.code() == Code::kProtocolError)
    CONDUIT_LOG(kWarn) << "rdma: protocol error from " << peer_ << ", closing: " << s.to_string();
  else
    CONDUIT_LOG(kDebug) << "rdma: connection to " << peer_ << " failed: " << s.to_string();
  const bool was_connecting =
      state_ == ConnState::kConnecting || state_ == ConnState::kAccepting || awaiting_xfer_;
  awaiting_xfer_ = false;
  error_ = s;
  state_ = ConnState::kError;
  if (id_ && !disconnect_sent_) {
    disconnect_sent_ = true;
    (void)id_->disconnect();
  }
  if (keepalive_timer_ != 0) ctx_->loop().cancel(keepalive_timer_);
  keepalive_timer_ = 0;
  if (was_connecting) {
    finish_connect(s);
    return;
  }
  ctx_->mark_pending(this);  // the read handler will see the error
}

void RdmaConnection::finish_connect(Status s) {
  if (connect_timer_ != 0) ctx_->loop().cancel(connect_timer_);
  connect_timer_ = 0;
  if (!s.ok() && state_ != ConnState::kError) {
    error_ = s;
    state_ = ConnState::kError;
    if (id_ && !disconnect_sent_) {
      disconnect_sent_ = true;
      (void)id_->disconnect();
    }
  }
  if (on_established_) {
    auto cb = std::move(on_established_);
    on_established_ = nullptr;
    cb(this, s);  // may destroy this
    return;
  }
  if (on_connect_) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    cb(*this, s);
  }
}

void RdmaConnection::on_cm_event(CmEvent& ev) {
  switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (Status s = id_->resolve_route(static_cast<int>(options_.connect_timeout_ms)); !s.ok()) fail(s);
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      Status s = setup_resources();
      if (s.ok()) s = id_->connect({}, 1, 1, 7);
      if (!s.ok()) fail(s);
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      established();
      return;
    case RDMA_CM_EVENT_DISCONNECTED:
      if (state_ == ConnState::kConnected) {
        peer_closed_ = true;
        if (!disconnect_sent_) {
          disconnect_sent_ = true;
          (void)id_->disconnect();
        }
        // Completions that raced the disconnect (data the peer wrote last) are still in
        // the CQ: take them before announcing EOF.
        (void)process_cq();
        if (srq_attached_) (void)srq_->process(qpn_);
        ctx_->mark_pending(this);
      } else if (state_ == ConnState::kConnecting || state_ == ConnState::kAccepting) {
        fail(Status(Code::kClosed, "rdma: peer disconnected during setup"));
      }
      return;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      return;
    case RDMA_CM_EVENT_REJECTED:
      fail(Status(Code::kUnavailable, "rdma connect to " + peer_ + ": rejected (no RDMA listener?)",
                  DetailKind::kCmEvent, ev.status));
      return;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      fail(Status(Code::kUnavailable, "rdma: device removed"));
      return;
    default:
      fail(Status(Code::kUnavailable, "rdma connect to " + peer_ + ": " + ev.to_string(), DetailKind::kCmEvent,
                  ev.status));
      return;
  }
}

void RdmaConnection::established() {
  if (state_ != ConnState::kConnecting && state_ != ConnState::kAccepting) return;
  local_ = id_->local_address().to_string();
  peer_ = id_->peer_address().to_string();
  last_rx_ns_ = monotonic_ns();
  const bool client = state_ == ConnState::kConnecting;
  state_ = ConnState::kConnected;
  Status s = register_rx();
  // A client asks for the server's features; a Valkey server answers 0.  The server side
  // never starts negotiation (Valkey clients may not send anything but RegisterXferMemory).
  if (s.ok() && client && options_.features != 0)
    s = send_ctrl(CtrlMsg::feature(Opcode::kGetServerFeature, options_.features));
  if (!s.ok()) {
    state_ = client ? ConnState::kConnecting : ConnState::kAccepting;
    fail(s);
    return;
  }
  arm_keepalive();
  // The caller hears of the connection once the peer has advertised its RX buffer (it
  // does so right after ESTABLISHED), so a new connection is writable at once.  The
  // connect timer still bounds the wait.
  // (Servers hand over at ESTABLISHED: a client that never advertises a buffer can still be
  // served replies as soon as it does, and protocol errors reach the accepted connection.)
  if (peer_xfer_seen_ || !client_side_) finish_connect(Status());
  else awaiting_xfer_ = true;
}

void RdmaConnection::arm_keepalive() {
  if (options_.keepalive_ms == 0 && options_.keepalive_timeout_ms == 0) return;
  const uint64_t period = options_.keepalive_ms != 0 ? options_.keepalive_ms : options_.keepalive_timeout_ms / 2 + 1;
  keepalive_timer_ = ctx_->loop().run_every(period * kMs, [this] { check_keepalive(); });
}

void RdmaConnection::check_keepalive() {
  if (state_ != ConnState::kConnected || peer_closed_) return;
  // Take what completed first: Soft-RoCE raises no event for error completions on a CQ
  // armed for solicited ones (real HCAs do), so a dead peer is noticed all the same, and
  // send completions waiting there free the control slot the keepalive needs.
  if (Status s = process_cq(); !s.ok()) return fail(s);
  if (state_ != ConnState::kConnected || peer_closed_) return;
  if (options_.keepalive_ms != 0) {
    // No free control slot or send-queue room means our sends are on the wire anyway: the
    // peer hears from us without this keepalive.
    Status s = send_ctrl(CtrlMsg::keepalive());
    if (!s.ok() && s.is_error() && s.code() != Code::kResourceExhausted) return fail(s);
  }
  // Only peers known to send keepalives can be timed out: Valkey's client library never
  // sends them, and an idle client is not a dead one.
  if (options_.keepalive_timeout_ms != 0 && (peer_keepalive_seen_ || features_ != 0) &&
      monotonic_ns() - last_rx_ns_ > options_.keepalive_timeout_ms * kMs)
    fail(Status(Code::kProtocolError, "rdma: no keepalive from " + peer_ + " for " +
                                          std::to_string(options_.keepalive_timeout_ms) + " ms"));
}

// ---------------------------------------------------------------------------------------
// Control messages and completions

Status RdmaConnection::post_recv_slot(uint32_t slot) {
  if (srq_) return {};  // the pool re-posts the slot once the completion has been handled
  ibv_sge sge = ctrl_->sge(static_cast<size_t>(slot) * kCtrlSize, kCtrlSize);
  RecvWr wr = RecvWr::make(&sge, 1, make_wr_id(kWrRecv, slot));
  return qp()->post_recv(wr);
}

Status RdmaConnection::send_ctrl(const CtrlMsg& m) {
  if (free_ctrl_slots_.empty() || !tracker_->can_post(1))
    return Status(Code::kResourceExhausted, "rdma: control send queue full");
  const uint32_t slot = free_ctrl_slots_.back();
  uint8_t* buf = ctrl_->data() + static_cast<size_t>(ctrl_recv_slots() + slot) * kCtrlSize;
  m.encode(*reinterpret_cast<uint8_t(*)[kCtrlSize]>(buf));
  ibv_sge sge = ctrl_->sge(static_cast<size_t>(ctrl_recv_slots() + slot) * kCtrlSize, kCtrlSize);
  // Control sends are always signaled (their completion frees the slot) and solicited (a
  // peer that negotiated kFeatureSolicited wakes for them; others ignore the bit).
  tracker_->on_post(true);
  SendWr wr = SendWr::send(&sge, 1).id(make_wr_id(kWrCtrlSend, slot)).signaled().solicited();
  if (Status s = qp()->post_send(wr); !s.ok()) return s;
  free_ctrl_slots_.pop_back();
  return {};
}

Status RdmaConnection::register_rx() {
  CONDUIT_RETURN_IF_ERROR(send_ctrl(
      CtrlMsg::register_xfer(rx_buf_->mr().addr(), static_cast<uint32_t>(rx_buf_->size()), rx_buf_->mr().rkey())));
  rx_ = ConsumerCursor(RingGeometry(rx_buf_->size()));  // only once the message is on its way
  return {};
}

// Gives consumed space back to the writer: in ring mode a Credit once credit_bytes are
// consumed; in the baseline the whole buffer, re-registered, once all of it is consumed.
void RdmaConnection::return_space() {
  if (peer_closed_ || state_ != ConnState::kConnected) return;
  Status s;
  if (ring()) {
    if (!rx_.credits_due(options_.credit_bytes)) return;
    s = send_ctrl(CtrlMsg::credit(rx_.unreturned()));
    if (s.ok()) (void)rx_.take_credits();
  } else {
    if (rx_.unreturned() != rx_.geometry().capacity()) return;
    s = register_rx();
  }
  if (s.ok()) {
    credit_blocked_ = false;
    return;
  }
  if (s.code() == Code::kResourceExhausted) {
    // No control slot or send-queue room: retried when a send completion frees one.
    credit_blocked_ = true;
    ensure_send_events();
    return;
  }
  fail(s);
}

Status RdmaConnection::handle_ctrl(const CtrlMsg& m) {
  switch (static_cast<Opcode>(m.opcode)) {
    case Opcode::kRegisterXferMemory: {
      if (tx_known_ && tx_unposted())
        return Status(Code::kProtocolError, "rdma: peer re-registered its buffer before receiving all data");
      if (!tx_buf_ || tx_buf_->size() != m.length) {
        tx_buf_.reset();
        CONDUIT_ASSIGN_OR_RETURN(auto buf, RegisteredBuffer::create(pd_, m.length, kLocalOnly));
        tx_buf_ = std::make_unique<RegisteredBuffer>(std::move(buf));
      }
      tx_known_ = true;
      tx_addr_ = m.addr;
      tx_rkey_ = m.rkey;
      tx_ = ProducerCursor(RingGeometry(m.length));
      tx_posted_ = 0;
      peer_xfer_seen_ = true;
      if (awaiting_xfer_) {
        awaiting_xfer_ = false;
        finish_connect(Status());
      }
      if (write_handler_) ctx_->mark_pending(this);
      return {};
    }
    case Opcode::kKeepalive:
      peer_keepalive_seen_ = true;
      return {};
    case Opcode::kCredit:
      if (!ring()) return Status(Code::kProtocolError, "rdma: Credit from a peer that did not negotiate ring mode");
      if (!tx_known_ || !tx_.add_credits(m.bytes))
        return Status(Code::kProtocolError, "rdma: peer returned " + std::to_string(m.bytes) + " bytes but only " +
                                                std::to_string(tx_known_ ? tx_.in_flight() : 0) + " are in flight");
      if (write_handler_) ctx_->mark_pending(this);
      return {};
    case Opcode::kGetServerFeature: {
      if (!client_side_) {
        // A client asks: answer with the select it named and the bits we offer there.
        CtrlMsg reply = CtrlMsg::feature(Opcode::kGetServerFeature, m.select == 0 ? options_.features : 0);
        reply.select = m.select;
        return send_ctrl(reply);
      }
      // The server's answer: switch on what both sides support (a Valkey server says 0,
      // and must then never see a SetClientFeature with bits set).
      const uint64_t chosen = m.select == 0 ? (m.features & options_.features) : 0;
      if (chosen != 0) {
        CONDUIT_RETURN_IF_ERROR(send_ctrl(CtrlMsg::feature(Opcode::kSetClientFeature, chosen)));
        features_ = chosen;
        on_features();
      }
      return {};
    }
    case Opcode::kSetClientFeature:
      if (client_side_) return Status(Code::kProtocolError, "rdma: server sent SetClientFeature");
      if (m.select != 0 || (m.features & ~options_.features) != 0)
        return Status(Code::kProtocolError, "rdma: peer selected unsupported features " + std::to_string(m.features));
      features_ = m.features;
      on_features();
      return {};
  }
  return Status(Code::kProtocolError, "rdma: unknown opcode " + std::to_string(m.opcode));
}

// Both sides now run the negotiated extensions.  Nothing on the wire changes at this point:
// space already consumed is credited from now on (ring), and a batch posted before without
// a solicited tail gets one before the loop sleeps (solicited); the CQ is armed for
// solicited completions at the next re-arm.
void RdmaConnection::on_features() {
  CONDUIT_LOG(kDebug) << "rdma: " << peer_ << " negotiated features " << features_;
  ctx_->mark_pending(this);
}

Status RdmaConnection::handle_completion(const Completion& wc) {
  if (!wc.ok()) {
    if (wc.ibv_wc::status == IBV_WC_WR_FLUSH_ERR && (peer_closed_ || disconnect_sent_)) return {};
    return wc.as_status().annotate("rdma " + peer_);
  }
  switch (wr_kind(wc.wr_id)) {
    case kWrRecv: {
      const uint32_t slot = wr_index(wc.wr_id);
      last_rx_ns_ = monotonic_ns();
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        const uint32_t len = wc.imm();
        if (!rx_.add_produced(len))
          return Status(Code::kProtocolError, "rdma: peer wrote " + std::to_string(len) + " bytes but only " +
                                                  std::to_string(rx_.granted()) + " of its " +
                                                  std::to_string(rx_.geometry().capacity()) +
                                                  "-byte buffer were granted");
      } else {
        CONDUIT_ASSIGN_OR_RETURN(CtrlMsg m, CtrlMsg::decode(recv_slot_data(slot), wc.byte_len));
        CONDUIT_RETURN_IF_ERROR(handle_ctrl(m));
      }
      return post_recv_slot(slot);
    }
    case kWrCtrlSend:
      free_ctrl_slots_.push_back(wr_index(wc.wr_id));
      tracker_->on_signaled_completion();
      if (credit_blocked_) return_space();
      return {};
    case kWrData:
      tracker_->on_signaled_completion();
      if (credit_blocked_) return_space();
      return {};
  }
  return Status(Code::kInternal, "rdma: completion with unknown wr_id " + std::to_string(wc.wr_id));
}

Status RdmaConnection::process_cq(int* handled) {
  if (!cq_) return {};
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int n, cq_->poll(wcs_));
    if (handled != nullptr) *handled += n;
    for (int i = 0; i < n; ++i) CONDUIT_RETURN_IF_ERROR(handle_completion(wcs_[i]));
    if (n < static_cast<int>(std::size(wcs_))) return {};
  }
}

// Arms the CQ for the next event: solicited completions only once the peer marks its batches
// (kFeatureSolicited), unless we are waiting for a send completion ourselves.
Status RdmaConnection::arm_cq() {
  armed_solicited_ = solicited() && !needs_send_events();
  return cq_->arm(armed_solicited_);
}

// We now wait for a send completion: widen a solicited-only arming to every completion, and
// poll once more before sleeping for completions that arrived while it was narrow (they
// raised no event).
void RdmaConnection::ensure_send_events() {
  if (!armed_solicited_ || !cq_) return;
  armed_solicited_ = false;
  if (Status s = cq_->arm(false); !s.ok()) return fail(s);
  poll_again_ = true;
  ctx_->mark_pending(this);
}

void RdmaConnection::on_events(uint32_t) {
  if (!cq_) return;
  Status s;
  auto events = cq_->consume_events();
  if (!events.ok()) s = events.status();
  else stats_.wakeups += static_cast<uint64_t>(*events);
  if (s.ok()) s = arm_cq();
  if (s.ok()) s = process_cq();
  if (!s.ok()) {
    fail(s);
  } else if (tx_unposted()) {
    (void)flush(true);  // completions may have freed send-queue slots
  }
  if (state_ == ConnState::kConnected && armed_solicited_ && needs_send_events()) ensure_send_events();
  if (options_.busy_poll_us != 0 && state_ == ConnState::kConnected) {
    busy_since_ns_ = monotonic_ns();  // traffic: poll for the next completion instead of sleeping
    ctx_->mark_pending(this);
  }
  deliver();
}

// Busy polling (busy_poll_us): while a handler is installed, the before-sleep hook polls the
// CQ itself and keeps the loop from sleeping until busy_poll_us pass without a completion.
// Completion events stay armed, so a connection that stops polling misses nothing.  Trades
// a core for the wakeup: under TCG an event-driven completion costs milliseconds.
bool RdmaConnection::busy_poll() {
  if (options_.busy_poll_us == 0 || state_ != ConnState::kConnected || (!read_handler_ && !write_handler_)) {
    busy_since_ns_ = 0;
    return false;
  }
  int handled = 0;
  if (Status s = process_cq(&handled); !s.ok()) {
    fail(s);
    return false;
  }
  if (srq_attached_) handled += srq_->process();  // may deliver to other connections too
  const uint64_t now = monotonic_ns();
  if (handled != 0 || busy_since_ns_ == 0) busy_since_ns_ = now;
  if (handled != 0 && tx_unposted()) (void)flush(true);
  if (now - busy_since_ns_ < options_.busy_poll_us * 1000) return true;
  busy_since_ns_ = 0;
  return false;
}

// ---------------------------------------------------------------------------------------
// Data path

Status RdmaConnection::post_data(Extent e, bool solicit) {
  const uint32_t len = static_cast<uint32_t>(e.len);
  ibv_sge sge = tx_buf_->sge(e.offset, len);
  const bool signal = tracker_->on_post(false);
  SendWr wr = SendWr::write_imm(len != 0 ? &sge : nullptr, len != 0 ? 1 : 0, tx_addr_ + e.offset, tx_rkey_, len)
                  .id(make_wr_id(kWrData, 0))
                  .signaled(signal)
                  .solicited(solicit)
                  .inlined(len != 0 && len <= qp()->max_inline());
  if (Status s = qp()->post_send(wr); !s.ok()) {
    fail(s);
    return s;
  }
  return {};
}

// Posts the bytes written since the last post: one RDMA_WRITE_WITH_IMM per contiguous run
// (two when the run wraps around the end of the peer's ring).  `batch_end`: nothing more
// follows before the loop sleeps (or the writer is blocked), so the last WR is solicited --
// the one that wakes a peer which negotiated kFeatureSolicited.  A batch whose last WR went
// out unsolicited (posted early because it reached flush_bytes) is closed by a zero-length
// solicited WRITE_WITH_IMM.
Status RdmaConnection::flush(bool batch_end) {
  if (state_ != ConnState::kConnected || !tx_known_) return {};
  if (!tx_unposted()) {
    if (!batch_end || !unsolicited_tail_ || !solicited()) return {};
    if (!tracker_->can_post(1)) {
      ensure_send_events();
      return Status::WouldBlock();
    }
    CONDUIT_RETURN_IF_ERROR(post_data(Extent{tx_.geometry().offset(tx_posted_), 0}, true));
    unsolicited_tail_ = false;
    return {};
  }
  while (tx_unposted()) {
    if (!tracker_->can_post(1)) {
      ensure_send_events();
      return Status::WouldBlock();  // a signaled completion will free room
    }
    const Extents e = tx_.geometry().extents(tx_posted_, tx_.head() - tx_posted_);
    const bool last = e.second.len == 0;
    CONDUIT_RETURN_IF_ERROR(post_data(e.first, batch_end && last));
    tx_posted_ += e.first.len;
    unsolicited_tail_ = !(batch_end && last);
  }
  return {};
}

Result<size_t> RdmaConnection::writev(std::span<const iovec> iov) {
  if (state_ != ConnState::kConnected) {
    if (state_ == ConnState::kError) return error_;
    if (state_ == ConnState::kClosed) return Status(Code::kClosed, "rdma: connection is closed");
    return Status(Code::kInvalidArgument, "rdma: connection is still being set up");
  }
  if (peer_closed_) {
    // The peer is gone: what we would write can never arrive (TCP: EPIPE).
    fail(Status(Code::kClosed, "rdma: write after the peer disconnected"));
    return error_;
  }
  size_t total = 0;
  // Until the peer has advertised its buffer (right after ESTABLISHED) nothing can be written.
  for (const iovec& v : tx_known_ ? iov : std::span<const iovec>()) {
    const auto* src = static_cast<const uint8_t*>(v.iov_base);
    size_t left = v.iov_len;
    while (left != 0 && tx_.free_space() != 0) {  // an empty iovec may carry a null base
      const Extent e = tx_.writable(left).first;   // contiguous; wraps on the next round
      std::memcpy(tx_buf_->data() + e.offset, src, e.len);
      tx_.produce(e.len);
      src += e.len;
      left -= e.len;
      total += e.len;
    }
    if (left != 0) break;
  }
  if (total == 0) {
    bool empty = true;
    for (const iovec& v : iov) empty = empty && v.iov_len == 0;
    if (empty) return size_t{0};
    ++stats_.write_would_block;
    write_blocked_ = true;
    return Status::WouldBlock();
  }
  stats_.bytes_written += total;
  ++stats_.writes;
  // Small runs wait for the before-sleep hook so that many writes become one WR; a full
  // buffer or a large run goes out now (a full buffer ends the batch: the writer waits).
  const bool full = tx_.free_space() == 0;
  if (tx_.head() - tx_posted_ >= options_.flush_bytes || full) {
    Status s = flush(full);
    if (s.is_error()) return s;
  }
  ctx_->mark_pending(this);
  return total;
}

Result<size_t> RdmaConnection::write(std::span<const uint8_t> data) {
  iovec v{const_cast<uint8_t*>(data.data()), data.size()};
  return writev(std::span<const iovec>(&v, 1));
}

Result<size_t> RdmaConnection::read(std::span<uint8_t> buf) {
  if (state_ != ConnState::kConnected) {
    if (state_ == ConnState::kError) return error_;
    if (state_ == ConnState::kClosed) return Status(Code::kClosed, "rdma: connection is closed");
    return Status(Code::kInvalidArgument, "rdma: connection is still being set up");
  }
  if (rx_.available() == 0) {
    if (peer_closed_) {
      eof_delivered_ = true;
      return size_t{0};
    }
    ++stats_.read_would_block;
    return Status::WouldBlock();
  }
  const Extents e = rx_.readable(buf.size());
  std::memcpy(buf.data(), rx_buf_->data() + e.first.offset, e.first.len);
  if (e.second.len != 0) std::memcpy(buf.data() + e.first.len, rx_buf_->data(), e.second.len);
  const size_t n = e.total();
  rx_.consume(n);
  stats_.bytes_read += n;
  ++stats_.reads;
  return_space();
  return n;
}

void RdmaConnection::deliver() {
  // Handlers may close the connection: re-check the state around every call.
  if (read_handler_ && readable()) {
    Handler h = read_handler_;
    h(*this);
  }
  if (state_ == ConnState::kConnected && write_handler_ && writable()) {
    write_blocked_ = false;
    Handler h = write_handler_;
    h(*this);
  } else if (state_ == ConnState::kError && write_handler_ && !error_told_writer_) {
    // A writer waiting for space learns of the failure too (TCP: EPOLLERR wakes writers).
    error_told_writer_ = true;
    Handler h = write_handler_;
    h(*this);
  }
  // Level-style: what a handler left undone is offered again before the loop sleeps.
  if (wants_service()) ctx_->mark_pending(this);
}

void RdmaConnection::process_pending() { deliver(); }

bool RdmaConnection::run_deferred() {
  if (poll_again_ && state_ == ConnState::kConnected) {
    poll_again_ = false;
    if (Status s = process_cq(); !s.ok()) fail(s);
  }
  const bool polling = busy_poll();
  if (state_ == ConnState::kConnected) {
    Status s = flush(true);
    if (s.is_error()) fail(s);
  }
  deliver();
  // Stay on the list while something is left that no event will announce.
  return wants_service() || (polling && state_ == ConnState::kConnected);
}

// ---------------------------------------------------------------------------------------
// Listener

class RdmaListener final : public Listener, public CmSink {
 public:
  RdmaListener(LoopContext* ctx, RdmaOptions o, AcceptCallback cb) : ctx_(ctx), options_(o), on_accept_(std::move(cb)) {}
  ~RdmaListener() override {
    close();
    ctx_->release();
  }

  Status start(const SocketAddress& addr, int backlog) {
    CONDUIT_ASSIGN_OR_RETURN(id_, CmId::create(ctx_->channel()));
    id_->set_user_data(static_cast<CmSink*>(this));
    CONDUIT_RETURN_IF_ERROR(id_->bind(addr));
    CONDUIT_RETURN_IF_ERROR(id_->listen(backlog));
    return {};
  }

  std::string url() const override {
    return id_ ? "rdma://" + id_->local_address().to_string() : "rdma://closed";
  }
  void close() override {
    accepting_.clear();
    if (id_) id_->set_user_data(nullptr);
    id_.reset();
  }

  void on_cm_event(CmEvent& ev) override {
    if (ev.type != RDMA_CM_EVENT_CONNECT_REQUEST || !ev.new_id) return;
    const std::string peer = ev.new_id->peer_address().to_string();
    auto conn = RdmaConnection::start_accept(ctx_, std::move(ev.new_id), options_);
    if (!conn.ok()) {
      CONDUIT_LOG(kWarn) << "rdma accept from " << peer << ": " << conn.status().to_string();
      return;  // the id was destroyed with the failed connection: the peer sees a reject
    }
    RdmaConnection* raw = conn->get();
    raw->on_established_ = [this](RdmaConnection* c, Status s) {
      auto it = std::find_if(accepting_.begin(), accepting_.end(), [c](const auto& p) { return p.get() == c; });
      if (it == accepting_.end()) return;
      std::unique_ptr<RdmaConnection> owned = std::move(*it);
      accepting_.erase(it);
      if (!s.ok()) {
        CONDUIT_LOG(kDebug) << "rdma: inbound connection failed during setup: " << s.to_string();
        ctx_->loop().destroy_later(std::move(owned));
        return;
      }
      on_accept_(std::move(owned));
    };
    accepting_.push_back(std::move(conn).value());
  }

 private:
  LoopContext* ctx_;
  RdmaOptions options_;
  AcceptCallback on_accept_;
  std::unique_ptr<CmId> id_;
  std::vector<std::unique_ptr<RdmaConnection>> accepting_;
};

class RdmaTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "rdma"; }

  Result<std::unique_ptr<Listener>> listen(EventLoop& loop, const Endpoint& ep, AcceptCallback on_accept) override {
    if (!on_accept) return Status(Code::kInvalidArgument, "rdma listen: null accept callback");
    CONDUIT_ASSIGN_OR_RETURN(RdmaOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto hp, ep.host_port());
    CONDUIT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::resolve(hp.first == "*" ? "" : hp.first, hp.second));
    CONDUIT_ASSIGN_OR_RETURN(LoopContext * ctx, LoopContext::acquire(loop));
    auto l = std::make_unique<RdmaListener>(ctx, o, std::move(on_accept));
    CONDUIT_RETURN_IF_ERROR(l->start(addr, static_cast<int>(o.backlog)));
    return std::unique_ptr<Listener>(std::move(l));
  }

  Result<std::unique_ptr<Connection>> connect(EventLoop& loop, const Endpoint& ep, ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(RdmaOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto c, RdmaConnection::start_connect(loop, ep, o, std::move(on_connect)));
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

std::vector<SrqStats> srq_stats(reactor::EventLoop& loop) { return LoopContext::srq_stats(loop); }

}  // namespace rdma

Transport* rdma_transport() {
  static rdma::RdmaTransport t;
  return &t;
}

}  // namespace conduit::transport
