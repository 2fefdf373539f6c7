// conduit-rma-perf: latency or bandwidth of one rma operation over any rma URL.
//
//   conduit-rma-perf --url rdma://192.0.2.1:7490 --op read --mode lat --size 64 --iters 2000
//   conduit-rma-perf --url rdma://192.0.2.1:7490 --op write --mode bw --size 65536 --iters 2000
//
// The process forks at once (before any verbs call: a forked child may not use its parent's
// device contexts): the parent listens on --url and exposes a buffer to each peer, handing
// the descriptor over a pipe; the child connects and measures.  lat: one op at a time,
// event-driven completions (compare with perftest -e; with --busy-poll-us polled, compare
// with plain perftest), prints t_min / t_typical (median) / t_avg / t_max in microseconds.
// pingpong (--op write): the two sides write into each other's buffer in turn, half the
// round trip, as ib_write_lat measures; same columns.  bw: --depth ops in flight, prints
// MiB/s (2^20 bytes per MB, perftest's unit).  --op tagged (bw only): tagged send/recv (rma::TaggedEndpoint): the
// parent posts receives of --size into a ring of registered buffers and re-posts each as it
// completes, the child isends --iters messages (after one untimed warm-up message; the
// ring is registered before the sender starts); bandwidth is the sender's, first timed isend
// to last completion (a send completes when its data and record landed).  --json for machines.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"
#include "conduit/rma/tagged.h"

using namespace conduit;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string url, op = "write", mode = "lat";
  size_t size = 64;
  int iters = 2000;
  int depth = 64;
  uint64_t busy_poll_us = 0;
  bool json = false;
  // The endpoint options both sides add to their URL.
  std::string query(const std::string& base) const {
    return base + (base.find('?') == std::string::npos ? "?" : "&") + "depth=" + std::to_string(depth) +
           "&busy_poll_us=" + std::to_string(busy_poll_us);
  }
};

// The receiving side of --op tagged: its hello to the child, the child's back, then a ring of
// posted receives re-posted as they complete, until --iters messages arrived.
struct TaggedReceiver {
  std::unique_ptr<rma::TaggedEndpoint> t;
  std::vector<uint8_t> ring;
  rma::Descriptor reg;
  std::vector<rma::Request> posted;  // by ring slot
  std::vector<bool> busy;
  int received = 0, posts = 0;
  bool failed = false;

