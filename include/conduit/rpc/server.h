// rpc::Server: protobuf services (generic services) served on several transport URLs at
// once (tcp://, shm://, rdma://, auto://).
//
//   rpc::ServerOptions o;  o.threads = 2;
//   auto server = rpc::Server::create(o).value();
//   EchoServiceImpl echo;                         // : public EchoService (cc_generic_services)
//   server->add_service(&echo);
//   server->listen("tcp://127.0.0.1:0");  server->listen("shm://echo");
//   ...
//   server->shutdown(5000);                       // finish in-flight calls within 5 s
//
// Threading: the server runs `threads` reactor loops of its own (a connection lives on one
// loop; tcp listeners are opened once per loop with SO_REUSEPORT, other transports on loop
// 0).  Handlers run on the connection's loop, or on `worker_threads` pool threads when
// set (streaming methods always run on the loop).  A handler must call done->Run() exactly
// once, from any thread, possibly later (asynchronous handlers).  The Server's methods
// are thread-safe; add_service/set_method_limit/add_interceptor before the first listen().
#pragma once

#include <google/protobuf/service.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/rpc/controller.h"

namespace conduit::rpc {

class StatusResponse;  // conduit/rpc/status.pb.h

struct ServerOptions {
  uint32_t threads = 1;                        // reactor loops (1..64)
  uint32_t worker_threads = 0;                 // 0 = handlers on the loop; N = a pool of N
  uint32_t busy_poll_us = 0;                   // loops spin this long before sleeping (fixed; wins)
  // Loops spin adaptively for up to this long before sleeping (reactor LoopOptions::poll_us:
  // a call that follows its predecessor closely costs no wakeup; idle or contended loops
  // stop spinning).  0 = sleep at once.  0..100000.
  uint32_t poll_us = 50;
  uint64_t max_request_bytes = 128ull << 20;   // body + attachment of one request
  uint64_t max_response_bytes = 128ull << 20;  // body + attachment of one response
  uint32_t max_concurrency = 0;                // calls in flight over the whole server, 0 = no limit
  uint32_t stream_window = 256 << 10;          // per-stream receive window granted to clients
  uint32_t max_connections = 10000;            // further connections are closed at accept
  bool status_service = true;                  // serve conduit.rpc.StatusService (status.proto)
  // Request attachments up to this size may be views of a connection's receive memory
  // while their handler runs on the loop; larger ones are copied out as they arrive
  // (attachment.h, docs/PROTOCOL.md "Attachments").  0 = never views.
  uint64_t attachment_hold_bytes = 256 << 10;
};

// What an interceptor sees of a call.
struct CallInfo {
  std::string_view method;     // "pkg.Service/Method"
  std::string_view transport;  // "tcp", "shm", "rdma"
  std::string_view peer;
};

// Server interceptors (authentication, tracing, logging): before() runs ahead of the
// handler on the thread the handler runs on, in the order added; a non-OK status rejects
// the call with that code (mapped by from_status_code) and message.  after() runs once the
// handler called done, in reverse order, on the loop thread.  Must be thread-safe.
class ServerInterceptor {
 public:
  virtual ~ServerInterceptor() = default;
  virtual Status before(const CallInfo& call, Controller& cntl) = 0;
  virtual void after(const CallInfo& call, const Controller& cntl, uint64_t latency_us) {
    (void)call, (void)cntl, (void)latency_us;
  }
};

class ServerImpl;

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(const ServerOptions& options = {});
  ~Server();  // shutdown(0)
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Registers every method of `service` ("pkg.Service/Method").  The server does not own
  // `service` unless `take_ownership`.  Fails on a duplicate name or method-id collision.
  Status add_service(google::protobuf::Service* service, bool take_ownership = false);
  // At most `max_concurrency` calls of this method in flight (0 = no limit); further calls
  // fail with resource-exhausted.
  Status set_method_limit(std::string_view full_method, uint32_t max_concurrency);
  void add_interceptor(std::shared_ptr<ServerInterceptor> interceptor);

  // Opens a listener (several may be open at once).  Returns the URL a client can use
  // (port 0 resolved).
  Result<std::string> listen(std::string_view url);
  std::vector<std::string> listen_urls() const;

  // Graceful: closes the listeners, tells every client (GOAWAY: no new calls), refuses new
  // calls with unavailable, waits up to `grace_ms` for in-flight calls, then closes every
  // connection and stops the loops.  Idempotent; returns kTimedOut when calls were cut off.
  Status shutdown(uint64_t grace_ms = 5000);

  // The status service's data (what conduit.rpc.StatusService/GetStatus returns).  Blocks; not
  // from one of the server's own loop threads (handlers).
  void status(StatusResponse* out) const;
  uint64_t calls_in_flight() const;

 private:
  explicit Server(std::unique_ptr<ServerImpl> impl);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace conduit::rpc
