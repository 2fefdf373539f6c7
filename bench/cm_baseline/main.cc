// conduit-cm-baseline: the bare rdma_cm connect/accept that rdma:// setup is measured
// against (issue 10 §2: "connect+accept p50 <= 1.5x a bare rdma_cm connect/accept to
// ESTABLISHED with the same QP and CQ sizes that registers nothing").
//
// One process, one thread, one rdma_cm event channel for the listener and every client --
// the shape of conduit-fanin (listener and clients on one loop).  Each connection gets
// what an rdma:// connection gets from the verbs, sized from rdma://'s defaults
// (src/transport/rdma/options.h, connection.cc setup_resources): a completion channel, one
// CQ of send_depth + recv_depth + 16 entries for sends and receives, an RC QP with
// send_depth/recv_depth WRs, one SGE each way, inline_bytes inline, on one PD per device;
// the same connect parameters (initiator depth and responder resources 1, rnr_retry and
// retry_count 7, ACK timeout 17).  It registers no memory, posts no receive and sends
// nothing: a connection is done when both sides have seen RDMA_CM_EVENT_ESTABLISHED.
//
// -n N connections sequentially (each fully up before the next starts; all kept open until
// the end, as conduit-fanin keeps them) or, with --concurrent, all N started at once.
// Per connection it times the phases: resolve address, resolve route, the client's
// CQ + QP + rdma_connect, connect request seen by the listener, the server's CQ + QP +
// rdma_accept, and the last ESTABLISHED.  Output: p50/min/max of each (microseconds) and
// the wall time; --json for one object on stdout.
#include <CLI/CLI.hpp>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "numeric_flags.h"

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "conduit-cm-baseline: %s\n", what.c_str());
  std::exit(1);
}
void check(int rc, const char* what) {
  if (rc != 0) die(std::string(what) + ": " + std::strerror(errno));
}

struct Sizes {
  uint32_t send_depth = 256, recv_depth = 256, inline_bytes = 64;
  uint8_t ack_timeout = 17;
};

// The verbs objects of one side of one connection, destroyed in reverse creation order.
struct Side {
  rdma_cm_id* id = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  bool qp = false;
  bool established = false;
  ~Side() {
    if (qp) rdma_destroy_qp(id);
    if (cq) ibv_destroy_cq(cq);
    if (channel) ibv_destroy_comp_channel(channel);
    if (id) rdma_destroy_id(id);
  }
};

// Phase timestamps of one connection (ns, monotonic).
struct Conn {
  Side client, server;
  uint64_t start = 0, addr = 0, route = 0, connect_sent = 0, request = 0, accept_sent = 0, done = 0;
};

