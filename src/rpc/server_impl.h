// Server internals: registered methods and their statistics, per-loop connections, calls.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/service.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cancel_hook.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rpc/server.h"
#include "conduit/rpc/stream.h"
#include "conduit/transport/connection.h"
#include "histogram.h"
#include "conduit/rpc/status.pb.h"
#include "link.h"

namespace conduit::rpc {

class ServerConn;

namespace detail {

enum class MethodKind : uint8_t { kUnary, kServerStream, kClientStream, kBidi };
std::string_view method_kind_name(MethodKind k);
MethodKind method_kind(const google::protobuf::MethodDescriptor* md);

struct MethodInfo {
  google::protobuf::Service* service = nullptr;
  const google::protobuf::MethodDescriptor* md = nullptr;
  std::string full_name;  // "pkg.Service/Method"
  uint32_t id = 0;
  MethodKind kind = MethodKind::kUnary;
  uint32_t max_concurrency = 0;
  std::atomic<uint32_t> in_flight{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> rejected{0};
  Histogram latency;
};

// One call being served.  Owned by its ServerConn's table until finished.
struct ServerCall {
  class Done : public google::protobuf::Closure {
   public:
    explicit Done(ServerCall* c) : call(c) {}
    void Run() override;
    ServerCall* call;
  };

  std::shared_ptr<ServerConn> conn;
  MethodInfo* method = nullptr;
  uint64_t id = 0;
  uint64_t start_ns = 0;
  Controller cntl;
  std::unique_ptr<google::protobuf::Message> req;
  std::unique_ptr<google::protobuf::Message> resp;
  std::unique_ptr<ServerStream> stream;
  reactor::TimerId deadline_timer = 0;
  Done done{this};
  bool counted_server = false;  // holds a slot of the server-wide limit
  bool finished = false;
  bool orphaned = false;   // the server shut down with the handler still holding done
  bool cancelled = false;  // by the client (CANCEL), the deadline, or the connection's end
  size_t interceptors_run = 0;
};

// A bounded handler pool.  Tasks never block the loop: push() fails when the queue is full.
class WorkerPool {
 public:
  WorkerPool(uint32_t threads, size_t max_queue);
  ~WorkerPool();
  bool push(std::function<void()> fn);
  void stop();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  size_t max_queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace detail

class ServerImpl {
 public:
  explicit ServerImpl(const ServerOptions& o) : options_(o) {}
  ~ServerImpl();
  Status init();

  Status add_service(google::protobuf::Service* s, bool own);
  Status set_method_limit(std::string_view name, uint32_t n);
  Result<std::string> listen(std::string_view url);
  Status shutdown(uint64_t grace_ms);
  // Everything but the connections (any thread).
  void status(StatusResponse* out) const;
  // Everything; cb runs on one of the loops.
  void status_async(std::function<void(std::shared_ptr<StatusResponse>)> cb) const;
  uint64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  const ServerOptions& options() const { return options_; }
  detail::MethodInfo* find_method(uint32_t id) const {
    auto it = methods_.find(id);
    return it == methods_.end() ? nullptr : it->second.get();
  }
  bool going_away() const { return going_away_.load(std::memory_order_acquire); }
  bool try_acquire_server_slot();
  void release_server_slot();
  detail::WorkerPool* workers() { return workers_.get(); }
  const std::vector<std::shared_ptr<ServerInterceptor>>& interceptors() const { return interceptors_; }
  void add_interceptor(std::shared_ptr<ServerInterceptor> i) { interceptors_.push_back(std::move(i)); }
  // `draining`: its link still drains after a GOAWAY; it is kept until conn_drained.
  void conn_closed(ServerConn* c, size_t loop_index, bool draining);
  void conn_drained(ServerConn* c, size_t loop_index);
  // The descriptors of every registered service's file and its dependencies.
  std::string file_descriptor_set() const;
  std::vector<std::string> service_names() const;
  std::vector<std::string> listen_urls() const;

