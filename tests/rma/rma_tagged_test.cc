// conduit::rma tagged send/recv on every carrier: tcp and shm (the emulation, host suite),
// rdma (label rdma, in the Soft-RoCE guest).  Byte-for-byte transfers at 0 B..1 MiB, a
// grouped receive of 4, a message larger than its buffer (both sides fail, the endpoint
// stays usable), a sender waiting without spinning for the receiver to post, 1,000
// messages over 8 tags in order per tag under backpressure, a peer that closes with
// requests pending, and a peer that writes a malformed FIFO slot.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"
#include "rma_test_util.h"
#include "conduit/rma/tagged.h"

namespace conduit::rma {
namespace {

using reactor::EventLoop;

using test::Row;
using test::rdma_addr;
using test::rdma_required;
using test::thread_cpu_ns;

const Row kRows[] = {
    {"tcp", [] { return std::string("tcp://127.0.0.1:0"); }},
    {"shm",
     [] {
       static int n = 0;
       return "shm://rma-tagged-" + std::to_string(getpid()) + "-" + std::to_string(++n);
     }},
    {"rdma", [] { return rdma_addr().empty() ? std::string() : "rdma://" + rdma_addr() + ":0"; }},
};

bool run_until(EventLoop& loop, const std::function<bool()>& pred, int ms = 60000) {
  return test::run_until(loop, pred, ms);
}

uint8_t pattern(uint64_t seed, size_t i) { return static_cast<uint8_t>((seed * 131 + i * 7 + (i >> 8)) & 0xff); }
std::vector<uint8_t> make_message(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern(seed, i);
  return v;
}
// memcmp that accepts empty (possibly null) ranges.
bool same(const uint8_t* a, const uint8_t* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

class RmaTagged : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    url_ = GetParam().listen_url();
    if (url_.empty()) {
      if (rdma_required()) FAIL() << "CONDUIT_REQUIRE_RDMA=1 but CONDUIT_RDMA_ADDR is unset";
      GTEST_SKIP() << "no RDMA address (CONDUIT_RDMA_ADDR); run in the testbed: testbed/run ctest -L rdma";
    }
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    loop_->adopt_current_thread();
    connect_pair(TaggedOptions{});
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    raw_client_.reset();
    raw_server_.reset();
    listener_.reset();
  }

  // a_ (the connecting side) and b_ (the accepted side), hellos exchanged.
  void connect_pair(TaggedOptions o, const std::string& query = "") {
    std::unique_ptr<Endpoint> server;
    auto l = Listener::listen(*loop_, url_ + query, [&](std::unique_ptr<Endpoint> ep) { server = std::move(ep); });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    listener_ = std::move(*l);
    bool done = false;
    Status st;
    std::string u = listener_->url();
    u += u.find('?') == std::string::npos ? query : (query.empty() ? "" : "&" + query.substr(1));
    auto ep = Endpoint::connect(*loop_, u, [&](Endpoint&, Status s) {
      done = true;
      st = s;
    });
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    ASSERT_TRUE(run_until(*loop_, [&] { return done && server; }));
    ASSERT_TRUE(st.ok()) << st.to_string();
    raw_client_ = std::move(*ep);
    raw_server_ = std::move(server);
    if (o.slots == 0) return;  // the caller wraps them itself
    auto a = TaggedEndpoint::create(std::move(raw_client_), o);
    auto b = TaggedEndpoint::create(std::move(raw_server_), o);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    a_ = std::move(*a);
    b_ = std::move(*b);
    ASSERT_TRUE(a_->start(b_->hello()).ok());
    ASSERT_TRUE(b_->start(a_->hello()).ok());
  }

  // Runs the loop until `r` on `t` is done; returns its completion.
  Completion wait(TaggedEndpoint& t, Request r, int ms = 60000) {
    std::optional<Completion> out;
    EXPECT_TRUE(run_until(*loop_, [&] {
      auto c = t.test(r);
      EXPECT_TRUE(c.ok()) << c.status().to_string();
      if (!c.ok()) return true;
      out = *c;
      return out.has_value();
    }, ms)) << "request " << r.id << " did not finish";
    return out.value_or(Completion{Status(Code::kTimedOut, "test timed out")});
  }

