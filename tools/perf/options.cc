#include "options.h"

#include <CLI/CLI.hpp>

#include "numeric_flags.h"

#include <algorithm>
#include <array>
#include <iostream>
#include <map>

namespace conduit::perf {
namespace {

constexpr std::array<TestInfo, 7> kTests{{
    {TestKind::kWriteBw, "write_bw", "RDMA_Write BW Test", Verb::kWrite, true},
    {TestKind::kReadBw, "read_bw", "RDMA_Read BW Test", Verb::kRead, true},
    {TestKind::kSendBw, "send_bw", "Send BW Test", Verb::kSend, true},
    {TestKind::kWriteLat, "write_lat", "RDMA_Write Latency Test", Verb::kWrite, false},
    {TestKind::kReadLat, "read_lat", "RDMA_Read Latency Test", Verb::kRead, false},
    {TestKind::kSendLat, "send_lat", "Send Latency Test", Verb::kSend, false},
    {TestKind::kAtomicLat, "atomic_lat", "Atomic FETCH_AND_ADD Latency Test", Verb::kAtomic, false},
}};

// perftest's defaults (perftest_parameters.h): DEF_SIZE_BW/LAT/ATOMIC, DEF_ITERS(_WB),
// DEF_TX_BW/LAT, DEF_RX_SEND, DEF_CQ_MOD, MSG_SIZE_CQ_MOD_LIMIT, DEF_INLINE_WRITE/SEND_RC_UC.
constexpr uint32_t kDefSizeBw = 65536;
constexpr uint32_t kDefSizeLat = 2;
constexpr uint64_t kDefIters = 1000;
constexpr uint64_t kDefItersWriteBw = 5000;
constexpr uint32_t kDefTxBw = 128;
constexpr uint32_t kDefTxLat = 1;
constexpr uint32_t kDefRxSend = 512;
constexpr uint32_t kDefCqMod = 100;
constexpr uint32_t kCqModSizeLimit = 8192;
constexpr uint32_t kDefInlineWrite = 220;
constexpr uint32_t kDefInlineSend = 236;

constexpr const char* kFooter = R"(
Without a server address conduit-perf is the server: it listens (rdma_cm, all addresses) on
--port and serves one client.  With an address it is the client.  Start the server first;
the client retries a refused connection until --timeout.  The client's -n/-D decide the run
length; test, size and -a must match on both sides or both sides exit with an error.

Output follows perftest.  MB/sec is 2^20 bytes per second; MsgRate is 10^6 messages per
second.  write_lat and send_lat are ping-pongs and report one-way latency (half a round
trip, measured as in perftest from the time between consecutive posts); read_lat and
atomic_lat report the full round trip of one READ or FETCH_AND_ADD.  t_typical is the
median; the two largest samples are dropped before the statistics, as perftest does.
Bandwidth tests print the table on both sides (the server of write_bw/read_bw repeats the
client's numbers; the send_bw server measures its receives); latency tests print it on the
client only.  With --json, stdout carries exactly one JSON object for the whole run:
{"tool":"conduit-perf", ..., "results":[ one object per size ]}.

Exit status: 0 success, 1 run-time failure (device, connection, peer lost, timeout),
2 bad command line.)";

void set_defaults(Options* o, bool size_given, bool iters_given, bool tx_given, bool rx_given, bool cq_given,
                  bool inline_given) {
  const TestInfo& t = *o->test;
  if (!size_given && !o->all_sizes)
    o->size = t.verb == Verb::kAtomic ? kAtomicSize : (t.bw ? kDefSizeBw : kDefSizeLat);
  if (!iters_given) o->iters = t.kind == TestKind::kWriteBw ? kDefItersWriteBw : kDefIters;
  if (!tx_given) o->tx_depth = t.bw ? kDefTxBw : kDefTxLat;
  if (!rx_given) o->rx_depth = kDefRxSend;
  if (!cq_given) {
    if (t.bw) {
      // perftest disables CQ moderation for single large messages, but not with -a.
      o->cq_mod = (!o->all_sizes && o->size > kCqModSizeLimit) ? 1 : kDefCqMod;
    } else {
      o->cq_mod = t.kind == TestKind::kSendLat ? kDefCqMod : 1;
    }
  }
  // Only the bandwidth loops and send_lat moderate; the other latency loops need (and
  // perftest takes) a completion for every operation.
  if (!t.bw && t.kind != TestKind::kSendLat) o->cq_mod = 1;
  if (!inline_given) {
    o->inline_size = 0;
    if (t.kind == TestKind::kWriteLat) o->inline_size = kDefInlineWrite;
    if (t.kind == TestKind::kSendLat) o->inline_size = kDefInlineSend;
  }
  if (t.verb == Verb::kRead || t.verb == Verb::kAtomic) o->inline_size = 0;  // as perftest
  apply_run_length(o, o->duration_mode() ? 0 : o->iters, o->duration_s);
}

}  // namespace

std::span<const TestInfo> all_tests() { return kTests; }

const TestInfo& test_info(TestKind kind) {
  for (const TestInfo& t : kTests)
    if (t.kind == kind) return t;
  return kTests[0];  // unreachable for valid kinds
}

const TestInfo* find_test(std::string_view name) {
  for (const TestInfo& t : kTests)
    if (t.name == name) return &t;
  return nullptr;
}

const TestInfo* find_test(uint8_t wire_value) {
  for (const TestInfo& t : kTests)
    if (static_cast<uint8_t>(t.kind) == wire_value) return &t;
  return nullptr;
}

std::vector<uint32_t> Options::sizes() const {
  std::vector<uint32_t> out;
  if (!all_sizes) {
    out.push_back(size);
    return out;
  }
  for (uint32_t s = 2; s <= kMaxSize; s *= 2) out.push_back(s);
  return out;
}

void apply_run_length(Options* o, uint64_t iters, uint32_t duration_s) {
  o->duration_s = duration_s;
  if (duration_s == 0) {
    o->iters = iters;
    // perftest: tx depth and receive depth never exceed the iteration count.
    o->tx_depth = static_cast<uint32_t>(std::min<uint64_t>(o->tx_depth, iters));
    o->rx_depth = static_cast<uint32_t>(std::min<uint64_t>(o->rx_depth, iters));
  }
  if (o->test->bw) o->cq_mod = std::min(o->cq_mod, o->tx_depth);
}

std::optional<int> parse_options(int argc, char** argv, Options* out) {
  CLI::App app{"conduit-perf: perftest-style RDMA micro-benchmarks over Conduit's verbs layer"};
  app.name("conduit-perf");
  app.footer(kFooter);
  app.get_formatter()->column_width(34);

  std::vector<std::string> names;
  std::string name_list;
  for (const TestInfo& t : kTests) {
    names.emplace_back(t.name);
    name_list += (name_list.empty() ? "" : ", ") + std::string(t.name);
  }

  Options o;
  std::string test_name;
  bool ignored_cpu_freq = false;
  app.add_option("test", test_name, "Test to run: " + name_list)
      ->required()
      ->check(CLI::IsMember(names));
  app.add_option("server-address", o.server, "Connect to this server (client mode); omit to be the server");
  app.add_option("-d,--ib-dev", o.device,
                 "RDMA device; must be the device rdma_cm uses for the address (default: that device)");
  app.add_option("-p,--port", o.port, "rdma_cm port to listen on / connect to")
      ->capture_default_str()
      ->check(tools::in_range(1, 65535));
  auto* size = app.add_option("-s,--size", o.size,
                              "Message size in bytes, 1 .. 8388608 (suffixes K, M allowed; default "
                              "65536 for bw, 2 for lat, 8 for atomic_lat, which takes no other)")
                   ->check(tools::size_in_range(kMinSize, kMaxSize));
  auto* iters = app.add_option("-n,--iters", o.iters,
                               "Iterations per size, 5 .. 100000000 (default 5000 for write_bw, else 1000)")
                    ->check(tools::in_range(uint64_t{5}, uint64_t{100000000}));
  auto* duration = app.add_option("-D,--duration", o.duration_s,
                                  "Run each size for this many seconds instead of -n iterations")
                       ->check(tools::in_range(1u, 86400u));
  auto* tx = app.add_option("-t,--tx-depth", o.tx_depth,
                            "Send queue depth: work requests in flight (default 128 bw, 1 lat)")
                 ->check(tools::in_range(1u, 15000u));
  auto* rx = app.add_option("-r,--rx-depth", o.rx_depth,
                            "Receives kept posted by the receiving side of send tests (default 512)")
                 ->check(tools::in_range(1u, 16384u));
  auto* cq = app.add_option("-Q,--cq-mod", o.cq_mod,
                            "Signal one send in N (default as perftest: 100, or 1 for single sizes "
                            "over 8 KiB; bw tests and send_lat only)")
                 ->check(tools::in_range(1u, 1024u));
  auto* inl = app.add_option("-I,--inline-size,--inline_size", o.inline_size,
                             "Send WRITE/SEND payloads up to this size inline (default as perftest: "
                             "220 write_lat, 236 send_lat, else 0; ignored by read/atomic)")
                  ->check(tools::in_range(0u, 912u));
  app.add_option("-l,--post-list", o.post_list,
                 "Bandwidth tests: post at most N work requests per doorbell (default: about 8 KiB "
                 "worth, at least 1)")
      ->check(tools::in_range(1u, 15000u));
  auto* all = app.add_flag("-a,--all", o.all_sizes, "Run all sizes 2 B .. 8 MiB (powers of two)");
  app.add_flag("-F,--CPU-freq", ignored_cpu_freq, "Accepted for perftest compatibility; ignored");
  app.add_flag("--json", o.json, "Print results as one JSON object on stdout instead of the tables");
  app.add_option("--timeout", o.timeout_s,
                 "Seconds allowed for connection setup, and for each size (plus -D) before "
                 "giving up on the peer")
      ->capture_default_str()
      ->check(tools::in_range(1u, 86400u));
  all->excludes(size);
  all->excludes(duration);
  duration->excludes(iters);

  try {
    app.parse(argc, argv);
    o.test = find_test(test_name);
    if (o.test == nullptr) throw CLI::ValidationError("test", "unknown test " + test_name);
    if (o.test->verb == Verb::kAtomic) {
      if (o.all_sizes)
        throw CLI::ValidationError("--all", "atomic_lat has one size: atomics are fixed 8-byte operations");
      if (size->count() > 0 && o.size != kAtomicSize)
        throw CLI::ValidationError("--size", "atomic_lat uses fixed 8-byte atomics; drop -s or pass -s 8");
    }
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  (void)ignored_cpu_freq;
  set_defaults(&o, size->count() > 0, iters->count() > 0, tx->count() > 0, rx->count() > 0, cq->count() > 0,
               inl->count() > 0);
  *out = std::move(o);
  return std::nullopt;
}

}  // namespace conduit::perf
