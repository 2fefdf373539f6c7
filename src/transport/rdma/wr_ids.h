// How the rdma transport tags its work requests: wr_id = kind in the top byte, an index
// (a receive or control-send slot) in the low 32 bits.  Every CQ the transport polls holds
// only its own WRs, so the kind alone routes a completion.
#pragma once

#include <cstdint>

namespace conduit::transport::rdma {

enum WrKind : uint64_t { kWrRecv = 1, kWrCtrlSend = 2, kWrData = 3, kWrBind = 4, kWrRead = 5 };  // kWrRead: index = offer tag
constexpr uint64_t make_wr_id(WrKind k, uint64_t index) { return (static_cast<uint64_t>(k) << 56) | index; }
constexpr WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 56); }
constexpr uint32_t wr_index(uint64_t id) { return static_cast<uint32_t>(id & 0xffffffffu); }

inline constexpr uint64_t kMs = 1'000'000;  // nanoseconds per millisecond

}  // namespace conduit::transport::rdma
