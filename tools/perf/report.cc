#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "conduit/base/json.h"

#include "conduit/base/clock.h"

namespace conduit::perf {
namespace {

constexpr double kMiB = 1048576.0;  // perftest's MB
constexpr const char* kLine =
    "---------------------------------------------------------------------------------------\n";
// perftest's table headers and row formats (perftest_parameters.h), so tools that parse
// perftest's output parse ours.
constexpr const char* kBwHeader =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
constexpr const char* kBwRow = " %-7" PRIu32 "    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n";
constexpr const char* kLatHeader =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
    "99% percentile[usec]   99.9% percentile[usec] \n";
constexpr const char* kLatRow =
    " %-7" PRIu32 " %-10" PRIu64 "    %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
    "\t\t%-7.2f\n";
constexpr const char* kLatDurHeader = " #bytes        #iterations       t_avg[usec]    tps average\n";
constexpr const char* kLatDurRow = " %-7" PRIu32 "       %-10" PRIu64 "    %-7.2f        %-7.2f\n";

// perftest prints GIDs as 16 decimal bytes.
std::string gid_text(const uint8_t (&gid)[16]) {
  std::string s;
  char b[8];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(b, sizeof b, i == 0 ? "%02d" : ":%02d", gid[i]);
    s += b;
  }
  return s;
}

std::string gid_hex(const uint8_t (&gid)[16]) {
  std::string s;
  char b[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, i == 0 ? "%02x%02x" : ":%02x%02x", gid[i], gid[i + 1]);
    s += b;
  }
  return s;
}


}  // namespace

BwResult bw_result(uint32_t size, uint64_t iterations, uint64_t cycles, double peak_mbs) {
  BwResult r;
  r.size = size;
  r.iterations = iterations;
  r.peak_mbs = peak_mbs;
  if (cycles == 0) return r;
  const double us = Tsc::to_us(cycles);
  r.avg_mbs = static_cast<double>(size) * static_cast<double>(iterations) / us * 1e6 / kMiB;
  r.msg_rate_mpps = static_cast<double>(iterations) / us;
  r.elapsed_ns = static_cast<uint64_t>(us * 1e3);
  return r;
}

double peak_bw_mbs(uint32_t size, std::span<const Stamp> posts, std::span<const Stamp> completions) {
  // For a post call, its first WR gives the longest interval ending at any completion, so
  // only the first WR of each post needs to be tried.
  double best_cycles_per_msg = 0;
  size_t first_j = 0;
  for (const Stamp& p : posts) {
    while (first_j < completions.size() && completions[first_j].index < p.index) ++first_j;
    for (size_t j = first_j; j < completions.size(); ++j) {
      const Stamp& c = completions[j];
      if (c.cycles <= p.cycles) continue;
      const double per_msg =
          static_cast<double>(c.cycles - p.cycles) / static_cast<double>(c.index - p.index + 1);
      if (best_cycles_per_msg == 0 || per_msg < best_cycles_per_msg) best_cycles_per_msg = per_msg;
    }
  }
  if (best_cycles_per_msg == 0) return 0;
  const double bytes_per_us = static_cast<double>(size) * Tsc::cycles_per_us() / best_cycles_per_msg;
  return bytes_per_us * 1e6 / kMiB;
}

LatResult lat_result(uint32_t size, std::span<uint64_t> tposted, int rtt_factor) {
  LatResult r;
  r.size = size;
  r.iterations = tposted.size();
  if (tposted.size() < 5) return r;
  size_t n = tposted.size() - 1;
  for (size_t i = 0; i < n; ++i) tposted[i] = tposted[i + 1] - tposted[i];
  std::span<uint64_t> delta = tposted.first(n);
  std::sort(delta.begin(), delta.end());
  n -= 2;  // perftest's LAT_MEASURE_TAIL
  const double per_us = Tsc::cycles_per_us() * rtt_factor;
  auto us = [&](double cycles) { return cycles / per_us; };
  const double median = ((n - 1) % 2) != 0 ? (static_cast<double>(delta[n / 2]) + delta[n / 2 - 1]) / 2
                                           : static_cast<double>(delta[n / 2]);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += us(static_cast<double>(delta[i]));
  const double avg = sum / static_cast<double>(n);
  double var = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = us(static_cast<double>(delta[i])) - avg;
    var += d * d;
  }
  r.t_min = us(static_cast<double>(delta[0]));
  r.t_max = us(static_cast<double>(delta[n]));
  r.t_typical = us(median);
  r.t_avg = avg;
  r.t_stdev = std::sqrt(var / static_cast<double>(n));
  r.p99 = us(static_cast<double>(delta[static_cast<size_t>(std::ceil(static_cast<double>(n) * 0.99))]));
  r.p999 = us(static_cast<double>(delta[static_cast<size_t>(std::ceil(static_cast<double>(n) * 0.999))]));
  return r;
}