class Bench {
 public:
  Bench(Sizes s, double timeout_s) : sizes_(s), timeout_ns_(static_cast<uint64_t>(timeout_s * 1e9)) {
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr) die(std::string("rdma_create_event_channel: ") + std::strerror(errno));
  }
  ~Bench() {
    conns_.clear();  // their ids before the listener's and the channel
    if (listen_id_) rdma_destroy_id(listen_id_);
    for (auto& [ctx, pd] : pds_) ibv_dealloc_pd(pd);
    if (ch_) rdma_destroy_event_channel(ch_);
  }

  void listen(const std::string& addr) {
    check(rdma_create_id(ch_, &listen_id_, nullptr, RDMA_PS_TCP), "rdma_create_id (listener)");
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, addr.c_str(), &sin.sin_addr) != 1) die("not an IPv4 address: " + addr);
    check(rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&sin)), "rdma_bind_addr");
    check(rdma_listen(listen_id_, 1024), "rdma_listen");
    dst_ = sin;
    dst_.sin_port = rdma_get_src_port(listen_id_);
  }

  // Starts connection i: create the id and resolve the address.
  void start(size_t i) {
    Conn& c = *conns_[i];
    c.start = now_ns();
    check(rdma_create_id(ch_, &c.client.id, reinterpret_cast<void*>(i), RDMA_PS_TCP), "rdma_create_id");
    check(rdma_resolve_addr(c.client.id, nullptr, reinterpret_cast<sockaddr*>(&dst_), 10000), "rdma_resolve_addr");
  }

  void run(size_t n, bool concurrent) {
    for (size_t i = 0; i < n; ++i) conns_.push_back(std::make_unique<Conn>());
    const uint64_t t0 = now_ns();
    deadline_ = t0 + timeout_ns_;
    if (concurrent) {
      for (size_t i = 0; i < n; ++i) start(i);
      while (done_ < n) step();
    } else {
      for (size_t i = 0; i < n; ++i) {
        start(i);
        while (done_ < i + 1) step();
      }
    }
    wall_ns_ = now_ns() - t0;
  }

  const std::vector<std::unique_ptr<Conn>>& conns() const { return conns_; }
  uint64_t wall_ns() const { return wall_ns_; }

 private:
  ibv_pd* pd_for(ibv_context* ctx) {
    auto& pd = pds_[ctx];
    if (pd == nullptr && (pd = ibv_alloc_pd(ctx)) == nullptr) die("ibv_alloc_pd failed");
    return pd;
  }

  // rdma://'s per-connection verbs objects, sized as its defaults size them.
  void create_qp(Side& s) {
    ibv_context* ctx = s.id->verbs;
    s.channel = ibv_create_comp_channel(ctx);
    if (s.channel == nullptr) die("ibv_create_comp_channel failed");
    const int cqe = static_cast<int>(sizes_.send_depth + sizes_.recv_depth) + 16;
    s.cq = ibv_create_cq(ctx, cqe, nullptr, s.channel, 0);
    if (s.cq == nullptr) die("ibv_create_cq failed");
    ibv_qp_init_attr a{};
    a.send_cq = s.cq;
    a.recv_cq = s.cq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = sizes_.send_depth;
    a.cap.max_recv_wr = sizes_.recv_depth;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.cap.max_inline_data = sizes_.inline_bytes;
    check(rdma_create_qp(s.id, pd_for(ctx), &a), "rdma_create_qp");
    s.qp = true;
    uint8_t t = sizes_.ack_timeout;
    check(rdma_set_option(s.id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t), "rdma_set_option");
  }

  static rdma_conn_param conn_param() {
    rdma_conn_param p{};
    p.initiator_depth = 1;
    p.responder_resources = 1;
    p.rnr_retry_count = 7;
    p.retry_count = 7;
    return p;
  }

  void finish_if_done(Conn& c) {
    if (c.done == 0 && c.client.established && c.server.established) {
      c.done = now_ns();
      ++done_;
    }
  }

  void step() {
    pollfd pfd{ch_->fd, POLLIN, 0};
    const uint64_t t = now_ns();
    if (t >= deadline_) die("timed out with " + std::to_string(done_) + " of " + std::to_string(conns_.size()) + " up");
    const int ms = static_cast<int>(std::min<uint64_t>((deadline_ - t) / 1'000'000 + 1, 1000));
    if (poll(&pfd, 1, ms) <= 0) return;
    rdma_cm_event* ev = nullptr;
    check(rdma_get_cm_event(ch_, &ev), "rdma_get_cm_event");
    const rdma_cm_event_type type = ev->event;
    const int status = ev->status;
    rdma_cm_id* id = ev->id;
    rdma_cm_id* listen = ev->listen_id;
    const uint64_t when = now_ns();
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      // Which client: the one whose connect went out, not yet requested (sequential: the
      // only one; concurrent: the request carries the client's source port).
      rdma_ack_cm_event(ev);
      (void)listen;
      Conn* c = by_port(rdma_get_dst_port(id));
      if (c == nullptr) die("connect request from an unknown port");
      c->request = when;
      c->server.id = id;
      id->context = reinterpret_cast<void*>(index_of(c) | kServerBit);
      create_qp(c->server);
      rdma_conn_param p = conn_param();
      check(rdma_accept(id, &p), "rdma_accept");
      c->accept_sent = now_ns();
      return;
    }
    const uintptr_t tag = reinterpret_cast<uintptr_t>(id->context);
    rdma_ack_cm_event(ev);
    Conn& c = *conns_.at(tag & ~kServerBit);
    const bool server = (tag & kServerBit) != 0;
    switch (type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        c.addr = when;
        check(rdma_resolve_route(c.client.id, 10000), "rdma_resolve_route");
        return;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        c.route = when;
        create_qp(c.client);
        rdma_conn_param p = conn_param();
        check(rdma_connect(c.client.id, &p), "rdma_connect");
        c.connect_sent = now_ns();
        port_of_[rdma_get_src_port(c.client.id)] = &c;
        return;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        (server ? c.server : c.client).established = true;
        finish_if_done(c);
        return;
      default:
        die(std::string(server ? "server" : "client") + " side: " + rdma_event_str(type) +
            " (status " + std::to_string(status) + ")");
    }
  }

  Conn* by_port(uint16_t port) {
    auto it = port_of_.find(port);
    if (it == port_of_.end()) return nullptr;
    Conn* c = it->second;
    port_of_.erase(it);
    return c;
  }
  size_t index_of(const Conn* c) const {
    for (size_t i = 0; i < conns_.size(); ++i)
      if (conns_[i].get() == c) return i;
    die("unknown connection");
  }

  static constexpr uintptr_t kServerBit = uintptr_t{1} << (sizeof(uintptr_t) * 8 - 1);
  Sizes sizes_;
  uint64_t timeout_ns_;
  uint64_t deadline_ = 0;
  uint64_t wall_ns_ = 0;
  size_t done_ = 0;
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  sockaddr_in dst_{};
  std::map<ibv_context*, ibv_pd*> pds_;
  std::map<uint16_t, Conn*> port_of_;  // client source port (network order) -> connection
  std::vector<std::unique_ptr<Conn>> conns_;
};

