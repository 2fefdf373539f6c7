// shm:// in-place and owned-buffer I/O, the parts the conformance suite cannot see:
// spans that cross the ring's wrap, reserve()'s minimum and the write handler, held
// read_owned() slices (released out of order, from another thread, at the hold cap, after
// the connection closed), and write_owned() releasing what it copied.
#include <thread>

#include "transport/shm_test_util.h"

namespace conduit::transport {
namespace {

constexpr size_t kRing = 4096;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// Writes as much as the connection takes of `n` bytes of filler; returns the count.
size_t fill(Connection& c, size_t n) {
  std::vector<uint8_t> junk(n, 0xab);
  auto r = c.write(junk);
  return r.ok() ? *r : 0;
}

// Reads everything available (copying) and returns the count.
size_t read_all(Connection& c) {
  uint8_t buf[kRing];
  size_t total = 0;
  for (;;) {
    auto r = c.read(buf);
    if (!r.ok() || *r == 0) return total;
    total += *r;
  }
}

class ShmInPlace : public ShmTest {
 protected:
  void pair(const std::string& query = "") {
    client = connect_pair("shm://" + unique_name("inplace") + "?ring=4096" + query);
    ASSERT_TRUE(client);
    server = accepted[0].get();
  }
  std::unique_ptr<Connection> client;
  Connection* server = nullptr;
};

// The rings are mapped twice: a reservation and a peek across the end of the ring are one
// span each.
TEST_F(ShmInPlace, SpansCrossTheWrapInOnePiece) {
  pair();
  ASSERT_EQ(fill(*client, 3000), 3000u);
  ASSERT_EQ(read_all(*server), 3000u);
  auto span = client->reserve(3000, 3000);  // 1096 bytes before the end, 1904 after
  ASSERT_TRUE(span.ok()) << span.status().to_string();
  ASSERT_EQ(span->size(), 3000u);
  const auto data = pattern(3000, 1);
  std::memcpy(span->data(), data.data(), data.size());
  ASSERT_TRUE(client->commit(3000).ok());
  auto in = server->peek();
  ASSERT_TRUE(in.ok());
  ASSERT_EQ(in->size(), 3000u) << "one span, though the bytes wrap in the ring";
  EXPECT_EQ(std::memcmp(in->data(), data.data(), data.size()), 0);
  ASSERT_TRUE(server->consume(3000).ok());
  EXPECT_EQ(server->stats().bytes_read, 6000u);
  EXPECT_EQ(client->stats().bytes_written, 6000u);
  EXPECT_TRUE(client->caps().zero_copy);
}

TEST_F(ShmInPlace, ReserveRulesAndCommitBounds) {
  pair();
  EXPECT_EQ(client->reserve(kRing + 1, kRing + 1).status().code(), Code::kInvalidArgument) << "never satisfiable";
  EXPECT_EQ(client->reserve(5, 4).status().code(), Code::kInvalidArgument);
  auto span = client->reserve(1, 1 << 30);
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span->size(), kRing) << "max is clamped to the free space";
  EXPECT_EQ(client->commit(kRing + 1).code(), Code::kInvalidArgument);
  ASSERT_TRUE(client->commit(10).ok());
  EXPECT_EQ(client->commit(1).code(), Code::kInvalidArgument) << "the reservation was used up";
  // A write voids an open reservation.
  ASSERT_TRUE(client->reserve(1, 10).ok());
  ASSERT_EQ(*client->write(bytes("x")), 1u);
  EXPECT_EQ(client->commit(1).code(), Code::kInvalidArgument);
  // consume() needs a peek() of at least as much, and a read in between voids the peek.
  auto in = server->peek();
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->size(), 11u);
  EXPECT_EQ(server->consume(12).code(), Code::kInvalidArgument);
  uint8_t b;
  ASSERT_EQ(*server->read(std::span<uint8_t>(&b, 1)), 1u);
  EXPECT_EQ(server->consume(1).code(), Code::kInvalidArgument);
}

