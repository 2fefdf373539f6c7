// conduit-perf command line: the tests it knows, their perftest defaults, and the parsed
// options.  Parsing (CLI11) and every rule about which values go together live in
// options.cc; the rest of the tool only reads a finished Options.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::perf {

// Wire values (they travel in the connection's private data): never renumber.
enum class TestKind : uint8_t {
  kWriteBw = 1,
  kReadBw = 2,
  kSendBw = 3,
  kWriteLat = 4,
  kReadLat = 5,
  kSendLat = 6,
  kAtomicLat = 7,
};

enum class Verb : uint8_t { kWrite, kRead, kSend, kAtomic };

// name and title view NUL-terminated literals, so name.data() may serve as a C string.
struct TestInfo {
  TestKind kind;
  std::string_view name;   // "write_bw", as typed on the command line
  std::string_view title;  // perftest's banner, "RDMA_Write BW Test"
  Verb verb;
  bool bw;                 // bandwidth test (else latency)
};

std::span<const TestInfo> all_tests();
const TestInfo& test_info(TestKind kind);
const TestInfo* find_test(std::string_view name);  // null when unknown
const TestInfo* find_test(uint8_t wire_value);     // null when unknown

inline constexpr uint32_t kMinSize = 1;
inline constexpr uint32_t kMaxSize = 8u << 20;  // perftest's MAX_SIZE; also the top of -a
inline constexpr uint32_t kAtomicSize = 8;
inline constexpr uint16_t kDefaultPort = 18515;
inline constexpr uint64_t kPeakMaxIters = 20000;  // perftest measures peak BW up to here

struct Options {
  const TestInfo* test = nullptr;
  std::string server;  // empty: this process is the server
  std::string device;  // empty: whatever device rdma_cm picks for the address
  uint16_t port = kDefaultPort;
  uint32_t size = 0;        // bytes (ignored with all_sizes)
  bool all_sizes = false;   // -a: 2 B .. 8 MiB, powers of two
  uint64_t iters = 0;       // iteration mode (duration_s == 0)
  uint32_t duration_s = 0;  // duration mode when > 0
  uint32_t tx_depth = 0;
  uint32_t rx_depth = 0;    // receives kept posted by a side that receives SENDs
  uint32_t cq_mod = 0;      // signal one send WR in cq_mod (bandwidth and send_lat loops)
  uint32_t inline_size = 0; // WRITE/SEND payloads up to this size go inline
  uint32_t post_list = 0;   // bandwidth loops: most WRs per post call (0: auto, see post_batch())
  bool json = false;
  uint32_t timeout_s = 60;

  bool is_server() const { return server.empty(); }
  bool duration_mode() const { return duration_s > 0; }
  // The message sizes to run, in order.
  std::vector<uint32_t> sizes() const;
  // perftest reports peak BW only in iteration mode and up to 20000 iterations.
  bool measure_peak() const { return !duration_mode() && iters <= kPeakMaxIters; }
  // Send-queue slots the data loops may fill: at least cq_mod, so that selective signalling
  // always has a signalled WR in the queue (the QP gets a few more for control messages).
  uint32_t sq_depth() const { return tx_depth > cq_mod ? tx_depth : cq_mod; }
  // Bandwidth loops: how many WRs of `bytes` bytes one post call (one doorbell) may carry.
  // Auto: about 8 KiB worth.  On Soft-RoCE a doorbell costs a system call, so small
  // messages gain a lot from chains, while long chains of big messages measured slower
  // than posting them one by one (as perftest does).
  uint32_t post_batch(uint32_t bytes) const {
    if (post_list > 0) return post_list;
    return bytes >= 8192 ? 1 : 8192 / bytes;
  }
  // The largest message this run sends.
  uint32_t max_size() const { return all_sizes ? kMaxSize : size; }
  // Duration-mode warm-up and cool-down: perftest's default margin, duration/4 (whole seconds).
  uint32_t margin_s() const { return duration_s / 4; }
};

// Parses argv into *out, filling every default from the test's perftest defaults.
// Returns an exit status when the program must stop now (0 after --help, 2 after a usage
// error, the message already printed), or nullopt to run.
std::optional<int> parse_options(int argc, char** argv, Options* out);

// Re-derives the values that depend on the iteration count after the server adopted the
// client's -n/-D (tx depth and rx depth are clamped to the iteration count, as perftest does).
void apply_run_length(Options* opts, uint64_t iters, uint32_t duration_s);

}  // namespace conduit::perf
