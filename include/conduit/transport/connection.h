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
};

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
};

class Listener {
 public:
  virtual ~Listener() = default;
  // The bound endpoint as a URL a client can connect to (port 0 resolved).
  virtual std::string url() const = 0;
  virtual void close() = 0;
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
