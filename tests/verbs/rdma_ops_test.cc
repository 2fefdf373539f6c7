// Every opcode over a real RC loopback pair, checked byte for byte and field by field.
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "rdma_env.h"

namespace conduit::verbs::testing {
namespace {

void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

class RdmaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    ASSERT_OK_AND_ASSIGN(pair_, LoopbackPair::create(ctx));
    ASSERT_EQ(pair_->a->state(), QpState::kRts);
    ASSERT_EQ(pair_->b->state(), QpState::kRts);
  }
  std::unique_ptr<LoopbackPair> pair_;
};

TEST_F(RdmaOps, DeviceFacts) {
  const Context& ctx = *pair_->ctx;
  auto devs = list_devices();
  ASSERT_TRUE(devs.ok());
  EXPECT_TRUE(std::any_of(devs->begin(), devs->end(), [&](const DeviceInfo& d) { return d.name == ctx.name(); }));
  ASSERT_OK_AND_ASSIGN(uint8_t port, ctx.first_active_port());
  ASSERT_OK_AND_ASSIGN(PortInfo info, ctx.port(port));
  EXPECT_TRUE(info.active());
  EXPECT_GT(mtu_bytes(info.active_mtu), 0);
  ASSERT_OK_AND_ASSIGN(auto gids, ctx.gids(port));
  EXPECT_FALSE(gids.empty());
  ASSERT_OK_AND_ASSIGN(GidEntry gid, ctx.default_gid(port));
  if (info.is_ethernet()) {
    EXPECT_EQ(gid.type, GidType::kRoceV2) << gid.to_string();
  }
  EXPECT_GT(ctx.attr().max_qp_wr, 0);
  // Re-opening by the reported name works.
  ASSERT_OK_AND_ASSIGN(auto again, Context::open(ctx.name()));
  EXPECT_EQ(again->name(), ctx.name());
}

TEST_F(RdmaOps, SendRecvByteForByte) {
  LoopbackPair& p = *pair_;
  fill_pattern(p.buf_a->data(), 4096, 1);
  ibv_sge rsge = p.buf_b->sge(0, 4096);
  RecvWr rwr = RecvWr::make(&rsge, 1, 77);
  ASSERT_OK(p.b->post_recv(rwr));
  ibv_sge ssge = p.buf_a->sge(0, 4096);
  SendWr swr = SendWr::send(&ssge, 1).id(11).signaled();
  ASSERT_OK(p.a->post_send(swr));

  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  EXPECT_TRUE(sc[0].ok()) << sc[0].to_string();
  EXPECT_EQ(sc[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(sc[0].wr_id, 11u);
  EXPECT_EQ(sc[0].qp_num, p.a->qp_num());

  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*p.cq_b, 1));
  EXPECT_TRUE(rc[0].ok()) << rc[0].to_string();
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rc[0].wr_id, 77u);
  EXPECT_EQ(rc[0].byte_len, 4096u);
  EXPECT_EQ(rc[0].qp_num, p.b->qp_num());
  EXPECT_FALSE(rc[0].has_imm());
  EXPECT_EQ(std::memcmp(p.buf_a->data(), p.buf_b->data(), 4096), 0);
}

TEST_F(RdmaOps, SendWithImm) {
  LoopbackPair& p = *pair_;
  fill_pattern(p.buf_a->data(), 100, 2);
  ibv_sge rsge = p.buf_b->sge(0, 128);
  RecvWr rwr = RecvWr::make(&rsge, 1, 1);
  ASSERT_OK(p.b->post_recv(rwr));
  ibv_sge ssge = p.buf_a->sge(0, 100);
  SendWr swr = SendWr::send_imm(&ssge, 1, 0xC0FFEE).id(2).signaled();
  ASSERT_OK(p.a->post_send(swr));
  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*p.cq_b, 1));
  ASSERT_TRUE(rc[0].ok()) << rc[0].to_string();
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV);
  EXPECT_TRUE(rc[0].has_imm());
  EXPECT_EQ(rc[0].imm(), 0xC0FFEEu);
  EXPECT_EQ(rc[0].byte_len, 100u);
  EXPECT_EQ(std::memcmp(p.buf_a->data(), p.buf_b->data(), 100), 0);
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  EXPECT_EQ(sc[0].opcode, IBV_WC_SEND);
}