LatResult lat_duration_result(uint32_t size, uint64_t iterations, uint64_t cycles, int rtt_factor) {
  LatResult r;
  r.size = size;
  r.iterations = iterations;
  r.duration_mode = true;
  if (iterations == 0 || cycles == 0) return r;
  const double us = Tsc::to_us(cycles);
  r.t_avg = us / rtt_factor / static_cast<double>(iterations);
  r.tps = static_cast<double>(iterations) / (us / 1e6);
  return r;
}

void Reporter::begin(const LinkInfo& link, bool prints_rows) {
  link_ = link;
  prints_rows_ = prints_rows;
  if (opts_.json) return;
  const TestInfo& t = *opts_.test;
  std::printf("%s", kLine);
  std::printf("                    %.*s (conduit-perf)\n", static_cast<int>(t.title.size()), t.title.data());
  std::printf(" Device          : %s\t\tPort            : %u\n", link.device.c_str(), link.port);
  std::printf(" Connection type : RC\t\tData ex. method : rdma_cm\n");
  const bool sends = !opts_.is_server() || !t.bw;
  if (sends) std::printf(" TX depth        : %u\n", opts_.tx_depth);
  if (t.verb == Verb::kSend && (opts_.is_server() || !t.bw)) std::printf(" RX depth        : %u\n", opts_.rx_depth);
  if (t.bw || t.kind == TestKind::kSendLat) std::printf(" CQ Moderation   : %u\n", opts_.cq_mod);
  std::printf(" Mtu             : %d[B]\n", link.mtu);
  std::printf(" Link type       : %s\n", link.link_layer.c_str());
  std::printf(" GID index       : %d\n", link.gid_index);
  if (t.verb == Verb::kRead || t.verb == Verb::kAtomic)
    std::printf(" Outstand reads  : %d\n", link.out_reads);
  else
    std::printf(" Max inline data : %u[B]\n", opts_.inline_size);
  std::printf("%s", kLine);
  auto end = [](const char* which, const LinkInfo::End& e) {
    std::printf(" %s address: QPN 0x%04x PSN 0x%06x RKey 0x%06x VAddr 0x%014" PRIx64 "\n", which, e.qpn, e.psn,
                e.rkey, e.vaddr);
    std::printf(" GID: %s\n", gid_text(e.gid).c_str());
  };
  end("local", link.local);
  end("remote", link.remote);
  std::printf("%s", kLine);
  if (prints_rows) {
    if (t.bw)
      std::printf("%s", kBwHeader);
    else
      std::printf("%s", opts_.duration_mode() ? kLatDurHeader : kLatHeader);
  }
  std::fflush(stdout);
}

void Reporter::row(const RowResult& r) {
  if (opts_.json) {
    rows_.push_back(r);
    return;
  }
  if (r.is_bw) {
    std::printf(kBwRow, r.bw.size, r.bw.iterations, r.bw.peak_mbs, r.bw.avg_mbs, r.bw.msg_rate_mpps);
  } else if (r.lat.duration_mode) {
    std::printf(kLatDurRow, r.lat.size, r.lat.iterations, r.lat.t_avg, r.lat.tps);
  } else {
    std::printf(kLatRow, r.lat.size, r.lat.iterations, r.lat.t_min, r.lat.t_max, r.lat.t_typical, r.lat.t_avg,
                r.lat.t_stdev, r.lat.p99, r.lat.p999);
  }
  std::fflush(stdout);
}

