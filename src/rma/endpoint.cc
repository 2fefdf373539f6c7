// The URL front door (scheme -> engine), the option table, and Endpoint's forwarding.
#include <memory>
#include <utility>

#include "conduit/base/log.h"
#include "conduit/transport/endpoint.h"
#include "engine.h"

namespace conduit::rma {
namespace {

// One row per URL option: name, default, range and doc, and how it is read.  Parsing,
// defaults and docs/RMA.md's table come from here (tests/rma checks the doc shows each row).
struct OptionRow {
  const char* name;
  const char* default_text;
  const char* range;
  const char* doc;
  uint64_t min, max;
  bool bytes;
  void (*set)(EndpointOptions&, uint64_t);
  uint64_t (*get)(const EndpointOptions&);
};

constexpr OptionRow kOptions[] = {
    {"depth", "64", "1–4096", "operations in flight at most; submit() would-blocks beyond", 1, 4096, false,
     [](EndpointOptions& o, uint64_t v) { o.depth = static_cast<uint32_t>(v); },
     [](const EndpointOptions& o) -> uint64_t { return o.depth; }},
    {"signal_every", "16", "1–4096 (≤ depth)", "rdma: a signalled work request at least every this many (default: at most depth)", 1, 4096,
     false, [](EndpointOptions& o, uint64_t v) { o.signal_every = static_cast<uint32_t>(v); },
     [](const EndpointOptions& o) -> uint64_t { return o.signal_every; }},
    {"max_op", "16M", "1–1G", "bytes one read or write may move (the emulation buffers a whole op)", 1, 1u << 30,
     true, [](EndpointOptions& o, uint64_t v) { o.max_op = v; },
     [](const EndpointOptions& o) -> uint64_t { return o.max_op; }},
    {"connect_timeout_ms", "5000", "100–600000", "client: connection setup bound (rdma: address, route, accept)",
     100, 600000, false, [](EndpointOptions& o, uint64_t v) { o.connect_timeout_ms = static_cast<uint32_t>(v); },
     [](const EndpointOptions& o) -> uint64_t { return o.connect_timeout_ms; }},
    {"busy_poll_us", "0", "0–1000000",
     "rdma: after each post or completion, poll the completion queue this long before sleeping on its channel "
     "(trades a core for the wakeup: compare with plain perftest); 0 = event-driven. tcp/shm: ignored (the event "
     "loop's own polling, `LoopOptions`, applies)",
     0, 1000000, false, [](EndpointOptions& o, uint64_t v) { o.busy_poll_us = v; },
     [](const EndpointOptions& o) -> uint64_t { return o.busy_poll_us; }},
    {"local_cache", "256M", "0–64G",
     "rdma: bytes of application memory (the local buffers of reads and writes) kept registered for reuse; beyond it "
     "the least recently used registrations are deregistered. Those that ops in flight use are kept regardless. "
     "tcp/shm: ignored (nothing is registered)",
     0, uint64_t{64} << 30, true, [](EndpointOptions& o, uint64_t v) { o.local_cache = v; },
     [](const EndpointOptions& o) -> uint64_t { return o.local_cache; }},
    {"timeout", "17", "1–31",
     "rdma: local ACK timeout exponent, 4.096 us * 2^timeout per try (17 = 537 ms, as rdma:// uses). Bounds how "
     "long a peer's packet waits when the other side recovers its queue pair second",
     1, 31, false, [](EndpointOptions& o, uint64_t v) { o.timeout = static_cast<uint8_t>(v); },
     [](const EndpointOptions& o) -> uint64_t { return o.timeout; }},
    {"windows", "1", "0–1",
     "rdma: 1 = an exposure's key is a type-2 memory window bound to this endpoint's queue pair where the device "
     "has windows (revoke invalidates it); 0 = the exposure's own memory region carries the rights and revoke "
     "deregisters it, the path of devices without windows. Either way the key opens exactly the exposure and works "
     "only from this endpoint's peer (the endpoint's protection domain is its own). tcp/shm: ignored",
     0, 1, false, [](EndpointOptions& o, uint64_t v) { o.windows = v != 0; },
     [](const EndpointOptions& o) -> uint64_t { return o.windows ? 1 : 0; }},
};

struct Parsed {
  transport::Endpoint ep;  // without the rma options
  EndpointOptions options;
};

Result<Parsed> parse(std::string_view url) {
  CONDUIT_ASSIGN_OR_RETURN(transport::Endpoint ep, transport::Endpoint::parse(url));
  Parsed p;
  transport::Endpoint mine;
  for (const OptionRow& row : kOptions) {
    auto it = ep.options.find(row.name);
    if (it == ep.options.end()) continue;
    mine.options.emplace(it->first, it->second);
    ep.options.erase(it);
  }
  transport::OptionReader reader(mine);
  for (const OptionRow& row : kOptions) {
    const uint64_t fallback = row.get(p.options);
    Result<uint64_t> v = row.bytes ? reader.get_bytes(row.name, fallback, row.min, row.max)
                                   : reader.get_u64(row.name, fallback, row.min, row.max);
    if (!v.ok()) return Status(v.status().code(), "rma " + std::string(url) + ": " + std::string(v.status().message()));
    row.set(p.options, *v);
  }
  // The default signal interval shrinks to a smaller depth; an explicit one must fit.
  if (p.options.signal_every > p.options.depth && mine.options.count("signal_every") == 0)
    p.options.signal_every = p.options.depth;
  if (p.options.signal_every > p.options.depth)
    return Status(Code::kInvalidArgument, "rma " + std::string(url) + ": signal_every is above depth");
  p.ep = std::move(ep);
  return p;
}

Result<std::pair<std::string, uint16_t>> rdma_address(const transport::Endpoint& ep) {
  if (!ep.options.empty())
    return Status(Code::kInvalidArgument, "rma rdma://: unknown option '" + ep.options.begin()->first + "'");
  return ep.host_port();
}

}  // namespace

std::string options_markdown() {
  std::string s = "| option | default | range | meaning |\n| --- | --- | --- | --- |\n";
  for (const OptionRow& row : kOptions)
    s += std::string("| `") + row.name + "` | " + row.default_text + " | " + row.range + " | " + row.doc + " |\n";
  return s;
}

Result<std::unique_ptr<Endpoint>> Endpoint::connect(reactor::EventLoop& loop, std::string_view url,
                                                    ConnectCallback on_connect) {
  CONDUIT_ASSIGN_OR_RETURN(Parsed p, parse(url));
  std::unique_ptr<Engine> engine;
  const std::string& scheme = p.ep.scheme;
  if (scheme == "auto") return connect_auto(loop, std::move(p.ep), p.options, std::move(on_connect));
  if (scheme == "tcp" || scheme == "shm") {
    CONDUIT_ASSIGN_OR_RETURN(engine, connect_emulated(loop, p.ep.to_string(), p.options));
  } else if (scheme == "rdma") {
    CONDUIT_ASSIGN_OR_RETURN(auto hp, rdma_address(p.ep));
    CONDUIT_ASSIGN_OR_RETURN(engine, connect_verbs(loop, hp.first, hp.second, p.options));
  } else {
    return Status(Code::kInvalidArgument, "rma: scheme '" + scheme + "' is not one of rdma, tcp, shm, auto");
  }
  auto ep = std::make_unique<Endpoint>(std::move(engine));
  ep->engine_->attach(ep.get(), std::move(on_connect));
  return ep;
}

// auto://: rdma when this host has a device and the peer answers over it, tcp otherwise (the
// listener serves both on one port number).  A failed rdma attempt swaps the engine for a
// tcp one inside the failure callback; the old engine is destroyed once its stack unwinds.
Result<std::unique_ptr<Endpoint>> Endpoint::connect_auto(reactor::EventLoop& loop, transport::Endpoint ep,
                                                         const EndpointOptions& o, ConnectCallback on_connect) {
  CONDUIT_ASSIGN_OR_RETURN(auto hp, rdma_address(ep));
  ep.scheme = "tcp";
  const std::string tcp_url = ep.to_string();
  Result<std::unique_ptr<Engine>> rdma =
      verbs_device_present() ? connect_verbs(loop, hp.first, hp.second, o)
                             : Result<std::unique_ptr<Engine>>(Status(Code::kUnavailable, "no RDMA device"));
  if (!rdma.ok()) {
    CONDUIT_LOG(kInfo) << "rma auto://" << ep.address << ": tcp (" << rdma.status().to_string() << ")";
    CONDUIT_ASSIGN_OR_RETURN(auto tcp, connect_emulated(loop, tcp_url, o));
    auto out = std::make_unique<Endpoint>(std::move(tcp));
    out->engine_->attach(out.get(), std::move(on_connect));
    return out;
  }
  auto out = std::make_unique<Endpoint>(std::move(*rdma));
  Endpoint* raw = out.get();
  raw->engine_->attach(raw, [raw, &loop, tcp_url, o, cb = std::move(on_connect)](Endpoint& e, Status s) mutable {
    if (s.ok() || s.code() == Code::kCancelled) return cb(e, std::move(s));
    CONDUIT_LOG(kInfo) << "rma " << tcp_url << ": rdma failed (" << s.to_string() << "), falling back to tcp";
    auto tcp = connect_emulated(loop, tcp_url, o);
    if (!tcp.ok()) return cb(e, tcp.status());
    std::unique_ptr<Engine> old = std::move(raw->engine_);
    raw->engine_ = std::move(*tcp);
    raw->engine_->attach(raw, std::move(cb));
    loop.destroy_later(std::move(old));
  });
  return out;
}

namespace {
// auto:// on the server: the rdma listener (when a device is present) and the tcp one.
class AutoListener final : public Listener {
 public:
  std::unique_ptr<Listener> rdma, tcp;
  std::string url() const override {
    std::string u = tcp->url();
    return "auto" + u.substr(u.find("://"));
  }
  void close() override {
    if (rdma) rdma->close();
    tcp->close();
  }
};
}  // namespace

Result<std::unique_ptr<Listener>> Listener::listen(reactor::EventLoop& loop, std::string_view url,
                                                   AcceptCallback on_accept) {
  CONDUIT_ASSIGN_OR_RETURN(Parsed p, parse(url));
  const std::string& scheme = p.ep.scheme;
  if (scheme == "tcp" || scheme == "shm") return listen_emulated(loop, p.ep.to_string(), p.options, on_accept);
  if (scheme == "rdma") {
    CONDUIT_ASSIGN_OR_RETURN(auto hp, rdma_address(p.ep));
    return listen_verbs(loop, hp.first, hp.second, p.options, std::move(on_accept));
  }
  if (scheme == "auto") {
    CONDUIT_ASSIGN_OR_RETURN(auto hp, rdma_address(p.ep));
    auto l = std::make_unique<AutoListener>();
    p.ep.scheme = "tcp";
    CONDUIT_ASSIGN_OR_RETURN(l->tcp, listen_emulated(loop, p.ep.to_string(), p.options, on_accept));
    if (verbs_device_present()) {
      // The same port number: rdma_cm's port space is not the kernel's TCP ports.  An
      // address without an RDMA device (loopback) serves tcp only.
      CONDUIT_ASSIGN_OR_RETURN(auto tcp_port, transport::Endpoint::parse(l->tcp->url()));
      CONDUIT_ASSIGN_OR_RETURN(auto bound, tcp_port.host_port());
      auto r = listen_verbs(loop, hp.first, bound.second, p.options, on_accept);
      if (r.ok()) l->rdma = std::move(*r);
      else CONDUIT_LOG(kInfo) << "rma " << url << ": tcp only (" << r.status().to_string() << ")";
    }
    return std::unique_ptr<Listener>(std::move(l));
  }
  return Status(Code::kInvalidArgument, "rma: scheme '" + scheme + "' is not one of rdma, tcp, shm, auto");
}

// --- Endpoint forwarding ------------------------------------------------------------------

Endpoint::Endpoint(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
Endpoint::~Endpoint() {
  if (engine_) engine_->close();
}
EndpointState Endpoint::state() const { return engine_->state(); }
const Status& Endpoint::error() const { return engine_->error(); }
std::string_view Endpoint::transport() const { return engine_->transport(); }
const EndpointOptions& Endpoint::options() const { return engine_->options(); }
std::string Endpoint::describe() const {
  return "rma/" + engine_->transport() + " " + engine_->addresses() + " " +
         std::string(endpoint_state_name(engine_->state()));
}
Result<Descriptor> Endpoint::expose(void* addr, size_t len, Rights rights) {
  return engine_->expose(addr, len, rights);
}
Status Endpoint::revoke(const Descriptor& d) { return engine_->revoke(d); }
Status Endpoint::submit(std::span<Op> ops) { return engine_->submit(ops); }
Status Endpoint::submit(Op op) { return engine_->submit(std::span<Op>(&op, 1)); }
size_t Endpoint::in_flight() const { return engine_->in_flight(); }
void Endpoint::set_ready_handler(std::function<void(Endpoint&)> h) { engine_->ready_handler = std::move(h); }
void Endpoint::set_imm_handler(ImmHandler h) { engine_->imm_handler = std::move(h); }
void Endpoint::set_close_handler(std::function<void(Endpoint&)> h) { engine_->close_handler = std::move(h); }
const EndpointStats& Endpoint::stats() const { return engine_->stats(); }
reactor::EventLoop& Endpoint::loop() const { return engine_->loop(); }
void Endpoint::close() { engine_->close(); }

std::pair<OpCallback, std::future<OpResult>> make_future() {
  auto promise = std::make_shared<std::promise<OpResult>>();
  std::future<OpResult> f = promise->get_future();
  return {[promise](const OpResult& r) { promise->set_value(r); }, std::move(f)};
}

}  // namespace conduit::rma
