// ClusterChannel: load balancing over per-server Channels, health checks, retries.
#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cancel_hook.h"
#include "conduit/base/log.h"
#include "conduit/rpc/cluster.h"

namespace conduit::rpc {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
uint64_t hash_str(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return mix64(h);
}
constexpr int kVnodes = 64;  // points per server on the hash ring

}  // namespace

class ClusterImpl {
 public:
  struct Server {
    std::string url;
    std::unique_ptr<Channel> ch;
    bool healthy = true;
    bool probing = false;
    uint64_t calls = 0;
  };

  ClusterImpl(reactor::EventLoop& loop, const ClusterOptions& o) : loop_(loop), opts_(o) {}
  ~ClusterImpl() {
    *alive_ = false;
    if (naming_) naming_->stop();
    if (health_timer_ != 0) loop_.cancel(health_timer_);
    for (auto& s : servers_) s->ch->set_state_listener(nullptr);
    for (auto& s : retired_) s->ch->set_state_listener(nullptr);
    servers_.clear();
    retired_.clear();
  }

  Status start(std::unique_ptr<NamingService> naming) {
    naming_ = std::move(naming);
    CONDUIT_RETURN_IF_ERROR(naming_->start(loop_, [this](std::vector<std::string> urls) { update(std::move(urls)); }));
    std::weak_ptr<bool> alive = alive_;
    health_timer_ = loop_.run_every(std::max<uint64_t>(opts_.health_check_ms, 1) * 1'000'000, [this, alive] {
      if (!alive.expired()) health_check();
    });
    return Status::Ok();
  }

  void update(std::vector<std::string> urls) {
    std::vector<std::unique_ptr<Server>> next;
    for (const std::string& u : urls) {
      auto it = std::find_if(servers_.begin(), servers_.end(), [&](const auto& s) { return s && s->url == u; });
      if (it != servers_.end()) {
        next.push_back(std::move(*it));
        continue;
      }
      auto ch = Channel::create(loop_, u, opts_.channel);
      if (!ch.ok()) {
        CONDUIT_LOG(kWarn) << "rpc cluster: ignoring server " << u << ": " << ch.status().to_string();
        continue;
      }
      auto s = std::make_unique<Server>();
      s->url = u;
      s->ch = std::move(*ch);
      Server* raw = s.get();
      s->ch->set_state_listener([this, raw](ChannelState st) {
        if (st == ChannelState::kFailed) mark(raw, false);
      });
      next.push_back(std::move(s));
    }
    // Removed servers: their channels fail pending calls (cancelled) as they go.
    retired_.clear();
    for (auto& s : servers_) {
      if (!s) continue;
      s->ch->set_state_listener(nullptr);
      retired_.push_back(std::move(s));
    }
    servers_ = std::move(next);
    rebuild_ring();
    publish();
    std::weak_ptr<bool> alive = alive_;
    loop_.post([this, alive] {
      if (!alive.expired()) retired_.clear();
    });
  }

  void rebuild_ring() {
    ring_.clear();
    for (size_t i = 0; i < servers_.size(); ++i)
      for (int v = 0; v < kVnodes; ++v) ring_.emplace_back(hash_str(servers_[i]->url + "#" + std::to_string(v)), i);
    std::sort(ring_.begin(), ring_.end());
  }

  void mark(Server* s, bool healthy) {
    if (s->healthy == healthy) return;
    s->healthy = healthy;
    CONDUIT_LOG(kInfo) << "rpc cluster: " << s->url << (healthy ? " back in" : " taken out");
    publish();
  }

  void health_check() {
    std::weak_ptr<bool> alive = alive_;
    for (auto& sp : servers_) {
      Server* s = sp.get();
      if (s->healthy || s->probing) continue;
      s->probing = true;
      s->ch->probe([this, alive, s](Status st) {
        if (alive.expired()) return;
        // The server may have been removed meanwhile.
        bool present = false;
        for (auto& p : servers_) present |= p.get() == s;
        if (!present) return;
        s->probing = false;
        if (st.ok()) mark(s, true);
      });
    }
  }

