// RdmaConnection: one rdma:// stream (Valkey's RDMA protocol plus the negotiated Conduit
// extensions, docs/PROTOCOL.md).  Setup, rdma_cm events, keepalive and control messages
// are in connection.cc; the data path (write, flush, read, delivery, polling) in
// connection_io.cc.  Loop thread only, like every Connection.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/transport/connection.h"
#include "conduit/verbs/verbs.h"
#include "cq_hub.h"
#include "loop_context.h"
#include "options.h"
#include "conduit/base/adaptive_spin.h"
#include "poll/spin_group.h"
#include "protocol.h"
#include "rendezvous.h"
#include "resources.h"
#include "ring/hold_tracker.h"
#include "ring/ring_cursor.h"
#include "srq_pool.h"

namespace conduit::transport::rdma {

// Where a connection is in its life: one value instead of a set of flags (rsocket's
// rs_state, brpc's RdmaEndpoint::State).  The public ConnState is derived from it.
enum class Phase : uint8_t {
  kResolvingAddress,  // client: rdma_resolve_addr (the peer's address to a device and neighbour)
  kResolvingRoute,    // client: rdma_resolve_route
  kConnecting,      // client: rdma_connect sent, waiting for ESTABLISHED
  kAccepting,       // server: rdma_accept sent, waiting for ESTABLISHED
  kAwaitingBuffer,  // client: established, waiting for the peer's first RegisterXferMemory
                    // (and for the answer to its GetServerFeature: caps() are final at hand-over)
  kOpen,            // data flows both ways
  kPeerGone,        // the peer disconnected: what it wrote is still readable, then EOF
  kFailed,          // error() says why; resources are released at close()
  kClosed,          // close() ran: resources released (or handed to a Closer)
};
std::string_view phase_name(Phase p);

class RdmaConnection final : public Connection,
                             public CqSink,
                             public CmSink,
                             public SrqClient,
                             private poll::SpinGroup::Member {
 public:
  // Outbound: starts address resolution.
  static Result<std::unique_ptr<RdmaConnection>> start_connect(reactor::EventLoop& loop, const Endpoint& ep,
                                                               const RdmaOptions& o, ConnectCallback cb);
  // Inbound: takes the id from CONNECT_REQUEST, sets up resources and accepts.
  static Result<std::unique_ptr<RdmaConnection>> start_accept(LoopContext* ctx, verbs::CmEvent& request,
                                                              const RdmaOptions& o);

  ~RdmaConnection() override;

  // Connection
  ConnState state() const override;
  const Status& error() const override { return error_; }
  Result<size_t> read(std::span<uint8_t> buf) override;
  Result<size_t> write(std::span<const uint8_t> data) override;
  Result<size_t> writev(std::span<const iovec> iov) override;
  // In place: reserve() hands out the staging area the NIC sends from (no copy on our
  // side), peek() the receive area the peer wrote into.  write_owned() posts slices of
  // pool() straight from where they lie (other memory is copied into the staging area) and
  // releases them when a completion covers their WR; with the rendezvous extension a slice
  // of at least rendezvous_min is offered instead and the peer READs it
  // (connection_rendezvous.cc), released once its ReadDone's invalidation completed.  read_owned() hands out views of the
  // receive area (zero copies); their space returns to the writer when they are released
  // (connection_io.cc), at most hold_bytes held.
  Result<std::span<uint8_t>> reserve(size_t min, size_t max) override;
  Status commit(size_t n) override;
  Result<std::span<const uint8_t>> peek() override;
  Status consume(size_t n) override;
  Result<size_t> write_owned(memory::Chain& chain) override;
  Result<size_t> read_owned(memory::Chain& out, size_t max) override;
  void set_read_handler(Handler h) override;
  void set_write_handler(Handler h) override;
  bool has_pending_data() const override { return read_handler_ != nullptr && readable(); }
  void process_pending() override { deliver(); }
  // With the half-close extension negotiated (caps().half_close): posts what is buffered,
  // then a HalfClose after it; later writes fail, reads go on.  Otherwise kNotSupported (a
  // Valkey peer: the Valkey RDMA protocol has no half-close).
  Status shutdown_write() override;
  void close() override;
  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  Caps caps() const override;
  const ConnStats& stats() const override { return stats_; }
  ConnSnapshot snapshot() const override;
  reactor::EventLoop& loop() const override { return ctx_->loop(); }
  memory::BlockPool* pool() const override { return arena_ ? arena_->pool.get() : nullptr; }

  // CqSink: completion events of our CQ, read by the loop's CqHub.
  void on_cq_event(int events) override;
  // CmSink
  void on_cm_event(verbs::CmEvent& ev) override;
  // SrqClient: a receive completion of this connection's QP (slot re-posted by the pool).
  void on_srq_completion(const verbs::Completion& wc) override;

  // Called by the loop context's before-sleep hook.  Returns true if work remains.
  bool run_deferred();

  // For the listener: fires once when the accepted connection is established (or failed).
  std::function<void(RdmaConnection*, Status)> on_established_;
  Phase phase() const { return phase_; }
  uint64_t negotiated_features() const { return features_; }

 private:
  RdmaConnection(LoopContext* ctx, const RdmaOptions& o, Phase p, bool client);

  verbs::QueuePair* qp() const { return res_ ? res_->qp() : nullptr; }
  // Established with a QP that carries data: our buffer is advertised, the peer's may be.
  bool live() const {
    return phase_ == Phase::kAwaitingBuffer || phase_ == Phase::kOpen || phase_ == Phase::kPeerGone;
  }
  // Live and the peer still there: we may send.
  bool sending() const { return phase_ == Phase::kAwaitingBuffer || phase_ == Phase::kOpen; }
  bool setting_up() const {
    return phase_ == Phase::kResolvingAddress || phase_ == Phase::kResolvingRoute || phase_ == Phase::kConnecting ||
           phase_ == Phase::kAccepting || phase_ == Phase::kAwaitingBuffer;
  }
  // Data to read (within the hold bound), or the end of the stream once all is read.
  bool readable() const {
    if (!live()) return phase_ == Phase::kFailed;
    if (rv_next()) return !rv_head().empty() || phase_ == Phase::kPeerGone;  // an offer's bytes come next
    return rx_.available() > 0 ? hold_room() > 0 : peer_done();
  }
  // How much further reads may go while read_owned views are held (UINT64_MAX: none held).
  uint64_t hold_room() const {
    if (holds_.empty()) return UINT64_MAX;
    const uint64_t stretch = rx_.tail() - holds_.releasable(rx_.tail());
    return stretch >= hold_limit() ? 0 : hold_limit() - stretch;
  }
  // hold_bytes and credit_bytes, scaled down while the receive area is smaller than
  // rx_buffer (rx_initial): half and a quarter of it at most.
  uint64_t hold_limit() const {
    return rx_len_ < options_.rx_buffer ? std::min<uint64_t>(options_.hold_bytes, rx_len_ / 2) : options_.hold_bytes;
  }
  uint64_t credit_step() const {
    return rx_len_ < options_.rx_buffer ? std::min<uint64_t>(options_.credit_bytes, rx_len_ / 4)
                                        : options_.credit_bytes;
  }
  // After the peer disconnected, writing is pointless but the write handler must still run
  // once more so the writer learns it (its write then fails, as TCP's would with EPIPE).
  // After shutdown_write() the writer is done: no handler call would do anything.
  bool writable() const {
    return !write_shut_ &&
           (phase_ == Phase::kPeerGone || (live() && tx_known_ && tx_.free_space() > 0 && !staging_waiter_));
  }
  bool tx_unposted() const { return tx_posted_ != tx_.head(); }
  bool ring() const { return (features_ & kFeatureRing) != 0; }
  bool solicited() const { return (features_ & kFeatureSolicited) != 0; }
  bool half_close() const { return (features_ & kFeatureHalfClose) != 0; }
  bool rendezvous() const { return (features_ & kFeatureRendezvous) != 0; }
  // The end of the stream is reached once the remaining data is read: the peer disconnected
  // or half-closed.
  bool peer_done() const { return phase_ == Phase::kPeerGone || peer_shut_; }
  // Something we want to post may have to wait for a send completion (a send-queue slot or
  // a control slot): the CQ must then raise events for send completions too, which a CQ
  // armed for solicited completions only does not.
  bool needs_send_events() const {
    return tx_unposted() || credit_blocked_ || half_close_due_ || deferred_feature_.has_value() ||
           free_ctrl_slots_.empty() || rv_due();
  }
  bool wants_service() const;
  bool linger();

  Status setup_resources();
  // Receive slots in ctrl (0 with an SRQ: ctrl then holds only send slots).
  uint32_t ctrl_recv_slots() const { return res_->srq ? 0 : static_cast<uint32_t>(options_.recv_depth); }
  const uint8_t* recv_slot_data(uint32_t slot) const {
    return res_->srq ? res_->srq->slot_data(slot) : res_->ctrl.data() + static_cast<size_t>(slot) * kCtrlSize;
  }
  Status post_recv_slot(uint32_t slot);
  Status post_all_recv_slots();  // setup: all of them, one post
  Status send_ctrl(const CtrlMsg& m);
  Status post_data(ring::Extent e, bool solicit);
  Status post_owned(size_t index, bool solicit);
  Status io_state();  // OK when data may flow now; the error read/write report otherwise
  Status produced(size_t n);  // bytes added at tx_'s head: account and maybe flush
  void release_sent();        // application slices whose WRs have completed
  void stage_owned();         // copies unposted owned segments into the staging area
  void consumed(size_t n);    // n bytes read from the receive area: account, return space
  Status hold_blocked();      // a read at the hold bound
  // read_owned views: their release callbacks find the connection through this (null once
  // it is closed); releases on other threads are posted to the loop.
  struct RxShare {
    std::mutex mu;
    RdmaConnection* conn = nullptr;
    reactor::EventLoop* loop = nullptr;
  };
  static void release_view(const std::shared_ptr<RxShare>& share, ring::HoldTracker::Ticket t);
  void on_released(ring::HoldTracker::Ticket t);
  void detach_share();
  Status flush(bool batch_end);
  Status flush_data(bool batch_end);
  Status send_half_close();  // the due HalfClose, once every data WR before it is posted
  void return_space();
  Status arm_cq();
  void ensure_send_events();
  Status process_cq(int* handled = nullptr);
  // Polling (poll_us, busy_poll_us; connection_io.cc).
  bool polling() const { return spin_.enabled() && sending() && (read_handler_ || write_handler_); }
  int poll_completions();  // one poll of the CQ (and the SRQ): completions handled
  void run_after_poll();   // handlers and flushes after a poll found completions
  bool arm_for_sleep();    // arms the CQ and re-checks; true: the loop may block
  void stop_spinning();
  bool spin_poll(uint64_t now) override;
  uint64_t spin_deadline() const override;
  void spin_preempted(uint64_t now) override { spin_.on_preempted(now); }
  Status handle_completion(const verbs::Completion& wc);
  Status handle_ctrl(const CtrlMsg& m);
  Status send_feature(const CtrlMsg& m);
  void on_features();
  uint64_t offered_features() const;  // feature_mask without what this connection cannot do

  // READ rendezvous (connection_rendezvous.cc; docs/PROTOCOL.md "Rendezvous (bit 2)").
  void rv_start();                             // at ESTABLISHED: slots and sequencer, READ limits known
  Result<bool> offer(const memory::Slice& s);  // false: the caller sends the slice in-band
  Status on_read_offer(const CtrlMsg& m);
  Status on_read_done(const CtrlMsg& m);
  Status on_read_completion(const verbs::Completion& wc);
  Status rv_service();  // READs, ReadDones and window invalidations that waited for room
  bool rv_due() const;
  void rv_memory_back();  // the pool's waiter: blocks came back
  // Reader delivery: in-band bytes that may be read before the head offer (UINT64_MAX when
  // none waits), whether the head offer's bytes come next, and those bytes once READ.
  uint64_t rv_inband_room() const;
  bool rv_next() const {
    return rv_seq_ && !rv_seq_->empty() && rv_seq_->inband_limit() == rx_inband_consumed_;
  }
  std::span<const uint8_t> rv_head() const;
  void rv_consume(size_t n);
  Status rv_wait();  // an offer is next but not READ yet: would-block, or the error once the peer is gone
  void rv_park();    // at close: what the NIC may still touch goes with res_ (after the QP)
  // The receive area (connection_rx.cc).
  Status register_rx();
  Status take_rx_area(uint64_t bytes);
  Status grow_rx();
  Status bind_rx_window();
  // stats_.pinned_bytes: control slots, receive area and (once taken) the staging mirror.
  void count_pinned() { stats_.pinned_bytes = res_->ctrl.capacity() + res_->rx.capacity() + res_->tx.capacity(); }
  Status cm_connect_params(bool accept);
  void established();
  void open();
  void finish_connect(Status s);
  void fail(Status s);
  void deliver();
  void arm_keepalive();
  void check_keepalive();
  uint64_t keepalive_period_ms() const;
  void cancel_timers();
  void release_resources();

  LoopContext* ctx_;
  RdmaOptions options_;
  const bool client_side_;
  Phase phase_;
  Status error_;
  Handler read_handler_;
  Handler write_handler_;
  ConnectCallback on_connect_;
  ConnStats stats_;
  std::string local_, peer_;
  // The peer's CONNECT_REQUEST (server side), as rdma_cm reports it from the receiver's
  // side: the initiator depth we may accept with (= the requester's responder resources)
  // and the responder resources it asks of us (= the requester's initiator depth). Our
  // accept exceeds neither.
  uint8_t req_initiator_depth_ = 1;
  uint8_t req_responder_resources_ = 1;
  // Hello (protocol.h; option cm_features): the bits the request's Hello offered (server:
  // nullopt when it carried none), and the bits our own request offered (client: 0 when it
  // carried none).  hello_done_: the features were settled in the handshake, so neither
  // GetServerFeature nor SetClientFeature is sent, and a SetClientFeature is a protocol error.
  std::optional<uint64_t> req_hello_;
  uint64_t hello_offered_ = 0;
  bool hello_done_ = false;
  // RDMA READ resources as rdma_cm settled them (PROTOCOL.md "Rendezvous": reserved on
  // every connection so the rendezvous extension can be negotiated later): READs this side
  // may have outstanding as initiator, and the peer's READs it serves at once as target.
  uint8_t read_initiator_depth_ = 0;
  uint8_t read_responder_resources_ = 0;

  std::unique_ptr<QpResources> res_;
  Arena* arena_ = nullptr;  // the loop context's, for this connection's PD
  Scope scope_ = Scope::kMw;
  bool channel_watched_ = false;
  std::vector<uint32_t> free_ctrl_slots_;

  // RX (our buffer, written by the peer): positions restart at 0 with every registration.
  // The peer's byte counts (immediate data) advance `produced`, read() advances `tail`, and
  // space goes back to the peer either all at once by re-registering the whole buffer once
  // it is consumed (baseline), or in credit_bytes steps by Credit messages (ring mode).
  ring::ConsumerCursor rx_{ring::RingGeometry(1)};
  // The area's advertised length: rx_initial, then rx_buffer once the peer has filled it
  // (grow_due_ from then until the whole area is back and the larger one is advertised;
  // grow_refused_ once no larger area could be had: the connection stays at this size).
  uint32_t rx_len_ = 0;
  bool grow_due_ = false;
  bool grow_refused_ = false;
  ring::HoldTracker holds_;  // read_owned views not yet released, by rx_ position
  bool hold_blocked_ = false;  // a read stopped at the hold bound: a release makes us runnable
  std::shared_ptr<RxShare> rx_share_;  // created by the first read_owned
  bool eof_delivered_ = false;
  // Half-close (kFeatureHalfClose), one flag per direction like TCP's shutdown state: the
  // phase stays kOpen while either or both directions are shut (the QP carries control
  // messages both ways until close).
  bool peer_shut_ = false;       // the peer's HalfClose arrived: EOF after rx_stream_ bytes
  bool write_shut_ = false;      // shutdown_write() ran: writes fail
  bool half_close_due_ = false;  // ... and its HalfClose is not posted yet
  uint64_t rx_stream_ = 0;       // bytes the peer wrote to us in all (every registration)
  uint64_t tx_stream_ = 0;       // bytes we wrote in all: a HalfClose carries it
  bool awaiting_features_ = false;  // client: asked GetServerFeature, no answer yet
  // TX (the peer's RX buffer): write() copies to the staging buffer at the producer's
  // head -- it mirrors the peer's offset for offset -- and flush() posts [posted, head).
  // In the baseline no space comes back until the peer re-registers the buffer, so the
  // writer never wraps; in ring mode Credits return space and the writer wraps around.
  bool tx_known_ = false;  // the peer has advertised its buffer
  uint64_t tx_addr_ = 0;
  uint32_t tx_rkey_ = 0;
  ring::ProducerCursor tx_{ring::RingGeometry(1)};
  uint64_t tx_posted_ = 0;
  // write_owned: stretches of [tx_posted_, head) whose bytes are in an application slice
  // rather than in the staging area, in position order.
  struct OwnedSegment {
    uint64_t pos;
    memory::Slice slice;
  };
  std::deque<OwnedSegment> owned_;
  size_t reserved_ = 0;  // bytes the last reserve() handed out
  size_t peeked_ = 0;    // bytes the last peek() showed that are not consumed yet
  bool error_told_writer_ = false;
  bool unsolicited_tail_ = false;  // the last data WR went out without IBV_SEND_SOLICITED
  bool credit_blocked_ = false;    // a Credit is due but no control slot was free
  std::optional<CtrlMsg> deferred_feature_;  // a feature message that found no room yet
  bool armed_solicited_ = false;   // the CQ is armed for solicited completions only
  bool cq_armed_ = false;          // the CQ will raise an event (false while we poll it instead)
  bool poll_again_ = false;        // re-armed for all completions: poll before sleeping

  bool peer_keepalive_seen_ = false;
  uint64_t features_ = 0;
  uint64_t last_rx_ns_ = 0;  // the loop's now_ns() when a message last arrived (keepalive timeout)
  uint64_t ack_seen_completed_ = 0;  // acknowledgement watchdog: SignalTracker::completed() last seen
  uint64_t ack_progress_ns_ = 0;     // ... and when it last moved (or nothing was outstanding)
  uint64_t keepalive_check_ns_ = 0;  // when check_keepalive last ran (a late one means the loop stalled)
  reactor::TimerId keepalive_timer_ = 0;
  reactor::TimerId connect_timer_ = 0;
  // READ rendezvous state (connection_rendezvous.cc).  Writer: an offer holds its slice and
  // its window (an index into res_->offer_mws) until the ReadDone's invalidation completes.
  struct OfferHeld {
    memory::Slice slice;
    uint32_t window = 0;
  };
  std::unique_ptr<OfferSlots<OfferHeld>> rv_slots_;
  std::vector<uint32_t> rv_free_windows_;
  std::deque<OfferHeld> rv_inv_due_;  // ReadDone arrived, invalidation not posted yet
  // Reader: one destination block per offer, in the sequencer's order (head first).
  struct RvBlock {
    uint32_t tag = 0;
    uint32_t length = 0;
    memory::Slice block;  // from the arena pool, once the READ may be posted
    size_t done = 0;      // bytes already delivered
    bool posted = false;
    bool read = false;
  };
  std::unique_ptr<OfferSequencer> rv_seq_;
  std::deque<RvBlock> rv_blocks_;
  std::deque<std::pair<uint32_t, uint32_t>> rv_done_due_;  // ReadDone(tag, length) not posted yet
  uint64_t rx_inband_consumed_ = 0;  // in-band bytes read since the start (the sequencer's marks)
  bool peeked_rv_ = false;           // the last peek() showed the head offer's bytes
  struct RvWaiter;
  std::shared_ptr<RvWaiter> rv_waiter_;  // registered with the pool while a READ waits for a block
  std::shared_ptr<RvWaiter> staging_waiter_;  // ... while the first copying write waits for staging
  // Registers a waiter with the arena's pool that runs `back` on the loop once `bytes` may be
  // had; stop_waiting detaches it (cancel: also withdraws it from the pool).
  std::shared_ptr<RvWaiter> wait_for_memory(size_t bytes, void (RdmaConnection::*back)());
  void stop_waiting(std::shared_ptr<RvWaiter>& w, bool cancel);
  // The staging mirror of the peer's buffer is taken at the first write, not when the peer
  // advertises its buffer (connection_io.cc): ok once it is there, would-block while the
  // arena is at its cap (the write handler runs again when blocks come back).
  Status ensure_staging();
  void staging_memory_back();
  AdaptiveSpin spin_;                      // poll_us / busy_poll_us
  std::shared_ptr<poll::SpinGroup> spin_group_;  // the loop's, once we spun
  verbs::Completion wcs_[32];
};

}  // namespace conduit::transport::rdma
