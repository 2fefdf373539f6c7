// Shared by conduit-rpc-bench and its gRPC peer (conduit-rpc-grpc-bench): latency samples,
// the result table (perftest-style columns) and --json lines, so both tools print the same
// figures the same way (bench/rpc_vs_grpc.sh reads the JSON).
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "conduit/base/json.h"

namespace conduit::rpcbench {

inline double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Result {
  std::string tool, url;
  uint64_t size = 0, attachment = 0, concurrency = 0, connections = 1, threads = 1;
  uint64_t calls = 0, errors = 0;
  double seconds = 0, cpu_s = 0;
  std::vector<double> lat_us;  // sorted by finish()
  double q(double p) const {
    if (lat_us.empty()) return 0;
    size_t i = static_cast<size_t>(p * static_cast<double>(lat_us.size() - 1) + 0.5);
    return lat_us[std::min(i, lat_us.size() - 1)];
  }
  void finish() { std::sort(lat_us.begin(), lat_us.end()); }
  double qps() const { return seconds > 0 ? static_cast<double>(calls) / seconds : 0; }
};

inline void print_header() {
  std::printf("%-10s %8s %6s %6s %12s %10s %10s %10s %12s %8s\n", "tool", "bytes", "conc", "conns", "qps", "p50_us",
              "p99_us", "p99.9_us", "cpu_us/call", "errors");
}

inline void print(const Result& r, bool json) {
  const double cpu_per_call = r.calls ? r.cpu_s * 1e6 / static_cast<double>(r.calls) : 0;
  if (json) {
    std::printf(
        "{\"tool\":%s,\"url\":%s,\"size\":%llu,\"attachment\":%llu,\"concurrency\":%llu,\"connections\":%llu,"
        "\"threads\":%llu,\"calls\":%llu,\"errors\":%llu,\"seconds\":%s,\"qps\":%s,\"p50_us\":%s,\"p99_us\":%s,"
        "\"p999_us\":%s,\"cpu_us_per_call\":%s}\n",
        json_string(r.tool).c_str(), json_string(r.url).c_str(), (unsigned long long)r.size,
        (unsigned long long)r.attachment, (unsigned long long)r.concurrency, (unsigned long long)r.connections,
        (unsigned long long)r.threads, (unsigned long long)r.calls, (unsigned long long)r.errors,
        json_number(r.seconds, 3).c_str(), json_number(r.qps(), 1).c_str(), json_number(r.q(0.5), 2).c_str(),
        json_number(r.q(0.99), 2).c_str(), json_number(r.q(0.999), 2).c_str(), json_number(cpu_per_call, 2).c_str());
  } else {
    std::printf("%-10s %8llu %6llu %6llu %12.0f %10.1f %10.1f %10.1f %12.2f %8llu\n", r.tool.c_str(),
                (unsigned long long)r.size, (unsigned long long)r.concurrency, (unsigned long long)r.connections,
                r.qps(), r.q(0.5), r.q(0.99), r.q(0.999), cpu_per_call, (unsigned long long)r.errors);
  }
  std::fflush(stdout);
}

// "64,4K,1M" -> bytes.
inline bool parse_sizes(const std::string& s, std::vector<uint64_t>* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string t = s.substr(i, j - i);
    if (t.empty()) return false;
    uint64_t mult = 1;
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
    if (last == 'K' || last == 'M' || last == 'G') {
      mult = last == 'K' ? 1024 : last == 'M' ? 1024 * 1024 : 1024ull * 1024 * 1024;
      t.pop_back();
    }
    char* end = nullptr;
    const unsigned long long v = std::strtoull(t.c_str(), &end, 10);
    if (end == t.c_str() || *end != '\0') return false;
    out->push_back(v * mult);
    i = j + 1;
  }
  return !out->empty();
}

}  // namespace conduit::rpcbench
