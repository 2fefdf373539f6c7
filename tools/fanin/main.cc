// conduit-fanin: many connections to one listener, on one event loop (loopback in one
// process).  Measures what a server with many clients pays and gets:
//   setup_ms      from the first connect() until every client is connected and accepted
//   stream MB/s   all clients writing --size messages at once for --duration seconds,
//                 the server side reading and discarding (MB = 2^20 bytes)
//   recv KiB/conn registered receive-slot memory per server connection, from the options:
//                 without srq (recv_depth + 16 send slots) x 32 B; with srq 16 x 32 B plus
//                 the shared srq_depth x 32 B divided by the connections
// --sequential instead: one connection at a time, each until both sides can write (the
// client's connect callback ran -- rdma:// calls it once the peer's first RegisterXferMemory
// has arrived -- and the accepted connection's write handler ran, i.e. the client's buffer
// has arrived there too); all kept open until the end; connect_accept_us p50/min/max, no
// streaming.  bench/rdma_setup.sh sets it against conduit-cm-baseline (bare rdma_cm).
// Used by bench/rdma_srq.sh; works over any URL (tcp:// for a smoke test).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "conduit/transport/endpoint.h"
#include "numeric_flags.h"

using namespace conduit;
using namespace conduit::transport;

namespace {

template <typename Pred>
bool run_until(reactor::EventLoop& loop, Pred pred, double seconds) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (!pred() && monotonic_ns() < deadline)
    if (!loop.run_once(10).ok()) return false;
  return pred();
}

uint64_t option_u64(const Endpoint& ep, const std::string& key, uint64_t fallback) {
  auto it = ep.options.find(key);
  return it == ep.options.end() ? fallback : std::strtoull(it->second.c_str(), nullptr, 0);
}
bool option_on(const Endpoint& ep, const std::string& key) {
  auto it = ep.options.find(key);
  return it != ep.options.end() && (it->second == "1" || it->second == "true" || it->second == "on" ||
                                    it->second == "yes");
}

