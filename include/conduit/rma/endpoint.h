// conduit::rma -- one-sided operations on remote memory.
//
// An Endpoint is a connection of its own, made from a URL (rdma://, tcp://, shm://,
// auto://), never a Connection's stream: over rdma it owns a queue pair set up through its
// own rdma_cm connection, so immediates of one-sided writes never meet the stream
// protocol's; over tcp/shm it owns a transport connection on which the peer's event loop
// serves reads, writes and atomics against the memory it exposed (docs/RMA.md).
//
//   auto listener = rma::Listener::listen(loop, "tcp://127.0.0.1:0", [&](auto ep) {...});
//   auto ep = rma::Endpoint::connect(loop, listener->url(), [&](rma::Endpoint&, Status) {...});
//   // exposing side:
//   Result<rma::Descriptor> d = ep->expose(buf, len, rma::Rights::kRead | rma::Rights::kWrite);
//   send d->encode() to the peer by any channel ...
//   // the peer:
//   ep->submit(rma::Op::write(data, desc, 0, [](const rma::OpResult& r) {...}));
//   ep->revoke(desc);  // exposing side: the peer's next access fails with kPermissionDenied
//
// Threading: an Endpoint belongs to one EventLoop; every method is called on its thread and
// callbacks run there.  A future (make_future) may be waited on from another thread.
// Ownership: memory given to expose() stays the caller's and must stay valid until revoke()
// (or the endpoint's destruction).  An Op's `local` buffer is the endpoint's from submit()
// until the op's callback ran: do not touch or free it before.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "conduit/base/status.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rma/descriptor.h"

namespace conduit::rma {

enum class OpKind : uint8_t { kRead, kWrite, kWriteImm, kFetchAdd, kCompareSwap };
std::string_view op_kind_name(OpKind k);

// What finished.  status: OK; kPermissionDenied = remote access error (the key is unknown or
// revoked, the generation is stale, the range is outside the exposure or the rights do not
// allow the op: the peer refused, nothing was touched); kCancelled = the endpoint closed
// before the op completed; kIoError/kClosed = the endpoint failed, or (kIoError, rdma) an
// atomic or write with immediate was in flight when the peer's remote access error failed
// the queue pair and may or may not have executed (docs/RMA.md, "Recovery").
// old_value: for fetch-and-add and compare-and-swap, the word's value before the op.
struct OpResult {
  Status status;
  uint64_t old_value = 0;
};
using OpCallback = std::function<void(const OpResult&)>;

// One operation.  Build with the named constructors; `remote` + `offset` address the peer's
// memory (offset from the descriptor's first byte).  Atomics act on one 8-byte word whose
// remote address is 8-byte aligned, in the exposing host's byte order.
struct Op {
  OpKind kind = OpKind::kRead;
  std::span<uint8_t> local;  // read: destination; write: source (not written to)
  Descriptor remote;
  uint64_t offset = 0;
  uint32_t imm = 0;        // write with immediate: delivered to the peer's ImmHandler
  uint64_t operand = 0;    // fetch-and-add: the addend; compare-and-swap: the compare value
  uint64_t swap = 0;       // compare-and-swap: the new value
  OpCallback done;         // may be null (the op still counts against the in-flight bound)

  // Inline: a callback-driven program builds one per op, and a call costs more than the
  // stores where every call is translated (the qemu guest of the benchmarks).
  static Op read(std::span<uint8_t> dst, const Descriptor& r, uint64_t off, OpCallback cb) {
    return make(OpKind::kRead, dst, r, off, std::move(cb));
  }
  static Op write(std::span<const uint8_t> src, const Descriptor& r, uint64_t off, OpCallback cb) {
    // Never written through: the span is non-const only so one field serves both directions.
    return make(OpKind::kWrite, {const_cast<uint8_t*>(src.data()), src.size()}, r, off, std::move(cb));
  }
  static Op write_imm(std::span<const uint8_t> src, const Descriptor& r, uint64_t off, uint32_t imm,
                      OpCallback cb) {
    Op op = write(src, r, off, std::move(cb));
    op.kind = OpKind::kWriteImm;
    op.imm = imm;
    return op;
  }
  static Op fetch_add(const Descriptor& r, uint64_t off, uint64_t add, OpCallback cb) {
    Op op = make(OpKind::kFetchAdd, {}, r, off, std::move(cb));
    op.operand = add;
    return op;
  }
  static Op compare_swap(const Descriptor& r, uint64_t off, uint64_t compare, uint64_t swap, OpCallback cb) {
    Op op = fetch_add(r, off, compare, std::move(cb));
    op.kind = OpKind::kCompareSwap;
    op.swap = swap;
    return op;
  }

