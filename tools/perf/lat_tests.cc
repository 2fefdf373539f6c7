// write_lat, send_lat, read_lat, atomic_lat, timed with read_tsc() at every post as
// perftest does: the latency samples are the gaps between consecutive posts.
//
// write_lat: ping-pong of RDMA WRITEs; each side spins on the last byte of its receive half
//            until the peer's write changes it (perftest's method), then writes back.
// send_lat:  ping-pong of SENDs; each side busy-polls its receive CQ, and re-posts the
//            consumed receive after its answer went out (see repost_after_send).
// read_lat, atomic_lat: the client issues one READ / FETCH_AND_ADD at a time and spins on
//            its completion; the server is passive.
#include <cstring>
#include <optional>
#include <vector>

#include "conduit/base/clock.h"
#include "tests.h"

namespace conduit::perf {
namespace {

// Spins until the one outstanding signalled send completes.
Status wait_send(Session& s, Watchdog& wd, const char* what) {
  verbs::Completion wc[1];
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int n, s.send_cq().poll(wc));
    if (n == 1) return wc[0].ok() ? Status() : completion_error(s, wc[0], what);
    if (wd.tick()) return wd.status();
  }
}

// Spins until one receive completes (the caller re-posts it).  *wc tells a control message
// (the peer's DONE) from ping-pong data.
Status wait_recv(Session& s, Watchdog& wd, const char* what, verbs::Completion* wc) {
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int n, s.recv_cq().poll({wc, 1}));
    if (n == 1) return wc->ok() ? Status() : completion_error(s, *wc, what);
    if (wd.tick()) return wd.status();
  }
}

// Where send_lat re-posts the receive a ping-pong message consumed.  With another receive
// still posted (rx depth >= 2), after its own SEND went out: the post then overlaps the
// peer's turn instead of lying between receiving and answering, which is the round trip's
// critical path.  With rx depth 1 the receive must be back before the SEND, or the peer's
// answer could find none (an RNR NAK and a 0.64 ms stall).
bool repost_after_send(const Session& s) { return s.recv_count() >= 2; }

Status unexpected_ctrl(const char* what) {
  return Status(Code::kProtocolError, std::string(what) + ": the peer sent a control message in the middle of a row");
}

// The loop of a latency client: stamps each iteration, and in duration mode decides when to
// stop.  Usage: for (LatClock c(o); c.next(i); ++i) { ... }
class LatClock {
 public:
  explicit LatClock(const Options& o) : opts_(o) {
    if (o.duration_mode())
      sampler_.emplace(o);
    else
      tposted_.resize(o.iters);
  }
  bool next(uint64_t i) {
    const uint64_t now = read_tsc();
    if (sampler_) return sampler_->update(now, i);
    if (i == opts_.iters) return false;
    tposted_[i] = now;
    return true;
  }
  LatResult result(uint32_t size, int rtt_factor) {
    if (sampler_) return lat_duration_result(size, sampler_->iterations(), sampler_->cycles(), rtt_factor);
    return lat_result(size, tposted_, rtt_factor);
  }

 private:
  const Options& opts_;
  std::optional<DurationSampler> sampler_;
  std::vector<uint64_t> tposted_;
};

}  // namespace

void write_lat_prepare(Session& s, uint32_t size) { std::memset(s.buf() + s.half(), 0, size); }

Status write_lat_client(Session& s, const RowSpec& row, RowResult* out) {
  const Options& o = s.opts();
  const uint32_t size = row.size;
  uint8_t* post_byte = s.buf() + size - 1;
  volatile uint8_t* poll_byte = s.buf() + s.half() + size - 1;
  ibv_sge sge{s.buf_addr(), size, s.lkey()};
  auto wr = verbs::SendWr::write(&sge, 1, s.remote().addr, s.remote().rkey).signaled();
  if (size <= o.inline_size) wr.inlined();
  Watchdog wd(s, row.deadline_ns, "write_lat");
  LatClock clock(o);
  for (uint64_t i = 0; clock.next(i); ++i) {
    const uint8_t v = static_cast<uint8_t>(i + 1);
    *post_byte = v;
    CONDUIT_RETURN_IF_ERROR(s.qp().post_send(wr));
    CONDUIT_RETURN_IF_ERROR(wait_send(s, wd, "write_lat"));
    while (*poll_byte != v)
      if (wd.tick()) return wd.status();
  }
  out->is_bw = false;
  out->lat = clock.result(size, 2);
  return {};
}

