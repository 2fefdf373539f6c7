#include <google/protobuf/descriptor.pb.h>

#include <future>
#include <set>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "conduit/transport/endpoint.h"
#include "server_impl.h"
#include "status_service.h"
#include "wire.h"

namespace conduit::rpc {
namespace detail {

std::string_view method_kind_name(MethodKind k) {
  switch (k) {
    case MethodKind::kUnary: return "unary";
    case MethodKind::kServerStream: return "server-stream";
    case MethodKind::kClientStream: return "client-stream";
    case MethodKind::kBidi: return "bidi";
  }
  return "?";
}

MethodKind method_kind(const google::protobuf::MethodDescriptor* md) {
  if (md->client_streaming()) return md->server_streaming() ? MethodKind::kBidi : MethodKind::kClientStream;
  return md->server_streaming() ? MethodKind::kServerStream : MethodKind::kUnary;
}

WorkerPool::WorkerPool(uint32_t threads, size_t max_queue) : max_queue_(max_queue) {
  for (uint32_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}
WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::push(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_ || q_.size() >= max_queue_) return false;
    q_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void WorkerPool::run() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [this] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;  // stopping, and everything queued ran
      fn = std::move(q_.front());
      q_.pop_front();
    }
    fn();
  }
}

}  // namespace detail

ServerImpl::~ServerImpl() { (void)shutdown(0); }

Status ServerImpl::init() {
  if (options_.threads < 1 || options_.threads > 64)
    return Status(Code::kInvalidArgument, "rpc server: threads must be 1..64, got " + std::to_string(options_.threads));
  if (options_.worker_threads > 1024)
    return Status(Code::kInvalidArgument, "rpc server: worker_threads must be 0..1024");
  if (options_.stream_window < 4096)
    return Status(Code::kInvalidArgument, "rpc server: stream_window must be at least 4096 bytes");
  if (options_.max_request_bytes == 0 || options_.max_request_bytes > 0xffffffffull)
    return Status(Code::kInvalidArgument, "rpc server: max_request_bytes must be 1..4294967295");
  if (options_.poll_us > 100000 || options_.busy_poll_us > 100000)
    return Status(Code::kInvalidArgument, "rpc server: poll_us and busy_poll_us must be 0..100000");
  reactor::LoopOptions lo;
  lo.busy_poll_us = options_.busy_poll_us;
  lo.poll_us = options_.poll_us;
  CONDUIT_ASSIGN_OR_RETURN(group_, reactor::LoopGroup::start(static_cast<int>(options_.threads), lo));
  for (size_t i = 0; i < group_->size(); ++i) {
    auto ls = std::make_unique<LoopState>();
    ls->loop = &group_->loop(i);
    ls->index = i;
    loops_.push_back(std::move(ls));
  }
  if (options_.worker_threads > 0) workers_ = std::make_unique<detail::WorkerPool>(options_.worker_threads, 1 << 16);
  start_ns_ = monotonic_ns();
  if (options_.status_service) {
    status_service_ = make_status_service(this);
    CONDUIT_RETURN_IF_ERROR(add_service(status_service_.get(), false));
  }
  return Status::Ok();
}

Status ServerImpl::add_service(google::protobuf::Service* s, bool own) {
  std::unique_ptr<google::protobuf::Service> holder(own ? s : nullptr);
  if (s == nullptr) return Status(Code::kInvalidArgument, "rpc server: add_service(nullptr)");
  std::lock_guard<std::mutex> g(mu_);
  if (frozen_) return Status(Code::kInvalidArgument, "rpc server: add_service after listen()");
  const google::protobuf::ServiceDescriptor* sd = s->GetDescriptor();
  std::vector<std::unique_ptr<detail::MethodInfo>> add;
  for (int i = 0; i < sd->method_count(); ++i) {
    auto m = std::make_unique<detail::MethodInfo>();
    m->service = s;
    m->md = sd->method(i);
    m->full_name = sd->full_name() + "/" + m->md->name();
    m->id = wire::method_id(m->full_name);
    m->kind = detail::method_kind(m->md);
    if (auto* other = find_method(m->id); other != nullptr) {
      return Status(Code::kInvalidArgument, other->full_name == m->full_name
                                                ? "rpc server: " + m->full_name + " is registered twice"
                                                : "rpc server: method id of " + m->full_name + " collides with " +
                                                      other->full_name + " (rename one)");
    }
    add.push_back(std::move(m));
  }
  for (auto& m : add) methods_.emplace(m->id, std::move(m));
  services_.push_back(s);
  if (holder) owned_.push_back(std::move(holder));
  return Status::Ok();
}