  // The server for this call, skipping `tried`; nullptr when none is healthy.
  Server* pick(const Controller& cntl, const std::vector<Server*>& tried) {
    auto usable = [&](Server* s) { return s->healthy && std::find(tried.begin(), tried.end(), s) == tried.end(); };
    const size_t n = servers_.size();
    if (n == 0) return nullptr;
    switch (opts_.lb) {
      case LbPolicy::kRoundRobin:
        for (size_t i = 0; i < n; ++i) {
          Server* s = servers_[rr_++ % n].get();
          if (usable(s)) return s;
        }
        return nullptr;
      case LbPolicy::kRandom: {
        std::uniform_int_distribution<size_t> d(0, n - 1);
        const size_t start = d(rng_);
        for (size_t i = 0; i < n; ++i) {
          Server* s = servers_[(start + i) % n].get();
          if (usable(s)) return s;
        }
        return nullptr;
      }
      case LbPolicy::kConsistentHash: {
        const uint64_t h = mix64(cntl.has_request_key() ? cntl.request_key() : rr_++);
        auto it = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(h, size_t{0}));
        for (size_t i = 0; i < ring_.size(); ++i, ++it) {
          if (it == ring_.end()) it = ring_.begin();
          Server* s = servers_[it->second].get();
          if (usable(s)) return s;
        }
        return nullptr;
      }
    }
    return nullptr;
  }

  struct Attempt {
    const google::protobuf::MethodDescriptor* md;
    Controller* cntl;
    const google::protobuf::Message* req;
    google::protobuf::Message* resp;
    std::function<void()> done;
    std::vector<Server*> tried;
  };

  void start_call(std::shared_ptr<Attempt> a) {
    Server* s = pick(*a->cntl, a->tried);
    if (s == nullptr) {
      a->cntl->SetFailed(ErrorCode::kUnavailable, "rpc cluster: no healthy server among " +
                                                      std::to_string(servers_.size()) +
                                                      (a->tried.empty() ? "" : " (tried " + std::to_string(a->tried.size()) + ")"));
      auto done = std::move(a->done);
      if (done) done();
      return;
    }
    a->tried.push_back(s);
    ++s->calls;
    std::weak_ptr<bool> alive = alive_;
    s->ch->call(a->md, a->cntl, a->req, a->resp, [this, alive, a, s] {
      if (alive.expired()) {
        if (a->done) a->done();
        return;
      }
      Controller& c = *a->cntl;
      const bool retriable = c.error_code() == ErrorCode::kUnavailable && (c.idempotent() || !c.reached_server_);
      if (c.error_code() == ErrorCode::kUnavailable) {
        bool present = false;
        for (auto& p : servers_) present |= p.get() == s;
        if (present) mark(s, false);
      }
      if (retriable && a->tried.size() <= opts_.max_retries && !c.IsCanceled()) {
        ++c.retries_;
        const int retries = c.retries_;
        start_call(a);
        a->cntl->retries_ = retries;
        return;
      }
      auto done = std::move(a->done);
      if (done) done();
    });
  }

  void publish() {
    std::vector<ClusterChannel::ServerState> snap;
    for (auto& s : servers_) snap.push_back({s->url, s->healthy, s->calls});
    std::lock_guard<std::mutex> g(mu_);
    snapshot_ = std::move(snap);
  }

  reactor::EventLoop& loop_;
  ClusterOptions opts_;
  std::unique_ptr<reactor::LoopGroup> own_;
  std::thread::id own_tid_;
  std::unique_ptr<NamingService> naming_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::unique_ptr<Server>> retired_;
  std::vector<std::pair<uint64_t, size_t>> ring_;
  size_t rr_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
  reactor::TimerId health_timer_ = 0;
  mutable std::mutex mu_;
  std::vector<ClusterChannel::ServerState> snapshot_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  bool on_loop() const { return own_ ? std::this_thread::get_id() == own_tid_ : loop_.in_loop_thread(); }
};

ClusterChannel::ClusterChannel(std::unique_ptr<ClusterImpl> impl) : impl_(std::move(impl)) {}