struct Stat {
  double p50, min, max;
};
Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[(v.size() - 1) / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bare rdma_cm connect/accept to ESTABLISHED, sized like rdma:// (registers nothing)"};
  std::string addr;
  size_t n = 20;
  bool concurrent = false, json = false;
  double timeout = 300;
  Sizes s;
  app.add_option("--addr", addr, "IPv4 address on the RDMA device's netdev (listen and connect)")->required();
  app.add_option("-n,--conns", n, "connections (1 .. 4096)")->check(conduit::tools::in_range<size_t>(1, 4096));
  app.add_flag("--concurrent", concurrent, "start all connections at once instead of one after another");
  app.add_option("--send-depth", s.send_depth, "QP send WRs (rdma:// send_depth)")
      ->capture_default_str()
      ->check(conduit::tools::in_range<uint32_t>(16, 16384));
  app.add_option("--recv-depth", s.recv_depth, "QP receive WRs (rdma:// recv_depth)")
      ->capture_default_str()
      ->check(conduit::tools::in_range<uint32_t>(16, 16384));
  app.add_option("--inline", s.inline_bytes, "max inline data (rdma:// inline)")
      ->capture_default_str()
      ->check(conduit::tools::in_range<uint32_t>(0, 1024));
  app.add_option("--timeout", timeout, "bound on the whole run, seconds")->check(conduit::tools::in_range(1.0, 3600.0));
  app.add_flag("--json", json, "one JSON object on stdout");
  CLI11_PARSE(app, argc, argv);

  Bench b(s, timeout);
  b.listen(addr);
  b.run(n, concurrent);

  std::vector<double> total, a, r, cq, req, sq, est;
  auto us = [](uint64_t from, uint64_t to) { return static_cast<double>(to - from) / 1e3; };
  for (const auto& c : b.conns()) {
    total.push_back(us(c->start, c->done));
    a.push_back(us(c->start, c->addr));
    r.push_back(us(c->addr, c->route));
    cq.push_back(us(c->route, c->connect_sent));
    req.push_back(us(c->connect_sent, c->request));
    sq.push_back(us(c->request, c->accept_sent));
    est.push_back(us(c->accept_sent, c->done));
  }
  const std::pair<const char*, Stat> rows[] = {
      {"connect_accept_us", stat_of(total)}, {"resolve_addr_us", stat_of(a)}, {"resolve_route_us", stat_of(r)},
      {"client_qp_connect_us", stat_of(cq)}, {"to_request_us", stat_of(req)}, {"server_qp_accept_us", stat_of(sq)},
      {"to_established_us", stat_of(est)}};
  const double wall_ms = static_cast<double>(b.wall_ns()) / 1e6;
  if (json) {
    std::printf("{\"tool\":\"bare-rdma-cm\",\"conns\":%zu,\"concurrent\":%s,\"send_depth\":%u,\"recv_depth\":%u,"
                "\"inline\":%u,\"wall_ms\":%.1f",
                n, concurrent ? "true" : "false", s.send_depth, s.recv_depth, s.inline_bytes, wall_ms);
    for (const auto& [name, st] : rows)
      std::printf(",\"%s\":{\"p50\":%.1f,\"min\":%.1f,\"max\":%.1f}", name, st.p50, st.min, st.max);
    std::printf("}\n");
  } else {
    std::printf("bare rdma_cm, %zu connections %s, QP %u/%u WRs, inline %u: %.1f ms wall\n", n,
                concurrent ? "at once" : "one after another", s.send_depth, s.recv_depth, s.inline_bytes, wall_ms);
    for (const auto& [name, st] : rows)
      std::printf("  %-22s p50 %10.1f  min %10.1f  max %10.1f\n", name, st.p50, st.min, st.max);
  }
  return 0;
}