Status ServerImpl::set_method_limit(std::string_view name, uint32_t n) {
  std::lock_guard<std::mutex> g(mu_);
  if (frozen_) return Status(Code::kInvalidArgument, "rpc server: set_method_limit after listen()");
  auto* m = find_method(wire::method_id(name));
  if (m == nullptr || m->full_name != name) return Status(Code::kNotFound, "rpc server: no method " + std::string(name));
  m->max_concurrency = n;
  return Status::Ok();
}

bool ServerImpl::try_acquire_server_slot() {
  if (options_.max_concurrency == 0) return true;
  uint64_t cur = server_slots_.load(std::memory_order_relaxed);
  while (cur < options_.max_concurrency) {
    if (server_slots_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}
void ServerImpl::release_server_slot() {
  if (options_.max_concurrency != 0) server_slots_.fetch_sub(1, std::memory_order_relaxed);
}

void ServerImpl::run_on(size_t i, const std::function<void()>& fn) {
  reactor::EventLoop& loop = *loops_[i]->loop;
  std::promise<void> p;
  loop.post([&] {
    fn();
    p.set_value();
  });
  p.get_future().wait();
}

Status ServerImpl::open_listener(LoopState& ls, const std::string& url, std::string* bound) {
  Status st;
  run_on(ls.index, [&] {
    auto l = transport::listen(*ls.loop, url, [this, &ls](std::unique_ptr<transport::Connection> c) {
      on_accept(ls, std::move(c));
    });
    if (!l.ok()) {
      st = l.status();
      return;
    }
    if (bound != nullptr) *bound = (*l)->url();
    ls.listeners.push_back(std::move(*l));
  });
  return st;
}

Result<std::string> ServerImpl::listen(std::string_view url) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (shut_) return Status(Code::kClosed, "rpc server: shut down");
    frozen_ = true;
  }
  CONDUIT_ASSIGN_OR_RETURN(auto ep, transport::Endpoint::parse(url));
  std::string bound;
  if (ep.scheme != "tcp" || loops_.size() == 1) {
    CONDUIT_RETURN_IF_ERROR(open_listener(*loops_[0], std::string(url), &bound).annotate("rpc server: listen " + std::string(url)));
  } else {
    // One tcp listener per loop on one port (SO_REUSEPORT): the kernel spreads connections.
    ep.options.try_emplace("reuseport", "1");
    CONDUIT_RETURN_IF_ERROR(open_listener(*loops_[0], ep.to_string(), &bound).annotate("rpc server: listen " + std::string(url)));
    CONDUIT_ASSIGN_OR_RETURN(auto same, transport::Endpoint::parse(bound));
    same.options = ep.options;
    for (size_t i = 1; i < loops_.size(); ++i) CONDUIT_RETURN_IF_ERROR(open_listener(*loops_[i], same.to_string(), nullptr));
  }
  std::lock_guard<std::mutex> g(mu_);
  listen_urls_.push_back(bound);
  return bound;
}

std::vector<std::string> ServerImpl::listen_urls() const {
  std::lock_guard<std::mutex> g(mu_);
  return listen_urls_;
}

void ServerImpl::on_accept(LoopState& ls, std::unique_ptr<transport::Connection> c) {
  if (going_away()) {
    c->close();
    return;
  }
  if (conn_count_.load(std::memory_order_relaxed) >= options_.max_connections) {
    CONDUIT_LOG(kWarn) << "rpc server: max_connections (" << options_.max_connections << ") reached, closing "
                       << c->describe();
    c->close();
    ls.loop->destroy_later(std::move(c));
    return;
  }
  conn_count_.fetch_add(1, std::memory_order_relaxed);
  auto sc = std::make_shared<ServerConn>(*this, *ls.loop, ls.index);
  ls.conns.emplace(sc.get(), sc);
  sc->start(std::move(c));
}