TEST_F(RdmaOps, RdmaWrite) {
  LoopbackPair& p = *pair_;
  const size_t n = 300000;  // several MTUs, not a power of two
  fill_pattern(p.buf_a->data(), n, 3);
  ibv_sge sge = p.buf_a->sge(0, n);
  SendWr wr = SendWr::write(&sge, 1, p.buf_b->mr().addr() + 512, p.buf_b->mr().rkey()).id(5).signaled();
  ASSERT_OK(p.a->post_send(wr));
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  ASSERT_TRUE(sc[0].ok()) << sc[0].to_string();
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(sc[0].wr_id, 5u);
  EXPECT_EQ(std::memcmp(p.buf_a->data(), p.buf_b->data() + 512, n), 0);
  // The responder sees nothing: a plain WRITE consumes no receive and makes no completion.
  Completion none[1];
  ASSERT_OK_AND_ASSIGN(int got, p.cq_b->poll(none));
  EXPECT_EQ(got, 0);
}

TEST_F(RdmaOps, RdmaWriteWithImm) {
  LoopbackPair& p = *pair_;
  fill_pattern(p.buf_a->data(), 8192, 4);
  ibv_sge none_sge{};  // WRITE_WITH_IMM consumes a receive; it needs no buffer
  RecvWr rwr = RecvWr::make(&none_sge, 0, 9);
  ASSERT_OK(p.b->post_recv(rwr));
  ibv_sge sge = p.buf_a->sge(0, 8192);
  SendWr wr = SendWr::write_imm(&sge, 1, p.buf_b->mr().addr(), p.buf_b->mr().rkey(), 8192).id(6).signaled();
  ASSERT_OK(p.a->post_send(wr));
  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*p.cq_b, 1));
  ASSERT_TRUE(rc[0].ok()) << rc[0].to_string();
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(rc[0].wr_id, 9u);
  EXPECT_TRUE(rc[0].has_imm());
  EXPECT_EQ(rc[0].imm(), 8192u);
  EXPECT_EQ(rc[0].byte_len, 8192u);
  EXPECT_EQ(std::memcmp(p.buf_a->data(), p.buf_b->data(), 8192), 0);
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_WRITE);
}

TEST_F(RdmaOps, RdmaRead) {
  LoopbackPair& p = *pair_;
  fill_pattern(p.buf_b->data(), 65536, 5);
  ibv_sge sge = p.buf_a->sge(1024, 65536);
  SendWr wr = SendWr::read(&sge, 1, p.buf_b->mr().addr(), p.buf_b->mr().rkey()).id(7).signaled();
  ASSERT_OK(p.a->post_send(wr));
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  ASSERT_TRUE(sc[0].ok()) << sc[0].to_string();
  EXPECT_EQ(sc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(sc[0].byte_len, 65536u);
  EXPECT_EQ(std::memcmp(p.buf_a->data() + 1024, p.buf_b->data(), 65536), 0);
}

TEST_F(RdmaOps, CompareAndSwap) {
  LoopbackPair& p = *pair_;
  uint64_t* remote = reinterpret_cast<uint64_t*>(p.buf_b->data() + 64);
  *remote = 100;
  uint64_t* old = reinterpret_cast<uint64_t*>(p.buf_a->data());
  ibv_sge sge = p.buf_a->sge(0, 8);
  // Matching compare: swaps.
  SendWr hit = SendWr::compare_swap(&sge, p.buf_b->mr().addr() + 64, p.buf_b->mr().rkey(), 100, 200).signaled();
  ASSERT_OK(p.a->post_send(hit));
  ASSERT_OK_AND_ASSIGN(auto c1, wait_completions(*p.cq_a, 1));
  ASSERT_TRUE(c1[0].ok()) << c1[0].to_string();
  EXPECT_EQ(c1[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*old, 100u);
  EXPECT_EQ(*remote, 200u);
  // Mismatching compare: leaves the word alone, still returns it.
  SendWr miss = SendWr::compare_swap(&sge, p.buf_b->mr().addr() + 64, p.buf_b->mr().rkey(), 100, 300).signaled();
  ASSERT_OK(p.a->post_send(miss));
  ASSERT_OK_AND_ASSIGN(auto c2, wait_completions(*p.cq_a, 1));
  ASSERT_TRUE(c2[0].ok());
  EXPECT_EQ(*old, 200u);
  EXPECT_EQ(*remote, 200u);
}

TEST_F(RdmaOps, FetchAndAdd) {
  LoopbackPair& p = *pair_;
  uint64_t* remote = reinterpret_cast<uint64_t*>(p.buf_b->data());
  *remote = 40;
  uint64_t* old = reinterpret_cast<uint64_t*>(p.buf_a->data() + 8);
  ibv_sge sge = p.buf_a->sge(8, 8);
  for (int i = 0; i < 10; ++i) {
    SendWr wr = SendWr::fetch_add(&sge, p.buf_b->mr().addr(), p.buf_b->mr().rkey(), 2).signaled().id(i);
    ASSERT_OK(p.a->post_send(wr));
    ASSERT_OK_AND_ASSIGN(auto c, wait_completions(*p.cq_a, 1));
    ASSERT_TRUE(c[0].ok()) << c[0].to_string();
    EXPECT_EQ(c[0].opcode, IBV_WC_FETCH_ADD);
    EXPECT_EQ(*old, 40u + 2u * i);
  }
  EXPECT_EQ(*remote, 60u);
}

TEST_F(RdmaOps, InlineSendNeedsNoRegistrationAndCopiesAtPost) {
  LoopbackPair& p = *pair_;
  ASSERT_GE(p.a->max_inline(), 32u);
  ibv_sge rsge = p.buf_b->sge(0, 64);
  RecvWr rwr = RecvWr::make(&rsge, 1, 1);
  ASSERT_OK(p.b->post_recv(rwr));
  char unregistered[32];
  std::memcpy(unregistered, "inline payload, not registered!", 32);
  ibv_sge sge{reinterpret_cast<uintptr_t>(unregistered), 32, 0};  // lkey ignored for inline
  SendWr wr = SendWr::send(&sge, 1).inlined().signaled();
  ASSERT_OK(p.a->post_send(wr));
  std::memset(unregistered, 'X', sizeof unregistered);  // the WQE already holds a copy
  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*p.cq_b, 1));
  ASSERT_TRUE(rc[0].ok()) << rc[0].to_string();
  EXPECT_EQ(std::memcmp(p.buf_b->data(), "inline payload, not registered!", 32), 0);
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
  EXPECT_TRUE(sc[0].ok());
}