  bool start(const Args& a, std::unique_ptr<rma::Endpoint> ep, int hello_out, int hello_in) {
    auto tt = rma::TaggedEndpoint::create(std::move(ep));
    if (!tt.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", tt.status().to_string().c_str()), false;
    t = std::move(*tt);
    // The ring is faulted in and registered before the hello goes out, so the sender's clock
    // (started once it has the hello) does not run while this side sets up (perftest, too,
    // registers its buffers before it times).
    // Every FIFO slot in use, or one buffer per message (+ the warm-up) if that is fewer.
    const size_t slots = std::min<size_t>(rma::TaggedOptions{}.slots, static_cast<size_t>(a.iters) + 1);
    ring.assign(slots * a.size, 0);
    auto r = t->register_buffer(ring.data(), ring.size());
    if (!r.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", r.status().to_string().c_str()), false;
    reg = *r;
    const auto h = t->hello();
    if (write(hello_out, h.data(), h.size()) != static_cast<ssize_t>(h.size())) return false;
    std::array<uint8_t, rma::TaggedEndpoint::kHelloSize> peer{};
    if (read(hello_in, peer.data(), peer.size()) != static_cast<ssize_t>(peer.size())) return false;
    if (Status s = t->start(peer); !s.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", s.to_string().c_str()), false;
    posted.assign(slots, {});
    busy.assign(slots, false);
    t->set_progress_handler([this, &a](rma::TaggedEndpoint&) { pump(a); });
    pump(a);
    return true;
  }
  void pump(const Args& a) {
    for (size_t i = 0; i < posted.size(); ++i) {
      if (!busy[i]) continue;
      auto c = t->test(posted[i]);
      if (!c.ok() || !c->has_value()) continue;
      busy[i] = false;
      if (!(*c)->status.ok()) failed = true;
      ++received;
    }
    for (size_t i = 0; i < posted.size() && posts < a.iters + 1 && !failed; ++i) {  // + the warm-up
      if (busy[i]) continue;
      const uint32_t tag = 0;
      rma::RecvBuffer b{std::span<uint8_t>(ring.data() + i * a.size, a.size), reg};
      auto r = t->irecv(std::span<const uint32_t>(&tag, 1), std::span<const rma::RecvBuffer>(&b, 1));
      if (!r.ok()) break;  // would-block: re-tried on the next completion
      posted[i] = *r;
      busy[i] = true;
      ++posts;
    }
  }
};

std::optional<rma::Descriptor> read_descriptor(int fd) {
  uint8_t w[rma::Descriptor::kWireSize];
  if (read(fd, w, sizeof w) != static_cast<ssize_t>(sizeof w)) return std::nullopt;
  auto d = rma::Descriptor::decode(w);
  if (!d.ok()) return std::nullopt;
  return *d;
}

// --mode pingpong (ib_write_lat's measure): the two sides RDMA-write --size bytes into each
// other's exposed buffer in turn, each waiting by polling its own buffer's last byte for the
// round's number; the initiator times each round trip with the cycle counter and reports half
// of it.  Write completions are reaped by the endpoint (driven here when 8 are in flight,
// inside the timed part).  `in` is this side's exposed buffer.  0 or an exit status.
int pingpong(const Args& a, reactor::EventLoop& loop, rma::Endpoint& ep, const rma::Descriptor& to, uint8_t* in,
             bool initiator, std::vector<double>* half_rtt_us) {
  std::vector<uint8_t> out(a.size, 0x5a);
  volatile uint8_t* last = in + a.size - 1;
  int failed = 0;
  auto cb = [&](const rma::OpResult& r) { failed += r.status.ok() ? 0 : 1; };
  auto reap = [&](size_t above) {
    while (ep.in_flight() > above && failed == 0 && ep.state() == rma::EndpointState::kConnected) (void)loop.run_once(0);
  };
  // Over tcp/shm the peer's loop serves the writes (the emulation): this side's loop must run
  // while it waits; over rdma the NIC writes and the wait only polls memory.
  const bool drive = ep.transport() != "rdma";
  auto wait_for = [&](uint8_t v) {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    for (uint32_t spins = 0; *last != v; ++spins) {
      if (drive) (void)loop.run_once(0);
      if ((spins & 0xffff) == 0 && (Clock::now() > give_up || ep.state() != rma::EndpointState::kConnected)) return false;
    }
    return true;
  };
  for (int i = 1; i <= a.iters; ++i) {
    const uint8_t v = static_cast<uint8_t>(i % 251 + 1);
    if (!initiator && !wait_for(v)) return std::fprintf(stderr, "conduit-rma-perf: pingpong: no ping %d\n", i), 5;
    const uint64_t t0 = read_tsc();
    out[a.size - 1] = v;
    if (Status s = ep.submit(rma::Op::write(out, to, 0, cb)); !s.ok())
      return std::fprintf(stderr, "conduit-rma-perf: %s\n", s.to_string().c_str()), 5;
    if (initiator) {
      if (!wait_for(v)) return std::fprintf(stderr, "conduit-rma-perf: pingpong: no pong %d\n", i), 5;
      reap(8);
      half_rtt_us->push_back(Tsc::to_us(read_tsc() - t0) / 2);
    } else {
      reap(8);
    }
    if (failed) return std::fprintf(stderr, "conduit-rma-perf: pingpong: a write failed\n"), 5;
  }
  reap(0);
  return failed ? 5 : 0;
}

int serve(const Args& a, int desc_fd, int ready_fd, int hello_fd, pid_t child, int* child_status) {
  auto loop = reactor::EventLoop::create();
  if (!loop.ok()) return 3;
  std::vector<uint8_t> mem(std::max<size_t>(a.size, 8), 0);
  std::unique_ptr<rma::Endpoint> peer;
  TaggedReceiver receiver;
  bool gone = false;
  std::optional<rma::Descriptor> pong;  // pingpong: where the answers go
  const std::string url = a.query(a.url);
  auto l = rma::Listener::listen(**loop, url, [&](std::unique_ptr<rma::Endpoint> ep) {
    if (a.op == "tagged") {  // the child's exit ends the run (waitpid below)
      if (!receiver.start(a, std::move(ep), desc_fd, hello_fd)) gone = true;
      return;
    }
    auto d = ep->expose(mem.data(), mem.size(), rma::kAllRights);
    if (!d.ok()) {
      std::fprintf(stderr, "conduit-rma-perf: expose: %s\n", d.status().to_string().c_str());
      gone = true;
      return;
    }
    ep->set_close_handler([&](rma::Endpoint&) { gone = true; });
    auto w = d->encode();
    if (write(desc_fd, w.data(), w.size()) != static_cast<ssize_t>(w.size())) gone = true;
    peer = std::move(ep);
    if (a.mode == "pingpong" && !gone) pong = read_descriptor(hello_fd);
  });
  if (!l.ok()) {
    std::fprintf(stderr, "conduit-rma-perf: listen %s: %s\n", url.c_str(), l.status().to_string().c_str());
    return 3;
  }
  std::string bound = (*l)->url();
  bound.push_back('\n');
  if (write(ready_fd, bound.data(), bound.size()) < 0) return 3;
  ::close(ready_fd);
  if (a.mode == "pingpong") {
    while (!gone && !pong) {
      (void)(*loop)->run_once(100);
      if (waitpid(child, child_status, WNOHANG) == child) return 0;
    }
    if (pong) {
      const int rc = pingpong(a, **loop, *peer, *pong, mem.data(), false, nullptr);
      if (rc != 0) return rc;
    }
  }
  // Until the peer goes away or the child exits (whichever is seen first).
  while (!gone) {
    (void)(*loop)->run_once(100);
    if (waitpid(child, child_status, WNOHANG) == child) return 0;
  }
  waitpid(child, child_status, 0);
  return 0;
}

rma::Op make(const Args& a, std::vector<uint8_t>& buf, const rma::Descriptor& d, rma::OpCallback cb) {
  switch (a.op[0]) {  // read, atomic, write (checked when parsed): no string compare per op
    case 'r': return rma::Op::read(buf, d, 0, std::move(cb));
    case 'a': return rma::Op::fetch_add(d, 0, 1, std::move(cb));
    default: return rma::Op::write(buf, d, 0, std::move(cb));
  }
}

// The sending side of --op tagged: --iters isends of one buffer, as many in flight as the
// tagged endpoint takes (max_requests), reaped in order.
int measure_tagged(const Args& a, reactor::EventLoop& loop, std::unique_ptr<rma::Endpoint> ep, int hello_in,
                   int hello_out) {
  auto tt = rma::TaggedEndpoint::create(std::move(ep));
  if (!tt.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", tt.status().to_string().c_str()), 4;
  auto& t = **tt;
  const auto h = t.hello();
  if (write(hello_out, h.data(), h.size()) != static_cast<ssize_t>(h.size())) return 4;
  std::array<uint8_t, rma::TaggedEndpoint::kHelloSize> peer{};
  if (read(hello_in, peer.data(), peer.size()) != static_cast<ssize_t>(peer.size())) return 4;
  if (Status s = t.start(peer); !s.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", s.to_string().c_str()), 4;
  std::vector<uint8_t> buf(a.size, 0x5a);
  // One untimed message first: the send buffer's registration (made at its first use, then
  // cached) and the receiver's first FIFO posts are set-up, as perftest's registration is.
  {
    auto w = t.isend(0, buf);
    if (!w.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", w.status().to_string().c_str()), 5;
    for (;;) {
      auto c = t.test(*w);
      if (!c.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", c.status().to_string().c_str()), 5;
      if (c->has_value()) {
        if (!(*c)->status.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", (*c)->status.to_string().c_str()), 5;
        break;
      }
      (void)loop.run_once(100);
    }
  }
  std::deque<rma::Request> q;
  int issued = 0, done = 0, failed = 0;
  const auto t0 = Clock::now();
  while (done < a.iters && failed == 0) {
    while (issued < a.iters) {
      auto r = t.isend(0, buf);
      if (!r.ok()) {
        if (r.status().would_block()) break;
        return std::fprintf(stderr, "conduit-rma-perf: %s\n", r.status().to_string().c_str()), 5;
      }
      q.push_back(*r);
      ++issued;
    }
    (void)loop.run_once(100);
    while (!q.empty()) {
      auto c = t.test(q.front());
      if (!c.ok() || !c->has_value()) break;
      if (!(*c)->status.ok()) {
        std::fprintf(stderr, "conduit-rma-perf: %s\n", (*c)->status.to_string().c_str());
        ++failed;
      }
      q.pop_front();
      ++done;
    }
  }
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed) return 5;
  const double mibs = static_cast<double>(a.size) * a.iters / sec / (1 << 20);
  if (a.json)
    std::printf("{\"op\":\"tagged\",\"mode\":\"bw\",\"bytes\":%zu,\"iters\":%d,\"bw_mib_s\":%.2f,\"msg_rate_mpps\":%.6f}\n",
                a.size, a.iters, mibs, a.iters / sec / 1e6);
  else
    std::printf(" #bytes #iterations BW average[MB/sec] MsgRate[Mpps]\n %zu %d %.2f %.6f\n", a.size, a.iters, mibs,
                a.iters / sec / 1e6);
  return 0;
}

int measure(const Args& a, const std::string& url, int desc_fd, int hello_fd) {
  auto loop = reactor::EventLoop::create();
  if (!loop.ok()) return 4;
  bool up = false;
  Status st;
  auto ep = rma::Endpoint::connect(**loop, a.query(url), [&](rma::Endpoint&, Status s) {
    up = true;
    st = s;
  });
  if (!ep.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", ep.status().to_string().c_str()), 4;
  while (!up) (void)(*loop)->run_once(100);
  if (!st.ok()) return std::fprintf(stderr, "conduit-rma-perf: connect: %s\n", st.to_string().c_str()), 4;
  if (a.op == "tagged") return measure_tagged(a, **loop, std::move(*ep), desc_fd, hello_fd);
  const std::optional<rma::Descriptor> d = read_descriptor(desc_fd);
  if (!d) return 4;
  std::vector<uint8_t> buf(a.size, 0x5a);
  int done = 0, failed = 0;
  auto cb = [&](const rma::OpResult& r) {
    ++done;
    if (!r.status.ok()) ++failed;
  };
  const size_t bytes = a.op == "atomic" ? 8 : a.size;
  std::vector<double> us;
  if (a.mode == "pingpong") {
    std::vector<uint8_t> in(a.size, 0);
    auto mine = (*ep)->expose(in.data(), in.size(), rma::Rights::kWrite);
    if (!mine.ok()) return std::fprintf(stderr, "conduit-rma-perf: expose: %s\n", mine.status().to_string().c_str()), 4;
    const auto w = mine->encode();
    if (write(hello_fd, w.data(), w.size()) != static_cast<ssize_t>(w.size())) return 4;
    (void)Tsc::cycles_per_us();
    us.reserve(static_cast<size_t>(a.iters));
    if (int rc = pingpong(a, **loop, **ep, *d, in.data(), true, &us); rc != 0) return rc;
  } else if (a.mode == "lat") {
    // Each op is submitted from the previous one's callback (as a callback-driven program
    // issues dependent ops) and timed from submit to its callback with the cycle counter,
    // as perftest times: a clock_gettime is a system call where the clock source has no
    // vDSO path (~5 us in the TCG guest), which would be counted.
    us.reserve(static_cast<size_t>(a.iters));
    (void)Tsc::cycles_per_us();  // calibrate before the first op
    uint64_t t0 = 0;
    bool submit_failed = false;
    std::function<void(const rma::OpResult&)> next;
    // Each op's callback is a pointer-sized forwarder to `next`, made afresh for each op (it
    // fits std::function's inline storage, so making and moving it allocate nothing and call
    // nothing): copying `next` itself, a closure of a dozen references, would be a heap
    // allocation and a free per op in the timed path.
    auto via = [n = &next] { return rma::OpCallback([n](const rma::OpResult& r) { (*n)(r); }); };
    next = [&](const rma::OpResult& r) {
      us.push_back(Tsc::to_us(read_tsc() - t0));
      cb(r);
      if (done >= a.iters || failed != 0) return;
      t0 = read_tsc();
      if (!(*ep)->submit(make(a, buf, *d, via())).ok()) submit_failed = true;
    };
    t0 = read_tsc();
    if (!(*ep)->submit(make(a, buf, *d, via())).ok()) return 5;
    // Blocks until an event (-1), as loop.run() does with no timer: an op in flight always
    // ends (RC retries end in an error; a disconnect fails it), and a bounded wait would make
    // the kernel read the clock twice per epoll_wait (a system-call clock under TCG).
    while (done < a.iters && failed == 0 && !submit_failed) (void)(*loop)->run_once(-1);
    if (submit_failed) return std::fprintf(stderr, "conduit-rma-perf: submit failed\n"), 5;
    if (failed) return std::fprintf(stderr, "conduit-rma-perf: %d ops failed\n", failed), 5;
  }
  if (a.mode != "bw") {
    std::vector<double> s = us;
    std::sort(s.begin(), s.end());
    double sum = 0;
    for (double x : s) sum += x;
    const double typical = s[s.size() / 2], avg = sum / static_cast<double>(s.size());
    if (a.json)
      std::printf("{\"op\":\"%s\",\"mode\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"t_min\":%.2f,\"t_typical\":%.2f,\"t_avg\":%.2f,\"t_max\":%.2f}\n",
                  a.op.c_str(), a.mode.c_str(), bytes, a.iters, s.front(), typical, avg, s.back());
    else
      std::printf(" #bytes #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec]\n %zu %d %.2f %.2f %.2f %.2f\n",
                  bytes, a.iters, s.front(), s.back(), typical, avg);
    return 0;
  }
  int issued = 0;
  const auto t0 = Clock::now();
  while (done < a.iters && failed == 0) {
    while (issued < a.iters) {
      Status s = (*ep)->submit(make(a, buf, *d, cb));
      if (s.would_block()) break;
      if (!s.ok()) return std::fprintf(stderr, "conduit-rma-perf: %s\n", s.to_string().c_str()), 5;
      ++issued;
    }
    (void)(*loop)->run_once(100);
  }
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed) return std::fprintf(stderr, "conduit-rma-perf: %d ops failed\n", failed), 5;
  const double mibs = static_cast<double>(bytes) * a.iters / sec / (1 << 20);
  if (a.json)
    std::printf("{\"op\":\"%s\",\"mode\":\"bw\",\"bytes\":%zu,\"iters\":%d,\"bw_mib_s\":%.2f,\"msg_rate_mpps\":%.6f}\n",
                a.op.c_str(), bytes, a.iters, mibs, a.iters / sec / 1e6);
  else
    std::printf(" #bytes #iterations BW average[MB/sec] MsgRate[Mpps]\n %zu %d %.2f %.6f\n", bytes, a.iters, mibs,
                a.iters / sec / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"conduit-rma-perf: rma read/write/atomic latency and bandwidth"};
  app.add_option("--url", a.url, "where the server side listens (rdma://, tcp://, shm://, auto://)")->required();
  app.add_option("--op", a.op, "read, write, atomic (fetch-and-add on 8 bytes) or tagged (send/recv, bw)")
      ->check(CLI::IsMember({"read", "write", "atomic", "tagged"}));
  app.add_option("--mode", a.mode,
                 "lat (one op at a time), bw (--depth in flight) or pingpong (--op write: the two sides write "
                 "to each other in turn, half the round trip, as ib_write_lat)")
      ->check(CLI::IsMember({"lat", "bw", "pingpong"}));
  app.add_option("--size", a.size, "bytes per op (atomic: 8)")->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--iters", a.iters, "operations")->check(CLI::Range(1, 100000000));
  app.add_option("--depth", a.depth, "ops in flight for bw")->check(CLI::Range(1, 4096));
  app.add_option("--busy-poll-us", a.busy_poll_us,
                 "rdma: poll completions this long before sleeping (0: event-driven, compare with perftest -e; "
                 "else compare with plain perftest)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1000000}));
  app.add_flag("--json", a.json, "one JSON line");
  CLI11_PARSE(app, argc, argv);
  if (a.mode == "lat") a.depth = std::max(a.depth, 1);
  if (a.op == "tagged" && a.mode != "bw") return std::fprintf(stderr, "conduit-rma-perf: --op tagged takes --mode bw\n"), 2;
  if (a.mode == "pingpong" && a.op != "write")
    return std::fprintf(stderr, "conduit-rma-perf: --mode pingpong takes --op write\n"), 2;
  int desc[2], ready[2], hello[2];  // hello: child to parent (its tagged hello; pingpong: its descriptor)
  if (pipe(desc) != 0 || pipe(ready) != 0 || pipe(hello) != 0) return 3;
  const pid_t pid = fork();
  if (pid < 0) return 3;
  if (pid == 0) {
    ::close(desc[1]);
    ::close(ready[1]);
    ::close(hello[0]);
    char line[512] = {};
    size_t n = 0;
    while (n < sizeof line - 1 && read(ready[0], line + n, 1) == 1 && line[n] != '\n') ++n;
    line[n] = 0;
    if (n == 0) _exit(4);
    const int rc = measure(a, line, desc[0], hello[1]);
    std::fflush(stdout);
    _exit(rc);
  }
  ::close(desc[0]);
  ::close(ready[0]);
  ::close(hello[1]);
  // The server runs until its peer goes away (the child exits and its endpoint closes).
  int st = 0;
  const int rc = serve(a, desc[1], ready[1], hello[0], pid, &st);
  if (rc != 0) {
    waitpid(pid, &st, 0);
    return rc;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 6;
}
