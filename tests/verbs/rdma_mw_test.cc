// Type-2 memory windows on a real device: the mechanism the rdma transport uses to scope
// each peer to its own part of one registered arena (and rma uses to revoke exposures).
// The region is registered with local access and MW_BIND only: its own rkey opens nothing.
#include <cstring>

#include "rdma_env.h"

namespace conduit::verbs::testing {
namespace {

class RdmaMw : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    if (!(ctx->attr().device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B)) GTEST_SKIP() << "no type-2B memory windows";
    ASSERT_OK_AND_ASSIGN(pair_, LoopbackPair::create(ctx));
    mem_.resize(64 << 10);
    ASSERT_OK_AND_ASSIGN(mr_, MemoryRegion::register_memory(pair_->pd, mem_.data(), mem_.size(),
                                                             Access::kLocalWrite | Access::kMwBind));
    ASSERT_OK_AND_ASSIGN(mw_, MemoryWindow::create(pair_->pd));
  }
  // Posts a bind of [off, off+len) on QP b (the side whose memory it is) and waits for it.
  void bind(size_t off, size_t len, int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) {
    const uint32_t rkey = mw_->next_rkey();
    SendWr wr = SendWr::bind_mw(mw_->native_handle(), rkey, mr_->native_handle(), mr_->addr() + off, len, access)
                    .id(1)
                    .signaled();
    ASSERT_OK(pair_->b->post_send(wr));
    ASSERT_OK_AND_ASSIGN(auto c, wait_completions(*pair_->cq_b, 1));
    ASSERT_TRUE(c[0].ok()) << c[0].to_string();
    mw_->bound(rkey);
  }
  // An RDMA WRITE of `len` bytes from a's buffer to `addr`/`rkey`; returns its completion.
  Completion write(uint64_t addr, uint32_t rkey, uint32_t len) {
    std::memset(pair_->buf_a->data(), 0x5a, len);
    ibv_sge sge = pair_->buf_a->sge(0, len);
    SendWr wr = SendWr::write(&sge, 1, addr, rkey).id(2).signaled();
    Status posted = pair_->a->post_send(wr);
    EXPECT_TRUE(posted.ok()) << posted.to_string();
    auto c = wait_completions(*pair_->cq_a, 1);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? (*c)[0] : Completion{};
  }
  std::unique_ptr<LoopbackPair> pair_;
  std::vector<uint8_t> mem_;
  std::unique_ptr<MemoryRegion> mr_;
  std::unique_ptr<MemoryWindow> mw_;
};

TEST_F(RdmaMw, ThePeerWritesInsideTheWindow) {
  bind(4096, 8192);
  Completion c = write(mr_->addr() + 4096 + 100, mw_->rkey(), 1000);
  ASSERT_TRUE(c.ok()) << c.to_string();
  EXPECT_EQ(mem_[4096 + 100], 0x5a);
  EXPECT_EQ(mem_[4096 + 1099], 0x5a);
  EXPECT_EQ(mem_[4096 + 1100], 0);
  EXPECT_EQ(mem_[4095], 0);
}

// What bounds a window's key.  The verbs spec: the window's range.  Soft-RoCE on Linux 6.1
// checks only the range of the region underneath (rxe_resp.c check_rkey() looks the window
// up, takes its MR and calls mr_check_range() on the MR), so an access that starts or ends
// outside the window but inside the region succeeds.  The rdma transport therefore gives
// each receive area a region of its own (one MR per arena block) and binds the window over
// all of it: the region's range is the bound that holds on every device, the window adds the
// QP binding and revocation.  This test pins down which behaviour this device has, so a
// kernel that starts enforcing window bounds (or a device that does not) is noticed.
TEST_F(RdmaMw, WhatBoundsAWindowKey) {
  bind(4096, 8192);
  Completion c = write(mr_->addr() + 4096 + 8192 - 10, mw_->rkey(), 100);  // runs past the window's end
  if (pair_->ctx->name().rfind("rxe", 0) == 0) {
    EXPECT_TRUE(c.ok()) << "rxe now enforces window bounds (revisit the transport's arena layout): " << c.to_string();
    EXPECT_EQ(mem_[4096 + 8192], 0x5a);
  } else {
    EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
    EXPECT_EQ(mem_[4096 + 8192], 0);
  }
}

