#include "auto.h"

#include <cerrno>
#include <mutex>
#include <utility>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "conduit/verbs/device.h"
#include "fallback_schedule.h"
#include "option_table.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;

struct AutoOptions {
  uint64_t rdma_timeout_ms = 2000;
  uint64_t rdma_retry_ms = 0;  // 0: try RDMA on every connect
  uint64_t rdma_retry_max_ms = 60000;
  std::map<std::string, std::string> tcp, rdma;
};

// The process-wide per-destination schedule of RDMA retries (rdma_retry_ms).
FallbackSchedule& schedule() {
  static FallbackSchedule s;
  return s;
}

// auto://host:0 listeners: how many ephemeral ports to try for one that is free for RDMA too.
constexpr int kEphemeralAttempts = 16;

// auto's own options (tcp.* and rdma.* go to the inner transports untouched).
using AutoRow = OptionRow<AutoOptions>;
constexpr AutoRow kAutoRows[] = {
    AutoRow::number_row("rdma_timeout_ms", "2000", 1, 600000, &AutoOptions::rdma_timeout_ms,
                        "how long the RDMA attempt may take before falling back")
        .client(),
    AutoRow::number_row("rdma_retry_ms", "0", 0, 86400000, &AutoOptions::rdma_retry_ms,
                        "after a fallback, new connections to that host:port start on TCP without trying RDMA for "
                        "this long, then try it again; 0 = try RDMA on every connect")
        .client(),
    AutoRow::number_row("rdma_retry_max_ms", "60000", 1, 86400000, &AutoOptions::rdma_retry_max_ms,
                        "each consecutive fallback doubles that wait, up to this; an RDMA success forgets it")
        .client(),
};

Result<AutoOptions> parse_options(const Endpoint& ep) {
  Endpoint own = ep;  // auto's own keys only, for the table
  own.options.clear();
  std::map<std::string, std::string> tcp, rdma;
  for (const auto& [k, v] : ep.options) {
    if (k.rfind("tcp.", 0) == 0)
      tcp[k.substr(4)] = v;
    else if (k.rfind("rdma.", 0) == 0)
      rdma[k.substr(5)] = v;
    else
      own.options[k] = v;
  }
  auto o = parse_option_table<AutoOptions>(kAutoRows, own);
  if (!o.ok())
    return Status(o.status().code(),
                  std::string(o.status().message()) + " (inner transports' options take a tcp. or rdma. prefix)");
  o->tcp = std::move(tcp);
  o->rdma = std::move(rdma);
  return o;
}

Endpoint inner(const Endpoint& ep, const std::string& scheme, const std::map<std::string, std::string>& opts) {
  Endpoint e;
  e.scheme = scheme;
  e.address = ep.address;
  e.options = opts;
  return e;
}

// Whether this host has an RDMA device with an active port (checked once per process).
bool rdma_device_present() {
  static std::once_flag once;
  static bool present = false;
  std::call_once(once, [] {
    auto ctx = verbs::Context::open();
    present = ctx.ok();
    if (!present) CONDUIT_LOG(kDebug) << "auto: no usable RDMA device: " << ctx.status().to_string();
  });
  return present;
}

// Wraps whichever connection won; every call is forwarded.
class AutoConnection final : public Connection {
 public:
  AutoConnection(EventLoop& loop, Endpoint ep, AutoOptions o, ConnectCallback cb)
      : loop_(loop), ep_(std::move(ep)), options_(std::move(o)), on_connect_(std::move(cb)) {}
  ~AutoConnection() override = default;

  Status start() {
    Transport* rdma = find_transport("rdma");
    if (rdma != nullptr && rdma_device_present()) {
      if (options_.rdma_retry_ms > 0) {
        const FallbackSchedule::Decision d = schedule().decide(ep_.address, monotonic_ns());
        if (!d.try_rdma) {
          fallback_reason_ = "RDMA not tried for another " + std::to_string(d.retry_in_ms) + " ms after " +
                             std::to_string(d.failures) + " failed attempt(s); last: " + d.last_reason;
          return start_tcp();
        }
      }
      auto opts = options_.rdma;
      if (opts.count("connect_timeout_ms") == 0) opts["connect_timeout_ms"] = std::to_string(options_.rdma_timeout_ms);
      auto c = rdma->connect(loop_, inner(ep_, "rdma", opts), [this](Connection&, Status s) { on_rdma_done(s); });
      if (c.ok()) {
        inner_ = std::move(*c);
        return {};
      }
      fallback_reason_ = c.status().to_string();
      note_rdma_failure();
    } else {
      fallback_reason_ = rdma == nullptr ? "no rdma transport" : "no active RDMA device on this host";
    }
    return start_tcp();
  }

