// Closer: the graceful half of close().  A connection closed (or destroyed) while its
// writes are still on the wire would lose them if it disconnected at once: rdma_disconnect
// moves the QP to the error state and every posted WR is flushed.  So close() hands its
// verbs objects to a Closer, which posts what was still buffered, makes sure the last WR is
// signaled (RC completes in order, so that one completion covers everything), and
// disconnects once it arrives: then every accepted byte is in the peer's memory and its
// receive completion is in the peer's CQ ahead of the DISCONNECTED event.  A peer
// disconnect, an error completion or linger_ms end it early; the loop's teardown ends it
// at the latest.  Receives are not re-posted: nothing more is read.  (With an SRQ the
// QP's receives are the pool's: its completions are re-posted there, not delivered, and
// the resources detach the QP from the pool once the QP is destroyed.)
// Loop thread only; owned by the LoopContext.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "conduit/reactor/event_loop.h"
#include "loop_context.h"
#include "resources.h"

namespace conduit::transport::rdma {

class Closer final : public reactor::FdHandler, public CmSink {
 public:
  struct Tx {  // the unposted tail [posted, head) of the peer's buffer
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t capacity = 1;
    uint64_t posted = 0;
    uint64_t head = 0;
  };

  Closer(LoopContext* ctx, std::unique_ptr<QpResources> res, Tx tx, std::string peer)
      : ctx_(ctx), res_(std::move(res)), tx_(tx), peer_(std::move(peer)) {}
  ~Closer() override = default;

  // Takes over the completion channel and the CM events (ends at once if that fails).
  void start(uint64_t linger_ms);
  // The loop is being destroyed: give up now, touching only the verbs objects.
  void abandon();

  void on_events(uint32_t) override;
  void on_cm_event(verbs::CmEvent& ev) override;

 private:
  bool poll();  // takes every completion there is; false if that finished the close
  void pump();
  void finish(const std::string& why);

  LoopContext* ctx_;
  std::unique_ptr<QpResources> res_;
  Tx tx_;
  std::string peer_;
  bool watched_ = false;
  bool done_ = false;
  reactor::TimerId timer_ = 0;
  verbs::Completion wcs_[32];
};

}  // namespace conduit::transport::rdma