Status write_lat_server(Session& s, const RowSpec& row, RowResult* /*out*/, CtrlMsg* done) {
  const Options& o = s.opts();
  const uint32_t size = row.size;
  uint8_t* post_byte = s.buf() + size - 1;
  volatile uint8_t* poll_byte = s.buf() + s.half() + size - 1;
  ibv_sge sge{s.buf_addr(), size, s.lkey()};
  auto wr = verbs::SendWr::write(&sge, 1, s.remote().addr, s.remote().rkey).signaled();
  if (size <= o.inline_size) wr.inlined();
  Watchdog wd(s, row.deadline_ns, "write_lat");
  verbs::Completion wc[1];
  for (uint64_t i = 0;; ++i) {
    const uint8_t v = static_cast<uint8_t>(i + 1);
    uint32_t spins = 0;
    while (*poll_byte != v) {
      // The row ends with the client's DONE; look for it now and then while spinning.
      if ((++spins & 4095u) == 0) {
        CONDUIT_ASSIGN_OR_RETURN(int n, s.recv_cq().poll(wc));
        if (n == 1) {
          if (!wc[0].ok()) return completion_error(s, wc[0], "write_lat");
          CONDUIT_RETURN_IF_ERROR(s.repost_recv());
          if (!Session::is_ctrl(wc[0])) return Status(Code::kProtocolError, "write_lat: unexpected SEND");
          CONDUIT_ASSIGN_OR_RETURN(*done, s.read_ctrl(wc[0]));
          return {};
        }
      }
      if (wd.tick()) return wd.status();
    }
    *post_byte = v;
    CONDUIT_RETURN_IF_ERROR(s.qp().post_send(wr));
    CONDUIT_RETURN_IF_ERROR(wait_send(s, wd, "write_lat"));
  }
}

Status send_lat_client(Session& s, const RowSpec& row, RowResult* out) {
  const Options& o = s.opts();
  const uint32_t size = row.size;
  ibv_sge sge{s.buf_addr(), size, s.lkey()};
  auto wr = verbs::SendWr::send(&sge, 1);
  if (size <= o.inline_size) wr.inlined();
  verbs::SignalTracker tracker(o.sq_depth(), o.cq_mod);
  Watchdog wd(s, row.deadline_ns, "send_lat");
  const bool late = repost_after_send(s);
  bool owed = false;  // the previous answer's receive, not re-posted yet
  verbs::Completion wc;
  LatClock clock(o);
  for (uint64_t i = 0; clock.next(i); ++i) {
    const bool signaled = tracker.on_post(!o.duration_mode() && i + 1 == o.iters);
    wr.signaled(signaled);
    CONDUIT_RETURN_IF_ERROR(s.qp().post_send(wr));
    if (owed) {
      CONDUIT_RETURN_IF_ERROR(s.repost_recv());
      owed = false;
    }
    if (signaled) {
      CONDUIT_RETURN_IF_ERROR(wait_send(s, wd, "send_lat"));
      tracker.on_signaled_completion();
    }
    CONDUIT_RETURN_IF_ERROR(wait_recv(s, wd, "send_lat", &wc));
    if (Session::is_ctrl(wc)) return unexpected_ctrl("send_lat");
    if (late)
      owed = true;
    else
      CONDUIT_RETURN_IF_ERROR(s.repost_recv());
  }
  if (owed) CONDUIT_RETURN_IF_ERROR(s.repost_recv());  // every receive is back before DONE goes out
  out->is_bw = false;
  out->lat = clock.result(size, 2);
  return {};
}

Status send_lat_server(Session& s, const RowSpec& row, RowResult* /*out*/, CtrlMsg* done) {
  const Options& o = s.opts();
  ibv_sge sge{s.buf_addr(), row.size, s.lkey()};
  auto wr = verbs::SendWr::send(&sge, 1);
  if (row.size <= o.inline_size) wr.inlined();
  verbs::SignalTracker tracker(o.sq_depth(), o.cq_mod);
  Watchdog wd(s, row.deadline_ns, "send_lat");
  const bool late = repost_after_send(s);
  verbs::Completion wc;
  for (;;) {
    CONDUIT_RETURN_IF_ERROR(wait_recv(s, wd, "send_lat", &wc));
    if (Session::is_ctrl(wc)) {
      CONDUIT_RETURN_IF_ERROR(s.repost_recv());
      CONDUIT_ASSIGN_OR_RETURN(*done, s.read_ctrl(wc));
      return {};
    }
    if (!late) CONDUIT_RETURN_IF_ERROR(s.repost_recv());
    const bool signaled = tracker.on_post();
    wr.signaled(signaled);
    CONDUIT_RETURN_IF_ERROR(s.qp().post_send(wr));
    if (late) CONDUIT_RETURN_IF_ERROR(s.repost_recv());
    if (signaled) {
      CONDUIT_RETURN_IF_ERROR(wait_send(s, wd, "send_lat"));
      tracker.on_signaled_completion();
    }
  }
}

Status rdma_lat_client(Session& s, const RowSpec& row, RowResult* out) {
  const Options& o = s.opts();
  const bool atomic = o.test->verb == Verb::kAtomic;
  const char* what = o.test->name.data();
  ibv_sge sge{s.buf_addr(), atomic ? kAtomicSize : row.size, s.lkey()};
  auto wr = atomic ? verbs::SendWr::fetch_add(&sge, s.remote().addr, s.remote().rkey, 1)
                   : verbs::SendWr::read(&sge, 1, s.remote().addr, s.remote().rkey);
  wr.signaled();
  Watchdog wd(s, row.deadline_ns, what);
  LatClock clock(o);
  for (uint64_t i = 0; clock.next(i); ++i) {
    CONDUIT_RETURN_IF_ERROR(s.qp().post_send(wr));
    CONDUIT_RETURN_IF_ERROR(wait_send(s, wd, what));
  }
  out->is_bw = false;
  out->lat = clock.result(row.size, 1);
  return {};
}

}  // namespace conduit::perf
