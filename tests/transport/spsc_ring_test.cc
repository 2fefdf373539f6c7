// The shared-memory SPSC ring: copies across the wrap, gather writes, end of stream,
// corrupt counters, the wakeup flags, and two-thread stress (spinning and sleeping).
#include "ring/spsc_ring.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "transport/ring_test_util.h"

namespace conduit::transport::ring {
namespace {

using conduit::testing::ByteStream;
using conduit::testing::kSanitized;
using conduit::testing::Rng;

// A ring in ordinary memory, for one or two threads.
struct LocalRing {
  explicit LocalRing(uint64_t capacity) : ctl(std::make_unique<RingControl>()), data(capacity) {}
  RingWriter writer() { return RingWriter(ctl.get(), data.data(), data.size()); }
  RingReader reader() { return RingReader(ctl.get(), data.data(), data.size()); }
  std::unique_ptr<RingControl> ctl;
  std::vector<uint8_t> data;
};

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

TEST(SpscRing, WriteReadAcrossWrap) {
  LocalRing r(16);
  RingWriter w = r.writer();
  RingReader rd = r.reader();
  uint8_t buf[64];
  EXPECT_EQ(rd.read(buf), 0u);  // empty
  EXPECT_EQ(w.write(bytes("0123456789")), 10u);
  EXPECT_EQ(rd.read(std::span<uint8_t>(buf, 7)), 7u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 7), "0123456");
  // 3 unread, 13 free; this write wraps (6 at the end, 7 at the start).
  EXPECT_EQ(w.write(bytes("abcdefghijklmnop")), 13u);
  EXPECT_EQ(w.write(bytes("x")), 0u);  // full
  EXPECT_EQ(w.free_space(), 0u);
  EXPECT_EQ(rd.read(buf), 16u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 16), "789abcdefghijklm");
  EXPECT_EQ(rd.read(buf), 0u);
  EXPECT_EQ(r.ctl->head.load(), 23u);
  EXPECT_EQ(r.ctl->tail.load(), 23u);
}

TEST(SpscRing, GatherWriteAcrossWrap) {
  LocalRing r(32);
  RingWriter w = r.writer();
  RingReader rd = r.reader();
  uint8_t buf[64];
  ASSERT_EQ(w.write(bytes(std::string(27, '.'))), 27u);
  ASSERT_EQ(rd.read(buf), 27u);
  // Five pieces, 5 bytes left before the end of the buffer: the wrap falls inside piece 2.
  const std::string parts[] = {"ab", "cdefg", "", "hijklmnopqrstu", "vwxyz"};
  std::vector<iovec> iov;
  for (const auto& p : parts) iov.push_back({const_cast<char*>(p.data()), p.size()});
  EXPECT_EQ(w.write(iov, 26), 26u);
  ASSERT_EQ(rd.read(buf), 26u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 26), "abcdefghijklmnopqrstuvwxyz");
  // `max` limits the gather; space limits it too.
  EXPECT_EQ(w.write(iov, 3), 3u);
  ASSERT_EQ(rd.read(buf), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 3), "abc");
  const std::string big(40, 'z');
  EXPECT_EQ(w.write(bytes(big)), 32u);
}

TEST(SpscRing, PeekAndConsume) {
  LocalRing r(8);
  RingWriter w = r.writer();
  RingReader rd = r.reader();
  uint8_t buf[8];
  ASSERT_EQ(w.write(bytes("123456")), 6u);
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 5)), 5u);
  ASSERT_EQ(w.write(bytes("789abc")), 6u);
  RingReader::Pieces p = rd.peek();
  EXPECT_EQ(std::string(p.first.begin(), p.first.end()), "678");
  EXPECT_EQ(std::string(p.second.begin(), p.second.end()), "9abc");
  rd.consume(4);
  EXPECT_EQ(r.ctl->tail.load(), 9u);
  p = rd.peek();
  EXPECT_EQ(std::string(p.first.begin(), p.first.end()), "abc");
  EXPECT_TRUE(p.second.empty());
}