 private:
  static Op make(OpKind kind, std::span<uint8_t> local, const Descriptor& r, uint64_t off, OpCallback cb) {
    Op op;
    op.kind = kind;
    op.local = local;
    op.remote = r;
    op.offset = off;
    op.done = std::move(cb);
    return op;
  }
};

// A callback that fulfils a future: `auto [cb, fut] = make_future();` then submit an op with
// cb and wait on fut from another thread (or poll it while driving the loop).
std::pair<OpCallback, std::future<OpResult>> make_future();

// The peer wrote `length` bytes with immediate `imm` into memory this side exposed; the
// data is in place when this runs (loop thread).
using ImmHandler = std::function<void(uint32_t imm, uint32_t length)>;

// URL options (query parameters), one table in src/rma/options.cc, printed in docs/RMA.md.
struct EndpointOptions {
  uint32_t depth = 64;            // operations in flight at most; more -> kWouldBlock
  uint32_t signal_every = 16;     // rdma: at least one signalled WR per this many
  uint64_t max_op = 16u << 20;    // bytes one read/write may move
  uint32_t connect_timeout_ms = 5000;
  uint64_t busy_poll_us = 0;      // rdma: poll the CQ this long after the last post/completion; 0 = events
  uint64_t local_cache = uint64_t{256} << 20;  // rdma: registered bytes of local operands kept for reuse
  uint8_t timeout = 17;           // rdma: local ACK timeout exponent (4.096 us * 2^timeout per retransmission)
  bool windows = true;            // rdma: expose through memory windows where the device has them
};

enum class EndpointState : uint8_t { kConnecting, kConnected, kClosed, kError };
std::string_view endpoint_state_name(EndpointState s);

struct EndpointStats {
  uint64_t ops_submitted = 0;
  uint64_t ops_completed = 0;     // callbacks run with OK
  uint64_t ops_failed = 0;        // callbacks run with an error
  uint64_t batches = 0;           // submit() calls that posted (one doorbell each over rdma)
  uint64_t would_block = 0;       // submit() refused for the in-flight bound
  uint64_t served = 0;            // peer requests this side served (tcp/shm emulation)
  uint64_t refused = 0;           // peer requests this side refused (remote access errors)
  uint64_t exposed = 0;           // regions exposed now
  uint64_t window_keys = 0;       // rdma: exposures so far whose key is a memory window (windows=1 on a device with them)
  uint64_t cq_wakeups = 0;        // rdma: completion-channel events that woke the endpoint
  uint64_t polled = 0;            // rdma: completions found by busy polling (no event)
  uint64_t recoveries = 0;        // rdma: queue pair failures recovered in place (remote access errors)
};

class Engine;  // the transport behind an endpoint (private: src/rma)
}  // namespace conduit::rma
namespace conduit::transport {
struct Endpoint;
}
namespace conduit::rma {

class Endpoint {
 public:
  using ConnectCallback = std::function<void(Endpoint&, Status)>;

  // Starts connecting; on_connect runs once on the loop (OK, or why it failed).  The
  // caller owns the endpoint from the start (destroying it cancels the attempt).
  // Errors at once for a bad URL, an unknown option or an unusable scheme.
  static Result<std::unique_ptr<Endpoint>> connect(reactor::EventLoop& loop, std::string_view url,
                                                   ConnectCallback on_connect);
  ~Endpoint();  // fails ops in flight with kCancelled (callbacks run), revokes every exposure
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  EndpointState state() const;
  const Status& error() const;
  std::string_view transport() const;  // "rdma", "tcp", "shm"
  const EndpointOptions& options() const;
  std::string describe() const;        // "rma/tcp 127.0.0.1:40000->127.0.0.1:5000 connected"

  // --- exposing memory to the peer --------------------------------------------------
  // Makes [addr, addr + len) reachable by this endpoint's peer with exactly `rights`
  // (kNone is refused: expose nothing by default, so say what).  Over rdma this registers
  // the range (a setup-path cost: tens of microseconds to milliseconds per MiB) and, where
  // the device has memory windows, binds one to this endpoint's queue pair.  The region is
  // pinned until revoke(): nothing evicts or invalidates it.  Connected state only.
  Result<Descriptor> expose(void* addr, size_t len, Rights rights);
  // Withdraws an exposure: the peer's accesses with it (any in flight after this returns
  // included) fail with kPermissionDenied, and the memory is the caller's again.
  // kNotFound for a descriptor this endpoint did not expose (or already revoked).
  Status revoke(const Descriptor& d);

  // --- operations --------------------------------------------------------------------
  // Posts `ops` in order, all or none: every op is checked first (rights the descriptor
  // grants, bounds, atomic alignment, size <= max_op; kInvalidArgument / kPermissionDenied
  // naming the op, nothing posted), then the whole list goes out together (rdma: one
  // doorbell, one chain; the last WR signalled and every signal_every-th).  kWouldBlock when
  // the in-flight bound has no room for all of them: nothing was posted; the ready handler
  // runs when room frees.  Each op's callback runs exactly once after a successful submit.
  // Ops complete in order.  Cost: no allocation per op over rdma beyond the callback's own.
  Status submit(std::span<Op> ops);
  Status submit(Op op);

  size_t in_flight() const;
  void set_ready_handler(std::function<void(Endpoint&)> h);  // room after a kWouldBlock
  void set_imm_handler(ImmHandler h);
  // Called once when the endpoint fails or the peer goes away (after ops were failed).
  void set_close_handler(std::function<void(Endpoint&)> h);

  const EndpointStats& stats() const;
  reactor::EventLoop& loop() const;
  void close();  // idempotent; fails ops in flight with kCancelled

  // For the implementation (src/rma).
  explicit Endpoint(std::unique_ptr<Engine> engine);
  Engine& engine() const { return *engine_; }

 private:
  static Result<std::unique_ptr<Endpoint>> connect_auto(reactor::EventLoop& loop, transport::Endpoint ep,
                                                        const EndpointOptions& o, ConnectCallback on_connect);
  std::unique_ptr<Engine> engine_;
};

class Listener {
 public:
  using AcceptCallback = std::function<void(std::unique_ptr<Endpoint>)>;
  // Listens on the URL; each connected endpoint is handed to on_accept (loop thread), which
  // owns it.  auto:// listens on rdma (when a device is present) and tcp at the same port.
  static Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, std::string_view url,
                                                  AcceptCallback on_accept);
  virtual ~Listener() = default;
  virtual std::string url() const = 0;  // connectable (port 0 resolved)
  virtual void close() = 0;
};

// The URL options an endpoint accepts, as docs/RMA.md prints them ("| name | default | doc |").
std::string options_markdown();

}  // namespace conduit::rma
