// conduit-memory-strategies: the seeds' three RDMA memory strategies (the Redis article's
// "RDMA 内存管理" list), measured against each other with everything else equal.
//
//   register  the application's message lives in ordinary memory; each message is registered
//             (ibv_reg_mr) before it is posted and deregistered when its completion arrives.
//             The receiver likewise registers the buffer it advertises per message and
//             deregisters it when the message has landed.
//   staging   memory registered once (today's rdma:// path and the Redis RDMA PR's): the
//             sender copies the application's message into a registered staging slot and
//             posts from there; the receiver copies out of its registered receive slot into
//             the application's buffer and reads it there.
//   pool      one registered pool shared by application and NIC (conduit::memory::BlockPool
//             with a verbs registrar): the sender builds the message in a pool block and the
//             NIC writes straight from it; the receiver advertises pool blocks and reads the
//             message in place -- zero copies.
//
// One protocol for all three, so only the memory strategy differs: the receiver advertises
// `window` destinations (a credit per destination: address, rkey, slot, sent by an inline
// SEND), the sender RDMA-WRITE_WITH_IMMs each message into a credited destination (the
// immediate names the slot), every work request is signalled, and the receiver re-advertises
// a slot once it is done with it.  The sender fills every message (a pattern that depends on
// its sequence number) and the receiver checksums every message; both sum the per-message
// checksums and the run fails if the sums differ.
//
// Threading: one thread per process; the server is a fork of the client (made before any
// verbs call), the two talk over a loopback TCP socket for setup and results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/fd.h"
#include "conduit/base/status.h"
#include "conduit/memory/pool.h"
#include "conduit/verbs/verbs.h"

namespace conduit::bench {

enum class Strategy : uint8_t { kRegister = 0, kStaging = 1, kPool = 2 };
inline constexpr Strategy kStrategies[] = {Strategy::kRegister, Strategy::kStaging, Strategy::kPool};
std::string_view strategy_name(Strategy s);
Result<Strategy> parse_strategy(std::string_view name);

enum class PollMode : uint8_t { kEvent, kSpin };

// Control records over the loopback TCP socket.  They never leave the machine (both ends
// are this program and its fork), so they travel in host byte order.
//
// CaseSpec (client -> server), 40 bytes:
//   0 magic "CMS1" | 4 strategy | 5 end (1: no more cases) | 6 window (u16) | 8 size (u32)
//   12 case_id (u32) | 16 max_messages (u64) | 24 max_ns (u64) | 32 reserved (u64)
struct CaseSpec {
  uint32_t magic = kMagic;
  uint8_t strategy = 0;
  uint8_t end = 0;
  uint16_t window = 0;
  uint32_t size = 0;
  uint32_t case_id = 0;
  uint64_t max_messages = 0;
  uint64_t max_ns = 0;
  uint64_t reserved = 0;
  static constexpr uint32_t kMagic = 0x31534d43;  // "CMS1"
};
static_assert(sizeof(CaseSpec) == 40);

// One side's measurement of one case (server -> client at the end of a case), 96 bytes.
struct SideResult {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t checksum = 0;   // sum of the per-message checksums
  uint64_t wall_ns = 0;    // timed section
  uint64_t user_ns = 0;    // getrusage(RUSAGE_SELF) over the timed section
  uint64_t sys_ns = 0;
  uint64_t reg_calls = 0;  // ibv_reg_mr calls in the timed section (pool: registrar calls)
  uint64_t copies = 0;     // bytes memcpy'd between application and registered memory
  uint64_t credits = 0;    // credits sent (server) / received (client)
  uint64_t bad_length = 0; // messages whose byte_len differed from the size (server)
  // Cycle-counter time (read_tsc) inside the timed section spent in the strategy's own memory
  // operations -- registering and deregistering (register), the copy (staging), taking and
  // returning the pool block (pool) -- and in the application's work on the message
  // (the sender's fill, the receiver's checksum).  Converted with Tsc::to_ns for printing.
  uint64_t strategy_cycles = 0;
  uint64_t work_cycles = 0;
};
static_assert(sizeof(SideResult) == 96);

// The credit a receiver sends for one destination (inline SEND payload), 24 bytes.
struct Credit {
  uint32_t case_id = 0;
  uint32_t slot = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(Credit) == 24);

inline constexpr uint32_t kMaxWindow = 64;
inline constexpr uint32_t kImmLast = 1u << 31;  // immediate: slot | kImmLast on the final message

// wr_id tags.
inline constexpr uint64_t kTagRecv = 1ull << 32;
inline constexpr uint64_t kTagWrite = 2ull << 32;
inline constexpr uint64_t kTagCredit = 3ull << 32;
inline constexpr uint64_t kTagMask = 0xffffffffull << 32;

// The message the application produces: `n` bytes (a multiple of 8) that depend on `seq`,
// written into `p`; returns their checksum (the same function as checksum(), computed on
// the fly).
inline uint64_t fill_message(uint8_t* p, size_t n, uint64_t seq) {
  uint64_t a = 0, b = 0;
  uint64_t w = seq * 0x9E3779B97F4A7C15ull + n;
  for (size_t i = 0; i < n; i += 8) {
    w += 0xD1B54A32D192ED03ull;
    std::memcpy(p + i, &w, 8);
    a += w;
    b += a;
  }
  return a ^ (b * 0x2545F4914F6CDD1Dull);
}
// A position-sensitive checksum (Fletcher-style sums over 64-bit words) of `n` bytes.
inline uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t a = 0, b = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    a += w;
    b += a;
  }
  return a ^ (b * 0x2545F4914F6CDD1Dull);
}

