// Results: the statistics perftest computes, and the perftest-style table or the --json
// object they are printed as.  Nothing here touches the network.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "options.h"

namespace conduit::perf {

struct BwResult {
  uint32_t size = 0;
  uint64_t iterations = 0;
  double peak_mbs = 0;  // MB/sec = 2^20 bytes/s; 0 when not measured (as perftest prints it)
  double avg_mbs = 0;
  double msg_rate_mpps = 0;
  uint64_t elapsed_ns = 0;
};

struct LatResult {
  uint32_t size = 0;
  uint64_t iterations = 0;
  bool duration_mode = false;  // then only t_avg and tps are meaningful
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;  // usec
  double tps = 0;  // operations per second (duration mode)
};

struct RowResult {
  bool is_bw = true;
  BwResult bw;
  LatResult lat;
};

// One BW row from a measured interval.  `cycles` is the read_tsc() time of the interval.
BwResult bw_result(uint32_t size, uint64_t iterations, uint64_t cycles, double peak_mbs);

// perftest's peak BW: the best (j - i + 1) * size / (tcompleted[j] - tposted[i]) over every
// posted WR i and every later signaled WR j.  Posts are given as (first WR index, cycles)
// per post call, completions as (WR index, cycles) per signaled completion, both in order.
struct Stamp {
  uint64_t index;
  uint64_t cycles;
};
double peak_bw_mbs(uint32_t size, std::span<const Stamp> posts, std::span<const Stamp> completions);

// perftest's latency statistics from the cycle stamps of consecutive posts: the iters - 1
// deltas are sorted and the two largest set aside, leaving n; t_typical is the median of
// those n, t_avg and t_stdev their mean and standard deviation, and (as perftest indexes)
// t_max = delta[n], 99% = delta[ceil(n * 0.99)], 99.9% = delta[ceil(n * 0.999)].
// rtt_factor 2 turns a ping-pong round trip into one-way latency.  Overwrites `tposted`
// with the sorted deltas.  Needs at least 5 stamps.
LatResult lat_result(uint32_t size, std::span<uint64_t> tposted, int rtt_factor);
// Duration mode: average over `iterations` operations that took `cycles`.
LatResult lat_duration_result(uint32_t size, uint64_t iterations, uint64_t cycles, int rtt_factor);

// What the header block says about the connection.
struct LinkInfo {
  std::string device;
  uint8_t port = 1;
  std::string link_layer;  // "Ethernet", "IB"
  int mtu = 0;             // bytes
  int gid_index = 0;
  int out_reads = 0;       // outstanding READ/atomic (read and atomic tests)
  uint32_t max_inline = 0; // granted by the provider
  int min_rnr_timer = -1;  // the QP's RNR NAK timer code (-1: unknown)
  struct End {
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t vaddr = 0;
    uint8_t gid[16] = {};
  } local, remote;
};

class Reporter {
 public:
  explicit Reporter(const Options& opts) : opts_(opts) {}
  // Text mode: the header block and the table header (the table only where this side prints
  // results).  JSON mode: remembered for the final object.
  void begin(const LinkInfo& link, bool prints_rows);
  void row(const RowResult& r);
  // Text mode: the closing line.  JSON mode: the whole object.
  void finish();

 private:
  const Options& opts_;
  LinkInfo link_;
  bool prints_rows_ = false;
  std::vector<RowResult> rows_;
};

}  // namespace conduit::perf
