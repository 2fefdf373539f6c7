// The Connection contract, modelled on Redis' ConnectionType so that an epoll program can
// switch between TCP, shared memory and RDMA by changing a URL.
//
// Threading: a connection belongs to one EventLoop; every method is called on that loop's
// thread, and handlers run there.
//
// I/O semantics (all non-blocking):
//   read(buf)    -> n > 0 bytes read; 0 = orderly end of stream (peer closed or shut down
//                   its write side); Status kWouldBlock = nothing available now; any other
//                   Status = the connection failed (state() becomes kError).
//   write(data)  -> n > 0 bytes accepted (may be less than asked); kWouldBlock = no space
//                   now (the write handler fires when there is); errors as for read.
//                   Accepted bytes are the transport's to deliver: the caller may reuse
//                   its buffer as soon as write returns.
//   writev(iov)  -> the same for a gather list, in order.
// Handlers: the read handler runs while data (or EOF/error) is available; the write handler
// runs while the connection is writable.  Both are level-style: uninstall the write handler
// when there is nothing more to write.  A handler may close the connection; it may destroy
// it only through EventLoop::destroy_later.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/memory/buffer.h"
#include "conduit/memory/pool.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/endpoint.h"
#include "conduit/transport/options.h"

namespace conduit::transport {

enum class ConnState : uint8_t { kConnecting, kAccepting, kConnected, kClosed, kError };
std::string_view conn_state_name(ConnState s);

// What a transport can do; the conformance suite skips what a transport lacks.
struct Caps {
  std::string_view transport;     // "tcp", "shm", "rdma"
  uint32_t max_inline = 0;        // bytes a write can hand to the device without a copy ring
  bool zero_copy = false;         // writes can avoid a copy (registered buffers)
  bool one_sided = false;         // RDMA WRITE/READ into peer memory is available
  bool half_close = true;         // shutdown_write() is supported
  bool cross_host = true;         // can reach another machine
  std::string_view extensions;    // negotiated protocol extensions, e.g. "ring,solicited" (rdma)
};

struct ConnStats {
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t reads = 0;               // read calls that returned data
  uint64_t writes = 0;              // write/writev calls that accepted data
  uint64_t read_would_block = 0;
  uint64_t write_would_block = 0;
  uint64_t wakeups = 0;             // shm: times the peer had to be woken (eventfd writes);
                                    // rdma: completion events this side woke up for
  // Memory this connection holds outside the process heap for as long as it is open, which
  // neither malloc's counters nor (until touched) RSS show: shm the shared region (both
  // rings and the header page, on each side), rdma the registered buffers.  0 for tcp
  // (socket buffers are the kernel's).  It may grow after setup (rdma: the staging area at
  // the first write, the receive area from rx_initial to rx_buffer once the peer filled
  // it), so an application that accounts for it reads it again now and then (conduit-kv
  // adds it to used_memory in its cron and counts it against maxmemory).
  uint64_t pinned_bytes = 0;
  // rdma's READ rendezvous (docs/PROTOCOL.md "Rendezvous"): owned slices offered to the
  // peer and offers this side READ; their bytes are in bytes_written / bytes_read too, but
  // never went through the peer's ring.  Fallbacks: slices that qualified but went in-band
  // (at the outstanding-offer limit, or no send-queue room).
  uint64_t rendezvous_offers = 0;
  uint64_t rendezvous_bytes_sent = 0;
  uint64_t rendezvous_reads = 0;
  uint64_t rendezvous_bytes_read = 0;
  uint64_t rendezvous_fallbacks = 0;
};

// One connection as the introspection surfaces see it -- the single data model behind rpc's
// StatusService (ConnectionStatus carries these fields one for one), the preload's status
// files and conduit-stat (tools/stat).  A plain value, taken by Connection::snapshot().
struct ConnSnapshot {
  std::string transport;   // caps().transport: "tcp", "shm", "rdma"
  std::string state;       // conn_state_name(state()); rdma: its setup phase ("open", "peer-gone")
  std::string local, peer;
  std::string extensions;  // caps().extensions
  std::string fallback;    // auto:// on TCP: why not RDMA (empty otherwise)
  std::string error;       // error().to_string() once failed (empty otherwise)
  ConnStats stats;
  // Bytes this side may write now before the peer returns space (rdma: free space in the
  // peer's receive buffer; shm: in the ring).  -1: the transport has no such window (tcp).
  int64_t credits = -1;
  // rdma only (empty / 0 elsewhere): ibv_query_qp's state ("RTS", "ERR", ...), the QP
  // number, "device:port", and that port's hardware counters (sysfs hw_counters, e.g.
  // rxe's retry_exceeded_err): device-wide, shared by every QP on the port.
  std::string qp_state;
  uint32_t qpn = 0;
  std::string device;
  std::vector<std::pair<std::string, uint64_t>> device_counters;
};

// The snapshot as key=value text fields (one spelling for every text surface: the
// preload's status files, conduit-stat's --json keys): transport state local peer ext
// fallback error bytes_in bytes_out reads writes wakeups pinned credits qp_state qpn device
// and ctr.<counter>.  snapshot_field() applies one such field (false: not a snapshot key;
// the caller may own it).  Pure functions, any thread.
std::vector<std::pair<std::string, std::string>> snapshot_fields(const ConnSnapshot& s);
bool snapshot_field(ConnSnapshot& s, std::string_view key, std::string_view value);

class Connection {
 public:
  using Handler = std::function<void(Connection&)>;
  virtual ~Connection() = default;