void Reporter::finish() {
  if (!opts_.json) {
    std::printf("%s", kLine);
    std::fflush(stdout);
    return;
  }
  const TestInfo& t = *opts_.test;
  std::string s = "{";
  auto field = [&s](std::string_view key, const std::string& value) {
    if (s.size() > 1) s += ", ";
    s += json_string(key) + ": " + value;
  };
  auto end = [](const LinkInfo::End& e) {
    return "{\"qpn\": " + std::to_string(e.qpn) + ", \"psn\": " + std::to_string(e.psn) +
           ", \"rkey\": " + std::to_string(e.rkey) + ", \"vaddr\": " + std::to_string(e.vaddr) +
           ", \"gid\": " + json_string(gid_hex(e.gid)) + "}";
  };
  field("tool", "\"conduit-perf\"");
  field("format", "1");
  field("test", json_string(t.name));
  field("role", opts_.is_server() ? "\"server\"" : "\"client\"");
  field("device", json_string(link_.device));
  field("port", std::to_string(link_.port));
  field("connection", "\"RC\"");
  field("link_layer", json_string(link_.link_layer));
  field("mtu", std::to_string(link_.mtu));
  field("gid_index", std::to_string(link_.gid_index));
  field("tx_depth", std::to_string(opts_.tx_depth));
  field("rx_depth", std::to_string(opts_.rx_depth));
  field("cq_mod", std::to_string(opts_.cq_mod));
  field("inline_size", std::to_string(opts_.inline_size));
  field("out_reads", std::to_string(link_.out_reads));
  field("min_rnr_timer", std::to_string(link_.min_rnr_timer));
  field("mode", opts_.duration_mode() ? "\"duration\"" : "\"iterations\"");
  field(opts_.duration_mode() ? "duration_s" : "iters",
        std::to_string(opts_.duration_mode() ? opts_.duration_s : opts_.iters));
  field("cycles_per_us", json_number(Tsc::cycles_per_us()));
  field("local", end(link_.local));
  field("remote", end(link_.remote));
  field("units", t.bw ? "{\"bw\": \"MB/sec (2^20 bytes/s)\", \"msg_rate\": \"Mpps\"}"
                      : (t.verb == Verb::kRead || t.verb == Verb::kAtomic
                             ? "{\"latency\": \"usec, full round trip\"}"
                             : "{\"latency\": \"usec, one-way (half the ping-pong round trip)\"}"));
  std::string rows = "[";
  for (const RowResult& r : rows_) {
    if (rows.size() > 1) rows += ", ";
    if (r.is_bw) {
      rows += "{\"bytes\": " + std::to_string(r.bw.size) + ", \"iterations\": " + std::to_string(r.bw.iterations) +
              ", \"bw_peak_mbs\": " + json_number(r.bw.peak_mbs) + ", \"bw_avg_mbs\": " + json_number(r.bw.avg_mbs) +
              ", \"msg_rate_mpps\": " + json_number(r.bw.msg_rate_mpps) + "}";
    } else if (r.lat.duration_mode) {
      rows += "{\"bytes\": " + std::to_string(r.lat.size) + ", \"iterations\": " + std::to_string(r.lat.iterations) +
              ", \"t_avg_us\": " + json_number(r.lat.t_avg) + ", \"tps\": " + json_number(r.lat.tps) + "}";
    } else {
      rows += "{\"bytes\": " + std::to_string(r.lat.size) + ", \"iterations\": " + std::to_string(r.lat.iterations) +
              ", \"t_min_us\": " + json_number(r.lat.t_min) + ", \"t_max_us\": " + json_number(r.lat.t_max) +
              ", \"t_typical_us\": " + json_number(r.lat.t_typical) + ", \"t_avg_us\": " + json_number(r.lat.t_avg) +
              ", \"t_stdev_us\": " + json_number(r.lat.t_stdev) + ", \"p99_us\": " + json_number(r.lat.p99) +
              ", \"p99_9_us\": " + json_number(r.lat.p999) + "}";
    }
  }
  rows += "]";
  field("results", rows);
  s += "}\n";
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace conduit::perf