// reserve(min) would-blocks until `min` bytes are free, and the write handler waits for
// that much, not for any space at all (else it would spin on a nearly full ring).
TEST_F(ShmInPlace, WriteHandlerWaitsForTheReservedMinimum) {
  pair("&poll_us=0");
  ASSERT_EQ(fill(*client, kRing), kRing);
  ASSERT_EQ(client->reserve(2000, 2000).status().code(), Code::kWouldBlock);
  int calls = 0;
  client->set_write_handler([&](Connection& c) {
    ++calls;
    auto span = c.reserve(2000, 2000);
    if (!span.ok()) return;
    std::memset(span->data(), 0x5a, 2000);
    ASSERT_TRUE(c.commit(2000).ok());
    c.set_write_handler(nullptr);
  });
  uint8_t buf[1000];
  ASSERT_EQ(*server->read(buf), 1000u);  // 1000 free: not enough
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(calls, 0) << "1000 free bytes must not wake a writer that needs 2000";
  ASSERT_EQ(*server->read(buf), 1000u);
  ASSERT_TRUE(run_until(*loop, [&] { return calls > 0; }));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(read_all(*server), kRing - 2000 + 2000);
}

// Owned reads are views of the ring; its space returns to the writer only over the released
// prefix, whatever order the releases come in.
TEST_F(ShmInPlace, OutOfOrderReleaseGivesSpaceBackOverThePrefix) {
  pair("&hold_bytes=4096");
  ASSERT_EQ(fill(*client, kRing), kRing);
  memory::Chain a, b, c;
  ASSERT_EQ(*server->read_owned(a, 1000), 1000u);
  ASSERT_EQ(*server->read_owned(b, 1000), 1000u);
  ASSERT_EQ(*server->read_owned(c, 2096), 2096u);
  EXPECT_EQ(a.front().owner(), b.front().owner()) << "views of one receive ring";
  EXPECT_EQ(fill(*client, kRing), 0u) << "everything read is held";
  b.clear();
  EXPECT_EQ(fill(*client, kRing), 0u) << "b is free, but a still holds the front";
  c.clear();
  EXPECT_EQ(fill(*client, kRing), 0u);
  a.clear();
  EXPECT_EQ(fill(*client, kRing), kRing) << "a, b and c released: the whole ring";
}

// Bytes read by copy behind a held slice are given back with it; bytes before it at once.
TEST_F(ShmInPlace, CopiesAndHoldsMix) {
  pair();
  const auto data = pattern(3000, 9);
  ASSERT_EQ(*client->write(data), 3000u);
  uint8_t buf[500];
  ASSERT_EQ(*server->read(buf), 500u);
  memory::Chain held;
  ASSERT_EQ(*server->read_owned(held, 1000), 1000u);
  ASSERT_EQ(*server->read(buf), 500u);
  EXPECT_EQ(std::memcmp(held.front().data(), data.data() + 500, 1000), 0);
  // 500 bytes were given back before the hold; the 500 read after it wait for it.
  EXPECT_EQ(fill(*client, kRing), 1096u + 500u);
  held.clear();
  EXPECT_EQ(fill(*client, kRing), 1500u);
}

// At hold_bytes, reads would-block, and the read handler is not called again (no busy
// loop) until a slice is released.
TEST_F(ShmInPlace, HoldCapBlocksOwnedReadsUntilARelease) {
  pair("&hold_bytes=1000&poll_us=0");
  ASSERT_EQ(fill(*client, 3000), 3000u);
  std::vector<memory::Chain> held;
  int calls = 0;
  Status last;
  server->set_read_handler([&](Connection& c) {
    ++calls;
    for (;;) {
      memory::Chain ch;
      auto n = c.read_owned(ch, 300);
      if (!n.ok()) {
        last = n.status();
        return;
      }
      held.push_back(std::move(ch));
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return calls > 0 && last.would_block(); }));
  size_t total = 0;
  for (auto& ch : held) total += ch.size();
  EXPECT_EQ(total, 1000u) << "300 + 300 + 300 + 100: up to the cap, no further";
  const int after = calls;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(calls, after) << "the handler must not run again while nothing can be read";
  held.erase(held.begin());  // 300 bytes back
  ASSERT_TRUE(run_until(*loop, [&] { return calls > after; }));
  total = 0;
  for (auto& ch : held) total += ch.size();
  EXPECT_EQ(total, 1000u) << "again up to the cap";
  EXPECT_GE(server->stats().read_would_block, 2u);
  // The bound is on the ring kept from the writer, so copies and peeks stop there too.
  uint8_t buf[kRing];
  EXPECT_TRUE(server->read(buf).status().would_block());
  EXPECT_TRUE(server->peek().status().would_block());
  held.clear();
  EXPECT_EQ(*server->read(buf), 3000u - 1300u);
}

