// The per-test loops.  Each runs one row (one message size) on an established Session;
// the row protocol around them (READY/DONE) is in runner.cc.
//
//   client(...)  runs the measured loop and fills the result.
//   server(...)  runs the server's side and returns once the client's DONE arrived, which
//                it hands back (its result is filled only where the server measures).
//   prepare(...) resets buffers before the row starts (server: before READY goes out).
#pragma once

#include <cstdint>
#include <optional>

#include "conduit/base/status.h"
#include "report.h"
#include "session.h"
#include "wire.h"

namespace conduit::perf {

struct RowSpec {
  uint32_t index = 0;
  uint32_t size = 0;
  uint64_t deadline_ns = 0;  // monotonic_ns(); the row fails after it
};

struct TestOps {
  Status (*client)(Session&, const RowSpec&, RowResult*);
  Status (*server)(Session&, const RowSpec&, RowResult*, CtrlMsg* done);
  void (*prepare)(Session&, uint32_t size);  // may be null
};

// write_bw, read_bw, send_bw (bw_tests.cc).
Status bw_client(Session& s, const RowSpec& row, RowResult* out);
Status bw_server(Session& s, const RowSpec& row, RowResult* out, CtrlMsg* done);

// write_lat, send_lat, read_lat, atomic_lat (lat_tests.cc).
Status write_lat_client(Session& s, const RowSpec& row, RowResult* out);
Status write_lat_server(Session& s, const RowSpec& row, RowResult* out, CtrlMsg* done);
void write_lat_prepare(Session& s, uint32_t size);
Status send_lat_client(Session& s, const RowSpec& row, RowResult* out);
Status send_lat_server(Session& s, const RowSpec& row, RowResult* out, CtrlMsg* done);
Status rdma_lat_client(Session& s, const RowSpec& row, RowResult* out);  // read_lat, atomic_lat

// A server with nothing to do during the row: sleeps until the client's DONE.
Status passive_server(Session& s, const RowSpec& row, RowResult* out, CtrlMsg* done);

// Duration mode (-D), in read_tsc() cycles, as perftest runs it: a warm-up margin of
// duration/4 whole seconds, the sampled window, and a cool-down margin.  update() is called
// with the loop's progress counter; it records the counter and time at both window edges.
class DurationSampler {
 public:
  explicit DurationSampler(const Options& o);
  // False once the whole duration is over.
  bool update(uint64_t now, uint64_t count) {
    if (phase_ == 0 && now >= sample_start_) {
      phase_ = 1;
      t0_ = now;
      count0_ = count;
    }
    if (phase_ == 1 && now >= sample_end_) {
      phase_ = 2;
      t1_ = now;
      count1_ = count;
    }
    return now < end_;
  }
  uint64_t iterations() const { return count1_ - count0_; }
  uint64_t cycles() const { return t1_ - t0_; }

 private:
  uint64_t sample_start_ = 0, sample_end_ = 0, end_ = 0;
  int phase_ = 0;
  uint64_t t0_ = 0, count0_ = 0, t1_ = 0, count1_ = 0;
};

}  // namespace conduit::perf
