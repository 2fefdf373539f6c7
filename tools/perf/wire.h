// What conduit-perf's two sides tell each other.
//
// ConnParams travels in the rdma_cm private data: the client's in the CONNECT_REQUEST, the
// server's in the ESTABLISHED (accept) or REJECTED event.  56 bytes, the most a
// CONNECT_REQUEST carries on RDMA_PS_TCP.  Integers are big-endian.
//
//   offset  size  field
//        0     4  magic "CDPF"
//        4     1  version (1)
//        5     1  test (TestKind)
//        6     1  flags: bit 0 all sizes (-a), bit 1 duration mode (-D)
//        7     1  status (RejectReason; 0 in requests and accepts)
//        8     4  message size in bytes (0 with -a)
//       12     4  iterations (-n; 0 in duration mode)
//       16     2  duration in seconds (-D; 0 in iteration mode)
//       18     2  tx depth
//       20     2  rx depth
//       22     2  inline size
//       24     8  data buffer address (the region the peer may WRITE/READ/atomically update)
//       32     4  data buffer rkey
//       36     4  data buffer length
//       40     8  control inbox address
//       48     4  control inbox rkey
//       52     4  control inbox length
//
// CtrlMsg is a control message, 64 bytes, big-endian.  The sender RDMA-writes it into
// slot (seq % kCtrlSlots) of the peer's control inbox with WRITE_WITH_IMM, imm = seq; the
// receiver's RECV completion (opcode RECV_RDMA_WITH_IMM) says which slot to read.  It
// consumes one posted receive whatever that receive points at, so control messages share
// the receive queue with the SEND tests' data receives without ever landing in them.
//
//   offset  size  field
//        0     4  magic "CDPC"
//        4     1  version (1)
//        5     1  type (CtrlType)
//        6     2  reserved (0)
//        8     4  row (index of the message size in the run)
//       12     4  message size
//       16     8  iterations measured
//       24     8  BW peak, MB/sec (IEEE-754 double bits)
//       32     8  BW average, MB/sec (double bits)
//       40     8  message rate, Mpps (double bits)
//       48     8  measured time in nanoseconds
//       56     8  reserved (0)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "conduit/base/status.h"
#include "options.h"

namespace conduit::perf {

inline constexpr uint8_t kWireVersion = 1;

enum class RejectReason : uint8_t {
  kNone = 0,
  kVersion = 1,         // not a conduit-perf peer of this wire version
  kTestMismatch = 2,
  kSizeMismatch = 3,    // -s or -a differ
  kDeviceMismatch = 4,  // the request arrived on another device than the server's -d
  kServerError = 5,     // the server could not set up its side
};
std::string_view reject_reason_name(RejectReason r);

struct ConnParams {
  uint8_t version = kWireVersion;
  uint8_t test = 0;  // TestKind
  bool all_sizes = false;
  bool duration_mode = false;
  RejectReason status = RejectReason::kNone;
  uint32_t size = 0;
  uint32_t iters = 0;
  uint16_t duration_s = 0;
  uint16_t tx_depth = 0;
  uint16_t rx_depth = 0;
  uint16_t inline_size = 0;
  uint64_t buf_addr = 0;
  uint32_t buf_rkey = 0;
  uint32_t buf_len = 0;
  uint64_t ctrl_addr = 0;
  uint32_t ctrl_rkey = 0;
  uint32_t ctrl_len = 0;
};

inline constexpr size_t kConnParamsSize = 56;
static_assert(kConnParamsSize <= 56, "rdma_connect carries at most 56 bytes of private data on RDMA_PS_TCP");
using ConnParamsBytes = std::array<uint8_t, kConnParamsSize>;
ConnParamsBytes encode(const ConnParams& p);
// kProtocolError when the bytes are not a version-1 conduit-perf record (wrong length,
// magic or version).
Result<ConnParams> decode_conn_params(std::span<const uint8_t> bytes);

enum class CtrlType : uint8_t {
  kReady = 1,  // server -> client: set up for `row`, go
  kDone = 2,   // client -> server: finished `row`; carries the client's measurement
  kFin = 3,    // server -> client: no more rows; disconnect
};
std::string_view ctrl_type_name(CtrlType t);

struct CtrlMsg {
  CtrlType type = CtrlType::kReady;
  uint32_t row = 0;
  uint32_t size = 0;
  uint64_t iterations = 0;
  double bw_peak = 0;
  double bw_avg = 0;
  double msg_rate = 0;
  uint64_t elapsed_ns = 0;
};

inline constexpr size_t kCtrlMsgSize = 64;
static_assert(kCtrlMsgSize % 8 == 0, "inbox slots stay 8-byte aligned");
inline constexpr uint32_t kCtrlSlots = 16;
static_assert(kCtrlSlots * kCtrlMsgSize <= 2048, "the inbox and the outbox share one 4 KiB region");
void encode(const CtrlMsg& m, uint8_t* out);  // writes kCtrlMsgSize bytes
Result<CtrlMsg> decode_ctrl(const uint8_t* in);

}  // namespace conduit::perf
