// The shared receive queue behind srq=1 (one per event loop, PD and depth).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/verbs/verbs.h"
#include "protocol.h"
#include "rdma.h"

namespace conduit::transport::rdma {

// What the pool delivers a QP's receive completions to (the connection owning the QP).
class SrqClient {
 public:
  virtual void on_srq_completion(const verbs::Completion& wc) = 0;

 protected:
  ~SrqClient() = default;
};

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
// - completions of a QP handed to a Closer, or being destroyed, or already destroyed, are
//   not delivered: their slots are re-posted.  QP numbers are reused, so a destroyed QP's
//   completions are taken out of the CQ before its number is forgotten (detach()) or given
//   to the new QP that reuses it (attach(): QPs are destroyed off the loop thread, so a new
//   QP may get the number before the old one's detach() has run).
// The one window left: a WQE a QP took mid multi-packet SEND (only a hostile peer sends one
// to a 32-byte receive) and never flushed because the QP was destroyed first is lost.
//
// Exhaustion only stalls senders (RNR retry 7 = forever) until we re-post.  The SRQ limit is
// armed at srq_depth/8; it is checked (ibv_query_srq: 0 once fired) every srq_depth/4
// completions and logged as a warning -- no async-event fd is read.
class SrqPool final : public reactor::FdHandler {
 public:
  static Result<std::shared_ptr<SrqPool>> create(std::shared_ptr<verbs::ProtectionDomain> pd, uint32_t depth,
                                                 std::function<void()> wake);
  SrqPool(const SrqPool&) = delete;
  SrqPool& operator=(const SrqPool&) = delete;

  int fd() const { return channel_->fd(); }
  const std::shared_ptr<verbs::SharedReceiveQueue>& srq() const { return srq_; }
  const std::shared_ptr<verbs::CompletionQueue>& cq() const { return cq_; }
  const uint8_t* slot_data(uint32_t slot) const { return buf_->data() + static_cast<size_t>(slot) * kCtrlSize; }

  // Completions of `qpn` go to `c` from now on.  A QP number still held by an orphan is
  // the number of a destroyed QP reused: its completions still queued are reclaimed first.
  void attach(uint32_t qpn, SrqClient* c);
  // Its QP is closing (a Closer's, or being destroyed off the loop: qp_reaper.h):
  // completions are re-posted, not delivered.  Returns the token detach() takes.
  uint64_t orphan(uint32_t qpn);
  // After the QP is destroyed: reclaims its completions still queued and forgets it --
  // unless a new QP took the number since (attach reclaimed them then; `token` is stale).
  void detach(uint32_t qpn, uint64_t token);
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
  std::shared_ptr<verbs::ProtectionDomain> pd_;
  std::shared_ptr<verbs::CompletionChannel> channel_;
  std::shared_ptr<verbs::CompletionQueue> cq_;
  std::shared_ptr<verbs::SharedReceiveQueue> srq_;
  std::unique_ptr<verbs::RegisteredBuffer> buf_;
  std::vector<uint8_t> posted_;  // per slot: 1 = in the SRQ
  uint32_t posted_count_ = 0;
  struct Qp {
    SrqClient* client = nullptr;  // nullptr = orphaned
    uint64_t token = 0;           // the orphan's, for detach()
  };
  void reclaim(uint32_t qpn);  // polls, and re-posts the slots of qpn's queued completions
  std::map<uint32_t, Qp> qps_;             // qp_num -> its connection
  uint64_t next_token_ = 0;
  std::deque<verbs::Completion> backlog_;  // polled, not yet delivered (slots held)
  uint32_t low_water_ = 0;                 // armed limit; 0 = the device can't arm one
  uint32_t since_check_ = 0;
  uint64_t completions_ = 0;
  uint64_t low_water_events_ = 0;
  uint64_t last_warn_ns_ = 0;
  verbs::Completion wcs_[32];
};

}  // namespace conduit::transport::rdma