ClusterChannel::~ClusterChannel() {
  if (impl_->own_) {
    auto group = std::move(impl_->own_);
    std::promise<void> p;
    ClusterImpl* raw = impl_.release();
    group->loop(0).post([raw, &p] {
      delete raw;
      p.set_value();
    });
    p.get_future().wait();
    group->stop();
  }
}

Result<std::unique_ptr<ClusterChannel>> ClusterChannel::create(reactor::EventLoop& loop,
                                                               std::unique_ptr<NamingService> naming,
                                                               const ClusterOptions& options) {
  auto impl = std::make_unique<ClusterImpl>(loop, options);
  CONDUIT_RETURN_IF_ERROR(impl->start(std::move(naming)));
  return std::unique_ptr<ClusterChannel>(new ClusterChannel(std::move(impl)));
}

Result<std::unique_ptr<ClusterChannel>> ClusterChannel::create(reactor::EventLoop& loop, std::string_view spec,
                                                               const ClusterOptions& options) {
  CONDUIT_ASSIGN_OR_RETURN(auto naming, make_naming(spec));
  return create(loop, std::move(naming), options);
}

Result<std::unique_ptr<ClusterChannel>> ClusterChannel::create(std::string_view spec, const ClusterOptions& options) {
  CONDUIT_ASSIGN_OR_RETURN(auto naming, make_naming(spec));
  if (options.channel.poll_us > 100000) return Status(Code::kInvalidArgument, "rpc cluster: poll_us must be 0..100000");
  reactor::LoopOptions lo;
  lo.poll_us = options.channel.poll_us;
  CONDUIT_ASSIGN_OR_RETURN(auto group, reactor::LoopGroup::start(1, lo));
  auto impl = std::make_unique<ClusterImpl>(group->loop(0), options);
  Status st;
  std::promise<std::thread::id> tid;
  group->loop(0).post([&] {
    st = impl->start(std::move(naming));
    tid.set_value(std::this_thread::get_id());
  });
  impl->own_tid_ = tid.get_future().get();
  if (!st.ok()) {
    std::promise<void> p;
    group->loop(0).post([&] {
      impl.reset();
      p.set_value();
    });
    p.get_future().wait();
    return st;
  }
  impl->own_ = std::move(group);
  return std::unique_ptr<ClusterChannel>(new ClusterChannel(std::move(impl)));
}

void ClusterChannel::CallMethod(const google::protobuf::MethodDescriptor* method,
                                google::protobuf::RpcController* controller, const google::protobuf::Message* request,
                                google::protobuf::Message* response, google::protobuf::Closure* done) {
  auto* cntl = dynamic_cast<Controller*>(controller);
  if (cntl == nullptr) {
    controller->SetFailed("conduit::rpc::ClusterChannel needs a conduit::rpc::Controller");
    if (done != nullptr) done->Run();
    return;
  }
  if (done != nullptr) {
    call(method, cntl, request, response, [done] { done->Run(); });
    return;
  }
  if (impl_->on_loop()) {
    bool finished = false;
    call(method, cntl, request, response, [&finished] { finished = true; });
    while (!finished)
      if (!impl_->loop_.run_once(-1).ok()) break;
    return;
  }
  call_future(method, cntl, request, response).wait();
}

void ClusterChannel::call(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                          const google::protobuf::Message* request, google::protobuf::Message* response,
                          std::function<void()> done) {
  cntl->retries_ = 0;
  cntl->ensure_cancel_hook();
  auto a = std::make_shared<ClusterImpl::Attempt>(ClusterImpl::Attempt{method, cntl, request, response, std::move(done), {}});
  if (impl_->on_loop()) {
    impl_->start_call(std::move(a));
    return;
  }
  ClusterImpl* impl = impl_.get();
  impl_->loop_.post([impl, a] { impl->start_call(a); });
}

std::future<Status> ClusterChannel::call_future(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                                                const google::protobuf::Message* request,
                                                google::protobuf::Message* response) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  call(method, cntl, request, response, [p, cntl] { p->set_value(cntl->status()); });
  return f;
}

std::vector<ClusterChannel::ServerState> ClusterChannel::servers() const {
  std::lock_guard<std::mutex> g(impl_->mu_);
  return impl_->snapshot_;
}

}  // namespace conduit::rpc
