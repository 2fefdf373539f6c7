// conduit-rpc-bench: echo server and closed-loop echo client for conduit::rpc.
//
//   conduit-rpc-bench server --listen tcp://127.0.0.1:7100 --listen shm://bench [--threads 1]
//   conduit-rpc-bench client --url tcp://127.0.0.1:7100 -s 64,4K -c 1,16,64 -D 2 [--json]
//   conduit-rpc-bench loopback --url tcp://127.0.0.1:0 -s 64 -c 1        (both in one process)
//
// The client keeps `concurrency` calls in flight per cell (spread over --threads loops,
// each with its own channel of --connections connections), measures QPS and latency
// percentiles after a warm-up, and the client process' CPU time per call.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <memory>
#include <thread>

#include "bench_report.h"
#include "conduit/base/clock.h"
#include "conduit/rpc/channel.h"
#include "conduit/rpc/echo.pb.h"
#include "conduit/rpc/server.h"
#include "echo_service.h"

using namespace conduit;

namespace {

std::atomic<bool> g_stop{false};

struct ClientFlags {
  std::string url;
  std::string sizes = "64";
  std::vector<uint64_t> conc = {1};
  std::string attachment = "0";
  uint32_t connections = 1;
  uint32_t threads = 1;
  double duration = 2.0;
  double warmup = 0.3;
  uint32_t busy_poll_us = 0;
  uint32_t poll_us = rpc::ChannelOptions{}.poll_us;  // the library's default
  bool json = false;
};

// One loop thread's share of the calls: `slots` calls always in flight.
struct Worker {
  std::unique_ptr<reactor::EventLoop> loop;
  std::unique_ptr<rpc::Channel> ch;
  struct Slot {
    rpc::Controller cntl;
    rpc::echo::EchoResponse resp;
    uint64_t start = 0;
  };
  std::vector<Slot> slots;
  rpc::echo::EchoRequest req;
  rpc::Attachment att;
  std::vector<double> lat;
  uint64_t calls = 0, errors = 0;
  uint64_t measure_from = 0, measure_to = 0;
  std::string error;
  size_t outstanding = 0;

  void issue(size_t i) {
    Slot& s = slots[i];
    s.cntl.Reset();
    s.cntl.set_timeout_ms(10000);
    if (!att.empty()) s.cntl.request_attachment() = att;
    s.start = monotonic_ns();
    ++outstanding;
    ch->call(rpc::echo::EchoService::descriptor()->method(0), &s.cntl, &req, &s.resp, [this, i] { done(i); });
  }
  void done(size_t i) {
    --outstanding;
    Slot& s = slots[i];
    const uint64_t now = monotonic_ns();
    if (s.cntl.Failed()) {
      ++errors;
      if (error.empty()) error = s.cntl.ErrorText();
    } else if (s.start >= measure_from && now <= measure_to) {
      ++calls;
      lat.push_back(static_cast<double>(now - s.start) / 1e3);
    }
    if (now < measure_to && !g_stop.load(std::memory_order_relaxed)) issue(i);
  }
};

int run_client(const ClientFlags& f, const std::string& tool_url) {
  std::vector<uint64_t> sizes, atts;
  if (!rpcbench::parse_sizes(f.sizes, &sizes) || !rpcbench::parse_sizes(f.attachment, &atts)) {
    std::fprintf(stderr, "conduit-rpc-bench: bad size list\n");
    return 2;
  }
  if (!f.json) rpcbench::print_header();
  // Each cell runs on fresh threads with their own loop and channel (an EventLoop belongs
  // to the thread that first drives it); connecting happens inside the warm-up.
  std::vector<std::unique_ptr<Worker>> ws;
  for (uint32_t t = 0; t < f.threads; ++t) ws.push_back(std::make_unique<Worker>());
  int rc = 0;
  for (uint64_t size : sizes) {
    for (uint64_t conc : f.conc) {
      for (uint64_t att : atts) {
        const double cpu0 = rpcbench::cpu_seconds();
        const uint64_t t0 = monotonic_ns();
        const uint64_t from = t0 + static_cast<uint64_t>(f.warmup * 1e9);
        const uint64_t to = from + static_cast<uint64_t>(f.duration * 1e9);
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < f.threads; ++t) {
          Worker* w = ws[t].get();
          const size_t mine = conc / f.threads + (t < conc % f.threads ? 1 : 0);
          w->slots = std::vector<Worker::Slot>(mine);
          w->req.mutable_payload()->assign(size, 'p');
          w->att.clear();
          if (att != 0) {
            w->att.append(std::string(att, 'a'));
            w->req.set_echo_attachment(true);
          }
          w->lat.clear();
          w->lat.reserve(1 << 20);
          w->calls = w->errors = 0;
          w->measure_from = from;
          w->measure_to = to;
          threads.emplace_back([w, &f, &tool_url] {
            reactor::LoopOptions lo;
            lo.busy_poll_us = f.busy_poll_us;
            lo.poll_us = f.poll_us;
            auto loop = reactor::EventLoop::create(lo);
            rpc::ChannelOptions co;
            co.connections = f.connections;
            auto ch = loop.ok() ? rpc::Channel::create(**loop, tool_url, co) : Result<std::unique_ptr<rpc::Channel>>(loop.status());
            if (!ch.ok()) {
              w->error = ch.status().to_string();
              ++w->errors;
              return;
            }
            w->loop = std::move(*loop);
            w->ch = std::move(*ch);
            for (size_t i = 0; i < w->slots.size(); ++i) w->issue(i);
            while (w->outstanding > 0) (void)w->loop->run_once(100);
            w->ch.reset();  // on this thread, which owns the loop
            w->loop.reset();
          });
        }
        for (auto& t : threads) t.join();
        rpcbench::Result r;
        r.tool = "conduit";
        r.url = tool_url;
        r.size = size;
        r.attachment = att;
        r.concurrency = conc;
        r.connections = f.connections;
        r.threads = f.threads;
        r.seconds = f.duration;
        r.cpu_s = (rpcbench::cpu_seconds() - cpu0) * f.duration / ((monotonic_ns() - t0) / 1e9);
        for (auto& w : ws) {
          r.calls += w->calls;
          r.errors += w->errors;
          r.lat_us.insert(r.lat_us.end(), w->lat.begin(), w->lat.end());
          if (!w->error.empty()) {
            std::fprintf(stderr, "conduit-rpc-bench: %llu errors, first: %s\n", (unsigned long long)w->errors,
                         w->error.c_str());
            w->error.clear();
            rc = 1;
          }
        }
        r.finish();
        rpcbench::print(r, f.json);
        if (g_stop.load()) return 130;
      }
    }
  }
  return rc;
}