  ConnState state() const override { return inner_ ? inner_->state() : ConnState::kError; }
  const Status& error() const override { return inner_ ? inner_->error() : error_; }
  Result<size_t> read(std::span<uint8_t> b) override { return inner_->read(b); }
  Result<size_t> write(std::span<const uint8_t> d) override { return inner_->write(d); }
  Result<size_t> writev(std::span<const iovec> v) override { return inner_->writev(v); }
  Result<std::span<uint8_t>> reserve(size_t min, size_t max) override { return inner_->reserve(min, max); }
  Status commit(size_t n) override { return inner_->commit(n); }
  Result<std::span<const uint8_t>> peek() override { return inner_->peek(); }
  Status consume(size_t n) override { return inner_->consume(n); }
  Result<size_t> write_owned(memory::Chain& c) override { return inner_->write_owned(c); }
  Result<size_t> read_owned(memory::Chain& out, size_t max) override { return inner_->read_owned(out, max); }
  memory::BlockPool* pool() const override { return inner_ ? inner_->pool() : nullptr; }
  // Handlers are kept here too, so a fallback connection gets them as well.
  void set_read_handler(Handler h) override {
    read_handler_ = std::move(h);
    if (inner_) inner_->set_read_handler(wrap(read_handler_));
  }
  void set_write_handler(Handler h) override {
    write_handler_ = std::move(h);
    if (inner_) inner_->set_write_handler(wrap(write_handler_));
  }
  bool has_pending_data() const override { return inner_->has_pending_data(); }
  void process_pending() override { inner_->process_pending(); }
  Status shutdown_write() override { return inner_->shutdown_write(); }
  void close() override {
    if (inner_) inner_->close();
  }
  std::string local_address() const override { return inner_ ? inner_->local_address() : ""; }
  std::string peer_address() const override { return inner_ ? inner_->peer_address() : ep_.address; }
  Caps caps() const override { return inner_->caps(); }
  const ConnStats& stats() const override { return inner_->stats(); }
  ConnSnapshot snapshot() const override {
    ConnSnapshot s = inner_ ? inner_->snapshot() : Connection::snapshot();
    if (!inner_ || std::string_view(inner_->caps().transport) != "rdma") s.fallback = fallback_reason_;
    s.transport = "auto/" + s.transport;  // as describe() says it
    return s;
  }
  EventLoop& loop() const override { return loop_; }

 private:
  Status start_tcp() {
    Transport* tcp = find_transport("tcp");
    auto c = tcp->connect(loop_, inner(ep_, "tcp", options_.tcp), [this](Connection&, Status s) { on_tcp_done(s); });
    if (!c.ok()) return c.status();
    inner_ = std::move(*c);
    if (read_handler_) inner_->set_read_handler(wrap(read_handler_));
    if (write_handler_) inner_->set_write_handler(wrap(write_handler_));
    return {};
  }

  // Handlers see the AutoConnection, not the inner one.
  Handler wrap(const Handler& h) {
    if (!h) return Handler();
    return [this, h](Connection&) { h(*this); };
  }

  // With rdma_retry_ms: the next connections to this destination start on TCP for a while.
  void note_rdma_failure() {
    if (options_.rdma_retry_ms == 0) return;
    const uint64_t wait = schedule().on_rdma_failed(ep_.address, monotonic_ns(), options_.rdma_retry_ms,
                                                    options_.rdma_retry_max_ms, fallback_reason_);
    fallback_reason_ += "; RDMA is tried again in " + std::to_string(wait) + " ms";
  }

  void on_rdma_done(Status s) {
    if (s.ok()) {
      if (options_.rdma_retry_ms > 0) schedule().on_rdma_ok(ep_.address);
      CONDUIT_LOG(kInfo) << "auto://" << ep_.address << ": using RDMA";
      return finish(s);
    }
    if (s.code() == Code::kResourceExhausted) {
      // The RDMA listener exists and refused (admission, or too many handshakes): that is
      // the server's decision, not a missing path; falling back to TCP would bypass it.
      error_ = s;
      return finish(s);
    }
    fallback_reason_ = s.to_string();
    note_rdma_failure();
    // Called from inside the RDMA connection: let it unwind before it is destroyed.
    loop_.destroy_later(std::move(inner_));
    if (Status t = start_tcp(); !t.ok()) {
      error_ = t;
      finish(t);
    }
  }