  Descriptor region(std::vector<uint8_t>& mem) {
    auto d = b_->register_buffer(mem.data(), mem.size());
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    return d.ok() ? *d : Descriptor{};
  }

  std::string url_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<Endpoint> raw_client_, raw_server_;
  std::unique_ptr<TaggedEndpoint> a_, b_;
};

TEST_P(RmaTagged, ByteForByteAtZeroOneFourKiBAndOneMiB) {
  const size_t sizes[] = {0, 1, 4096, 1 << 20};
  std::vector<uint8_t> mem(4 * (1 << 20), 0xee);
  const Descriptor reg = region(mem);
  std::vector<Request> recvs, sends;
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t i = 0; i < 4; ++i) {
    const uint32_t tag = 7;
    RecvBuffer buf{std::span<uint8_t>(mem.data() + i * (1 << 20), 1 << 20), reg};
    auto r = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&buf, 1));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    recvs.push_back(*r);
    msgs.push_back(make_message(i + 1, sizes[i]));
  }
  for (size_t i = 0; i < 4; ++i) {
    auto s = a_->isend(7, msgs[i]);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    sends.push_back(*s);
  }
  for (size_t i = 0; i < 4; ++i) {
    Completion s = wait(*a_, sends[i]);
    EXPECT_TRUE(s.status.ok()) << s.status.to_string();
    EXPECT_EQ(s.sizes[0], sizes[i]);
    Completion r = wait(*b_, recvs[i]);
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_TRUE(b_->flush().ok());
    ASSERT_EQ(r.count, 1u);
    EXPECT_EQ(r.sizes[0], sizes[i]);
    EXPECT_TRUE(same(mem.data() + i * (1 << 20), msgs[i].data(), sizes[i])) << "size " << sizes[i];
    if (sizes[i] < (1u << 20)) {
      EXPECT_EQ(mem[i * (1 << 20) + sizes[i]], 0xee) << "written past the message";
    }
  }
  EXPECT_EQ(a_->outstanding(), 0u);
  EXPECT_EQ(b_->outstanding(), 0u);
  auto again = b_->test(recvs[0]);
  EXPECT_EQ(again.status().code(), Code::kNotFound);
}

TEST_P(RmaTagged, GroupedReceiveOfFourCompletesWhenAllArrived) {
  std::vector<uint8_t> mem(4 * 8192, 0);
  const Descriptor reg = region(mem);
  const uint32_t tags[4] = {10, 11, 12, 13};
  const size_t lens[4] = {8192, 100, 0, 5000};
  RecvBuffer bufs[4];
  for (int i = 0; i < 4; ++i) bufs[i] = RecvBuffer{std::span<uint8_t>(mem.data() + i * 8192, lens[i]), reg};
  auto r = b_->irecv(tags, bufs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const size_t sizes[4] = {8192, 99, 0, 1};
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < 4; ++i) msgs.push_back(make_message(40 + i, sizes[i]));
  // Sent out of the posted order: 13, 11, 12 first; the group is not done without 10.
  std::vector<Request> sends;
  for (int i : {3, 1, 2}) sends.push_back(*a_->isend(tags[i], msgs[i]));
  for (Request s : sends) EXPECT_TRUE(wait(*a_, s).status.ok());
  // The sends completed locally, so their records are on the way; give them time to land.
  ASSERT_TRUE(run_until(*loop_, [&] { return b_->protocol_wakeups() >= 3; }));
  auto early = b_->test(*r);
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(early->has_value()) << "a group of 4 finished with 3 messages";
  EXPECT_TRUE(wait(*a_, *a_->isend(10, msgs[0])).status.ok());
  Completion c = wait(*b_, *r);
  ASSERT_TRUE(c.status.ok()) << c.status.to_string();
  ASSERT_EQ(c.count, 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(c.sizes[i], sizes[i]) << i;
    EXPECT_TRUE(same(mem.data() + i * 8192, msgs[i].data(), sizes[i])) << i;
  }
}

