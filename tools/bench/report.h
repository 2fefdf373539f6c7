// Results and how they are printed: perftest-style tables on stdout, or one JSON object
// with --json.  Nothing here touches the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace conduit::bench {

// Latency statistics in microseconds.  Percentiles are nearest-rank, computed the way
// sockperf does: sorted[(int)(0.5 + p * n) - 1].
struct LatencyStats {
  double min = 0, p50 = 0, avg = 0, p99 = 0, p999 = 0, max = 0, stdev = 0;
};

struct PingPongResult {
  uint32_t size = 0;
  uint64_t samples = 0;    // measured round trips
  double seconds = 0;      // measured part
  LatencyStats rtt;        // round trip, as measured
  LatencyStats one_way;    // rtt / 2 (sockperf's ping-pong convention)
};

struct StreamResult {
  uint32_t size = 0;
  uint64_t messages = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double mib_per_s = 0;   // 2^20 bytes per second
  double gbit_per_s = 0;  // 10^9 bits per second
  double msg_per_s = 0;
  // Loopback mode: ConnStats::wakeups of the server's (receiving) connection during the
  // measured phase -- rdma: completion events it woke up for.  0 with a separate server.
  uint64_t server_wakeups = 0;
  // Of `bytes`, those the client's connection sent by rendezvous (rdma: READ by the peer;
  // ConnStats::rendezvous_bytes_sent), so a run shows which path carried them.
  uint64_t rendezvous_bytes = 0;
};

struct MemcpyResult {
  uint64_t size = 0;
  uint64_t copies = 0;
  double seconds = 0;
  double mib_per_s = 0;
  bool touch = false;  // each copy also filled the source and checksummed the destination
};

// Sorts `rtt_ns` and summarizes it (RTT and one-way).
PingPongResult pingpong_result(uint32_t size, std::vector<double>& rtt_ns, double seconds);
StreamResult stream_result(uint32_t size, uint64_t messages, uint64_t bytes, double seconds);

// What the header block says about a run.
struct RunInfo {
  std::string url;
  std::string transport;  // scheme
  std::string peer;       // describe() of the client's connection
};

class Reporter {
 public:
  explicit Reporter(const Options& opts) : opts_(opts) {}
  void begin(const RunInfo& info);
  void add(const PingPongResult& r);
  void add(const StreamResult& r);
  // Prints the JSON object (with --json) or the closing line.
  void end();

 private:
  const Options& opts_;
  RunInfo info_;
  std::vector<PingPongResult> pp_;
  std::vector<StreamResult> st_;
};

void print_memcpy(const Options& opts, const MemcpyResult& r);

}  // namespace conduit::bench
