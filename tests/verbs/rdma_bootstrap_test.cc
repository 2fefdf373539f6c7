// The NCCL/TensorFlow-style bootstrap: QP number, PSN, GID and a buffer key exchanged over
// TCP (loopback), QPs driven INIT -> RTR -> RTS by hand, in two processes.
#include <cstring>
#include <random>

#include "child_process.h"
#include "rdma_env.h"

namespace conduit::verbs::testing {
namespace {

using conduit::testing::ChildProcess;
constexpr size_t kLen = 64 * 1024;
constexpr int kTimeoutMs = 10000;

void pattern(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

// One side's verbs objects.
struct Peer {
  std::shared_ptr<Context> ctx;
  std::shared_ptr<ProtectionDomain> pd;
  std::shared_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<RegisteredBuffer> buf;
  ConnectOptions co;
  Status init(std::shared_ptr<Context> c) {
    ctx = std::move(c);
    CONDUIT_ASSIGN_OR_RETURN(co.port, ctx->first_active_port());
    CONDUIT_ASSIGN_OR_RETURN(pd, ProtectionDomain::create(ctx));
    CONDUIT_ASSIGN_OR_RETURN(cq, CompletionQueue::create(ctx, 64));
    CONDUIT_ASSIGN_OR_RETURN(qp, QueuePair::create(pd, cq, cq, QpOptions{}));
    CONDUIT_ASSIGN_OR_RETURN(auto b, RegisteredBuffer::create(pd, kLen + 64, Access::kLocalWrite | Access::kRemoteWrite));
    buf = std::make_unique<RegisteredBuffer>(std::move(b));
    // INIT right away: receives may be posted from INIT on, before the peer is known.
    return qp->to_init(co);
  }
  Result<BootstrapInfo> handshake(int fd) {
    CONDUIT_ASSIGN_OR_RETURN(QpEndpoint local, qp->local_endpoint(co));
    BootstrapInfo mine{local, buf->mr().addr(), buf->mr().rkey(), static_cast<uint32_t>(kLen)};
    CONDUIT_ASSIGN_OR_RETURN(BootstrapInfo theirs, exchange_bootstrap(fd, mine, kTimeoutMs));
    CONDUIT_RETURN_IF_ERROR(qp->to_rtr(theirs.endpoint, co));
    CONDUIT_RETURN_IF_ERROR(qp->to_rts(local.psn, co));
    return theirs;
  }
};

// Child: listens, handshakes, pre-posts a receive, and once the parent's SEND arrives
// checks that the WRITE posted before it already landed (RC ordering), then answers.
int run_child(int report_fd) {
  auto ctx = open_test_device();
  if (!ctx.ok()) return 2;
  Peer me;
  if (Status s = me.init(*ctx); !s.ok()) return std::fprintf(stderr, "child init: %s\n", s.to_string().c_str()), 3;
  auto listener = tcp_listen("127.0.0.1", 0);
  if (!listener.ok()) return 4;
  ChildProcess::send_value(report_fd, *bound_port(listener->get()));
  auto conn = tcp_accept(listener->get(), kTimeoutMs);
  if (!conn.ok()) return 5;
  ibv_sge rsge = me.buf->sge(kLen, 64);
  RecvWr r = RecvWr::make(&rsge, 1, 1);
  if (!me.qp->post_recv(r).ok()) return 6;
  auto theirs = me.handshake(conn->get());
  if (!theirs.ok()) return std::fprintf(stderr, "child handshake: %s\n", theirs.status().to_string().c_str()), 7;
  Completion wc[1];
  if (!poll_until(*me.cq, 1, kTimeoutMs, wc).ok() || !wc[0].ok()) return 8;
  std::vector<uint8_t> expect(kLen);
  pattern(expect.data(), kLen, 99);
  const bool match = std::memcmp(expect.data(), me.buf->data(), kLen) == 0;
  me.buf->data()[kLen + 32] = match ? 'Y' : 'N';
  ibv_sge ssge = me.buf->sge(kLen + 32, 1);
  SendWr s = SendWr::send(&ssge, 1).signaled();
  if (!me.qp->post_send(s).ok()) return 9;
  if (!poll_until(*me.cq, 1, kTimeoutMs, wc).ok() || !wc[0].ok()) return 10;
  char done = 0;
  (void)!read(conn->get(), &done, 1);  // wait until the parent has seen the answer
  return 0;
}

TEST(RdmaBootstrap, TcpBootstrappedPairAcrossProcesses) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  ChildProcess child(run_child);
  uint32_t port = 0;
  ASSERT_TRUE(child.receive_value(&port)) << "child could not listen";
  ASSERT_OK_AND_ASSIGN(UniqueFd conn, tcp_connect("127.0.0.1", static_cast<uint16_t>(port), kTimeoutMs));
  Peer me;
  ASSERT_OK(me.init(ctx));
  ibv_sge rsge = me.buf->sge(kLen, 64);
  RecvWr r = RecvWr::make(&rsge, 1, 1);
  ASSERT_OK(me.qp->post_recv(r));
  ASSERT_OK_AND_ASSIGN(BootstrapInfo theirs, me.handshake(conn.get()));
  EXPECT_EQ(theirs.length, kLen);
  EXPECT_EQ(me.qp->state(), QpState::kRts);

  pattern(me.buf->data(), kLen, 99);
  ibv_sge wsge = me.buf->sge(0, kLen);
  SendWr w = SendWr::write(&wsge, 1, theirs.addr, theirs.rkey);  // unsignaled
  ibv_sge ssge = me.buf->sge(kLen + 40, 4);
  SendWr s = SendWr::send(&ssge, 1).signaled();
  SendChain chain;
  chain.append(w);
  chain.append(s);
  ASSERT_OK(me.qp->post_send(chain));
  Completion wc[2];
  ASSERT_OK(poll_until(*me.cq, 2, kTimeoutMs, wc));  // our SEND and the child's answer
  for (auto& c : wc) ASSERT_TRUE(c.ok()) << c.to_string();
  EXPECT_EQ(me.buf->data()[kLen], 'Y') << "child saw different bytes than were written";
  (void)!write(conn.get(), "x", 1);
  EXPECT_EQ(child.wait(), 0);
}

}  // namespace
}  // namespace conduit::verbs::testing
