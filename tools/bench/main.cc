// conduit-bench: stream latency/bandwidth over any Conduit transport URL, and a memcpy
// baseline (see README.md and --help).
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/transport/endpoint.h"
#include "options.h"
#include "protocol.h"
#include "report.h"
#include "session.h"
#include "touch.h"

namespace conduit::bench {
namespace {

Status pin_this_thread(int cpu) {
  if (cpu < 0) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set); rc != 0)
    return Status::FromErrno(rc, "pin to cpu " + std::to_string(cpu));
  return {};
}

// The URL a loopback client uses: the listener's url() plus the options the user gave
// (shm's busy_poll_us= is per side; the listener may not echo it).
std::string client_url_for(const std::string& listener_url, const std::string& user_url) {
  auto l = transport::Endpoint::parse(listener_url);
  auto u = transport::Endpoint::parse(user_url);
  if (!l.ok() || !u.ok()) return listener_url;
  for (const auto& [k, v] : u->options) l->options.emplace(k, v);
  return l->to_string();
}

Result<std::unique_ptr<reactor::EventLoop>> make_loop(const Options& o) {
  reactor::LoopOptions lo;
  lo.busy_poll_us = o.busy_poll_us;
  return reactor::EventLoop::create(lo);
}

// Runs every size of the chosen test on a connected client and reports.
Status run_client(const Options& o, const std::string& url) {
  CONDUIT_RETURN_IF_ERROR(pin_this_thread(o.cpu));
  CONDUIT_ASSIGN_OR_RETURN(auto loop, make_loop(o));
  Client client(*loop, o);
  CONDUIT_RETURN_IF_ERROR(client.connect(url));
  (void)Tsc::cycles_per_us();  // calibrate before the first sample
  Reporter rep(o);
  rep.begin(RunInfo{url, transport::Endpoint::parse(url).value_or({}).scheme, client.connection().describe()});
  for (uint32_t size : o.sizes) {
    if (o.test == StreamTest::kPingPong) {
      CONDUIT_ASSIGN_OR_RETURN(PingPongResult r, client.pingpong(size));
      rep.add(r);
    } else {
      CONDUIT_ASSIGN_OR_RETURN(StreamResult r, client.stream(size));
      rep.add(r);
    }
  }
  client.finish();
  rep.end();
  return {};
}

Status run_server(const Options& o) {
  CONDUIT_RETURN_IF_ERROR(pin_this_thread(o.cpu));
  CONDUIT_ASSIGN_OR_RETURN(auto loop, make_loop(o));
  CONDUIT_ASSIGN_OR_RETURN(auto server, Server::listen(*loop, o.url, o.sessions, true));
  std::printf("conduit-bench: listening on %s\n", server->url().c_str());
  std::fflush(stdout);
  return server->serve(o.client_wait_s, o.timeout_s);
}

Status run_loopback(const Options& o) {
  std::promise<Result<std::string>> listening;
  std::future<Result<std::string>> url_future = listening.get_future();
  std::atomic<Server*> server_ptr{nullptr};
  Status server_status;
  std::thread server_thread([&] {
    if (Status st = pin_this_thread(o.server_cpu); !st.ok()) {
      listening.set_value(st);
      return;
    }
    auto loop = make_loop(o);
    if (!loop.ok()) {
      listening.set_value(loop.status());
      return;
    }
    auto server = Server::listen(**loop, o.url, 1, false);
    if (!server.ok()) {
      listening.set_value(server.status());
      return;
    }
    server_ptr = server->get();
    listening.set_value((*server)->url());
    server_status = (*server)->serve(o.timeout_s, o.timeout_s);
    server_ptr = nullptr;
    server->reset();
  });
  Result<std::string> url = url_future.get();
  Status client_status = url.ok() ? run_client(o, client_url_for(*url, o.url)) : url.status();
  if (!client_status.ok()) {
    // The server ends by itself when our connection closes; this only speeds it up.
    if (Server* s = server_ptr.load()) s->request_stop();
  }
  server_thread.join();
  if (!client_status.ok()) return client_status;
  if (!server_status.ok() && server_status.code() != Code::kCancelled) return server_status.annotate("server");
  return {};
}

Status run_memcpy(const Options& o) {
  CONDUIT_RETURN_IF_ERROR(pin_this_thread(o.cpu));
  const size_t n = o.copy_size;
  const size_t alloc = (n + 4095) / 4096 * 4096;
  auto* src = static_cast<uint8_t*>(std::aligned_alloc(4096, alloc));
  auto* dst = static_cast<uint8_t*>(std::aligned_alloc(4096, alloc));
  if (src == nullptr || dst == nullptr) {
    std::free(src);
    std::free(dst);
    return Status(Code::kResourceExhausted, "memcpy: cannot allocate");
  }
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  std::memcpy(dst, src, n);  // fault both buffers in
  // Check the clock about every 64 MiB copied, at least every copy for huge blocks.
  const uint64_t batch = std::max<uint64_t>(1, (64ull << 20) / n);
  const uint64_t t0 = monotonic_ns();
  const uint64_t end = t0 + static_cast<uint64_t>(o.duration_s * 1e9);
  uint64_t copies = 0, now = t0;
  uint64_t bad = 0;
  do {
    for (uint64_t i = 0; i < batch; ++i) {
      if (o.touch) {  // what a touching stream's two ends do, on this one core
        const uint8_t v = fill_value(copies + i);
        fill_message(src, 0, n, v, kMoreFlag);
        std::memcpy(dst, src, n);
        Checksum sum;
        sum.add(dst, n);
        bad += sum.value() != expected_checksum(n, v, kMoreFlag);
      } else {
        std::memcpy(dst, src, n);
      }
      __asm__ __volatile__("" : : "r"(dst), "r"(src) : "memory");  // the copy is observable
    }
    copies += batch;
    now = monotonic_ns();
  } while (now < end);
  if (bad != 0) {
    std::free(src);
    std::free(dst);
    return Status(Code::kInternal, "memcpy --touch: " + std::to_string(bad) + " checksums did not match");
  }
  MemcpyResult r;
  r.size = n;
  r.copies = copies;
  r.seconds = static_cast<double>(now - t0) / 1e9;
  r.mib_per_s = static_cast<double>(n) * static_cast<double>(copies) / r.seconds / 1048576.0;
  r.touch = o.touch;
  std::free(src);
  std::free(dst);
  print_memcpy(o, r);
  return {};
}

void list_transports() {
  for (const char* scheme : {"tcp", "shm", "rdma", "auto"})
    if (transport::find_transport(scheme) != nullptr) std::printf("%s\n", scheme);
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  using namespace conduit::bench;
  Options opts;
  if (std::optional<int> rc = parse_options(argc, argv, &opts)) return *rc;
  conduit::Status st;
  switch (opts.command) {
    case Command::kTransports:
      list_transports();
      return 0;
    case Command::kMemcpy:
      st = run_memcpy(opts);
      break;
    case Command::kStream:
      st = opts.role == Role::kServer ? run_server(opts)
           : opts.role == Role::kClient ? run_client(opts, opts.url)
                                        : run_loopback(opts);
      break;
  }
  if (!st.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "conduit-bench: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