  virtual ConnState state() const = 0;
  // Why the connection is in kError (or closed by the peer with an error); OK otherwise.
  virtual const Status& error() const = 0;

  virtual Result<size_t> read(std::span<uint8_t> buf) = 0;
  virtual Result<size_t> write(std::span<const uint8_t> data) = 0;
  virtual Result<size_t> writev(std::span<const iovec> iov) = 0;

  // --- in-place and owned-buffer I/O (zero copy where the transport can) ---------------
  // Every transport offers these; the base class implements them by copying through
  // read/write, and tcp/shm/rdma override them (docs/TRANSPORTS.md says what each copies).
  // They mix freely with read/write: bytes stay in order.
  //
  // reserve(min, max) -> writable space of at least `min` and at most `max` bytes where the
  //   caller builds the next bytes in place (shm: in the ring; rdma: in the registered
  //   staging area the NIC sends from); kWouldBlock when `min` bytes cannot be offered now.
  //   The span is valid until commit() or the next I/O call on this connection.
  //   commit(n) sends the first n <= span.size() bytes; all of them are accepted.
  // peek() -> the next readable bytes in place (contiguous, possibly fewer than are
  //   available; empty span = end of stream; kWouldBlock = nothing yet).  Valid until
  //   consume() or the next I/O call; consume(n) (n <= span size) releases them.
  // write_owned(chain) -> hands the front of `chain` to the transport and returns how many
  //   bytes it took (consumed from the chain), or kWouldBlock (chain untouched).  Taken
  //   slices are kept until their data is on the wire (rdma: until the completion) and then
  //   released: do not write into them after handing them over.  Slices from this
  //   connection's pool() go from where they lie (rdma: RDMA WRITE straight from them);
  //   other memory is copied.
  // read_owned(out, max) -> appends up to `max` readable bytes to `out` as slices and
  //   returns the count; 0 = end of stream.  The slices may be views of the transport's
  //   receive area (shm, rdma): that space returns to the writer only when they are
  //   released, so keep them briefly (a connection holding more than its `hold_bytes`
  //   would-blocks further owned reads until some are released).
  // pool() -> the registered pool whose slices this connection sends without a copy (the
  //   rdma transport's arena for this loop and device); null if there is none.
  virtual Result<std::span<uint8_t>> reserve(size_t min, size_t max);
  virtual Status commit(size_t n);
  virtual Result<std::span<const uint8_t>> peek();
  virtual Status consume(size_t n);
  virtual Result<size_t> write_owned(memory::Chain& chain);
  virtual Result<size_t> read_owned(memory::Chain& out, size_t max);
  virtual memory::BlockPool* pool() const { return nullptr; }

  // Null uninstalls.
  virtual void set_read_handler(Handler h) = 0;
  virtual void set_write_handler(Handler h) = 0;

  // Data already received that no fd event will announce (Redis' has_pending_data); the
  // transport's before-sleep hook calls process_pending, which runs the read handler.
  virtual bool has_pending_data() const = 0;
  virtual void process_pending() = 0;

  // Stops sending: the peer reads EOF after the data already written.  Reading goes on.
  virtual Status shutdown_write() = 0;
  // Releases the transport resources now; further I/O fails with kClosed.  Idempotent.
  virtual void close() = 0;

  virtual std::string local_address() const = 0;
  virtual std::string peer_address() const = 0;
  virtual Caps caps() const = 0;
  virtual const ConnStats& stats() const = 0;
  virtual reactor::EventLoop& loop() const = 0;

  // "tcp 127.0.0.1:5000->127.0.0.1:6379 connected"
  std::string describe() const;
  // The connection's introspection record (ConnSnapshot).  Loop thread.  The base version
  // fills what every transport has (caps, addresses, state, stats); rdma adds its phase,
  // credits, QP state and the port's counters (an ibv_query_qp and a sysfs read: for
  // status tools, not the data path), auto the fallback reason.
  virtual ConnSnapshot snapshot() const;