// Copies behind a held slice count toward the bound: they cannot be given back before it.
TEST_F(ShmInPlace, CopiesBehindAHeldSliceCountTowardTheBound) {
  pair("&hold_bytes=1000");
  ASSERT_EQ(fill(*client, kRing), kRing);
  memory::Chain held;
  ASSERT_EQ(*server->read_owned(held, 10), 10u);
  uint8_t buf[kRing];
  EXPECT_EQ(*server->read(buf), 990u) << "up to 1000 bytes from the held one";
  auto p = server->peek();
  EXPECT_TRUE(p.status().would_block()) << p.status().to_string();
  EXPECT_EQ(fill(*client, kRing), 0u) << "nothing was given back";
  held.clear();
  EXPECT_EQ(fill(*client, kRing), 1000u);
  EXPECT_EQ(*server->read(buf), kRing) << "nothing held: no bound";
}

// Releases from another thread are posted to the connection's loop; the writer, blocked on
// a full ring, is woken by them (the loop sleeps meanwhile: a lost release would hang).
TEST_F(ShmInPlace, ReleaseFromAnotherThreadWakesTheWriter) {
  pair("&hold_bytes=4096&poll_us=0");
  ASSERT_EQ(fill(*client, kRing), kRing);
  memory::Chain held;
  ASSERT_EQ(*server->read_owned(held, kRing), kRing);
  size_t written = 0;
  client->set_write_handler([&](Connection& c) {
    written += fill(c, kRing);
    if (written >= kRing) c.set_write_handler(nullptr);
  });
  ASSERT_TRUE(loop->run_once(0).ok());
  EXPECT_EQ(written, 0u);
  std::thread other([chain = std::move(held)]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    chain.clear();  // the last reference goes here, off the loop thread
  });
  ASSERT_TRUE(run_until(*loop, [&] { return written >= kRing; }));
  other.join();
  EXPECT_EQ(written, kRing);
}

// Many slices released by several threads in random order: every byte arrives intact and
// the whole ring comes back.
TEST_F(ShmInPlace, ConcurrentReleasesInAnyOrder) {
  pair("&hold_bytes=4096");
  const int kRounds = kSanitized ? 20 : 200;
  Rng rng(3);
  for (int round = 0; round < kRounds; ++round) {
    const auto data = pattern(kRing, static_cast<uint8_t>(round));
    ASSERT_EQ(*client->write(data), kRing);
    std::vector<memory::Chain> chains;
    size_t got = 0;
    while (got < kRing) {
      memory::Chain ch;
      auto n = server->read_owned(ch, rng.range(1, 700));
      ASSERT_TRUE(n.ok()) << n.status().to_string();
      ASSERT_EQ(std::memcmp(ch.front().data(), data.data() + got, *n), 0);
      got += *n;
      chains.push_back(std::move(ch));
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      std::vector<memory::Chain> mine;
      for (size_t i = static_cast<size_t>(t); i < chains.size(); i += 3) mine.push_back(std::move(chains[i]));
      threads.emplace_back([m = std::move(mine), seed = round * 3 + t]() mutable {
        Rng r(static_cast<uint64_t>(seed) + 1);
        while (!m.empty()) m.erase(m.begin() + static_cast<long>(r.next() % m.size()));
      });
    }
    for (auto& t : threads) t.join();
    size_t written = 0;
    ASSERT_TRUE(run_until(*loop, [&] {
      written += fill(*client, kRing - written);
      return written == kRing;
    })) << "round " << round;
    ASSERT_EQ(read_all(*server), kRing);
  }
}