std::unique_ptr<rpc::Server> start_server(const std::vector<std::string>& urls, const rpc::ServerOptions& o,
                                          rpc::EchoServiceImpl* svc, std::vector<std::string>* bound) {
  auto s = rpc::Server::create(o);
  if (!s.ok()) {
    std::fprintf(stderr, "conduit-rpc-bench: %s\n", s.status().to_string().c_str());
    return nullptr;
  }
  if (Status st = (*s)->add_service(svc); !st.ok()) {
    std::fprintf(stderr, "conduit-rpc-bench: %s\n", st.to_string().c_str());
    return nullptr;
  }
  for (const auto& u : urls) {
    auto b = (*s)->listen(u);
    if (!b.ok()) {
      std::fprintf(stderr, "conduit-rpc-bench: %s\n", b.status().to_string().c_str());
      return nullptr;
    }
    bound->push_back(*b);
  }
  return std::move(*s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conduit-rpc-bench: echo RPC server and client over any Conduit transport URL"};
  app.require_subcommand(1);
  std::vector<std::string> listen;
  rpc::ServerOptions so;
  double serve_seconds = 0;
  auto* server = app.add_subcommand("server", "serve the echo service until killed (or --seconds)");
  server->add_option("--listen,-l", listen, "URL to listen on (repeatable)")->required();
  server->add_option("--threads", so.threads, "reactor threads")->capture_default_str();
  server->add_option("--workers", so.worker_threads, "handler pool threads (0 = on the loop)")->capture_default_str();
  server->add_option("--busy-poll-us", so.busy_poll_us, "loops spin this long before sleeping")->capture_default_str();
  server->add_option("--poll-us", so.poll_us, "loops spin adaptively up to this long before sleeping (0 = off)")
      ->capture_default_str();
  server->add_option("--seconds", serve_seconds, "exit after this long (0 = until killed)");

  ClientFlags cf;
  auto add_client_flags = [&cf](CLI::App* c) {
    c->add_option("--url,-u", cf.url, "server URL")->required();
    c->add_option("--size,-s", cf.sizes, "request payload sizes, e.g. 64,4K,64K,1M")->capture_default_str();
    c->add_option("--concurrency,-c", cf.conc, "calls in flight (list)")->delimiter(',')->capture_default_str();
    c->add_option("--attachment,-a", cf.attachment, "attachment sizes (echoed back)")->capture_default_str();
    c->add_option("--connections", cf.connections, "connections per channel")->capture_default_str();
    c->add_option("--threads,-t", cf.threads, "client loop threads")->capture_default_str();
    c->add_option("--duration,-D", cf.duration, "measured seconds per cell")->capture_default_str();
    c->add_option("--warmup,-w", cf.warmup, "warm-up seconds per cell")->capture_default_str();
    c->add_option("--busy-poll-us", cf.busy_poll_us, "client loops spin this long before sleeping");
    c->add_option("--poll-us", cf.poll_us, "client loops spin adaptively up to this long before sleeping (0 = off)")
        ->capture_default_str();
    c->add_flag("--json", cf.json, "one JSON object per cell");
  };
  auto* client = app.add_subcommand("client", "run the closed-loop echo client against a server");
  add_client_flags(client);
  auto* loopback = app.add_subcommand("loopback", "server and client in this process (--url is the listen URL)");
  add_client_flags(loopback);
  loopback->add_option("--server-threads", so.threads, "server reactor threads");
  CLI11_PARSE(app, argc, argv);
  if (cf.threads == 0 || cf.connections == 0 || cf.duration <= 0) {
    std::fprintf(stderr, "conduit-rpc-bench: threads, connections and duration must be positive\n");
    return 2;
  }
  for (uint64_t c : cf.conc)
    if (c == 0 || c < cf.threads) {
      std::fprintf(stderr, "conduit-rpc-bench: concurrency must be >= threads\n");
      return 2;
    }
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  std::signal(SIGPIPE, SIG_IGN);

  rpc::EchoServiceImpl svc;
  if (*server) {
    std::vector<std::string> bound;
    auto s = start_server(listen, so, &svc, &bound);
    if (!s) return 1;
    for (const auto& b : bound) std::printf("listening %s\n", b.c_str());
    std::fflush(stdout);
    const uint64_t end = serve_seconds > 0 ? monotonic_ns() + static_cast<uint64_t>(serve_seconds * 1e9) : 0;
    while (!g_stop.load() && (end == 0 || monotonic_ns() < end)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)s->shutdown(1000);
    return 0;
  }
  if (*loopback) {
    std::vector<std::string> bound;
    auto s = start_server({cf.url}, so, &svc, &bound);
    if (!s) return 1;
    const int rc = run_client(cf, bound[0]);
    (void)s->shutdown(1000);
    return rc;
  }
  return run_client(cf, cf.url);
}