TEST_F(RdmaOps, ScatterGather) {
  LoopbackPair& p = *pair_;
  fill_pattern(p.buf_a->data(), 3000, 6);
  // Gather three pieces on send, scatter into one receive.
  ibv_sge ssge[3] = {p.buf_a->sge(0, 1000), p.buf_a->sge(2000, 1000), p.buf_a->sge(1000, 1000)};
  ibv_sge rsge = p.buf_b->sge(0, 3000);
  RecvWr rwr = RecvWr::make(&rsge, 1, 1);
  ASSERT_OK(p.b->post_recv(rwr));
  SendWr wr = SendWr::send(ssge, 3).signaled();
  ASSERT_OK(p.a->post_send(wr));
  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*p.cq_b, 1));
  ASSERT_TRUE(rc[0].ok());
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(std::memcmp(p.buf_b->data(), p.buf_a->data(), 1000), 0);
  EXPECT_EQ(std::memcmp(p.buf_b->data() + 1000, p.buf_a->data() + 2000, 1000), 0);
  EXPECT_EQ(std::memcmp(p.buf_b->data() + 2000, p.buf_a->data() + 1000, 1000), 0);
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 1));
}

TEST_F(RdmaOps, ThousandsOfChainedWritesWithSelectiveSignalling) {
  LoopbackPair& p = *pair_;
  const uint32_t depth = p.a->options().max_send_wr;
  SignalTracker tracker(depth, std::max(1u, depth / 4));
  constexpr int kTotal = 20000;
  constexpr int kChain = 16;
  constexpr uint32_t kMsg = 32;  // each WR writes its own 32-byte slot
  fill_pattern(p.buf_a->data(), kTotal * kMsg, 7);
  std::vector<SendWr> wrs(kChain, SendWr::send(nullptr, 0));
  ibv_sge sges[kChain];
  int posted = 0, max_outstanding = 0, signals = 0;
  Completion wcs[32];
  while (posted < kTotal) {
    const int n = std::min(kChain, kTotal - posted);
    // Reap whatever finished; wait only when the queue is full.
    for (;;) {
      ASSERT_OK_AND_ASSIGN(int got, p.cq_a->poll(wcs));
      for (int i = 0; i < got; ++i) {
        ASSERT_TRUE(wcs[i].ok()) << wcs[i].to_string();
        tracker.on_signaled_completion();
      }
      if (tracker.can_post(static_cast<uint32_t>(n))) break;
    }
    SendChain chain;
    for (int i = 0; i < n; ++i) {
      const size_t off = static_cast<size_t>(posted + i) * kMsg;
      sges[i] = p.buf_a->sge(off, kMsg);
      wrs[i] = SendWr::write(&sges[i], 1, p.buf_b->mr().addr() + off, p.buf_b->mr().rkey()).id(posted + i);
      const bool sig = tracker.on_post(posted + i == kTotal - 1);
      signals += sig ? 1 : 0;
      wrs[i].signaled(sig);
      chain.append(wrs[i]);
    }
    ASSERT_OK(p.a->post_send(chain));
    posted += n;
    max_outstanding = std::max<int>(max_outstanding, static_cast<int>(tracker.outstanding()));
  }
  while (tracker.outstanding() > 0) {
    ASSERT_OK_AND_ASSIGN(int got, p.cq_a->poll_blocking(wcs, 5000));
    for (int i = 0; i < got; ++i) {
      ASSERT_TRUE(wcs[i].ok()) << wcs[i].to_string();
      tracker.on_signaled_completion();
    }
  }
  EXPECT_LE(max_outstanding, static_cast<int>(depth));
  EXPECT_LT(signals, kTotal / 2) << "signalling should be selective";
  EXPECT_EQ(std::memcmp(p.buf_a->data(), p.buf_b->data(), kTotal * kMsg), 0);
}

