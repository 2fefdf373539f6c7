#include "options.h"

#include <algorithm>
#include <cstdlib>

#include "protocol.h"

namespace conduit::transport::rdma {
namespace {

using O = RdmaOptions;
using K = OptKind;

constexpr OptionRow<O> kRows[] = {
    {"rx_buffer", &O::rx_buffer, K::kBytes, kMinRxBuffer, kMaxRxBuffer,
     "receive buffer the peer writes into (registered, advertised by `RegisterXferMemory`)"},
    {"send_depth", &O::send_depth, K::kNumber, 16, 16384,
     "send queue entries; never overrun: data WRs are signaled at least every quarter"},
    {"recv_depth", &O::recv_depth, K::kNumber, 16, 16384,
     "32-byte receives pre-posted for control messages and immediates"},
    {"inline", &O::inline_bytes, K::kBytes, 0, 1024, "runs up to this size are posted inline (the provider may grant less)"},
    {"flush_bytes", &O::flush_bytes, K::kBytes, 1, kMaxRxBuffer,
     "a run of written bytes this large is posted at once; smaller writes are batched until the loop is about to sleep"},
    {"features", &O::features, K::kString, 0, 0,
     "extensions to offer: `all`, `none` or a mask (bit 0 ring, bit 1 solicited; PROTOCOL.md); `none` behaves exactly "
     "like a Valkey peer"},
    {"credit_bytes", &O::credit_bytes, K::kBytes, 0, kMaxRxBuffer,
     "ring mode: return space to the writer in steps of this many consumed bytes (0 = `rx_buffer`/4)", "`rx_buffer`/4"},
    {"keepalive_ms", &O::keepalive_ms, K::kMillis, 0, 3'600'000, "send a Keepalive this often (0 = never)"},
    {"keepalive_timeout_ms", &O::keepalive_timeout_ms, K::kMillis, 0, 3'600'000,
     "drop a peer that sends keepalives (or negotiated extensions) and then goes silent this long (0 = never)"},
    {"connect_timeout_ms", &O::connect_timeout_ms, K::kMillis, 1, 3'600'000,
     "address/route resolution, connection and the peer's first `RegisterXferMemory`; on a listener, the bound on "
     "each inbound handshake"},
    {"linger_ms", &O::linger_ms, K::kMillis, 0, 3'600'000,
     "`close()` with writes still on the wire waits this long for their acknowledgement"},
    {"backlog", &O::backlog, K::kNumber, 1, 65535, "rdma_cm listen backlog"},
    {"max_pending", &O::max_pending, K::kNumber, 1, 65535,
     "listener: inbound handshakes in progress (each holds a QP and registered memory); further connect requests are "
     "rejected at once"},
    {"busy_poll_us", &O::busy_poll_us, K::kNumber, 0, 1'000'000,
     "poll the CQ from the loop instead of sleeping, for this long after the last completion"},
    {"device", &O::device, K::kString, 0, 0, "refuse connections whose route uses another device (e.g. `rxe0`)",
     "any"},
    {"srq", &O::srq, K::kBool, 0, 0,
     "take receives from one shared receive queue per event loop and device instead of `recv_depth` per connection "
     "(for servers with many connections; receiver-local, no wire change)"},
    {"srq_depth", &O::srq_depth, K::kNumber, 16, 16384,
     "receives in that shared queue (also bounded by the device's `max_srq_wr`)"},
    {"retry_cnt", &O::retry_cnt, K::kNumber, 0, 7,
     "transport retries of an unacknowledged packet before the QP fails with \"retry exceeded\" (bounds the detection "
     "of a dead peer while data is in flight, with `timeout`)"},
    {"rnr_retry", &O::rnr_retry, K::kNumber, 0, 7,
     "receiver-not-ready retries; 7 = forever (a slow reader stalls the writer instead of failing it; keepalives "
     "still bound dead-peer detection)"},
    {"timeout", &O::timeout, K::kNumber, 1, 31,
     "local ACK timeout exponent: 4.096 us * 2^timeout per try (17 = 537 ms, rdma_cm's own choice on RoCE; with "
     "retry_cnt=7 a dead peer fails the QP after about 4 s of unacknowledged traffic)"},
};

}  // namespace

std::span<const OptionRow<RdmaOptions>> option_rows() { return kRows; }

std::vector<OptionDoc> option_docs() { return document_option_table(option_rows()); }

Result<RdmaOptions> parse_options(const Endpoint& ep) {
  RdmaOptions o;
  CONDUIT_RETURN_IF_ERROR(parse_option_table(ep, option_rows(), o));
  if (o.features == "all") {
    o.feature_mask = kFeatureKnownMask;
  } else if (o.features == "none") {
    o.feature_mask = 0;
  } else {
    char* end = nullptr;
    o.feature_mask = std::strtoull(o.features.c_str(), &end, 0);
    if (end == o.features.c_str() || *end != '\0')
      return Status(Code::kInvalidArgument, "rdma option features='" + o.features + "': expected all, none or a number");
    o.feature_mask &= kFeatureKnownMask;
  }
  o.credit_bytes = o.credit_bytes != 0 ? std::min(o.credit_bytes, o.rx_buffer) : o.rx_buffer / 4;
  return o;
}

}  // namespace conduit::transport::rdma