TEST(SpscRing, EndOfStreamAfterData) {
  LocalRing r(16);
  RingWriter w = r.writer();
  RingReader rd = r.reader();
  ASSERT_EQ(w.write(bytes("tail")), 4u);
  w.close();
  EXPECT_TRUE(rd.writer_closed());
  EXPECT_FALSE(rd.at_eof());  // data first
  uint8_t buf[16];
  EXPECT_EQ(rd.read(buf), 4u);
  EXPECT_TRUE(rd.at_eof());
  EXPECT_FALSE(w.reader_closed());
  rd.close();
  EXPECT_TRUE(w.reader_closed());
}

TEST(SpscRing, CorruptCountersAreDetected) {
  {
    LocalRing r(16);
    RingReader rd = r.reader();
    r.ctl->head.store(17);  // more than a ring's worth
    uint8_t buf[32];
    EXPECT_EQ(rd.read(buf), 0u);
    EXPECT_TRUE(rd.corrupt());
    EXPECT_FALSE(rd.has_data());
  }
  {
    LocalRing r(16);
    RingWriter w = r.writer();
    ASSERT_EQ(w.write(bytes(std::string(16, 'x'))), 16u);
    r.ctl->tail.store(20);  // beyond head
    EXPECT_EQ(w.write(bytes("y")), 0u);
    EXPECT_TRUE(w.corrupt());
  }
  {
    // Attached to a ring that already carries positions: fine.
    LocalRing r(16);
    r.ctl->head.store(1000);
    r.ctl->tail.store(990);
    RingReader rd = r.reader();
    RingWriter w = r.writer();
    EXPECT_FALSE(rd.corrupt());
    EXPECT_FALSE(w.corrupt());
    EXPECT_EQ(rd.available(), 10u);
    EXPECT_EQ(w.free_space(), 6u);
  }
}

TEST(SpscRing, WakeupFlags) {
  LocalRing r(8);
  RingWriter w = r.writer();
  RingReader rd = r.reader();
  // Nobody sleeps: publishing needs no wakeup.
  ASSERT_EQ(w.write(bytes("ab")), 2u);
  EXPECT_FALSE(w.consumer_needs_wakeup());
  uint8_t buf[8];
  ASSERT_EQ(rd.read(buf), 2u);
  EXPECT_FALSE(rd.producer_needs_wakeup());

  // The consumer announces sleep on an empty ring: the re-check says block.
  EXPECT_FALSE(rd.wait_for_data());
  ASSERT_EQ(w.write(bytes("c")), 1u);
  EXPECT_TRUE(w.consumer_needs_wakeup());   // ring once
  EXPECT_FALSE(w.consumer_needs_wakeup());  // the announcement was consumed
  // Announcing sleep with data present: the re-check says don't block.
  EXPECT_TRUE(rd.wait_for_data());
  rd.cancel_sleep();
  EXPECT_FALSE(w.consumer_needs_wakeup());

  // Producer waits on a full ring; the consumer's read must wake it.
  ASSERT_EQ(w.write(bytes("1234567")), 7u);
  EXPECT_FALSE(w.wait_for_space());
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 1)), 1u);
  EXPECT_TRUE(rd.producer_needs_wakeup());
  EXPECT_FALSE(rd.producer_needs_wakeup());
  EXPECT_TRUE(w.wait_for_space());
  w.cancel_wait();

  // With a wake threshold the producer waits until enough is free, or the ring is empty.
  ASSERT_EQ(w.write(bytes("8")), 1u);  // full again (8 bytes)
  EXPECT_FALSE(w.wait_for_space());
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 1)), 1u);
  EXPECT_FALSE(rd.producer_needs_wakeup(4)) << "1 byte free, 4 asked";
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 2)), 2u);
  EXPECT_FALSE(rd.producer_needs_wakeup(4)) << "3 bytes free";
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 1)), 1u);
  EXPECT_TRUE(rd.producer_needs_wakeup(4)) << "4 bytes free: the announcement was kept until now";
  EXPECT_FALSE(rd.producer_needs_wakeup(4));
  EXPECT_TRUE(w.wait_for_space());
  w.cancel_wait();
  ASSERT_EQ(w.write(bytes("9abc")), 4u);  // full again
  EXPECT_FALSE(w.wait_for_space());
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 7)), 7u);
  ASSERT_EQ(rd.read(std::span<uint8_t>(buf, 1)), 1u);
  EXPECT_TRUE(rd.producer_needs_wakeup(1000)) << "an empty ring always wakes the producer";
  w.cancel_wait();
  ASSERT_EQ(w.write(bytes("defghij")), 7u);

  // End of stream wakes a sleeping consumer and makes its re-check succeed.
  ASSERT_EQ(rd.read(buf), 7u);
  EXPECT_FALSE(rd.wait_for_data());
  w.close();
  EXPECT_TRUE(w.consumer_needs_wakeup());
  EXPECT_TRUE(rd.wait_for_data());
  EXPECT_TRUE(rd.at_eof());
}