// Page-aligned application memory (not registered), pre-faulted.
struct AppBuffer {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem;
  static AppBuffer make(size_t n);
  uint8_t* data() const { return mem.get(); }
};

// Setup, not a timed part: takes `count` blocks of `n` bytes from `pool`, touches them and
// gives them back, so the regions a case uses are mapped and registered before it starts.
Status warm_pool(memory::BlockPool& pool, size_t n, uint32_t count);

// One end of the benchmark's connection: device, one CQ on a completion channel for sends
// and receives, an RC QP, the receive ring the credits land in (both sides post it), and the
// TCP control socket.
struct Link {
  std::shared_ptr<verbs::Context> ctx;
  std::shared_ptr<verbs::ProtectionDomain> pd;
  std::shared_ptr<verbs::CompletionChannel> channel;
  std::shared_ptr<verbs::CompletionQueue> cq;
  std::unique_ptr<verbs::QueuePair> qp;
  std::unique_ptr<verbs::RegisteredBuffer> recv_ring;
  UniqueFd ctl;
  PollMode poll = PollMode::kEvent;
  int wait_ms = 20000;  // a single wait for a completion longer than this is an error

  static constexpr uint32_t kRecvSlots = 2 * kMaxWindow + 8;
  static constexpr uint32_t kRecvSlotBytes = 64;
  static constexpr uint32_t kMaxSend = 2 * kMaxWindow + 16;

  // Opens `device` (empty: the first active one), creates the QP and connects it to the
  // peer's over `ctl` (conduit::verbs bootstrap records).
  static Result<std::unique_ptr<Link>> create(const std::string& device, UniqueFd ctl, PollMode poll);
  Status post_recv(uint32_t slot);
  // At least one completion into `out` (spinning or sleeping on the channel).
  Result<int> wait(std::span<verbs::Completion> out);
};

// Blocking control-socket I/O with a timeout.
Status send_all(int fd, const void* p, size_t n);
Status recv_all(int fd, void* p, size_t n, int timeout_ms);

// CPU time of this process (user, system) in ns.
void cpu_times(uint64_t* user_ns, uint64_t* sys_ns);

// The two sides of one case.  The sender is the client (parent) process.  `pool` is the
// process's pool (registered for local access on the client, remote write on the server).
Result<SideResult> run_sender(Link& link, const CaseSpec& spec, memory::BlockPool& pool);
// Drains the credits the server sent for a case that ended (untimed).
Status drain_credits(Link& link, uint64_t received, uint64_t sent);
Result<SideResult> run_receiver(Link& link, const CaseSpec& spec, memory::BlockPool& pool);

}  // namespace conduit::bench
