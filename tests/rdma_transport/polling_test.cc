// rdma:// adaptive polling (poll_us, busy_poll_us; src/transport/poll): while traffic is
// dense the CQ is polled instead of armed (no completion events), event mode (poll_us=0)
// takes one per message, an idle connection stops spinning, and a connection whose
// handlers go away while its CQ is unarmed still hears of later data.
#include <gtest/gtest.h>
#include <time.h>

#include <cstring>
#include <iostream>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;

constexpr size_t kMsg = 64;

void fill(uint8_t* m, uint32_t round) {
  std::memcpy(m, &round, sizeof round);
  for (size_t i = sizeof round; i < kMsg; ++i) m[i] = static_cast<uint8_t>(round * 31 + i);
}

// Client sends round r, the server echoes it, the client checks it byte for byte and sends
// r + 1: `rounds` request/response exchanges driven by handlers.  Returns the rounds that
// came back intact.
uint32_t ping_pong(Pair& pair, uint32_t rounds) {
  uint32_t done = 0;
  bool broken = false;
  std::vector<uint8_t> got;
  uint8_t msg[kMsg];
  auto send = [&](uint32_t r) {
    fill(msg, r);
    auto n = pair.client->write(std::span<const uint8_t>(msg, kMsg));
    if (!n.ok() || *n != kMsg) broken = true;
  };
  pair.server->set_read_handler([&](Connection& c) {
    uint8_t buf[4096];
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok() || *n == 0) return;
      auto w = c.write(std::span<const uint8_t>(buf, *n));
      if (!w.ok() || *w != *n) broken = true;  // 64-byte echoes never fill a 1 MiB ring
    }
  });
  pair.client->set_read_handler([&](Connection& c) {
    uint8_t buf[4096];
    for (;;) {
      auto n = c.read(buf);
      if (!n.ok() || *n == 0) return;
      got.insert(got.end(), buf, buf + *n);
      while (got.size() >= kMsg) {
        uint8_t want[kMsg];
        fill(want, done);
        if (std::memcmp(got.data(), want, kMsg) != 0) broken = true;
        got.erase(got.begin(), got.begin() + kMsg);
        if (++done < rounds) send(done);
      }
    }
  });
  send(0);
  run_until(*pair.loop, [&] { return done == rounds || broken; }, 120000);
  EXPECT_FALSE(broken);
  return broken ? 0 : done;
}

class RdmaPolling : public RdmaDeviceTest {};

// While a connection polls, completions are found by polling, not announced by events.
// Shown with a fixed window (busy_poll_us): the adaptive one backs off whenever its spin
// loses the CPU (conduit/base/adaptive_spin.h), which a loaded TCG host makes happen at random.
TEST_F(RdmaPolling, DenseTrafficIsPolledWithoutCompletionEvents) {
  auto p = make_pair(addr_, "?busy_poll_us=100000", "?busy_poll_us=100000");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  const uint64_t before = pair.client->stats().wakeups + pair.server->stats().wakeups;
  constexpr uint32_t kRounds = 500;
  ASSERT_EQ(ping_pong(pair, kRounds), kRounds);
  const uint64_t events = pair.client->stats().wakeups + pair.server->stats().wakeups - before;
  // Event mode takes at least one per message on each side (2 x kRounds): polling, far fewer.
  EXPECT_LT(events, kRounds / 2) << "completion events while polling: " << events;
}

// The adaptive window (a large bound, so that it tunes itself to whatever TCG makes of the
// gaps): everything arrives, an idle connection stops spinning, and new traffic after the
// idle time is heard (through an event, since it sleeps).
TEST_F(RdmaPolling, AdaptiveWindowStopsSpinningWhenIdle) {
  auto p = make_pair(addr_, "?poll_us=1000000", "?poll_us=1000000");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  const uint64_t before = pair.client->stats().wakeups + pair.server->stats().wakeups;
  constexpr uint32_t kRounds = 500;
  ASSERT_EQ(ping_pong(pair, kRounds), kRounds);
  std::cout << "adaptive polling: " << pair.client->stats().wakeups + pair.server->stats().wakeups - before
            << " completion events for " << kRounds << " round trips\n";

  // Idle now (handlers still installed): the window closes, the CQs are armed and the loop
  // sleeps -- it does not spin the whole time.
  const uint64_t cpu0 = thread_cpu_ns();
  const uint64_t wall0 = monotonic_ns();
  while (monotonic_ns() - wall0 < 400 * kMs) ASSERT_TRUE(pair.loop->run_once(50).ok());
  const uint64_t cpu = thread_cpu_ns() - cpu0;
  EXPECT_LT(cpu, 200 * kMs) << "an idle polling connection kept spinning: " << cpu / 1000 << " us CPU in 400 ms";
  ASSERT_EQ(ping_pong(pair, 20), 20u);
}

TEST_F(RdmaPolling, EventModeTakesACompletionEventPerMessage) {
  auto p = make_pair(addr_, "?poll_us=0", "?poll_us=0");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  const uint64_t server_before = pair.server->stats().wakeups;
  constexpr uint32_t kRounds = 200;
  ASSERT_EQ(ping_pong(pair, kRounds), kRounds);
  // Every request reaches a sleeping server: it wakes for (at least) each one.
  EXPECT_GE(pair.server->stats().wakeups - server_before, kRounds);
}

// The default options poll too: the same exchange with them, and with a fixed window.
TEST_F(RdmaPolling, DefaultAndFixedWindowsDeliverEverything) {
  for (const char* opts : {"", "?busy_poll_us=200"}) {
    SCOPED_TRACE(opts);
    auto p = make_pair(addr_, opts, opts);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(ping_pong(**p, 300), 300u);
  }
}

// Handlers removed right after a polled completion (the CQ is not armed then): the hook
// arms it before the loop sleeps, so data written later wakes the reader.
TEST_F(RdmaPolling, HandlersRemovedWhileTheCqIsUnarmedMissNothing) {
  auto p = make_pair(addr_, "?poll_us=1000000", "?poll_us=1000000");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pair& pair = **p;
  ASSERT_EQ(ping_pong(pair, 100), 100u);
  pair.client->set_read_handler(nullptr);
  pair.server->set_read_handler(nullptr);
  // Drain the loop until it sleeps (no handlers: nothing polls).
  const uint64_t cpu0 = thread_cpu_ns();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pair.loop->run_once(20).ok());
  EXPECT_LT(thread_cpu_ns() - cpu0, 150 * kMs) << "the loop spun without handlers";
  const char text[] = "written while the server sleeps";
  ASSERT_TRUE(pair.client->write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text), sizeof text)).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pair.loop->run_once(20).ok());
  std::string got;
  pair.server->set_read_handler([&](Connection& c) {
    char buf[256];
    for (;;) {
      auto n = c.read(std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf));
      if (!n.ok() || *n == 0) return;
      got.append(buf, *n);
    }
  });
  ASSERT_TRUE(run_until(*pair.loop, [&] { return got.size() == sizeof text; }));
  EXPECT_EQ(std::memcmp(got.data(), text, sizeof text), 0);
}

}  // namespace
}  // namespace conduit::transport
