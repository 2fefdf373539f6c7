// write_bw, read_bw, send_bw: the client keeps tx-depth operations of one size in flight,
// signalling one in cq_mod (SignalTracker), and posts the room the completions free in
// chains of Options::post_batch() WRs (one doorbell each).  The server of write_bw/read_bw is passive; the send_bw server
// keeps its receives posted and counts them.
#include <algorithm>
#include <optional>
#include <vector>

#include "conduit/base/clock.h"
#include "tests.h"

namespace conduit::perf {
namespace {

constexpr int kPollBatch = 16;

verbs::SendWr make_wr(const Session& s, Verb verb, ibv_sge* sge) {
  switch (verb) {
    case Verb::kWrite: return verbs::SendWr::write(sge, 1, s.remote().addr, s.remote().rkey);
    case Verb::kRead: return verbs::SendWr::read(sge, 1, s.remote().addr, s.remote().rkey);
    case Verb::kSend:
    case Verb::kAtomic: break;
  }
  return verbs::SendWr::send(sge, 1);
}

}  // namespace

DurationSampler::DurationSampler(const Options& o) {
  const double cycles_per_s = Tsc::cycles_per_us() * 1e6;
  const uint64_t now = read_tsc();
  sample_start_ = now + static_cast<uint64_t>(o.margin_s() * cycles_per_s);
  sample_end_ = now + static_cast<uint64_t>((o.duration_s - o.margin_s()) * cycles_per_s);
  end_ = now + static_cast<uint64_t>(o.duration_s * cycles_per_s);
}

Status bw_client(Session& s, const RowSpec& row, RowResult* out) {
  const Options& o = s.opts();
  const char* what = o.test->name.data();
  const uint32_t size = row.size;
  const uint32_t depth = o.sq_depth();
  const bool duration = o.duration_mode();
  const uint64_t iters = duration ? UINT64_MAX : o.iters;
  const bool peak = o.measure_peak();
  const uint32_t per_post = o.post_batch(size);

  // Every WR reads or writes the same bytes (one buffer per side, as perftest).
  ibv_sge sge{s.buf_addr(), size, s.lkey()};
  std::vector<verbs::SendWr> wrs(depth, make_wr(s, o.test->verb, &sge));
  if (o.test->verb != Verb::kRead && size <= o.inline_size)
    for (verbs::SendWr& wr : wrs) wr.inlined();
  verbs::SignalTracker tracker(depth, o.cq_mod);
  verbs::SendChain chain;
  std::vector<Stamp> posts, completions;  // for the peak: sized up front, never grown
  if (peak) {
    posts.reserve(iters);
    completions.reserve(iters);
  }
  std::optional<DurationSampler> sampler;
  if (duration) sampler.emplace(o);

  uint64_t posted = 0;
  uint64_t completed = 0;
  uint64_t t_first = 0;
  uint64_t t_last = 0;
  bool posting = true;
  verbs::Completion wc[kPollBatch];
  Watchdog wd(s, row.deadline_ns, what);
  for (;;) {
    if (duration) {
      if (!sampler->update(read_tsc(), completed)) posting = false;
      // Stop once no signalled WR is left; the unsignalled tail completes before DONE.
      if (!posting && tracker.signals_in_flight() == 0) break;
    } else if (completed >= iters) {
      break;
    }

    uint64_t room = posting ? std::min<uint64_t>(tracker.available(), iters - posted) : 0;
    room = std::min<uint64_t>(room, per_post);
    if (room > 0) {
      chain.clear();
      for (uint64_t k = 0; k < room; ++k) {
        const uint64_t seq = posted + k;
        verbs::SendWr& wr = wrs[k];
        wr.id(seq).signaled(tracker.on_post(!duration && seq + 1 == iters));
        chain.append(wr);
      }
      const uint64_t now = read_tsc();
      if (posted == 0) t_first = now;
      if (peak) posts.push_back({posted, now});
      if (Status st = s.qp().post_send(chain); !st.ok()) return st.annotate(what);
      posted += room;
    }

    CONDUIT_ASSIGN_OR_RETURN(int n, s.send_cq().poll(wc));
    if (n == 0) {
      if (wd.tick()) return wd.status();
      continue;
    }
    const uint64_t now = read_tsc();
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok()) return completion_error(s, wc[i], what);
      tracker.on_signaled_completion();  // RC: this WR and all before it are done
      completed = wc[i].wr_id + 1;
      if (peak) completions.push_back({wc[i].wr_id, now});
    }
    t_last = now;
  }

  out->is_bw = true;
  if (duration)
    out->bw = bw_result(size, sampler->iterations(), sampler->cycles(), 0);
  else
    out->bw = bw_result(size, iters, t_last - t_first, peak ? peak_bw_mbs(size, posts, completions) : 0);
  return {};
}

Status bw_server(Session& s, const RowSpec& row, RowResult* out, CtrlMsg* done) {
  out->is_bw = true;
  if (s.opts().test->verb != Verb::kSend) {
    // The NIC does the work; print what the client measured, as perftest's server does.
    CONDUIT_RETURN_IF_ERROR(passive_server(s, row, out, done));
    out->bw = BwResult{row.size, done->iterations, done->bw_peak, done->bw_avg, done->msg_rate, done->elapsed_ns};
    return {};
  }

  // send_bw: count the SENDs until the client's DONE, which arrives after all of them.
  verbs::Completion wc[kPollBatch];
  Watchdog wd(s, row.deadline_ns, "send_bw");
  uint64_t count = 0;
  uint64_t t_first = 0;
  uint64_t t_last = 0;
  bool finished = false;
  while (!finished) {
    CONDUIT_ASSIGN_OR_RETURN(int n, s.recv_cq().poll(wc));
    if (n == 0) {
      if (wd.tick()) return wd.status();
      continue;
    }
    const uint64_t now = read_tsc();
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok()) return completion_error(s, wc[i], "send_bw receive");
      if (Session::is_ctrl(wc[i])) {
        CONDUIT_ASSIGN_OR_RETURN(*done, s.read_ctrl(wc[i]));
        finished = true;
        continue;
      }
      if (count++ == 0) t_first = now;
      t_last = now;
    }
    CONDUIT_RETURN_IF_ERROR(s.repost_recvs(n));
  }
  // The clock starts at the first arrival, so count - 1 messages fill the measured time.
  out->bw = bw_result(row.size, count > 0 ? count - 1 : 0, t_last - t_first, 0);
  out->bw.iterations = count;
  return {};
}

Status passive_server(Session& s, const RowSpec& row, RowResult* /*out*/, CtrlMsg* done) {
  CONDUIT_ASSIGN_OR_RETURN(*done, s.wait_ctrl(row.deadline_ns, "waiting for the client to finish the row"));
  return {};
}

}  // namespace conduit::perf