void ServerImpl::conn_closed(ServerConn* c, size_t loop_index, bool draining) {
  LoopState& ls = *loops_[loop_index];
  auto it = ls.conns.find(c);
  if (it == ls.conns.end()) return;
  std::shared_ptr<ServerConn> keep = std::move(it->second);
  ls.conns.erase(it);
  conn_count_.fetch_sub(1, std::memory_order_relaxed);
  std::erase_if(ls.closed, [](const std::weak_ptr<ServerConn>& w) { return w.expired(); });
  ls.closed.push_back(keep);
  if (draining) {
    ls.draining.emplace(c, std::move(keep));
    return;
  }
  // Calls still running hold their own reference; the last one frees the connection.
  ls.loop->post([keep] {});
}

void ServerImpl::conn_drained(ServerConn* c, size_t loop_index) {
  LoopState& ls = *loops_[loop_index];
  auto it = ls.draining.find(c);
  if (it == ls.draining.end()) return;
  std::shared_ptr<ServerConn> keep = std::move(it->second);
  ls.draining.erase(it);
  ls.loop->post([keep] {});  // not from within its link
}

Status ServerImpl::shutdown(uint64_t grace_ms) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (shut_) return Status::Ok();
    shut_ = true;
  }
  if (!group_) return Status::Ok();
  going_away_.store(true, std::memory_order_release);
  for (auto& ls : loops_) {
    run_on(ls->index, [&ls] {
      for (auto& l : ls->listeners) l->close();
      ls->listeners.clear();
      auto conns = ls->conns;  // go_away may close a connection (and erase it)
      for (auto& [p, c] : conns) c->go_away();
    });
  }
  const uint64_t deadline = monotonic_ns() + grace_ms * 1'000'000;
  while (in_flight() != 0 && monotonic_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool cut = in_flight() != 0;
  if (cut) CONDUIT_LOG(kWarn) << "rpc server: shutdown grace of " << grace_ms << " ms over, " << in_flight() << " calls cut off";
  for (auto& ls : loops_) {
    run_on(ls->index, [&ls] {
      auto conns = ls->conns;
      for (auto& [p, c] : conns) c->close_now(Status(Code::kUnavailable, "rpc server: shut down"));
    });
  }
  // Handlers still running on workers finish into closed connections (their done posts
  // to the loops, which run it before the step below).
  if (workers_) workers_->stop();
  for (auto& ls : loops_) {
    run_on(ls->index, [this, &ls] {
      std::vector<std::shared_ptr<ServerConn>> all;
      for (auto& [p, c] : ls->conns) all.push_back(c);
      for (auto& w : ls->closed)
        if (auto c = w.lock()) all.push_back(std::move(c));
      for (auto& c : all) c->orphan_calls(&orphans_);
      ls->conns.clear();
      ls->closed.clear();
      ls->draining.clear();  // their links close their connections
    });
  }
  group_->stop();
  // No loop runs now: nothing can call these calls' done any more.
  for (detail::ServerCall* c : orphans_) delete c;
  orphans_.clear();
  return cut ? Status(Code::kTimedOut, "rpc server: calls still running at the end of the shutdown grace") : Status::Ok();
}

std::string ServerImpl::file_descriptor_set() const {
  google::protobuf::FileDescriptorSet set;
  std::set<std::string> seen;
  std::function<void(const google::protobuf::FileDescriptor*)> add = [&](const google::protobuf::FileDescriptor* f) {
    if (!seen.insert(f->name()).second) return;
    for (int i = 0; i < f->dependency_count(); ++i) add(f->dependency(i));
    f->CopyTo(set.add_file());
  };
  for (auto* s : services_) add(s->GetDescriptor()->file());
  return set.SerializeAsString();
}