  void on_tcp_done(Status s) {
    if (s.ok())
      CONDUIT_LOG(kInfo) << "auto://" << ep_.address << ": using TCP (" << fallback_reason_ << ")";
    finish(s);
  }

  void finish(Status s) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    if (cb) cb(*this, s);
  }

  EventLoop& loop_;
  Endpoint ep_;
  AutoOptions options_;
  ConnectCallback on_connect_;
  std::unique_ptr<Connection> inner_;
  Handler read_handler_, write_handler_;
  std::string fallback_reason_;
  Status error_;
};

class AutoListener final : public Listener {
 public:
  std::string url() const override { return "auto://" + address_; }
  void close() override {
    if (tcp_) tcp_->close();
    if (rdma_) rdma_->close();
  }
  // Both inner listeners' handshakes (tcp has none) and one admission check for both.
  ListenerStats stats() const override {
    ListenerStats s = tcp_->stats();
    if (rdma_) {
      const ListenerStats r = rdma_->stats();
      s.handshakes += r.handshakes;
      s.handshake_bytes += r.handshake_bytes;
      s.refused += r.refused;
      s.failed += r.failed;
    }
    return s;
  }
  void set_admission(AdmitCallback admit) override {
    if (rdma_) rdma_->set_admission(admit);
    tcp_->set_admission(std::move(admit));
  }
  bool serves_rdma() const { return rdma_ != nullptr; }

  std::unique_ptr<Listener> tcp_, rdma_;
  std::string address_;
};

class AutoTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "auto"; }
  std::vector<OptionDoc> options() const override { return document_option_table<AutoOptions>(kAutoRows); }

  Result<std::unique_ptr<Listener>> listen(EventLoop& loop, const Endpoint& ep, AcceptCallback on_accept) override {
    CONDUIT_ASSIGN_OR_RETURN(AutoOptions o, parse_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(auto host_port, ep.host_port());
    Transport* rdma = rdma_device_present() ? find_transport("rdma") : nullptr;
    // Port 0: the RDMA side takes the number TCP got.  rdma_cm's port space is not TCP's, so
    // that number may already be bound there (another process's rdma listener or connection):
    // then both are dropped and the kernel is asked for another, a bounded number of times.
    const int attempts = host_port.second == 0 ? kEphemeralAttempts : 1;
    for (int attempt = 1;; ++attempt) {
      auto l = std::make_unique<AutoListener>();
      CONDUIT_ASSIGN_OR_RETURN(l->tcp_, find_transport("tcp")->listen(loop, inner(ep, "tcp", o.tcp), on_accept));
      const std::string tcp_url = l->tcp_->url();
      l->address_ = tcp_url.substr(tcp_url.find("://") + 3);
      if (rdma == nullptr) return std::unique_ptr<Listener>(std::move(l));
      Endpoint r = inner(ep, "rdma", o.rdma);
      r.address = l->address_;
      auto rl = rdma->listen(loop, r, on_accept);
      if (rl.ok()) {
        l->rdma_ = std::move(*rl);
        CONDUIT_LOG(kInfo) << "auto://" << l->address_ << ": serving RDMA and TCP";
      } else if (attempt < attempts && rl.status().detail_kind() == DetailKind::kErrno &&
                 rl.status().detail() == EADDRINUSE) {
        l->close();
        continue;  // another ephemeral port
      } else {
        CONDUIT_LOG(kInfo) << "auto://" << l->address_ << ": serving TCP only (RDMA: " << rl.status().to_string() << ")";
      }
      return std::unique_ptr<Listener>(std::move(l));
    }
  }

  Result<std::unique_ptr<Connection>> connect(EventLoop& loop, const Endpoint& ep, ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(AutoOptions o, parse_options(ep));
    CONDUIT_RETURN_IF_ERROR(ep.host_port().status());
    auto c = std::make_unique<AutoConnection>(loop, ep, std::move(o), std::move(on_connect));
    CONDUIT_RETURN_IF_ERROR(c->start());
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

Transport* auto_transport() {
  static AutoTransport t;
  return &t;
}

}  // namespace conduit::transport