TEST_P(RmaTagged, TooLargeMessageFailsBothSidesAndTheEndpointStaysUsable) {
  std::vector<uint8_t> mem(200, 0x5a);
  const Descriptor reg = region(mem);
  const uint32_t tag = 3;
  RecvBuffer small{std::span<uint8_t>(mem.data(), 100), reg};
  auto r = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&small, 1));
  ASSERT_TRUE(r.ok());
  auto big = make_message(9, 101);
  Completion s = wait(*a_, *a_->isend(tag, big));
  EXPECT_EQ(s.status.code(), Code::kResourceExhausted) << s.status.to_string();
  EXPECT_NE(s.status.message().find("larger than the posted buffer of 100 bytes"), std::string::npos)
      << s.status.to_string();
  Completion c = wait(*b_, *r);
  EXPECT_EQ(c.status.code(), Code::kResourceExhausted) << c.status.to_string();
  for (uint8_t x : mem) ASSERT_EQ(x, 0x5a) << "a refused message wrote into the buffer";
  // Still usable: the next message of the right size goes through, same buffer, same tag.
  auto r2 = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&small, 1));
  ASSERT_TRUE(r2.ok());
  auto fit = make_message(10, 100);
  EXPECT_TRUE(wait(*a_, *a_->isend(tag, fit)).status.ok());
  Completion c2 = wait(*b_, *r2);
  ASSERT_TRUE(c2.status.ok()) << c2.status.to_string();
  EXPECT_EQ(c2.sizes[0], 100u);
  EXPECT_EQ(std::memcmp(mem.data(), fit.data(), 100), 0);
  EXPECT_EQ(a_->endpoint().state(), EndpointState::kConnected);
}

TEST_P(RmaTagged, SenderBeforeTheReceiverPostsWaitsWithoutSpinning) {
  auto msg = make_message(5, 3000);
  auto s = a_->isend(5, msg);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(a_->waiting_sends(), 1u);
  // 600 ms with nothing posted: the loop must sleep (a spinning sender would turn the loop
  // thousands of times and burn the CPU for the whole window).
  bool fired = false;
  (void)loop_->run_after(600'000'000, [&] { fired = true; });
  const uint64_t cpu0 = thread_cpu_ns();
  int turns = 0;
  while (!fired) {
    (void)loop_->run_once(1000);
    ++turns;
  }
  const uint64_t cpu_ms = (thread_cpu_ns() - cpu0) / 1000000;
  EXPECT_LE(turns, 60) << "the loop kept waking with nothing posted";
  EXPECT_LE(cpu_ms, 300u) << "the waiting sender used the CPU";
  EXPECT_EQ(a_->protocol_wakeups(), 0u);
  auto pending = a_->test(*s);
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value());
  std::vector<uint8_t> mem(4096);
  const Descriptor reg = region(mem);
  const uint32_t tag = 5;
  RecvBuffer buf{std::span<uint8_t>(mem), reg};
  auto r = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&buf, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(wait(*a_, *s).status.ok());
  Completion c = wait(*b_, *r);
  ASSERT_TRUE(c.status.ok());
  EXPECT_EQ(c.sizes[0], 3000u);
  EXPECT_EQ(std::memcmp(mem.data(), msg.data(), 3000), 0);
  EXPECT_EQ(a_->protocol_wakeups(), 1u);  // one FIFO post woke the sender
  printf("[ info ] waiting 600 ms: %d loop turns, %llu ms CPU\n", turns, static_cast<unsigned long long>(cpu_ms));
}

