#include "options.h"

#include <algorithm>
#include <cstdlib>

#include "option_table.h"
#include "conduit/memory/spare_keeper.h"
#include "protocol.h"

namespace conduit::transport::rdma {
namespace {

using O = RdmaOptions;
using Row = OptionRow<O>;

Status parse_features(std::string_view what, std::string_view text, O& o) {
  o.features = std::string(text);
  if (text == "all") {
    o.feature_mask = kFeatureKnownMask;
    return {};
  }
  if (text == "none") {
    o.feature_mask = 0;
    return {};
  }
  char* end = nullptr;
  o.feature_mask = std::strtoull(o.features.c_str(), &end, 0);
  if (o.features.empty() || *end != '\0')
    return Status(Code::kInvalidArgument, std::string(what) + "='" + o.features + "': expected all, none or a number");
  o.feature_mask &= kFeatureKnownMask;
  return {};
}

Status parse_scope(std::string_view what, std::string_view text, O& o) {
  if (text != "auto" && text != "mw" && text != "private" && text != "shared")
    return Status(Code::kInvalidArgument, std::string(what) + "='" + std::string(text) +
                                              "': expected auto, mw, private or shared");
  o.scope = std::string(text);
  return {};
}

Status parse_device(std::string_view, std::string_view text, O& o) {
  o.device = std::string(text);
  return {};
}

constexpr Row kRows[] = {
    Row::bytes_row("rx_buffer", "1M", kMinRxBuffer, kMaxRxBuffer, &O::rx_buffer,
                   "receive buffer the peer writes into (advertised by `RegisterXferMemory`)"),
    Row::bytes_row("rx_initial", "64K", 0, kMaxRxBuffer, &O::rx_initial,
                   "the receive area advertised first; once the peer has filled it (used all the space it was "
                   "given) and all of it is read and released, an `rx_buffer`-sized area replaces it, advertised by "
                   "a new `RegisterXferMemory` (PROTOCOL.md, \"Growing the receive area\"). Connections that carry "
                   "little never pin more, and setup needs less fresh memory (most of its cost under Soft-RoCE). 0, or not below `rx_buffer`: `rx_buffer` from the start"),
    Row::number_row("send_depth", "256", 16, 16384, &O::send_depth,
                    "send queue entries; never overrun: data WRs are signaled at least every quarter"),
    Row::number_row("recv_depth", "256", 16, 16384, &O::recv_depth,
                    "32-byte receives pre-posted for control messages and immediates"),
    Row::bytes_row("inline", "64", 0, 1024, &O::inline_bytes,
                   "runs up to this size are posted inline (the provider may grant less)"),
    Row::bytes_row("flush_bytes", "64K", 1, kMaxRxBuffer, &O::flush_bytes,
                   "a run of written bytes this large is posted at once; smaller writes are batched until the loop "
                   "is about to sleep"),
    Row::bytes_row("zero_copy_min", "4K", 0, kMaxRxBuffer, &O::zero_copy_min,
                   "`write_owned`: slices of `pool()` at least this large are RDMA-written from where they lie "
                   "(one work request each); smaller ones are copied into the staging area and batched"),
    Row::bytes_row("rendezvous_min", "256K", 0, kMaxRendezvous, &O::rendezvous_min,
                   "`write_owned`: a slice of `pool()` at least this large is not written into the peer's ring but "
                   "offered, and the peer RDMA-READs it into its own pool (the rendezvous extension, bit 2: no "
                   "staging copy on either side, no ring space). With `scope=mw` on a device whose windows are "
                   "bounded only by their region (rxe) only slices whose block fills its region are offered: the "
                   "pool's blocks of 256 KiB and more are each a region, so below 256K this option offers nothing "
                   "more; `scope=shared` offers any. At the limit of outstanding offers a slice goes in-band. "
                   "0 = off (bit 2 not offered)"),
    Row::custom_row("features", "all", parse_features, "`all`, `none`, mask",
                    "extensions to offer: bit 0 ring, bit 1 solicited, bit 2 rendezvous, bit 3 half-close (PROTOCOL.md); "
                    "`none` behaves exactly like a Valkey peer"),
    Row::bool_row("cm_features", "true", &O::cm_features,
                  "negotiate `features` inside the connection handshake (a Hello in rdma_cm's private data, "
                  "PROTOCOL.md): both sides run the extensions from ESTABLISHED, without the GetServerFeature "
                  "round trip and the SetClientFeature message. A peer that does not answer there (Valkey, older "
                  "Conduit) is asked with messages as before. `false`: messages only"),
    Row::bytes_row("credit_bytes", "0", 0, kMaxRxBuffer, &O::credit_bytes,
                   "ring mode: return space to the writer in steps of this many consumed bytes (0 = `rx_buffer`/4)")
        .default_is("`rx_buffer`/4"),
    Row::bytes_row("hold_bytes", "0", 0, kMaxRxBuffer, &O::hold_bytes,
                   "`read_owned` hands out views of the receive area; its space goes back to the writer only when "
                   "they are released. This bounds the stretch from the oldest held byte to the read position: "
                   "beyond it every read would-blocks until a release (0 = `rx_buffer`/2). In the baseline "
                   "(Valkey) protocol a held view stalls the writer once the rest of the buffer is used: it is "
                   "re-advertised only when all of it is read and released")
        .default_is("`rx_buffer`/2"),
    Row::number_row("keepalive_ms", "3000", 0, 3'600'000, &O::keepalive_ms, "send a Keepalive this often (0 = never)"),
    Row::number_row("keepalive_timeout_ms", "10000", 0, 3'600'000, &O::keepalive_timeout_ms,
                    "drop a peer that sends keepalives (or negotiated extensions) and then goes silent this long; "
                    "with `keepalive_ms` on, also any peer that leaves our sends unacknowledged this long "
                    "(FAILURES.md; 0 = never)"),
    Row::number_row("connect_timeout_ms", "10000", 1, 3'600'000, &O::connect_timeout_ms,
                    "address/route resolution, connection and the peer's first `RegisterXferMemory`; on a listener, "
                    "the bound on each inbound handshake"),
    Row::number_row("linger_ms", "5000", 0, 3'600'000, &O::linger_ms,
                    "`close()` with writes still on the wire waits this long for their acknowledgement"),
    Row::number_row("backlog", "1024", 1, 65535, &O::backlog, "rdma_cm listen backlog").listener(),
    Row::number_row("max_handshakes", "1024", 1, 65535, &O::max_handshakes,
                    "inbound handshakes in progress (each holds a QP and registered memory); further connect "
                    "requests are rejected at once; `Listener::stats().handshakes` counts them")
        .listener(),
    Row::number_row("poll_us", "100", 0, 1'000'000, &O::poll_us,
                    "adaptive polling: after running out of work, poll the CQ for up to this long before arming "
                    "the completion channel and sleeping. The window tunes itself from the idle gaps seen "
                    "(`src/transport/poll/`, the same policy as shm://): it polls while traffic is recent and "
                    "dense and turns itself off when the connection idles; the connections of one loop spin "
                    "together; a spin that loses its CPU stops polling for a cool-down (1 ms, doubling to 1 s). "
                    "Gaps of up to 8x this that a probe shows spinning to shorten (two sides waiting on each "
                    "other where wake-ups are slow) lift the bound to as much as 8x. "
                    "0 = pure event mode: arm and block at once (compare with perftest `-e`)"),
    Row::number_row("busy_poll_us", "0", 0, 1'000'000, &O::busy_poll_us,
                    "fixed polling instead: poll the CQ this long without a completion before sleeping, never "
                    "tuned (trades a core for the wakeup: for dedicated cores). Non-zero overrides `poll_us`"),
    Row::custom_row("device", "", parse_device, "name", "refuse connections whose route uses another device (e.g. "
                                                        "`rxe0`)")
        .default_is("any"),
    Row::bool_row("srq", "false", &O::srq,
                  "take receives from one shared receive queue per event loop and device instead of `recv_depth` "
                  "per connection (for servers with many connections; receiver-local, no wire change)"),
    Row::number_row("srq_depth", "4096", 16, 16384, &O::srq_depth,
                    "receives in that shared queue (also bounded by the device's `max_srq_wr`)"),
    Row::number_row("arena_mb", "1024", 8, 65536, &O::arena_mb,
                    "cap of the registered pool each event loop keeps per device (owned buffers, control slots, "
                    "staging, READ destinations); the loop's first rdma connection or listener on the device sets "
                    "it. At the cap, owned allocations would-block, a READ waits for blocks to come back, and so "
                    "does a connection's first write (it takes the connection's staging area: writes would-block "
                    "and the write handler runs again once blocks are back)"),
    Row::number_row("spare_areas", "2", 0, memory::SpareKeeper::kMaxBlocks, &O::spare_areas,
                    "receive areas and send-staging blocks of this connection's sizes that the loop's arena keeps "
                    "registered ahead of demand, topped up by a background thread, so that a new connection "
                    "registers nothing on its setup path (registering 1 MiB costs milliseconds under Soft-RoCE). "
                    "Pinned memory: up to this many areas of each size in use. 0 = register on demand"),
    Row::number_row("spare_qps", "4", 0, memory::SpareKeeper::kMaxBlocks, &O::spare_qps,
                    "queue pairs, each with its completion queue, that the loop keeps created ahead of demand for "
                    "connections of this one's sizes (send_depth, recv_depth, inline), made by the same background "
                    "thread as spare_areas, so that a new connection's setup creates none (1-3 ms per side under "
                    "Soft-RoCE). Kernel memory: up to this many QPs and CQs per size in use. Not with srq=1. "
                    "0 = create on demand"),
    Row::number_row("retry_cnt", "7", 0, 7, &O::retry_cnt,
                    "transport retries of an unacknowledged packet before the QP fails with \"retry exceeded\" "
                    "(bounds the detection of a dead peer while data is in flight, with `timeout`)"),
    Row::number_row("rnr_retry", "7", 0, 7, &O::rnr_retry,
                    "receiver-not-ready retries; 7 = forever (a slow reader stalls the writer instead of failing "
                    "it; keepalives still bound dead-peer detection)"),
    Row::custom_row("scope", "auto", parse_scope, "`auto`, `mw`, `private`, `shared`",
                    "how a peer is kept to its own receive area: `mw` a type-2 memory window bound to the "
                    "connection's QP over an arena area; `private` a registration of its own per connection "
                    "(slow setup); `shared` the arena region's rkey (trusted peers only); `auto` = `mw` where "
                    "the device has windows, else `private` (docs/MEMORY.md)"),
    Row::number_row("timeout", "17", 1, 31, &O::timeout,
                    "local ACK timeout exponent: 4.096 us * 2^timeout per try (17 = 537 ms, rdma_cm's own choice on "
                    "RoCE; with retry_cnt=7 a dead peer fails the QP after about 4 s of unacknowledged traffic)"),
};

}  // namespace

std::vector<OptionDoc> option_docs() { return document_option_table<O>(kRows); }

Result<RdmaOptions> parse_options(const Endpoint& ep) {
  CONDUIT_ASSIGN_OR_RETURN(RdmaOptions o, parse_option_table<O>(kRows, ep));
  o.rx_initial = o.rx_initial == 0 || o.rx_initial >= o.rx_buffer ? o.rx_buffer
                                                                     : std::max<uint64_t>(o.rx_initial, kMinRxBuffer);
  o.credit_bytes = o.credit_bytes != 0 ? std::min(o.credit_bytes, o.rx_buffer) : o.rx_buffer / 4;
  o.hold_bytes = o.hold_bytes != 0 ? std::min(o.hold_bytes, o.rx_buffer) : o.rx_buffer / 2;
  return o;
}

}  // namespace conduit::transport::rdma