  std::atomic<uint64_t> in_flight_{0};

 private:
  friend class ServerConn;
  struct LoopState {
    reactor::EventLoop* loop = nullptr;
    size_t index = 0;
    std::vector<std::unique_ptr<transport::Listener>> listeners;
    std::unordered_map<ServerConn*, std::shared_ptr<ServerConn>> conns;
    std::vector<std::weak_ptr<ServerConn>> closed;  // closed, kept alive by running calls
    // Closed after a GOAWAY of ours, kept until the link's drain is over (Link::on_drained).
    std::unordered_map<ServerConn*, std::shared_ptr<ServerConn>> draining;
  };
  // Runs fn on loop i and waits for it.
  void run_on(size_t i, const std::function<void()>& fn);
  Status open_listener(LoopState& ls, const std::string& url, std::string* bound);
  void on_accept(LoopState& ls, std::unique_ptr<transport::Connection> c);

  ServerOptions options_;
  std::unique_ptr<reactor::LoopGroup> group_;
  std::vector<std::unique_ptr<LoopState>> loops_;
  std::unordered_map<uint32_t, std::unique_ptr<detail::MethodInfo>> methods_;
  std::vector<std::unique_ptr<google::protobuf::Service>> owned_;
  std::vector<google::protobuf::Service*> services_;
  std::unique_ptr<google::protobuf::Service> status_service_;
  std::vector<std::shared_ptr<ServerInterceptor>> interceptors_;
  std::unique_ptr<detail::WorkerPool> workers_;
  mutable std::mutex mu_;  // listen_urls_, frozen_
  std::vector<std::string> listen_urls_;
  bool frozen_ = false;  // methods fixed once listening
  std::atomic<bool> going_away_{false};
  std::atomic<uint64_t> server_slots_{0};
  std::atomic<size_t> conn_count_{0};
  bool shut_ = false;
  uint64_t start_ns_ = 0;
  std::vector<detail::ServerCall*> orphans_;  // freed once the loops stopped
};

// One accepted connection.
class ServerConn : public detail::LinkOwner, public std::enable_shared_from_this<ServerConn> {
 public:
  ServerConn(ServerImpl& srv, reactor::EventLoop& loop, size_t loop_index) : srv_(srv), loop_(loop), loop_index_(loop_index) {}
  ~ServerConn() override;
  void start(std::unique_ptr<transport::Connection> c);

  void on_frame(detail::Frame& f) override;
  void on_oversized(const wire::FrameHeader& h) override;
  void on_writable() override {}
  void on_closed(const Status& why) override;
  void on_drained() override;

  // Loop thread: the handler called done.
  void finish(detail::ServerCall* call);
  void go_away();
  void close_now(const Status& why);
  // Shutdown, loop thread, after close_now: hands over the calls whose handlers never
  // called done (freed once the loops stopped) and drops the link.
  void orphan_calls(std::vector<detail::ServerCall*>* out);
  size_t calls() const { return calls_.size(); }
  reactor::EventLoop& loop() { return loop_; }
  void fill(ConnectionStatus* out) const;

 private:
  void on_request(detail::Frame& f);
  void reject(uint64_t id, ErrorCode code, const std::string& text);
  void run_handler(detail::ServerCall* call);
  void cancel_call(detail::ServerCall* call, ErrorCode why);
  detail::ServerCall* find(uint64_t id) {
    auto it = calls_.find(id);
    return it == calls_.end() ? nullptr : it->second;
  }

  ServerImpl& srv_;
  reactor::EventLoop& loop_;
  size_t loop_index_;
  std::unique_ptr<detail::Link> link_;
  std::unordered_map<uint64_t, detail::ServerCall*> calls_;
  bool closed_ = false;
  bool goaway_sent_ = false;
  std::string transport_;
  std::string peer_;
  std::shared_ptr<memory::BlockPool> pool_;  // the connection's (Controller::pool())
};

}  // namespace conduit::rpc