// 1,000 messages over 8 tags; receives posted in another tag order than the sends; at most
// 32 requests outstanding per side (backpressure: isend/irecv would-block, retried after
// reaping) and 8 ops in flight on each endpoint (matched sends wait for the endpoint's room,
// woken by its ready handler).  Each tag's messages complete in order and land byte for byte.
TEST_P(RmaTagged, ThousandMessagesOverEightTagsCompleteInOrderPerTag) {
  TearDown();
  TaggedOptions o;
  o.slots = 16;
  o.max_requests = 32;
  connect_pair(o, "?depth=8");
  constexpr int kMessages = 1000, kTags = 8, kBuf = 2048, kRing = 64;
  auto size_of = [](int tag, int k) { return static_cast<size_t>(1 + (tag * 131 + k * 17) % (kBuf - 1)); };
  std::vector<std::vector<uint8_t>> msgs(kMessages);
  for (int i = 0; i < kMessages; ++i) msgs[i] = make_message(i, size_of(i % kTags, i / kTags));
  std::vector<uint8_t> mem(size_t{kRing} * kBuf);
  const Descriptor reg = region(mem);
  struct Pending {
    Request req;
    int k;
    int buf;
  };
  std::vector<std::deque<Pending>> recv_q(kTags), send_q(kTags);
  int sent = 0, posted = 0, received = 0, send_done = 0, would_block = 0;
  int ring_next = 0;
  std::vector<int> recv_k(kTags, 0);
  bool order_ok = true, bytes_ok = true;
  auto scan = [&](TaggedEndpoint& t, std::vector<std::deque<Pending>>& qs, bool recv) {
    for (int tag = 0; tag < kTags; ++tag) {
      bool earlier_pending = false;
      for (auto it = qs[tag].begin(); it != qs[tag].end();) {
        auto c = t.test(it->req);
        if (!c.ok() || !c->has_value()) {
          earlier_pending = true;
          ++it;
          continue;
        }
        if (earlier_pending) order_ok = false;
        if (!(*c)->status.ok()) bytes_ok = false;
        if (recv) {
          const int i = it->k * kTags + tag;  // the message this receive must hold
          if ((*c)->sizes[0] != msgs[i].size() ||
              std::memcmp(mem.data() + size_t{static_cast<size_t>(it->buf)} * kBuf, msgs[i].data(), msgs[i].size()) != 0)
            bytes_ok = false;
          ++received;
        } else {
          ++send_done;
        }
        it = qs[tag].erase(it);
      }
    }
  };
  std::vector<bool> ring_busy(kRing, false);
  auto step = [&] {
    scan(*b_, recv_q, true);
    scan(*a_, send_q, false);
    for (auto& q : recv_q)
      for (auto& p : q) ring_busy[p.buf] = true;
    while (sent < kMessages) {
      const int tag = sent % kTags;
      auto s = a_->isend(static_cast<uint32_t>(tag), msgs[sent]);
      if (!s.ok()) {
        if (s.status().would_block()) ++would_block;
        else bytes_ok = false;
        break;
      }
      send_q[tag].push_back({*s, sent / kTags, -1});
      ++sent;
    }
    std::fill(ring_busy.begin(), ring_busy.end(), false);
    for (auto& q : recv_q)
      for (auto& p : q) ring_busy[p.buf] = true;
    while (posted < kMessages) {
      const uint32_t tag = static_cast<uint32_t>(kTags - 1 - posted % kTags);
      if (ring_busy[ring_next]) break;
      RecvBuffer buf{std::span<uint8_t>(mem.data() + size_t{static_cast<size_t>(ring_next)} * kBuf, kBuf), reg};
      auto r = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&buf, 1));
      if (!r.ok()) {
        if (r.status().would_block()) ++would_block;
        else bytes_ok = false;
        break;
      }
      recv_q[tag].push_back({*r, recv_k[tag]++, ring_next});
      ring_busy[ring_next] = true;
      ring_next = (ring_next + 1) % kRing;
      ++posted;
    }
    return received == kMessages && send_done == kMessages;
  };
  ASSERT_TRUE(run_until(*loop_, step, 240000)) << "sent " << sent << " posted " << posted << " received "
                                                << received << " send_done " << send_done;
  EXPECT_TRUE(order_ok) << "a tag's requests completed out of order";
  EXPECT_TRUE(bytes_ok) << "a message failed or landed wrong";
  EXPECT_GT(would_block, 0) << "the request bound was never reached";
  EXPECT_LE(a_->outstanding(), 32u);
  EXPECT_EQ(a_->outstanding() + b_->outstanding(), 0u);
}

