// QpReaper: destroys the QPs of closed rdma connections on a thread of its own, so that the
// event loop never waits for the kernel.  Soft-RoCE's destroy_qp waits until every
// reference to the QP is gone -- packets still queued to a peer that vanished hold some --
// and that was seen to take over 10 s in state D; a loop doing it itself served nobody
// meanwhile (docs/FAILURES.md).
//
// The loop hands over a connection's (or Closer's) QpResources, prepared: no owner for its
// CM events, its QP orphaned in the SRQ pool.  The thread destroys the memory windows, the
// QP and its id (QpResources::destroy_qp), and hands the resources back; the loop's hook
// then releases the rest on the loop thread (SRQ detach, arena slices, CQ, PD).  So the
// memory a QP used is still released only after the QP is gone.
//
// Ownership: one per LoopContext.  give(), take_done() and busy() are loop-thread calls; the
// thread starts on the first give() and is joined by stop() or the destructor, which wait
// until every QP given is destroyed (they block: the loop's teardown only).  A QP that took
// over 1 s to destroy is logged (info).  Cost: a mutex and a wakeup per connection closed,
// one `wake` (an eventfd write) per QP handed back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "resources.h"

namespace conduit::transport::rdma {

class QpReaper {
 public:
  // `wake` (called on the reaper's thread) makes the loop run its before-sleep hooks soon.
  explicit QpReaper(std::function<void()> wake) : wake_(std::move(wake)) {}
  ~QpReaper() { stop(); }
  QpReaper(const QpReaper&) = delete;
  QpReaper& operator=(const QpReaper&) = delete;

  // Takes `res` (prepared: QpResources::prepare_to_reap) and destroys its QP soon.
  void give(std::unique_ptr<QpResources> res);
  // The resources whose QP is gone since the last call, for the loop to release.
  std::vector<std::unique_ptr<QpResources>> take_done();
  // Resources given and not yet taken back.
  bool busy() const { return outstanding_ != 0; }
  uint64_t given() const { return given_; }
  uint64_t outstanding() const { return outstanding_; }
  uint64_t slowest_ns() const;
  // Destroys every QP given (blocking) and joins the thread; take_done() returns them all.
  void stop();

  // Fault injection for tests: each QP destroy first sleeps this long (0 = off).
  static void set_delay_for_tests(uint32_t ms);

 private:
  void run();

  std::function<void()> wake_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<QpResources>> todo_;  // guarded by mu_
  std::vector<std::unique_ptr<QpResources>> done_;  // guarded by mu_
  uint64_t slowest_ns_ = 0;                         // guarded by mu_
  bool stopping_ = false;                           // guarded by mu_
  uint64_t given_ = 0;        // loop thread
  uint64_t outstanding_ = 0;  // loop thread
};

}  // namespace conduit::transport::rdma
