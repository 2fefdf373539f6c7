// Failures must come back as Status values: no crash, no hang.
#include <cstring>

#include "rdma_env.h"

namespace conduit::verbs::testing {
namespace {

class RdmaErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    ASSERT_OK_AND_ASSIGN(pair_, LoopbackPair::create(ctx));
  }
  // Posts one signaled WR on a and returns its completion.
  Result<Completion> one(SendWr wr) {
    CONDUIT_RETURN_IF_ERROR(pair_->a->post_send(wr));
    CONDUIT_ASSIGN_OR_RETURN(auto c, wait_completions(*pair_->cq_a, 1, 10000));
    return c[0];
  }
  std::unique_ptr<LoopbackPair> pair_;
};

TEST_F(RdmaErrors, WrongRkeyIsRemoteAccessError) {
  LoopbackPair& p = *pair_;
  ibv_sge sge = p.buf_a->sge(0, 64);
  ASSERT_OK_AND_ASSIGN(Completion c,
                       one(SendWr::write(&sge, 1, p.buf_b->mr().addr(), p.buf_b->mr().rkey() ^ 0x5a5a00).signaled()));
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
  conduit::Status s = c.as_status();
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_EQ(s.detail_kind(), DetailKind::kWcStatus);
  EXPECT_NE(s.to_string().find("remote access error"), std::string::npos) << s.to_string();
  // The requester's QP is now in error; posting more flushes instead of hanging.
  EXPECT_EQ(p.a->state(), QpState::kError);
  ASSERT_OK_AND_ASSIGN(Completion c2, one(SendWr::write(&sge, 1, p.buf_b->mr().addr(), p.buf_b->mr().rkey()).signaled()));
  EXPECT_EQ(c2.as_status().code(), Code::kCancelled) << c2.to_string();
}

TEST_F(RdmaErrors, OutOfBoundsWriteIsRemoteAccessError) {
  LoopbackPair& p = *pair_;
  ibv_sge sge = p.buf_a->sge(0, 4096);
  const uint64_t past_end = p.buf_b->mr().addr() + LoopbackPair::kBufSize - 100;
  ASSERT_OK_AND_ASSIGN(Completion c, one(SendWr::write(&sge, 1, past_end, p.buf_b->mr().rkey()).signaled()));
  EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
  // Nothing was written past the region's end inside it either.
  EXPECT_EQ(p.buf_b->data()[LoopbackPair::kBufSize - 100], 0);
}

TEST_F(RdmaErrors, RegionWithoutRemoteWriteRefusesWrites) {
  LoopbackPair& p = *pair_;
  ASSERT_OK_AND_ASSIGN(auto local_only, RegisteredBuffer::create(p.pd, 4096, kLocalOnly));
  ibv_sge sge = p.buf_a->sge(0, 64);
  ASSERT_OK_AND_ASSIGN(Completion c, one(SendWr::write(&sge, 1, local_only.mr().addr(), local_only.mr().rkey()).signaled()));
  EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
}

TEST_F(RdmaErrors, QpInErrorFlushesOutstandingReceives) {
  LoopbackPair& p = *pair_;
  ibv_sge sges[5];
  for (int i = 0; i < 5; ++i) {
    sges[i] = p.buf_b->sge(static_cast<size_t>(i) * 64, 64);
    RecvWr r = RecvWr::make(&sges[i], 1, 100 + i);
    ASSERT_OK(p.b->post_recv(r));
  }
  ASSERT_OK(p.b->to_error());
  EXPECT_EQ(p.b->state(), QpState::kError);
  ASSERT_OK_AND_ASSIGN(auto flushed, wait_completions(*p.cq_b, 5));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(flushed[i].ibv_wc::status, IBV_WC_WR_FLUSH_ERR) << flushed[i].to_string();
    EXPECT_EQ(flushed[i].wr_id, 100u + i) << "flushes complete in posting order";
    EXPECT_EQ(flushed[i].as_status().code(), Code::kCancelled);
  }
}

TEST_F(RdmaErrors, InvalidTransitionIsAnErrorStatus) {
  LoopbackPair& p = *pair_;
  // RTS -> INIT is not a legal transition.
  ConnectOptions co;
  conduit::Status s = p.a->to_init(co);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("ibv_modify_qp to INIT"), std::string::npos) << s.to_string();
  EXPECT_EQ(p.a->state(), QpState::kRts);
}

TEST_F(RdmaErrors, OversizedQueueRequestsAreRejectedUpFront) {
  LoopbackPair& p = *pair_;
  QpOptions huge;
  huge.max_send_wr = static_cast<uint32_t>(p.ctx->attr().max_qp_wr) + 1;
  auto qp = QueuePair::create(p.pd, p.cq_a, p.cq_a, huge);
  EXPECT_EQ(qp.status().code(), Code::kInvalidArgument) << qp.status().to_string();
  auto cq = CompletionQueue::create(p.ctx, p.ctx->attr().max_cqe + 1);
  EXPECT_EQ(cq.status().code(), Code::kInvalidArgument);
  auto mr = MemoryRegion::register_memory(p.pd, nullptr, 0, kLocalOnly);
  EXPECT_EQ(mr.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::verbs::testing