TEST_F(RdmaOps, PostingPastTheProviderLimitIsAnErrorStatus) {
  LoopbackPair& p = *pair_;
  // Providers may keep a few spare slots beyond the granted max_send_wr (rxe rounds its
  // ring up), which is why SignalTracker, not the provider, enforces the depth.  Far past
  // the limit, though, the post must fail with a Status instead of overwriting the ring.
  const uint32_t depth = p.a->options().max_send_wr;
  const uint32_t total = 4 * depth + 16;
  std::vector<SendWr> wrs;
  std::vector<ibv_sge> sges(total);
  wrs.reserve(total);
  SendChain chain;
  for (uint32_t i = 0; i < total; ++i) {
    sges[i] = p.buf_a->sge(0, 8);
    wrs.push_back(SendWr::write(&sges[i], 1, p.buf_b->mr().addr(), p.buf_b->mr().rkey()).id(i).signaled());
  }
  for (auto& w : wrs) chain.append(w);
  conduit::Status s = p.a->post_send(chain);
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.to_string();
  EXPECT_NE(s.to_string().find("first rejected wr_id"), std::string::npos) << s.to_string();
  // Whatever was accepted completes normally, in order.
  Completion wcs[64];
  uint32_t done = 0;
  for (;;) {
    auto got = p.cq_a->poll_blocking(wcs, 1000);
    if (!got.ok()) break;
    for (int i = 0; i < *got; ++i) {
      EXPECT_TRUE(wcs[i].ok()) << wcs[i].to_string();
      EXPECT_EQ(wcs[i].wr_id, done + i);
    }
    done += static_cast<uint32_t>(*got);
  }
  EXPECT_GE(done, depth);
  EXPECT_LT(done, total);
}

