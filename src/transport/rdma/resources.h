// One rdma connection's verbs objects with a single owner.  Destruction runs the windows,
// the id and its QP first (destroy_qp), then the memory the QP used (members are declared
// in creation order: arena slices go back to the arena), then the CQ and its channel (the
// loop's, shared: cq_hub.h), then the SRQ pool and the PD.  A connection holds them while
// it runs, hands them to a Closer with one move when it lingers, and releases them through
// the loop's QpReaper (qp_reaper.h), which destroys the QP off the loop thread and hands
// them back for the rest; when the loop is going, with one reset.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "conduit/verbs/verbs.h"
#include "conduit/memory/buffer.h"
#include "cq_hub.h"
#include "srq_pool.h"

namespace conduit::transport::rdma {

struct QpResources {
  std::shared_ptr<verbs::ProtectionDomain> pd;
  std::shared_ptr<SrqPool> srq;  // srq=1: receives come from here (null otherwise)
  std::shared_ptr<CqHub> hub;  // the loop's channel for this device, which cq's events reach
  std::shared_ptr<verbs::CompletionChannel> channel;
  std::shared_ptr<verbs::CompletionQueue> cq;
  memory::Slice ctrl;  // arena: receive slots (none with srq), then send slots
  // scope=private: the receive area's own registration (rx keeps it too, for read_owned views)
  std::shared_ptr<verbs::RegisteredBuffer> rx_private;
  // Our receive area, written by the peer (arena, or a view of rx_private).  read_owned
  // views hold a reference: the memory outlives the connection while they exist.
  memory::Slice rx;
  memory::Slice tx;    // arena: staging, mirrors the peer's receive buffer
  // Application slices posted from (write_owned), with the tracker sequence of their WR:
  // released once a completion covers it -- or with these resources, after the QP is gone.
  std::deque<std::pair<uint64_t, memory::Slice>> sent_from;
  std::unique_ptr<verbs::MemoryWindow> mw;  // scope=mw: the peer's only key to rx (freed before the QP)
  // Rendezvous: windows bound over offered slices (REMOTE_READ, this QP), re-bound per offer.
  std::vector<std::unique_ptr<verbs::MemoryWindow>> offer_mws;
  uint32_t rx_rkey = 0;                     // what RegisterXferMemory advertises
  std::unique_ptr<verbs::CmId> id;
  std::unique_ptr<verbs::SignalTracker> tracker;
  uint32_t qpn = 0;           // the QP's number (the SRQ pool's key)
  bool srq_attached = false;  // the pool routes the QP's completions (to a connection or nowhere)
  bool srq_orphaned = false;  // ... nowhere: they are re-posted (srq_token: detach()'s)
  uint64_t srq_token = 0;
  bool disconnected = false;  // rdma_disconnect was called

  QpResources() = default;
  QpResources(const QpResources&) = delete;
  QpResources& operator=(const QpResources&) = delete;
  ~QpResources() {
    prepare_to_reap();
    destroy_qp();
    // After the QP: no completion of it can reach the pool's CQ any more, and the pool
    // takes back the slots of those still queued.
    if (srq_attached) srq->detach(qpn, srq_token);
  }

  // The QP is closing: the SRQ pool re-posts its receive completions instead of delivering
  // them.  Loop thread.
  void orphan() {
    if (!srq_attached || srq_orphaned) return;
    srq_token = srq->orphan(qpn);
    srq_orphaned = true;
  }
  // Loop thread, before the resources leave it for the QpReaper: no CM event of the id
  // reaches an owner, and no receive completion a connection.
  void prepare_to_reap() {
    if (id) id->set_user_data(nullptr);
    orphan();
  }
  // Any thread (the QpReaper's): the windows, then the QP and its id.  Can block in the
  // kernel for seconds (rxe waits for every reference to the QP).  Once only.
  void destroy_qp() {
    // The window before its QP: a window bound to a QP holds a reference on it, and rxe's
    // destroy_qp waits for every reference -- destroying the QP first hangs in the kernel.
    mw.reset();
    offer_mws.clear();
    id.reset();
  }

  verbs::QueuePair* qp() const { return id ? id->qp() : nullptr; }
  // Sends a disconnect once (the peer sees DISCONNECTED; our QP goes to error).
  void disconnect() {
    if (!id || disconnected) return;
    disconnected = true;
    (void)id->disconnect();
  }
};

}  // namespace conduit::transport::rdma