TEST_P(RmaTagged, PeerClosingFailsPendingRequestsWithoutLeaks) {
  std::vector<uint8_t> mem(3 * 4096);
  const Descriptor reg = region(mem);
  const uint32_t tag = 1;
  std::vector<Request> recvs;
  for (int i = 0; i < 3; ++i) {
    RecvBuffer buf{std::span<uint8_t>(mem.data() + i * 4096, 4096), reg};
    recvs.push_back(*b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&buf, 1)));
  }
  auto m = make_message(1, 4096);
  EXPECT_TRUE(wait(*a_, *a_->isend(1, m)).status.ok());
  EXPECT_TRUE(wait(*b_, recvs[0]).status.ok());
  // The sender has two sends queued for a tag nobody posted: when the receiver goes away
  // both fail.
  auto q1 = *a_->isend(9, m);
  auto q2 = *a_->isend(9, m);
  b_.reset();  // the peer closes with two receives pending (dropped, not leaked)
  for (Request q : {q1, q2}) {
    Completion c = wait(*a_, q);
    EXPECT_TRUE(c.status.code() == Code::kClosed || c.status.code() == Code::kCancelled) << c.status.to_string();
  }
  auto late = a_->isend(9, m);
  EXPECT_FALSE(late.ok());
  // And the other way: the sender closes while the receiver waits.
  TearDown();
  connect_pair(TaggedOptions{});
  std::vector<uint8_t> mem2(4096);
  auto reg2 = b_->register_buffer(mem2.data(), mem2.size());
  ASSERT_TRUE(reg2.ok());
  RecvBuffer buf{std::span<uint8_t>(mem2), *reg2};
  auto r = b_->irecv(std::span<const uint32_t>(&tag, 1), std::span<const RecvBuffer>(&buf, 1));
  ASSERT_TRUE(r.ok());
  (void)a_->isend(2, m);  // pending at the sender when it closes (dropped, not leaked)
  a_.reset();
  Completion c = wait(*b_, *r);
  EXPECT_TRUE(c.status.code() == Code::kClosed || c.status.code() == Code::kCancelled) << c.status.to_string();
}

// A peer that is not a tagged endpoint writes a malformed FIFO slot: the tagged side fails
// with kProtocolError (its pending requests too) and nothing else is touched.
TEST_P(RmaTagged, MalformedFifoSlotClosesOnlyThatEndpoint) {
  TearDown();
  TaggedOptions raw;
  raw.slots = 0;
  connect_pair(raw);
  auto t = TaggedEndpoint::create(std::move(raw_server_));
  ASSERT_TRUE(t.ok());
  auto send = (*t)->isend(4, std::span<const uint8_t>());
  ASSERT_TRUE(send.ok());
  const auto hello = (*t)->hello();
  auto fifo = Descriptor::decode(std::span<const uint8_t>(hello.data() + 16, Descriptor::kWireSize));
  ASSERT_TRUE(fifo.ok());
  std::vector<uint8_t> junk(TaggedEndpoint::kFifoSlotBytes, 0);
  junk[0] = 1;
  junk[1] = 9;  // count 9 > kMaxGroup
  ASSERT_TRUE(raw_client_->submit(Op::write_imm(junk, *fifo, 0, 1u << 31, nullptr)).ok());
  Completion c = wait(**t, *send);
  EXPECT_EQ(c.status.code(), Code::kProtocolError) << c.status.to_string();
  EXPECT_EQ((*t)->flush().code(), Code::kProtocolError);
}


INSTANTIATE_TEST_SUITE_P(host, RmaTagged, ::testing::Values(kRows[0], kRows[1]), test::row_name);
INSTANTIATE_TEST_SUITE_P(rdma, RmaTagged, ::testing::Values(kRows[2]), test::row_name);

}  // namespace
}  // namespace conduit::rma