std::vector<std::string> ServerImpl::service_names() const {
  std::vector<std::string> out;
  for (auto* s : services_) out.push_back(s->GetDescriptor()->full_name());
  return out;
}

void ServerImpl::status(StatusResponse* out) const {
  out->set_server("conduit-rpc/0.1");
  out->set_uptime_ms((monotonic_ns() - start_ns_) / 1'000'000);
  for (const auto& u : listen_urls()) out->add_listen_urls(u);
  out->set_threads(options_.threads);
  out->set_worker_threads(options_.worker_threads);
  out->set_in_flight(in_flight());
  out->set_wire_version(wire::kVersion);
  std::vector<const detail::MethodInfo*> ms;
  for (const auto& [id, m] : methods_) ms.push_back(m.get());
  std::sort(ms.begin(), ms.end(), [](auto* a, auto* b) { return a->full_name < b->full_name; });
  for (const auto* m : ms) {
    MethodStatus* s = out->add_methods();
    s->set_name(m->full_name);
    s->set_kind(std::string(detail::method_kind_name(m->kind)));
    s->set_calls(m->calls.load(std::memory_order_relaxed));
    s->set_errors(m->errors.load(std::memory_order_relaxed));
    s->set_in_flight(m->in_flight.load(std::memory_order_relaxed));
    s->set_max_concurrency(m->max_concurrency);
    s->set_rejected(m->rejected.load(std::memory_order_relaxed));
    s->set_p50_us(m->latency.quantile(0.5) / 1e3);
    s->set_p99_us(m->latency.quantile(0.99) / 1e3);
    s->set_p999_us(m->latency.quantile(0.999) / 1e3);
  }
}

void ServerImpl::status_async(std::function<void(std::shared_ptr<StatusResponse>)> cb) const {
  auto out = std::make_shared<StatusResponse>();
  status(out.get());
  // Connections live on their loops: each loop fills its part; the last one calls back.
  // Asynchronous so that a status call served on one loop never waits for another.
  struct Gather {
    std::mutex mu;
    size_t left;
    std::vector<std::vector<ConnectionStatus>> parts;
  };
  auto g = std::make_shared<Gather>();
  g->left = loops_.size();
  g->parts.resize(loops_.size());
  for (const auto& ls : loops_) {
    LoopState* l = ls.get();
    l->loop->post([g, l, out, cb] {
      std::vector<ConnectionStatus> mine;
      for (const auto& [p, c] : l->conns) c->fill(&mine.emplace_back());
      bool last = false;
      {
        std::lock_guard<std::mutex> lk(g->mu);
        g->parts[l->index] = std::move(mine);
        last = --g->left == 0;
      }
      if (!last) return;
      for (auto& part : g->parts)
        for (auto& c : part) *out->add_connections() = std::move(c);
      cb(out);
    });
  }
}

// --- Server facade -------------------------------------------------------------------------

Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

Result<std::unique_ptr<Server>> Server::create(const ServerOptions& options) {
  auto impl = std::make_unique<ServerImpl>(options);
  CONDUIT_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}
Status Server::add_service(google::protobuf::Service* s, bool own) { return impl_->add_service(s, own); }
Status Server::set_method_limit(std::string_view m, uint32_t n) { return impl_->set_method_limit(m, n); }
void Server::add_interceptor(std::shared_ptr<ServerInterceptor> i) { impl_->add_interceptor(std::move(i)); }
Result<std::string> Server::listen(std::string_view url) { return impl_->listen(url); }
std::vector<std::string> Server::listen_urls() const { return impl_->listen_urls(); }
Status Server::shutdown(uint64_t grace_ms) { return impl_->shutdown(grace_ms); }
void Server::status(StatusResponse* out) const {
  std::promise<std::shared_ptr<StatusResponse>> p;
  impl_->status_async([&p](std::shared_ptr<StatusResponse> r) { p.set_value(std::move(r)); });
  *out = *p.get_future().get();
}
uint64_t Server::calls_in_flight() const { return impl_->in_flight(); }

}  // namespace conduit::rpc