// --- two threads ---------------------------------------------------------------------

// Spinning producer and consumer (no sleeping): hundreds of MB through a 4 KiB ring with
// random write and read sizes and gather lists, verified byte for byte.
TEST(SpscRingStress, TwoThreadsSpinning) {
  const uint64_t total = kSanitized ? (uint64_t{32} << 20) : (uint64_t{384} << 20);
  LocalRing r(4096);
  std::atomic<bool> failed{false};

  std::thread producer([&] {
    RingWriter w = r.writer();
    ByteStream stream;
    Rng rng(1);
    std::vector<uint8_t> chunk(8192);
    uint64_t sent = 0;
    while (sent < total && !failed.load(std::memory_order_relaxed)) {
      const size_t want = std::min<uint64_t>(rng.range(1, 6000), total - sent);
      stream.fill(chunk.data(), want);
      // Split into up to three pieces.
      const size_t a = rng.range(0, want), b = rng.range(a, want);
      size_t off = 0;
      while (off < want) {
        iovec iov[3] = {{chunk.data(), a}, {chunk.data() + a, b - a}, {chunk.data() + b, want - b}};
        // Skip what was already written.
        size_t skip = off;
        std::vector<iovec> rest;
        for (const iovec& v : iov) {
          if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
          }
          rest.push_back({static_cast<uint8_t*>(v.iov_base) + skip, v.iov_len - skip});
          skip = 0;
        }
        const size_t n = w.write(rest, want - off);
        if (n == 0) {
          if (w.corrupt()) failed = true;
          sched_yield();
        }
        off += n;
      }
      sent += want;
    }
  });

  RingReader rd = r.reader();
  ByteStream expect;
  Rng rng(2);
  std::vector<uint8_t> buf(8192);
  uint64_t got = 0;
  while (got < total && !failed.load(std::memory_order_relaxed)) {
    const size_t n = rd.read(std::span<uint8_t>(buf.data(), rng.range(1, 8192)));
    if (n == 0) {
      if (rd.corrupt()) {
        failed = true;
        ADD_FAILURE() << "reader saw a corrupt head";
        break;
      }
      sched_yield();
      continue;
    }
    const size_t bad = expect.check(buf.data(), n);
    if (bad != n) {
      failed = true;
      ADD_FAILURE() << "stream mismatch at byte " << got + bad;
      break;
    }
    got += n;
  }
  producer.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(got, total);
  EXPECT_EQ(r.ctl->head.load(), total);
  EXPECT_EQ(r.ctl->tail.load(), total);
}

