// Helpers shared by the rdma:// transport tests: the device fixture, a bounded event-loop
// wait, a connected pair on one loop, a handler-driven transfer, the thread's CPU time,
// random test data.
#pragma once

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma/rdma.h"
#include "rdma_env.h"

namespace conduit::transport::testing {

inline constexpr uint64_t kMs = 1'000'000;

// n pseudo-random bytes from `seed` (four per draw: a byte per draw is slow under ASan).
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; i += 4) {
    const uint32_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(4, n - i));
  }
  return v;
}

// The arenas' spare keepers register ahead of demand on their own threads: registered
// totals are stable, and a pool at its cap stays there, once they have nothing left to do.
inline bool spares_idle(reactor::EventLoop& loop) {
  for (const auto& a : rdma::arena_stats(loop))
    if (!a.spares_idle) return false;
  return true;
}

// Base fixture: skips the test without a device or without CONDUIT_RDMA_ADDR (fails with
// CONDUIT_REQUIRE_RDMA=1); addr_ is the address to listen on.
class RdmaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    (void)ctx;
    CONDUIT_REQUIRE_ADDR_OR_SKIP(a);
    addr_ = a;
  }
  std::string addr_;
};

// CPU time the calling thread used (a loop that spins shows up here, one that sleeps not).
inline uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Runs `loop` until `pred` holds or `timeout_ms` pass; returns pred().
template <typename Pred>
bool run_until(reactor::EventLoop& loop, Pred pred, int timeout_ms = 20000) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * kMs;
  while (!pred() && monotonic_ns() < deadline)
    if (!loop.run_once(10).ok()) return false;
  return pred();
}

struct Pair {
  std::unique_ptr<reactor::EventLoop> loop;
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> server, client;
  Status connect_status = Status(Code::kInProgress, "");
};

// Listens on rdma://ADDR:0<server_opts> and connects to it with <client_opts> ("?a=b&..."
// or ""); both ends on one new loop.
inline Result<std::unique_ptr<Pair>> make_pair(const std::string& addr, const std::string& server_opts,
                                               const std::string& client_opts) {
  auto p = std::make_unique<Pair>();
  CONDUIT_ASSIGN_OR_RETURN(p->loop, reactor::EventLoop::create());
  Pair* raw = p.get();
  CONDUIT_ASSIGN_OR_RETURN(p->listener, listen(*p->loop, "rdma://" + addr + ":0" + server_opts,
                                               [raw](std::unique_ptr<Connection> c) { raw->server = std::move(c); }));
  CONDUIT_ASSIGN_OR_RETURN(p->client, connect(*p->loop, p->listener->url() + client_opts,
                                              [raw](Connection&, Status s) { raw->connect_status = s; }));
  if (!run_until(*p->loop, [&] { return raw->server && !raw->connect_status.in_progress(); }, 10000))
    return Status(Code::kTimedOut, "rdma pair setup timed out");
  CONDUIT_RETURN_IF_ERROR(p->connect_status);
  return p;
}

// Pumps `data` from a to b through the loop with handlers, `chunk` bytes per write and up
// to `read_chunk` per read; returns what b read (within 60 s).
inline std::vector<uint8_t> transfer(reactor::EventLoop& loop, Connection& a, Connection& b,
                                     const std::vector<uint8_t>& data, size_t chunk = 1 << 16,
                                     size_t read_chunk = 32768) {
  std::vector<uint8_t> got;
  std::vector<uint8_t> buf(read_chunk);
  size_t sent = 0;
  auto pump = [&](Connection& c) {
    while (sent < data.size()) {
      auto n = c.write(std::span(data.data() + sent, std::min(chunk, data.size() - sent)));
      if (!n.ok()) break;
      sent += *n;
    }
    if (sent == data.size()) c.set_write_handler(nullptr);
  };
  a.set_write_handler(pump);
  b.set_read_handler([&](Connection& c) {
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok() || *n == 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
  });
  pump(a);
  run_until(loop, [&] { return got.size() >= data.size(); }, 60000);
  a.set_write_handler(nullptr);
  b.set_read_handler(nullptr);
  return got;
}

}  // namespace conduit::transport::testing