// Closing (and destroying) the connection while slices are held: their bytes stay mapped,
// readable and unchanged -- the peer never got their space back, so it cannot overwrite
// them -- and the region is unmapped when the last slice goes.
TEST_F(ShmInPlace, HeldSlicesOutliveTheConnection) {
  pair("&hold_bytes=4096");
  const int before = count_shm_mappings();
  const auto data = pattern(2000, 42);
  ASSERT_EQ(*client->write(data), 2000u);
  memory::Chain held;
  ASSERT_EQ(*server->read_owned(held, 2000), 2000u);
  accepted[0]->close();
  accepted.clear();  // destroyed
  EXPECT_EQ(client->write(std::vector<uint8_t>(kRing, 0xee)).status().code(), Code::kClosed)
      << "the peer sees the reader gone";
  ASSERT_EQ(held.size(), 2000u);
  EXPECT_EQ(std::memcmp(held.front().data(), data.data(), 2000), 0) << "held bytes intact after close";
  EXPECT_EQ(count_shm_mappings(), before) << "still mapped while the slice lives";
  client->close();
  client.reset();
  EXPECT_LT(count_shm_mappings(), before);
  EXPECT_EQ(std::memcmp(held.front().data(), data.data(), 2000), 0);
  held.clear();
  EXPECT_EQ(count_shm_mappings(), 0) << "the last slice unmapped the region";
}

// The same with the last slice released on another thread after the loop is gone.
TEST_F(ShmInPlace, LastSliceReleasedElsewhereAfterTheLoopIsGone) {
  pair();
  ASSERT_EQ(fill(*client, 1000), 1000u);
  memory::Chain held;
  ASSERT_EQ(*server->read_owned(held, 1000), 1000u);
  client->close();
  client.reset();
  accepted.clear();
  listener.reset();
  loop.reset();
  std::thread([h = std::move(held)]() mutable { h.clear(); }).join();
  EXPECT_EQ(count_shm_mappings(), 0);
}

// write_owned copies into the ring and releases the slices it took at once.
TEST_F(ShmInPlace, WriteOwnedCopiesAndReleases) {
  pair();
  int released = 0;
  auto data = pattern(5000, 3);
  memory::Chain c;
  c.append(memory::Slice::foreign(data.data(), 2500, [&] { ++released; }));
  c.append(memory::Slice::foreign(data.data() + 2500, 2500, [&] { ++released; }));
  auto n = client->write_owned(c);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, kRing);
  EXPECT_EQ(released, 1) << "the first slice was copied whole; the second in part";
  EXPECT_EQ(c.size(), 5000u - kRing);
  std::vector<uint8_t> got(kRing);
  ASSERT_EQ(*server->read(got), kRing);
  EXPECT_EQ(std::memcmp(got.data(), data.data(), kRing), 0);
  ASSERT_EQ(*client->write_owned(c), 5000u - kRing);
  EXPECT_EQ(released, 2);
  EXPECT_EQ(client->pool(), nullptr);
}

TEST_F(ShmInPlace, EndOfStreamAndErrors) {
  pair();
  ASSERT_EQ(*client->write(bytes("tail")), 4u);
  ASSERT_TRUE(client->shutdown_write().ok());
  EXPECT_EQ(client->reserve(1, 1).status().code(), Code::kClosed);
  memory::Chain c;
  ASSERT_EQ(*server->read_owned(c, 100), 4u) << "data before the end of stream";
  EXPECT_EQ(*server->read_owned(c, 100), 0u);
  auto p = server->peek();
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty()) << "empty span = end of stream";
  client->close();
  EXPECT_EQ(client->peek().status().code(), Code::kClosed);
  EXPECT_EQ(client->reserve(1, 1).status().code(), Code::kClosed);
  EXPECT_EQ(client->read_owned(c, 1).status().code(), Code::kClosed);
}

}  // namespace
}  // namespace conduit::transport