TEST_F(RdmaMw, OutsideTheRegionIsARemoteAccessError) {
  bind(0, mem_.size());
  Completion c = write(mr_->addr() + mem_.size() - 10, mw_->rkey(), 100);  // runs past the region's end
  EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
}

TEST_F(RdmaMw, TheRegionsOwnKeyOpensNothing) {
  bind(0, 4096);
  Completion c = write(mr_->addr(), mr_->rkey(), 64);
  EXPECT_EQ(c.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << c.to_string();
  EXPECT_EQ(mem_[0], 0);
}

TEST_F(RdmaMw, AnInvalidatedKeyIsRefusedAndARebindUsesANewOne) {
  bind(0, 4096);
  const uint32_t old_key = mw_->rkey();
  SendWr inv = SendWr::local_invalidate(old_key).id(3).signaled();
  ASSERT_OK(pair_->b->post_send(inv));
  ASSERT_OK_AND_ASSIGN(auto ic, wait_completions(*pair_->cq_b, 1));
  ASSERT_TRUE(ic[0].ok()) << ic[0].to_string();
  bind(0, 4096);
  EXPECT_NE(mw_->rkey(), old_key);
  Completion ok = write(mr_->addr(), mw_->rkey(), 64);
  ASSERT_TRUE(ok.ok()) << ok.to_string();
  Completion stale = write(mr_->addr(), old_key, 64);
  EXPECT_EQ(stale.ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << stale.to_string();
}

// The window belongs to QP b: another connection on the same protection domain cannot use
// its key -- this is what keeps one peer out of another's receive area in a shared arena.
TEST_F(RdmaMw, AnotherQpOnTheSamePdCannotUseTheKey) {
  bind(0, 4096);
  LoopbackPair& p = *pair_;
  QpOptions qo;
  ASSERT_OK_AND_ASSIGN(auto cq, CompletionQueue::create(p.ctx, 64));
  ASSERT_OK_AND_ASSIGN(auto c_qp, QueuePair::create(p.pd, cq, cq, qo));  // same PD as b
  ASSERT_OK_AND_ASSIGN(auto d_qp, QueuePair::create(p.pd, cq, cq, qo));
  ConnectOptions co;
  ASSERT_OK_AND_ASSIGN(co.port, p.ctx->first_active_port());
  ASSERT_OK_AND_ASSIGN(auto ep_c, c_qp->local_endpoint(co));
  ASSERT_OK_AND_ASSIGN(auto ep_d, d_qp->local_endpoint(co));
  ASSERT_OK(c_qp->connect(ep_c, ep_d, co));
  ASSERT_OK(d_qp->connect(ep_d, ep_c, co));
  ibv_sge sge = p.buf_a->sge(0, 64);
  SendWr wr = SendWr::write(&sge, 1, mr_->addr(), mw_->rkey()).id(9).signaled();
  ASSERT_OK(d_qp->post_send(wr));  // d's writes arrive at c, not at b
  ASSERT_OK_AND_ASSIGN(auto got, wait_completions(*cq, 1));
  EXPECT_EQ(got[0].ibv_wc::status, IBV_WC_REM_ACCESS_ERR) << got[0].to_string();
  EXPECT_EQ(mem_[0], 0);
  // b's own peer still can.
  Completion ok = write(mr_->addr(), mw_->rkey(), 64);
  EXPECT_TRUE(ok.ok()) << ok.to_string();
}

}  // namespace
}  // namespace conduit::verbs::testing