// An eventfd doorbell as the shm transport uses it.
class Doorbell {
 public:
  Doorbell() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Doorbell() { close(fd_); }
  void ring() {
    const uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }
  // Blocks until rung; false on timeout (a lost wakeup: the other side always makes progress).
  bool wait(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    uint64_t v;
    (void)!::read(fd_, &v, sizeof v);
    return true;
  }

 private:
  int fd_;
};

// Both sides sleep whenever they cannot proceed: the consumer on an empty ring, the producer
// on a full one.  Tiny messages through a 64-byte ring make both happen constantly.  A lost
// wakeup shows up as a wait that times out (both sides asleep), which fails the test instead
// of hanging it.  (Syscalls surround the race here, so a missing fence rarely shows; the
// litmus test below is the one that catches that.)
TEST(SpscRingStress, BothSidesSleepingNoLostWakeup) {
  const uint64_t messages = kSanitized ? 50'000 : 300'000;
  const int kWaitMs = 5000;
  LocalRing r(64);
  Doorbell producer_bell, consumer_bell;
  std::atomic<bool> lost{false};
  std::atomic<uint64_t> producer_sleeps{0}, consumer_sleeps{0};
  uint64_t total = 0;
  {
    Rng rng(3);
    for (uint64_t i = 0; i < messages; ++i) total += rng.range(1, 48);
  }

  std::thread producer([&] {
    RingWriter w = r.writer();
    ByteStream stream;
    Rng rng(3);
    uint8_t msg[64];
    for (uint64_t i = 0; i < messages && !lost.load(); ++i) {
      const size_t len = rng.range(1, 48);
      stream.fill(msg, len);
      size_t off = 0;
      while (off < len && !lost.load()) {
        const size_t n = w.write(std::span<const uint8_t>(msg + off, len - off));
        if (n > 0) {
          off += n;
          if (w.consumer_needs_wakeup()) consumer_bell.ring();
          continue;
        }
        if (w.wait_for_space()) {
          w.cancel_wait();
          continue;
        }
        producer_sleeps.fetch_add(1, std::memory_order_relaxed);
        if (!producer_bell.wait(kWaitMs)) lost = true;
      }
    }
    w.close();
    if (w.consumer_needs_wakeup()) consumer_bell.ring();
  });

  RingReader rd = r.reader();
  ByteStream expect;
  Rng rng(4);
  uint8_t buf[64];
  uint64_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kSanitized ? 240 : 120);
  while (!lost.load() && std::chrono::steady_clock::now() < deadline) {
    const size_t n = rd.read(std::span<uint8_t>(buf, rng.range(1, 40)));
    if (n > 0) {
      if (expect.check(buf, n) != n) {
        ADD_FAILURE() << "stream mismatch near byte " << got;
        lost = true;
        break;
      }
      got += n;
      if (rd.producer_needs_wakeup()) producer_bell.ring();
      continue;
    }
    if (rd.at_eof()) break;
    if (rd.wait_for_data()) {
      rd.cancel_sleep();
      continue;
    }
    consumer_sleeps.fetch_add(1, std::memory_order_relaxed);
    if (!consumer_bell.wait(kWaitMs)) lost = true;
  }
  if (got != total) {
    // Stop the producer and unblock it if it is the one still waiting.
    lost = true;
    producer_bell.ring();
  }
  producer.join();
  EXPECT_FALSE(lost.load()) << "a wakeup was lost: a side slept " << kWaitMs << " ms with work available";
  EXPECT_EQ(got, total);
  // The test only proves something if both sides really slept, many times.
  EXPECT_GT(producer_sleeps.load(), 100u);
  EXPECT_GT(consumer_sleeps.load(), 100u);
  std::printf("producer slept %llu times, consumer %llu times\n",
              static_cast<unsigned long long>(producer_sleeps.load()),
              static_cast<unsigned long long>(consumer_sleeps.load()));
}

