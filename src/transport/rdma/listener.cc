// RdmaListener (rdma_cm listen, bounded handshakes in progress) and the rdma:// Transport.
#include <algorithm>
#include <atomic>

#include "conduit/base/log.h"
#include "connection.h"
#include "loop_context.h"
#include "options.h"
#include "rdma.h"

namespace conduit::transport {
namespace rdma {
namespace {

using namespace conduit::verbs;
using reactor::EventLoop;

class RdmaListener final : public Listener, public CmSink {
 public:
  RdmaListener(LoopContext* ctx, RdmaOptions o, AcceptCallback cb) : ctx_(ctx), options_(o), on_accept_(std::move(cb)) {}
  ~RdmaListener() override {
    close();
    ctx_->release();
  }

  Status start(const SocketAddress& addr, int backlog) {
    CONDUIT_ASSIGN_OR_RETURN(id_, CmId::create(ctx_->channel()));
    id_->set_user_data(static_cast<CmSink*>(this));
    CONDUIT_RETURN_IF_ERROR(id_->bind(addr));
    CONDUIT_RETURN_IF_ERROR(id_->listen(backlog));
    return {};
  }

  std::string url() const override { return id_ ? "rdma://" + id_->local_address().to_string() : "rdma://closed"; }
  void close() override {
    accepting_.clear();
    publish();
    if (id_) id_->set_user_data(nullptr);
    id_.reset();
  }

  void on_cm_event(CmEvent& ev) override {
    if (ev.type != RDMA_CM_EVENT_CONNECT_REQUEST || !ev.new_id) return;
    const std::string peer = ev.new_id->peer_address().to_string();
    // Every accepted request costs a QP and registered memory before its handshake ends:
    // beyond max_handshakes, refuse at once (the client sees REJECTED) rather than let a
    // storm of half-open requests pin memory.
    const bool full = accepting_.size() >= options_.max_handshakes;
    if (full || (admit_ && !admit_())) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      if (full)
        CONDUIT_LOG(kWarn) << "rdma: refusing connection from " << peer << ": " << accepting_.size()
                           << " handshakes in progress (max_handshakes=" << options_.max_handshakes << ")";
      else
        CONDUIT_LOG(kDebug) << "rdma: connection from " << peer << " not admitted";
      uint8_t why[kRefusalSize];
      encode_refusal(full ? Refusal::kHandshakesFull : Refusal::kNotAdmitted, why);
      (void)ev.new_id->reject(why);
      return;
    }
    auto conn = RdmaConnection::start_accept(ctx_, ev, options_);
    if (!conn.ok()) {
      failed_.fetch_add(1, std::memory_order_relaxed);
      CONDUIT_LOG(kWarn) << "rdma accept from " << peer << ": " << conn.status().to_string();
      return;  // the id was destroyed with the failed connection: the peer sees a reject
    }
    RdmaConnection* raw = conn->get();
    raw->on_established_ = [this](RdmaConnection* c, Status s) {
      auto it = std::find_if(accepting_.begin(), accepting_.end(), [c](const auto& p) { return p.get() == c; });
      if (it == accepting_.end()) return;
      std::unique_ptr<RdmaConnection> owned = std::move(*it);
      accepting_.erase(it);
      publish();
      if (!s.ok()) {
        failed_.fetch_add(1, std::memory_order_relaxed);
        CONDUIT_LOG(kDebug) << "rdma: inbound connection failed during setup: " << s.to_string();
        ctx_->loop().destroy_later(std::move(owned));
        return;
      }
      on_accept_(std::move(owned));
    };
    accepting_.push_back(std::move(conn).value());
    publish();
  }

  ListenerStats stats() const override {
    ListenerStats st;
    st.handshakes = handshakes_.load(std::memory_order_relaxed);
    st.handshake_bytes = handshake_bytes_.load(std::memory_order_relaxed);
    st.refused = refused_.load(std::memory_order_relaxed);
    st.failed = failed_.load(std::memory_order_relaxed);
    return st;
  }
  void set_admission(AdmitCallback admit) override { admit_ = std::move(admit); }

 private:
  // Handshake counters for other threads (stats()): recomputed when the set changes.
  void publish() {
    uint64_t bytes = 0;
    for (const auto& c : accepting_) bytes += c->stats().pinned_bytes;
    handshakes_.store(accepting_.size(), std::memory_order_relaxed);
    handshake_bytes_.store(bytes, std::memory_order_relaxed);
  }

  LoopContext* ctx_;
  RdmaOptions options_;
  AcceptCallback on_accept_;
  std::unique_ptr<CmId> id_;
  std::vector<std::unique_ptr<RdmaConnection>> accepting_;  // handshakes in progress
  AdmitCallback admit_;
  std::atomic<uint64_t> handshakes_{0}, handshake_bytes_{0}, refused_{0}, failed_{0};
};

class RdmaTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "rdma"; }
  std::vector<OptionDoc> options() const override { return option_docs(); }

  Result<std::unique_ptr<Listener>> listen(EventLoop& loop, const Endpoint& ep, AcceptCallback on_accept) override {
    if (!on_accept) return Status(Code::kInvalidArgument, "rdma listen: null accept callback");
    CONDUIT_ASSIGN_OR_RETURN(RdmaOptions o, parse_options(ep));
    auto hp = ep.host_port();
    if (!hp.ok()) return hp.status();
    const std::string host = hp->first == "*" ? std::string() : hp->first;
    CONDUIT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::resolve(host, hp->second));
    CONDUIT_ASSIGN_OR_RETURN(LoopContext * ctx, LoopContext::acquire(loop));
    auto l = std::make_unique<RdmaListener>(ctx, o, std::move(on_accept));
    CONDUIT_RETURN_IF_ERROR(l->start(addr, static_cast<int>(o.backlog)));
    return std::unique_ptr<Listener>(std::move(l));
  }

  Result<std::unique_ptr<Connection>> connect(EventLoop& loop, const Endpoint& ep, ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(RdmaOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto c, RdmaConnection::start_connect(loop, ep, o, std::move(on_connect)));
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

std::vector<SrqStats> srq_stats(reactor::EventLoop& loop) { return LoopContext::srq_stats(loop); }
std::vector<ArenaStats> arena_stats(reactor::EventLoop& loop) { return LoopContext::arena_stats(loop); }
std::vector<QpStockStats> qp_stock_stats(reactor::EventLoop& loop) { return LoopContext::qp_stock_stats(loop); }
ReaperStats reaper_stats(reactor::EventLoop& loop) { return LoopContext::reaper_stats(loop); }
void set_qp_destroy_delay_for_tests(uint32_t ms) { QpReaper::set_delay_for_tests(ms); }

}  // namespace rdma

Transport* rdma_transport() {
  static rdma::RdmaTransport t;
  return &t;
}

}  // namespace conduit::transport