 protected:
  // The copying fallback behind the base class' reserve/commit and peek/consume: a staging
  // buffer each way.  A transport that relies on it (instead of overriding those calls)
  // must keep bytes in order by calling flush_staged_out() before it writes anything else
  // (kWouldBlock while staged bytes remain; it should then watch for writability itself and
  // flush when it comes) and by serving read() from take_staged_in() first.  tcp does.
  struct CopyState {
    std::vector<uint8_t> out;  // reserve()'s space, then committed bytes the transport has not taken
    size_t out_begin = 0, out_end = 0;  // committed, unsent: [out_begin, out_end)
    std::vector<uint8_t> in;            // peek()'s bytes
    size_t in_begin = 0, in_end = 0;
  };
  // Both say false while the base class itself is moving staged bytes through the
  // transport's writev/read.
  bool has_staged_out() const { return !staging_io_ && copy_ && copy_->out_end != copy_->out_begin; }
  bool has_staged_in() const { return !staging_io_ && copy_ && copy_->in_end != copy_->in_begin; }
  // Writes staged bytes with writev(); OK once none remain, kWouldBlock if some do.
  Status flush_staged_out();
  // Moves up to buf.size() staged input bytes into buf; returns the count (0 if none).
  size_t take_staged_in(std::span<uint8_t> buf);
  std::unique_ptr<CopyState> copy_;
  bool staging_io_ = false;
};

// Handshakes in progress: inbound connections a listener has taken from the kernel but not
// yet handed to its AcceptCallback.  A transport with a setup exchange spends descriptors
// and memory on each of them before the application sees it (shm: a socket and its hello;
// rdma: a QP and registered buffers per connect request), so a server must be able to see
// and bound them.  Every such transport bounds them with a listener option (shm and rdma:
// `max_handshakes`) and asks the admission callback before it starts one.  tcp has no
// handshake: it reports zeros and never asks.
struct ListenerStats {
  uint64_t handshakes = 0;       // in progress now (never above the transport's max_handshakes)
  uint64_t handshake_bytes = 0;  // memory those pin outside the heap (see ConnStats::pinned_bytes)
  uint64_t refused = 0;          // inbound connections turned away before their handshake:
                                 // peer not allowed, or the admission callback said no
  uint64_t failed = 0;           // handshakes that failed or timed out
};

// Asked by a listener on its loop thread for each inbound connection, before it spends
// anything on it (no memory, no descriptor beyond the accepted socket, no QP).  True admits
// the connection to its handshake; false refuses it at once: the peer's connect fails with
// kResourceExhausted ("server out of resources"; shm: a reject hello, rdma: rdma_reject),
// and the refusal is counted in ListenerStats::refused.  Must not close or destroy the
// listener.  An application that limits its clients counts handshakes in progress
// (stats().handshakes of each listener) against the same limit here, so that clients plus
// handshakes never exceed it.
using AdmitCallback = std::function<bool()>;

class Listener {
 public:
  virtual ~Listener() = default;
  // The bound endpoint as a URL a client can connect to (port 0 resolved).
  virtual std::string url() const = 0;
  virtual void close() = 0;

  // Handshakes in progress and what they cost.  Any thread: each field is read with one
  // relaxed atomic load (a snapshot, possibly a moment old); O(1).  The base version is for
  // transports without a handshake (tcp): all zeros.  After close(), handshakes is 0.
  virtual ListenerStats stats() const { return {}; }
  // Installs the admission check (null removes it: every connection is admitted, up to the
  // transport's own bound).  Loop thread.  The base version ignores it: a transport
  // without a handshake hands each connection straight to the AcceptCallback, which is the
  // application's admission point there.  A transport with a handshake must override
  // both this and stats().
  virtual void set_admission(AdmitCallback admit) { (void)admit; }
};

// Called on the loop thread for each fully established inbound connection; the callee
// takes ownership.
using AcceptCallback = std::function<void(std::unique_ptr<Connection>)>;
// Called once when an outbound connection is established (OK) or failed (error).
using ConnectCallback = std::function<void(Connection&, Status)>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view scheme() const = 0;
  // The URL options this transport accepts, from its option table (docs, --help).
  virtual std::vector<OptionDoc> options() const { return {}; }
  // Call on the loop's thread (or before the loop runs).
  virtual Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, const Endpoint& ep,
                                                   AcceptCallback on_accept) = 0;
  // Returns a connection in kConnecting; on_connect fires from the loop when done.  The
  // caller owns it from the start (destroying it cancels the attempt).
  virtual Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, const Endpoint& ep,
                                                      ConnectCallback on_connect) = 0;
};

// The registry of transports by scheme (one table; tcp and shm are built in).
Transport* find_transport(std::string_view scheme);
// Registers an additional transport (e.g. rdma); the registry does not own it.
Status register_transport(Transport* t);

// URL front doors.
Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, std::string_view url, AcceptCallback on_accept);
Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, std::string_view url,
                                            ConnectCallback on_connect);

}  // namespace conduit::transport