TEST_F(RdmaOps, SharedReceiveQueueServesTwoQps) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  ASSERT_OK_AND_ASSIGN(auto pd, ProtectionDomain::create(ctx));
  ASSERT_OK_AND_ASSIGN(auto srq, SharedReceiveQueue::create(pd, 64));
  // Two pairs whose receiving sides (b) share one SRQ and one CQ.
  ASSERT_OK_AND_ASSIGN(auto p1, LoopbackPair::create(ctx, {}, nullptr));
  (void)p1;
  ASSERT_OK_AND_ASSIGN(auto chan, CompletionChannel::create(ctx));
  ASSERT_OK_AND_ASSIGN(auto scq, CompletionQueue::create(ctx, 256, chan));
  ASSERT_OK_AND_ASSIGN(auto rcq, CompletionQueue::create(ctx, 256, chan));
  ConnectOptions co;
  ASSERT_OK_AND_ASSIGN(co.port, ctx->first_active_port());
  QpOptions opts;
  ASSERT_OK_AND_ASSIGN(auto s1, QueuePair::create(pd, scq, scq, opts));
  ASSERT_OK_AND_ASSIGN(auto s2, QueuePair::create(pd, scq, scq, opts));
  ASSERT_OK_AND_ASSIGN(auto r1, QueuePair::create(pd, scq, rcq, opts, srq));
  ASSERT_OK_AND_ASSIGN(auto r2, QueuePair::create(pd, scq, rcq, opts, srq));
  for (auto [s, r] : {std::pair{s1.get(), r1.get()}, std::pair{s2.get(), r2.get()}}) {
    ASSERT_OK_AND_ASSIGN(QpEndpoint es, s->local_endpoint(co));
    ASSERT_OK_AND_ASSIGN(QpEndpoint er, r->local_endpoint(co));
    ASSERT_OK(s->connect(es, er, co));
    ASSERT_OK(r->connect(er, es, co));
  }
  ASSERT_OK_AND_ASSIGN(auto recv_buf, RegisteredBuffer::create(pd, 64 * 256, kLocalOnly));
  ASSERT_OK_AND_ASSIGN(auto send_buf, RegisteredBuffer::create(pd, 4096, kLocalOnly));
  std::vector<ibv_sge> rs(16);
  std::vector<RecvWr> rw;
  RecvChain rchain;
  for (int i = 0; i < 16; ++i) {
    rs[i] = recv_buf.sge(static_cast<size_t>(i) * 256, 256);
    rw.push_back(RecvWr::make(&rs[i], 1, 1000 + i));
  }
  for (auto& w : rw) rchain.append(w);
  ASSERT_OK(srq->post_recv(rchain));
  // Each sender sends 4 messages tagged with its index.
  for (int i = 0; i < 8; ++i) {
    QueuePair* s = i % 2 == 0 ? s1.get() : s2.get();
    send_buf.data()[i * 16] = static_cast<uint8_t>(i);
    ibv_sge sge = send_buf.sge(static_cast<size_t>(i) * 16, 16);
    SendWr wr = SendWr::send(&sge, 1).signaled();
    ASSERT_OK(s->post_send(wr));
  }
  ASSERT_OK_AND_ASSIGN(auto rc, wait_completions(*rcq, 8));
  int from1 = 0, from2 = 0;
  std::vector<uint64_t> ids;
  for (auto& c : rc) {
    ASSERT_TRUE(c.ok()) << c.to_string();
    EXPECT_EQ(c.byte_len, 16u);
    from1 += c.qp_num == r1->qp_num();
    from2 += c.qp_num == r2->qp_num();
    ids.push_back(c.wr_id);
    // Even tags were sent by s1 (connected to r1), odd ones by s2.
    const uint8_t tag = recv_buf.data()[(c.wr_id - 1000) * 256];
    EXPECT_EQ(tag % 2 == 0 ? r1->qp_num() : r2->qp_num(), c.qp_num) << "tag " << int(tag);
  }
  EXPECT_EQ(from1, 4);
  EXPECT_EQ(from2, 4);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "an SRQ buffer was used twice";
  ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*scq, 8));
}

TEST_F(RdmaOps, CompletionChannelInEpollArmDrainRearm) {
  LoopbackPair& p = *pair_;
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = p.channel->fd();
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p.channel->fd(), &ev), 0);
  ASSERT_OK(p.cq_b->arm());
  int received = 0;
  ibv_sge rsge[8];
  for (int i = 0; i < 8; ++i) {
    rsge[i] = p.buf_b->sge(static_cast<size_t>(i) * 64, 64);
    RecvWr r = RecvWr::make(&rsge[i], 1, i);
    ASSERT_OK(p.b->post_recv(r));
  }
  ibv_sge ssge = p.buf_a->sge(0, 64);
  for (int round = 0; round < 4; ++round) {
    // Two messages per round; the second may land while we drain the first: none may be lost.
    for (int k = 0; k < 2; ++k) {
      SendWr wr = SendWr::send(&ssge, 1).signaled();
      ASSERT_OK(p.a->post_send(wr));
    }
    while (received < 2 * (round + 1)) {
      epoll_event out{};
      const int n = epoll_wait(ep, &out, 1, 5000);
      ASSERT_EQ(n, 1) << "no completion event within 5 s: an event was lost";
      ASSERT_OK_AND_ASSIGN(int got, p.cq_b->drain([&](const Completion& c) {
        EXPECT_TRUE(c.ok()) << c.to_string();
        ++received;
      }));
      (void)got;
    }
    ASSERT_OK_AND_ASSIGN(auto sc, wait_completions(*p.cq_a, 2));
  }
  EXPECT_EQ(received, 8);
  close(ep);
}

}  // namespace
}  // namespace conduit::verbs::testing
