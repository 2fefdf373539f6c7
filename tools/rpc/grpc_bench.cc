// conduit-rpc-grpc-bench: the gRPC C++ peer of conduit-rpc-bench for bench/rpc_vs_grpc.sh.
// Same echo.proto (generic services switched off, which gRPC's generator needs), same
// payloads, same closed-loop client and the same output (bench_report.h).
//
//   conduit-rpc-grpc-bench server --listen 127.0.0.1:7200 [--threads 1]
//   conduit-rpc-grpc-bench client --url 127.0.0.1:7200 -s 64,4K -c 1,16,64 -D 2 [--json]
//
// Server: gRPC's default synchronous server; --threads 1 limits it to one completion
// queue with one polling thread (the "one serving thread" configuration).  Client: the
// callback API on one channel (one connection), `concurrency` calls in flight.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "bench_report.h"
#include "conduit/base/clock.h"
#include "echo_grpc/conduit/rpc/echo.grpc.pb.h"

using namespace conduit;
namespace echo = conduit::rpc::echo;

namespace {

std::atomic<bool> g_stop{false};

class EchoImpl final : public echo::EchoService::Service {
  grpc::Status Echo(grpc::ServerContext*, const echo::EchoRequest* req, echo::EchoResponse* resp) override {
    if (req->response_size() != 0) {
      resp->mutable_payload()->assign(req->response_size(), 'r');
    } else {
      resp->set_payload(req->payload());
    }
    return grpc::Status::OK;
  }
};

struct Client {
  std::unique_ptr<echo::EchoService::Stub> stub;
  echo::EchoRequest req;
  struct Slot {
    grpc::ClientContext* ctx = nullptr;
    echo::EchoResponse resp;
    uint64_t start = 0;
  };
  std::vector<Slot> slots;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> lat;
  uint64_t calls = 0, errors = 0, from = 0, to = 0;
  size_t outstanding = 0;
  std::string error;

  void issue(size_t i) {
    Slot& s = slots[i];
    delete s.ctx;
    s.ctx = new grpc::ClientContext();
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    s.start = monotonic_ns();
    stub->async()->Echo(s.ctx, &req, &s.resp, [this, i](grpc::Status st) { done(i, st); });
  }
  void done(size_t i, const grpc::Status& st) {
    const uint64_t now = monotonic_ns();
    bool again;
    {
      std::lock_guard<std::mutex> g(mu);
      Slot& s = slots[i];
      if (!st.ok()) {
        ++errors;
        if (error.empty()) error = st.error_message();
      } else if (s.start >= from && now <= to) {
        ++calls;
        lat.push_back(static_cast<double>(now - s.start) / 1e3);
      }
      again = now < to && !g_stop.load();
      if (!again) --outstanding;
    }
    if (again) {
      issue(i);
    } else {
      cv.notify_all();
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conduit-rpc-grpc-bench: gRPC C++ echo server/client (the peer of conduit-rpc-bench)"};
  app.require_subcommand(1);
  std::string listen;
  int threads = 0;
  double serve_seconds = 0;
  auto* server = app.add_subcommand("server", "gRPC sync echo server");
  server->add_option("--listen,-l", listen, "host:port")->required();
  server->add_option("--threads", threads, "1 = one completion queue, one polling thread (0 = gRPC's default)");
  server->add_option("--seconds", serve_seconds, "exit after this long (0 = until killed)");
  std::string url, sizes = "64";
  std::vector<uint64_t> conc = {1};
  double duration = 2, warmup = 0.3;
  bool json = false;
  auto* client = app.add_subcommand("client", "closed-loop callback-API client on one channel");
  client->add_option("--url,-u", url, "host:port")->required();
  client->add_option("--size,-s", sizes, "payload sizes")->capture_default_str();
  client->add_option("--concurrency,-c", conc, "calls in flight (list)")->delimiter(',');
  client->add_option("--duration,-D", duration, "measured seconds per cell");
  client->add_option("--warmup,-w", warmup, "warm-up seconds per cell");
  client->add_flag("--json", json, "one JSON object per cell");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });

  if (*server) {
    EchoImpl svc;
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&svc);
    b.SetMaxReceiveMessageSize(256 << 20);
    b.SetMaxSendMessageSize(256 << 20);
    if (threads == 1) {
      b.SetSyncServerOption(grpc::ServerBuilder::NUM_CQS, 1);
      b.SetSyncServerOption(grpc::ServerBuilder::MIN_POLLERS, 1);
      b.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, 1);
    }
    auto s = b.BuildAndStart();
    if (!s) {
      std::fprintf(stderr, "conduit-rpc-grpc-bench: cannot listen on %s\n", listen.c_str());
      return 1;
    }
    std::printf("listening %d\n", port);
    std::fflush(stdout);
    const uint64_t end = serve_seconds > 0 ? monotonic_ns() + static_cast<uint64_t>(serve_seconds * 1e9) : 0;
    while (!g_stop.load() && (end == 0 || monotonic_ns() < end)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    return 0;
  }

  std::vector<uint64_t> sz;
  if (!rpcbench::parse_sizes(sizes, &sz)) return 2;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  auto channel = grpc::CreateCustomChannel(url, grpc::InsecureChannelCredentials(), args);
  if (!json) rpcbench::print_header();
  int rc = 0;
  for (uint64_t size : sz) {
    for (uint64_t c : conc) {
      Client cl;
      cl.stub = echo::EchoService::NewStub(channel);
      cl.req.mutable_payload()->assign(size, 'p');
      cl.slots = std::vector<Client::Slot>(c);
      cl.lat.reserve(1 << 20);
      const double cpu0 = rpcbench::cpu_seconds();
      const uint64_t t0 = monotonic_ns();
      cl.from = t0 + static_cast<uint64_t>(warmup * 1e9);
      cl.to = cl.from + static_cast<uint64_t>(duration * 1e9);
      cl.outstanding = c;
      for (size_t i = 0; i < c; ++i) cl.issue(i);
      {
        std::unique_lock<std::mutex> g(cl.mu);
        cl.cv.wait(g, [&] { return cl.outstanding == 0; });
      }
      for (auto& s : cl.slots) delete s.ctx;
      rpcbench::Result r;
      r.tool = "grpc";
      r.url = url;
      r.size = size;
      r.concurrency = c;
      r.seconds = duration;
      r.cpu_s = (rpcbench::cpu_seconds() - cpu0) * duration / ((monotonic_ns() - t0) / 1e9);
      r.calls = cl.calls;
      r.errors = cl.errors;
      r.lat_us = std::move(cl.lat);
      r.finish();
      rpcbench::print(r, json);
      if (!cl.error.empty()) {
        std::fprintf(stderr, "conduit-rpc-grpc-bench: %llu errors, first: %s\n", (unsigned long long)cl.errors,
                     cl.error.c_str());
        rc = 1;
      }
      if (g_stop.load()) return 130;
    }
  }
  return rc;
}
