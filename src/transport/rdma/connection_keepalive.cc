// RdmaConnection's keepalives: a Keepalive every keepalive_ms, the acknowledgement
// watchdog (outstanding work requests must keep completing), and the timeout of a peer
// that goes silent -- counting only time this loop ran.
#include <algorithm>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "connection.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

using verbs::SignalTracker;

void RdmaConnection::arm_keepalive() {
  if (options_.keepalive_ms == 0 && options_.keepalive_timeout_ms == 0) return;
  ack_seen_completed_ = res_->tracker->completed();
  ack_progress_ns_ = monotonic_ns();
  keepalive_check_ns_ = ack_progress_ns_;
  keepalive_timer_ = ctx_->loop().run_every(keepalive_period_ms() * kMs, [this] { check_keepalive(); });
}

uint64_t RdmaConnection::keepalive_period_ms() const {
  return options_.keepalive_ms != 0 ? options_.keepalive_ms : options_.keepalive_timeout_ms / 2 + 1;
}

void RdmaConnection::check_keepalive() {
  if (!sending()) return;
  // Take what completed first: Soft-RoCE raises no event for error completions on a CQ
  // armed for solicited ones (real HCAs do), so a dead peer is noticed all the same, and
  // send completions waiting there free the control slot the keepalive needs.
  if (Status s = process_cq(); !s.ok()) return fail(s);
  if (!sending()) return;
  const uint64_t now = monotonic_ns();
  // Time this loop did not run is not the peer's silence: a program that stalls its loop
  // (a long handler, a debugger, SIGSTOP, a thread that drives the loop and did other work
  // for seconds) heard nothing because it did not listen -- and a peer on the same loop sent
  // nothing either.  A check that comes more than a period late moves both clocks on by the
  // delay (never past now), so only the time the loop ran counts against the peer.
  const uint64_t period_ns = keepalive_period_ms() * kMs;
  if (now - keepalive_check_ns_ > 2 * period_ns) {
    const uint64_t stalled = now - keepalive_check_ns_ - period_ns;
    CONDUIT_LOG(kDebug) << "rdma: " << peer_ << ": the loop did not run for " << stalled / kMs
                        << " ms; not counted as the peer's silence";
    last_rx_ns_ = std::min(now, last_rx_ns_ + stalled);
    ack_progress_ns_ = std::min(now, ack_progress_ns_ + stalled);
  }
  keepalive_check_ns_ = now;
  if (options_.keepalive_ms != 0) {
    // Acknowledgement watchdog: while work requests are outstanding, completions must keep
    // coming (the peer's NIC acknowledges them, whatever its application does).  A dead or
    // partitioned peer is normally found by the QP's retry budget, but that budget is the
    // *client's* choice (ib_cm copies its retry_count into both QPs) and Soft-RoCE treats
    // retry_cnt 7 -- what Valkey's client asks for -- as "retry forever"; RNR retry is
    // unlimited by design (the SRQ extension relies on it).  This bounds detection by
    // keepalive_timeout_ms whatever the QP does.  Only with keepalives on: a signalled
    // Keepalive each period guarantees a completion is due whenever anything is outstanding.
    const SignalTracker& t = *res_->tracker;
    if (t.outstanding() == 0 || t.completed() != ack_seen_completed_) {
      ack_seen_completed_ = t.completed();
      ack_progress_ns_ = now;
    } else if (options_.keepalive_timeout_ms != 0 && now - ack_progress_ns_ > options_.keepalive_timeout_ms * kMs) {
      return fail(Status(Code::kIoError, "rdma: " + peer_ + " acknowledged nothing for " +
                                             std::to_string((now - ack_progress_ns_) / kMs) + " ms with " +
                                             std::to_string(t.outstanding()) +
                                             " work requests outstanding (dead peer or partition; keepalive_timeout_ms=" +
                                             std::to_string(options_.keepalive_timeout_ms) + ")"));
    }
    // No free control slot or send-queue room means our sends are on the wire anyway: the
    // peer hears from us without this keepalive.
    Status s = send_ctrl(CtrlMsg::keepalive());
    if (!s.ok() && s.is_error() && s.code() != Code::kResourceExhausted) return fail(s);
  }
  // Only peers known to send keepalives can be timed out: Valkey's client library never
  // sends them, and an idle client is not a dead one.
  if (options_.keepalive_timeout_ms != 0 && (peer_keepalive_seen_ || features_ != 0) &&
      now - last_rx_ns_ > options_.keepalive_timeout_ms * kMs)
    fail(Status(Code::kProtocolError, "rdma: no keepalive from " + peer_ + " for " +
                                          std::to_string(options_.keepalive_timeout_ms) + " ms"));
}

}  // namespace conduit::transport::rdma