// Connects one after another: returns 0 and prints the figures, or 1.
int run_sequential(reactor::EventLoop& loop, const std::string& url, const std::string& client_options,
                   unsigned conns, double timeout, bool json) {
  std::vector<std::unique_ptr<Connection>> servers, clients;
  bool server_ready = false;
  auto listener = listen(loop, url, [&](std::unique_ptr<Connection> c) {
    Connection* raw = c.get();
    raw->set_write_handler([&server_ready, raw](Connection&) {
      server_ready = true;
      raw->set_write_handler(nullptr);  // deliver() called a copy
    });
    servers.push_back(std::move(c));
  });
  if (!listener.ok()) {
    std::fprintf(stderr, "conduit-fanin: listen %s: %s\n", url.c_str(), listener.status().to_string().c_str());
    return 1;
  }
  const std::string curl = (*listener)->url() + (client_options.empty() ? "" : "?" + client_options);
  std::vector<double> us;
  const uint64_t t_all = monotonic_ns();
  for (unsigned i = 0; i < conns; ++i) {
    bool client_done = false;
    Status result;
    server_ready = false;
    const uint64_t t0 = monotonic_ns();
    auto c = connect(loop, curl, [&](Connection&, Status s) {
      client_done = true;
      result = s;
    });
    if (!c.ok()) {
      std::fprintf(stderr, "conduit-fanin: connect %s: %s\n", curl.c_str(), c.status().to_string().c_str());
      return 1;
    }
    clients.push_back(std::move(*c));
    if (!run_until(loop, [&] { return (client_done && !result.ok()) || (client_done && server_ready); }, timeout) ||
        !result.ok()) {
      std::fprintf(stderr, "conduit-fanin: connection %u: %s\n", i + 1,
                   !client_done ? "connect did not complete" : !result.ok() ? result.to_string().c_str()
                                                                          : "the accepted side never became writable");
      return 1;
    }
    us.push_back(static_cast<double>(monotonic_ns() - t0) / 1e3);
  }
  const double wall_ms = static_cast<double>(monotonic_ns() - t_all) / 1e6;
  const double first = us.front();
  std::sort(us.begin(), us.end());
  const double p50 = us[(us.size() - 1) / 2];
  if (json) {
    std::printf("{\"tool\":\"conduit-fanin\",\"url\":\"%s\",\"conns\":%u,\"sequential\":true,\"wall_ms\":%.1f,"
                "\"first_us\":%.1f,\"connect_accept_us\":{\"p50\":%.1f,\"min\":%.1f,\"max\":%.1f}}\n",
                url.c_str(), conns, wall_ms, first, p50, us.front(), us.back());
  } else {
    std::printf("%-48s %u connections one after another: connect+accept until both can write p50 %.1f us "
                "(min %.1f, max %.1f, first %.1f), %.1f ms wall\n",
                url.c_str(), conns, p50, us.front(), us.back(), first, wall_ms);
  }
  clients.clear();
  servers.clear();
  listener->reset();
  (void)run_until(loop, [] { return false; }, 0.05);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"many connections to one listener: setup time, receive memory, aggregate stream"};
  std::string url;
  std::string client_options;
  unsigned conns = 16;
  double duration = 2;
  double warmup = 0.5;
  double timeout = 300;
  std::string size_text = "64K";
  bool json = false;
  bool sequential = false;
  app.add_option("--url", url, "listen URL with its options (rdma://192.0.2.1:0?srq=1)")->required();
  app.add_option("--client-options", client_options, "options the clients add, e.g. rx_buffer=65536");
  app.add_option("-c,--conns", conns, "connections (1 .. 4096)")->check(tools::in_range(1u, 4096u));
  app.add_option("-D,--duration", duration, "seconds of streaming measured")->check(tools::in_range(0.1, 3600.0));
  app.add_option("-w,--warmup", warmup, "seconds of unmeasured streaming first")->check(tools::in_range(0.0, 60.0));
  app.add_option("--timeout", timeout, "bound on connection setup, seconds")->check(tools::in_range(1.0, 3600.0));
  app.add_option("-s,--size", size_text, "bytes per write, 1 .. 64M (K/M suffixes)")
      ->capture_default_str()
      ->check(tools::size_in_range(1, 64u << 20));
  app.add_flag("--json", json, "one JSON object on stdout");
  app.add_flag("--sequential", sequential,
               "one connection at a time, each until both sides can write; connect+accept p50/min/max, no "
               "streaming");
  CLI11_PARSE(app, argc, argv);
  uint64_t size = 0;
  (void)tools::parse_size(size_text, &size);  // checked above (or the default)
  auto ep = Endpoint::parse(url);
  if (!ep.ok()) {
    std::fprintf(stderr, "conduit-fanin: %s\n", ep.status().to_string().c_str());
    return 2;
  }

  auto loop_r = reactor::EventLoop::create();
  if (!loop_r.ok()) return 1;
  reactor::EventLoop& loop = **loop_r;
  if (sequential) return run_sequential(loop, url, client_options, conns, timeout, json);
  std::vector<std::unique_ptr<Connection>> servers, clients;
  auto listener = listen(loop, url, [&](std::unique_ptr<Connection> c) { servers.push_back(std::move(c)); });
  if (!listener.ok()) {
    std::fprintf(stderr, "conduit-fanin: listen %s: %s\n", url.c_str(), listener.status().to_string().c_str());
    return 1;
  }
  const std::string curl = (*listener)->url() + (client_options.empty() ? "" : "?" + client_options);
  unsigned connected = 0, failed = 0;
  const uint64_t t0 = monotonic_ns();
  for (unsigned i = 0; i < conns; ++i) {
    auto c = connect(loop, curl, [&](Connection&, Status s) {
      ++connected;
      if (!s.ok()) {
        ++failed;
        std::fprintf(stderr, "conduit-fanin: connect: %s\n", s.to_string().c_str());
      }
    });
    if (!c.ok()) {
      std::fprintf(stderr, "conduit-fanin: connect %s: %s\n", curl.c_str(), c.status().to_string().c_str());
      return 1;
    }
    clients.push_back(std::move(*c));
  }
  if (!run_until(loop, [&] { return connected == conns && servers.size() == conns; }, timeout) || failed != 0) {
    std::fprintf(stderr, "conduit-fanin: %u of %u connected, %zu accepted, %u failed\n", connected, conns,
                 servers.size(), failed);
    return 1;
  }
  const double setup_ms = static_cast<double>(monotonic_ns() - t0) / 1e6;

  std::vector<uint8_t> block(size, 0x5a);
  uint64_t received = 0;
  bool broken = false;
  for (auto& s : servers)
    s->set_read_handler([&](Connection& c) {
      static thread_local std::vector<uint8_t> sink(1 << 16);
      for (;;) {
        auto n = c.read(sink);
        if (!n.ok() || *n == 0) {
          if (!n.ok() && n.status().is_error()) broken = true;
          break;
        }
        received += *n;
      }
    });
  for (auto& c : clients) {
    c->set_write_handler([&](Connection& conn) {
      for (;;) {
        auto n = conn.write(block);
        if (!n.ok()) {
          if (n.status().is_error()) broken = true;
          break;
        }
      }
    });
  }
  (void)run_until(loop, [] { return false; }, warmup);
  const uint64_t r0 = received;
  const uint64_t m0 = monotonic_ns();
  (void)run_until(loop, [&] { return broken; }, duration);
  const double secs = static_cast<double>(monotonic_ns() - m0) / 1e9;
  const double mbps = static_cast<double>(received - r0) / secs / (1 << 20);
  if (broken) {
    std::fprintf(stderr, "conduit-fanin: a connection failed while streaming\n");
    return 1;
  }

  // Registered receive-slot memory per server connection, from the listener's options.
  const bool srq = ep->scheme == "rdma" && option_on(*ep, "srq");
  const uint64_t recv_depth = option_u64(*ep, "recv_depth", 256);
  const uint64_t srq_depth = option_u64(*ep, "srq_depth", 4096);
  const double recv_bytes = ep->scheme != "rdma" ? 0.0 : srq ? 16.0 * 32 + static_cast<double>(srq_depth) * 32 / conns
                                : static_cast<double>(recv_depth + 16) * 32;
  if (json) {
    std::printf("{\"url\":\"%s\",\"conns\":%u,\"srq\":%s,\"setup_ms\":%.1f,\"setup_ms_per_conn\":%.2f,"
                "\"recv_slot_bytes_per_conn\":%.0f,\"size\":%zu,\"seconds\":%.2f,\"mb_per_s\":%.2f}\n",
                url.c_str(), conns, srq ? "true" : "false", setup_ms, setup_ms / conns, recv_bytes, size, secs, mbps);
  } else {
    std::printf("%-48s conns %5u  setup %9.1f ms (%6.2f ms/conn)  recv slots %8.0f B/conn  stream %8.2f MB/s\n",
                url.c_str(), conns, setup_ms, setup_ms / conns, recv_bytes, mbps);
  }
  for (auto& c : clients) c->set_write_handler(nullptr);
  for (auto& s : servers) s->set_read_handler(nullptr);
  clients.clear();
  servers.clear();
  listener->reset();
  (void)run_until(loop, [] { return false; }, 0.05);
  return 0;
}
