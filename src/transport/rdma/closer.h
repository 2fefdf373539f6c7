// Closer: the graceful half of close().  A connection closed (or destroyed) while its
// writes are still on the wire would lose them if it disconnected at once: rdma_disconnect
// moves the QP to the error state and every posted WR is flushed.  So close() hands its
// verbs objects to a Closer, which posts what was still buffered, makes sure the last WR is
// signaled (RC completes in order, so that one completion covers everything), and
// disconnects once it arrives: then every accepted byte is in the peer's memory and its
// receive completion is in the peer's CQ ahead of the DISCONNECTED event.  A peer
// disconnect, an error completion or linger_ms end it early; the loop's teardown ends it
// at the latest.  Rendezvous offers still outstanding are waited for too: the peer READs
// them from the slices parked with the resources, and the Closer reads its control
// messages (re-posting the receives) until each offer's ReadDone has come; the rest of
// what arrives is dropped.  (With an SRQ the QP's receives are the pool's: its completions
// are re-posted there, not delivered -- so there offers are not waited for -- and the
// resources detach the QP from the pool once the QP is destroyed.)
// Loop thread only; owned by the LoopContext.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "loop_context.h"
#include "resources.h"

namespace conduit::transport::rdma {

class Closer final : public CqSink, public CmSink {
 public:
  struct Tx {  // the unposted tail [posted, head) of the peer's buffer
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t capacity = 1;
    uint64_t posted = 0;
    uint64_t head = 0;
  };

  // `offers`: (tag, length) of the rendezvous offers without a ReadDone yet; `recv_slots`:
  // the control receive slots of a QP without an SRQ (re-posted as they complete).
  Closer(LoopContext* ctx, std::unique_ptr<QpResources> res, Tx tx, std::string peer,
         std::vector<std::pair<uint32_t, uint32_t>> offers = {}, uint32_t recv_slots = 0)
      : ctx_(ctx),
        res_(std::move(res)),
        tx_(tx),
        peer_(std::move(peer)),
        offers_(std::move(offers)),
        recv_slots_(recv_slots) {}
  ~Closer();  // the resources go to the loop's reaper

  // Takes over the CQ's events (from the loop's CqHub) and the CM events (ends at once if that fails).
  void start(uint64_t linger_ms);
  // The loop is being destroyed: give up now, touching only the verbs objects.
  void abandon();

  void on_cq_event(int events) override;
  void on_cm_event(verbs::CmEvent& ev) override;

 private:
  bool poll();  // takes every completion there is; false if that finished the close
  Status on_receive(const verbs::Completion& wc);  // a ReadDone ends an offer's wait
  void pump();
  void finish(const std::string& why);

  LoopContext* ctx_;
  std::unique_ptr<QpResources> res_;
  Tx tx_;
  std::string peer_;
  std::vector<std::pair<uint32_t, uint32_t>> offers_;  // (tag, length) still to be read
  uint32_t recv_slots_;
  bool watched_ = false;
  bool done_ = false;
  reactor::TimerId timer_ = 0;
  verbs::Completion wcs_[32];
};

}  // namespace conduit::transport::rdma