// The protocol's core as a store-buffering litmus test: in every round both threads pass a
// spin barrier together, then the consumer announces sleep and re-checks (wait_for_data)
// while the producer publishes one byte and checks the announcement (consumer_needs_wakeup).
// A round where the consumer saw no data *and* the producer saw no announcement is a lost
// wakeup.  With the fence there must be none; with wakeup_fence() reduced to a compiler
// barrier, x86 store->load reordering produces them.  (The sleeping stress above is the
// end-to-end version, but there syscalls surround the race and its window is too narrow to
// hit reliably.)  The threads leave the barrier a cache-line transfer apart, which is much
// longer than the critical sections, so a delay adapted round by round steers them onto
// each other.
TEST(SpscRingStress, WakeupProtocolLitmus) {
  const uint64_t max_rounds = 1'000'000;
  const uint64_t enough_overlaps = 20'000;
  const auto budget = std::chrono::seconds(kSanitized ? 15 : 6);
  LocalRing r(64);
  std::atomic<uint64_t> arrived{0};
  auto barrier = [&](uint64_t n) {
    arrived.fetch_add(1, std::memory_order_acq_rel);
    for (uint32_t spins = 0; arrived.load(std::memory_order_acquire) < n;)
      if (++spins % 4096 == 0) sched_yield();
  };
  auto delay = [](int64_t n) {
    for (; n > 0; --n) __asm__ __volatile__("" ::: "memory");
  };
  // > 0: the producer waits that many loop iterations, < 0: the consumer does.
  std::atomic<int64_t> skew{0};
  std::atomic<bool> stop{false};
  std::vector<uint8_t> producer_saw(max_rounds), consumer_saw(max_rounds);

  std::thread producer([&] {
    RingWriter w = r.writer();
    const uint8_t byte = 1;
    Rng rng(5);
    for (uint64_t i = 0; i < max_rounds; ++i) {
      barrier(4 * i + 2);
      if (stop.load(std::memory_order_relaxed)) break;
      delay(skew.load(std::memory_order_relaxed) + static_cast<int64_t>(rng.range(0, 64)));
      (void)w.write(std::span<const uint8_t>(&byte, 1));
      producer_saw[i] = w.consumer_needs_wakeup();
      barrier(4 * i + 4);
    }
  });
  RingReader rd = r.reader();
  uint8_t buf[8];
  Rng rng(6);
  uint64_t rounds = 0, lost = 0, overlapped = 0;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (uint64_t i = 0; i < max_rounds; ++i) {
    barrier(4 * i + 2);
    if (stop.load(std::memory_order_relaxed)) break;
    delay(-skew.load(std::memory_order_relaxed) + static_cast<int64_t>(rng.range(0, 64)));
    consumer_saw[i] = rd.wait_for_data();
    barrier(4 * i + 4);
    // Settle the round after the producer's check: take the byte, withdraw, steer, count.
    while (rd.read(buf) == 0) {
    }
    rd.cancel_sleep();
    ++rounds;
    const bool p = producer_saw[i] != 0, c = consumer_saw[i] != 0;
    lost += !p && !c;
    overlapped += p && c;
    int64_t k = skew.load(std::memory_order_relaxed);
    if (c && !p) k = std::min<int64_t>(k + 4, 50'000);   // the producer was early
    if (p && !c) k = std::max<int64_t>(k - 4, -50'000);  // the consumer was early
    skew.store(k, std::memory_order_relaxed);
    if (overlapped >= enough_overlaps || ((i & 1023) == 0 && std::chrono::steady_clock::now() > deadline))
      stop.store(true, std::memory_order_relaxed);
  }
  producer.join();
  std::printf("%llu rounds: %llu lost wakeups, %llu overlapped (both sides saw the other), skew %lld\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>(overlapped), static_cast<long long>(skew.load()));
  EXPECT_EQ(lost, 0u);
  if (overlapped == 0) GTEST_SKIP() << "the two threads never overlapped (one vCPU, or a loaded machine): inconclusive";
}

}  // namespace
}  // namespace conduit::transport::ring
