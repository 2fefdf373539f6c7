#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "conduit/base/json.h"

namespace conduit::bench {
namespace {

constexpr double kMiB = 1048576.0;
constexpr const char* kLine =
    "---------------------------------------------------------------------------------------------\n";

double nearest_rank(const std::vector<double>& sorted, double p) {
  const long idx = static_cast<long>(0.5 + p * static_cast<double>(sorted.size())) - 1;
  return sorted[static_cast<size_t>(std::clamp<long>(idx, 0, static_cast<long>(sorted.size()) - 1))];
}

LatencyStats stats_us(const std::vector<double>& sorted_ns, double divisor) {
  LatencyStats s;
  if (sorted_ns.empty()) return s;
  const double k = 1e-3 / divisor;
  double sum = 0;
  for (double v : sorted_ns) sum += v;
  const double mean = sum / static_cast<double>(sorted_ns.size());
  double var = 0;
  for (double v : sorted_ns) var += (v - mean) * (v - mean);
  s.min = sorted_ns.front() * k;
  s.max = sorted_ns.back() * k;
  s.avg = mean * k;
  s.stdev = std::sqrt(var / static_cast<double>(sorted_ns.size())) * k;
  s.p50 = nearest_rank(sorted_ns, 0.50) * k;
  s.p99 = nearest_rank(sorted_ns, 0.99) * k;
  s.p999 = nearest_rank(sorted_ns, 0.999) * k;
  return s;
}

std::string lat_json(const LatencyStats& s) {
  return "{\"min\":" + json_number(s.min) + ",\"p50\":" + json_number(s.p50) + ",\"avg\":" + json_number(s.avg) +
         ",\"p99\":" + json_number(s.p99) + ",\"p99_9\":" + json_number(s.p999) + ",\"max\":" + json_number(s.max) +
         ",\"stdev\":" + json_number(s.stdev) + "}";
}

void print_lat_header(const char* what) {
  std::printf(" %-9s %-11s %9s %9s %9s %9s %9s %9s   %s\n", "#bytes", "#samples", "min", "p50", "avg", "p99", "p99.9",
              "max", what);
}

void print_lat_row(uint32_t size, uint64_t samples, const LatencyStats& s) {
  std::printf(" %-9" PRIu32 " %-11" PRIu64 " %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", size, samples, s.min, s.p50,
              s.avg, s.p99, s.p999, s.max);
}

}  // namespace


PingPongResult pingpong_result(uint32_t size, std::vector<double>& rtt_ns, double seconds) {
  std::sort(rtt_ns.begin(), rtt_ns.end());
  PingPongResult r;
  r.size = size;
  r.samples = rtt_ns.size();
  r.seconds = seconds;
  r.rtt = stats_us(rtt_ns, 1.0);
  r.one_way = stats_us(rtt_ns, 2.0);
  return r;
}

StreamResult stream_result(uint32_t size, uint64_t messages, uint64_t bytes, double seconds) {
  StreamResult r;
  r.size = size;
  r.messages = messages;
  r.bytes = bytes;
  r.seconds = seconds;
  if (seconds > 0) {
    r.mib_per_s = static_cast<double>(bytes) / seconds / kMiB;
    r.gbit_per_s = static_cast<double>(bytes) * 8 / seconds / 1e9;
    r.msg_per_s = static_cast<double>(messages) / seconds;
  }
  return r;
}

void Reporter::begin(const RunInfo& info) {
  info_ = info;
  if (opts_.json) return;
  const bool pp = opts_.test == StreamTest::kPingPong;
  std::printf("%s", kLine);
  std::printf("                %s (conduit-bench)\n",
              pp ? "Stream ping-pong latency" : "Stream bandwidth");
  std::printf(" URL             : %s\n", info.url.c_str());
  std::printf(" Mode            : %s%s\n", role_name(opts_.role),
              opts_.role == Role::kLoopback ? " (server and client threads in one process)" : "");
  std::printf(" Connection      : %s\n", info.peer.c_str());
  std::printf(" Per size        : %.2f s warm-up, then %.2f s", opts_.warmup_s, opts_.duration_s);
  if (opts_.iters > 0) std::printf(" or %" PRIu64 " %s, whichever first", opts_.iters, pp ? "round trips" : "messages");
  std::printf("\n");
  if (opts_.busy_poll_us > 0) std::printf(" Loop busy poll  : %u us\n", opts_.busy_poll_us);
  if (opts_.inplace)
    std::printf(" Work            : client fills each message in reserve()d space, server checksums it in\n"
                "                   place with peek()/consume() (--inplace)\n");
  else if (opts_.touch)
    std::printf(" Work            : client fills each message, server checksums what it reads (--touch)\n");
  if (opts_.peek && !opts_.inplace)
    std::printf(" Reading         : server reads in place with peek()/consume() (--peek)\n");
  if (opts_.owned) std::printf(" Writing         : pool blocks handed over with write_owned() (--owned)\n");
  if (pp) {
    std::printf(" Latency         : usec; RTT = one full round trip as measured;\n"
                "                   one-way = RTT/2 (sockperf ping-pong's convention)\n"
                " Percentiles     : nearest rank over all measured round trips (as sockperf)\n");
  } else {
    std::printf(" Units           : MB/s = 2^20 bytes/s, Gb/s = 10^9 bits/s; payload bytes from the\n"
                "                   first write to the server's acknowledgement of the last message\n");
  }
  std::printf("%s", kLine);
  if (!pp)
    std::printf(" %-9s %-12s %9s %12s %10s %14s\n", "#bytes", "#messages", "seconds", "MB/s", "Gb/s", "msg/s");
  std::fflush(stdout);
}

void Reporter::add(const PingPongResult& r) {
  pp_.push_back(r);
  if (opts_.json) return;
  // Rows are printed at end() so that the RTT and one-way tables each stay whole.
}

void Reporter::add(const StreamResult& r) {
  st_.push_back(r);
  if (opts_.json) return;
  std::printf(" %-9" PRIu32 " %-12" PRIu64 " %9.3f %12.2f %10.3f %14.0f\n", r.size, r.messages, r.seconds,
              r.mib_per_s, r.gbit_per_s, r.msg_per_s);
  std::fflush(stdout);
}

void Reporter::end() {
  if (!opts_.json) {
    if (!pp_.empty()) {
      print_lat_header("RTT [usec]");
      for (const PingPongResult& r : pp_) print_lat_row(r.size, r.samples, r.rtt);
      std::printf("\n");
      print_lat_header("one-way = RTT/2 [usec]");
      for (const PingPongResult& r : pp_) print_lat_row(r.size, r.samples, r.one_way);
    }
    std::printf("%s", kLine);
    std::fflush(stdout);
    return;
  }
  std::string s = "{\"tool\":\"conduit-bench\",\"command\":\"stream\",\"test\":" +
                  json_string(test_name(opts_.test)) + ",\"mode\":" + json_string(role_name(opts_.role)) +
                  ",\"url\":" + json_string(info_.url) + ",\"transport\":" + json_string(info_.transport) +
                  ",\"connection\":" + json_string(info_.peer) + ",\"warmup_s\":" + json_number(opts_.warmup_s) +
                  ",\"duration_s\":" + json_number(opts_.duration_s) + ",\"iters\":" + std::to_string(opts_.iters) +
                  ",\"busy_poll_us\":" + std::to_string(opts_.busy_poll_us) +
                  ",\"touch\":" + (opts_.touch ? "true" : "false") + ",\"inplace\":" + (opts_.inplace ? "true" : "false") +
                  ",\"peek\":" + (opts_.peek || opts_.inplace ? "true" : "false") + ",\"owned\":" + (opts_.owned ? "true" : "false");
  if (opts_.test == StreamTest::kPingPong) {
    s += ",\"latency_units\":\"usec\",\"one_way\":\"rtt/2 (sockperf convention)\","
         "\"percentiles\":\"nearest-rank\",\"results\":[";
    for (size_t i = 0; i < pp_.size(); ++i) {
      const PingPongResult& r = pp_[i];
      s += (i ? "," : "") + std::string("{\"size\":") + std::to_string(r.size) +
           ",\"samples\":" + std::to_string(r.samples) + ",\"seconds\":" + json_number(r.seconds) +
           ",\"rtt_us\":" + lat_json(r.rtt) + ",\"one_way_us\":" + lat_json(r.one_way) + "}";
    }
  } else {
    s += ",\"bandwidth_units\":\"MB/s = 2^20 bytes/s\",\"results\":[";
    for (size_t i = 0; i < st_.size(); ++i) {
      const StreamResult& r = st_[i];
      s += (i ? "," : "") + std::string("{\"size\":") + std::to_string(r.size) +
           ",\"messages\":" + std::to_string(r.messages) + ",\"bytes\":" + std::to_string(r.bytes) +
           ",\"seconds\":" + json_number(r.seconds) + ",\"mb_per_s\":" + json_number(r.mib_per_s) +
           ",\"gbit_per_s\":" + json_number(r.gbit_per_s) + ",\"msg_per_s\":" + json_number(r.msg_per_s) +
           ",\"server_wakeups\":" + std::to_string(r.server_wakeups) +
           ",\"rendezvous_bytes\":" + std::to_string(r.rendezvous_bytes) + "}";
    }
  }
  s += "]}\n";
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

void print_memcpy(const Options& opts, const MemcpyResult& r) {
  if (opts.json) {
    std::printf("{\"tool\":\"conduit-bench\",\"command\":\"memcpy\",\"size\":%" PRIu64 ",\"copies\":%" PRIu64
                ",\"seconds\":%s,\"mb_per_s\":%s,\"touch\":%s,\"bandwidth_units\":\"MB/s = 2^20 bytes/s\"}\n",
                r.size, r.copies, json_number(r.seconds).c_str(), json_number(r.mib_per_s).c_str(),
                r.touch ? "true" : "false");
    return;
  }
  std::printf("%s", kLine);
  std::printf("                Single-core memcpy (conduit-bench)\n");
  std::printf(" Units           : MB/s = 2^20 bytes/s copied (one source block -> one destination block)\n");
  if (r.touch)
    std::printf(" Work per copy   : fill the source, copy, checksum the destination (--touch)\n");
  std::printf("%s", kLine);
  std::printf(" %-9s %-12s %9s %12s\n", "#bytes", "#copies", "seconds", "MB/s");
  std::printf(" %-9" PRIu64 " %-12" PRIu64 " %9.3f %12.2f\n", r.size, r.copies, r.seconds, r.mib_per_s);
  std::printf("%s", kLine);
}

}  // namespace conduit::bench
