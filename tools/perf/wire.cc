#include "wire.h"

#include <bit>
#include <cstring>

namespace conduit::perf {
namespace {

constexpr uint8_t kConnMagic[4] = {'C', 'D', 'P', 'F'};
constexpr uint8_t kCtrlMagic[4] = {'C', 'D', 'P', 'C'};
// The last fields of each layout end exactly at the record size.
static_assert(52 + sizeof(uint32_t) == kConnParamsSize);
static_assert(56 + sizeof(uint64_t) == kCtrlMsgSize);

// Big-endian stores and loads at a byte offset.
template <typename T>
void put(uint8_t* base, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i)
    base[offset + i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * (sizeof(T) - 1 - i)));
}
template <typename T>
T get(const uint8_t* base, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = (v << 8) | base[offset + i];
  return static_cast<T>(v);
}

}  // namespace

std::string_view reject_reason_name(RejectReason r) {
  switch (r) {
    case RejectReason::kNone: return "accepted";
    case RejectReason::kVersion: return "not a conduit-perf peer of the same wire version";
    case RejectReason::kTestMismatch: return "test mismatch";
    case RejectReason::kSizeMismatch: return "message size mismatch";
    case RejectReason::kDeviceMismatch: return "device mismatch";
    case RejectReason::kServerError: return "server-side setup failed";
  }
  return "unknown reason";
}

std::string_view ctrl_type_name(CtrlType t) {
  switch (t) {
    case CtrlType::kReady: return "READY";
    case CtrlType::kDone: return "DONE";
    case CtrlType::kFin: return "FIN";
  }
  return "?";
}

ConnParamsBytes encode(const ConnParams& p) {
  ConnParamsBytes b{};
  std::memcpy(b.data(), kConnMagic, 4);
  b[4] = p.version;
  b[5] = p.test;
  b[6] = static_cast<uint8_t>((p.all_sizes ? 1 : 0) | (p.duration_mode ? 2 : 0));
  b[7] = static_cast<uint8_t>(p.status);
  put<uint32_t>(b.data(), 8, p.size);
  put<uint32_t>(b.data(), 12, p.iters);
  put<uint16_t>(b.data(), 16, p.duration_s);
  put<uint16_t>(b.data(), 18, p.tx_depth);
  put<uint16_t>(b.data(), 20, p.rx_depth);
  put<uint16_t>(b.data(), 22, p.inline_size);
  put<uint64_t>(b.data(), 24, p.buf_addr);
  put<uint32_t>(b.data(), 32, p.buf_rkey);
  put<uint32_t>(b.data(), 36, p.buf_len);
  put<uint64_t>(b.data(), 40, p.ctrl_addr);
  put<uint32_t>(b.data(), 48, p.ctrl_rkey);
  put<uint32_t>(b.data(), 52, p.ctrl_len);
  return b;
}

Result<ConnParams> decode_conn_params(std::span<const uint8_t> bytes) {
  // rdma_cm may pad private data (RoCE/IB round it up), so only a minimum length is required.
  if (bytes.size() < kConnParamsSize)
    return Status(Code::kProtocolError, "connection private data too short (" + std::to_string(bytes.size()) +
                                            " bytes, want " + std::to_string(kConnParamsSize) + ")");
  const uint8_t* b = bytes.data();
  if (std::memcmp(b, kConnMagic, 4) != 0)
    return Status(Code::kProtocolError, "connection private data is not from conduit-perf (bad magic)");
  ConnParams p;
  p.version = b[4];
  if (p.version != kWireVersion)
    return Status(Code::kProtocolError, "peer speaks conduit-perf wire version " + std::to_string(p.version) +
                                            ", this binary version " + std::to_string(kWireVersion));
  p.test = b[5];
  p.all_sizes = (b[6] & 1) != 0;
  p.duration_mode = (b[6] & 2) != 0;
  p.status = static_cast<RejectReason>(b[7]);
  p.size = get<uint32_t>(b, 8);
  p.iters = get<uint32_t>(b, 12);
  p.duration_s = get<uint16_t>(b, 16);
  p.tx_depth = get<uint16_t>(b, 18);
  p.rx_depth = get<uint16_t>(b, 20);
  p.inline_size = get<uint16_t>(b, 22);
  p.buf_addr = get<uint64_t>(b, 24);
  p.buf_rkey = get<uint32_t>(b, 32);
  p.buf_len = get<uint32_t>(b, 36);
  p.ctrl_addr = get<uint64_t>(b, 40);
  p.ctrl_rkey = get<uint32_t>(b, 48);
  p.ctrl_len = get<uint32_t>(b, 52);
  return p;
}

void encode(const CtrlMsg& m, uint8_t* out) {
  std::memset(out, 0, kCtrlMsgSize);
  std::memcpy(out, kCtrlMagic, 4);
  out[4] = kWireVersion;
  out[5] = static_cast<uint8_t>(m.type);
  put<uint32_t>(out, 8, m.row);
  put<uint32_t>(out, 12, m.size);
  put<uint64_t>(out, 16, m.iterations);
  put<uint64_t>(out, 24, std::bit_cast<uint64_t>(m.bw_peak));
  put<uint64_t>(out, 32, std::bit_cast<uint64_t>(m.bw_avg));
  put<uint64_t>(out, 40, std::bit_cast<uint64_t>(m.msg_rate));
  put<uint64_t>(out, 48, m.elapsed_ns);
}

Result<CtrlMsg> decode_ctrl(const uint8_t* in) {
  if (std::memcmp(in, kCtrlMagic, 4) != 0 || in[4] != kWireVersion)
    return Status(Code::kProtocolError, "malformed control message from the peer");
  const uint8_t type = in[5];
  if (type < static_cast<uint8_t>(CtrlType::kReady) || type > static_cast<uint8_t>(CtrlType::kFin))
    return Status(Code::kProtocolError, "unknown control message type " + std::to_string(type));
  CtrlMsg m;
  m.type = static_cast<CtrlType>(type);
  m.row = get<uint32_t>(in, 8);
  m.size = get<uint32_t>(in, 12);
  m.iterations = get<uint64_t>(in, 16);
  m.bw_peak = std::bit_cast<double>(get<uint64_t>(in, 24));
  m.bw_avg = std::bit_cast<double>(get<uint64_t>(in, 32));
  m.msg_rate = std::bit_cast<double>(get<uint64_t>(in, 40));
  m.elapsed_ns = get<uint64_t>(in, 48);
  return m;
}

}  // namespace conduit::perf
