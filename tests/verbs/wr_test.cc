#include "conduit/verbs/wr.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>

namespace conduit::verbs {
namespace {

TEST(SendWr, SendCarriesSgesAndNoRemoteFields) {
  ibv_sge sge[2] = {{0x1000, 10, 7}, {0x2000, 20, 7}};
  SendWr wr = SendWr::send(sge, 2).id(99);
  EXPECT_EQ(wr.opcode(), IBV_WR_SEND);
  EXPECT_EQ(wr.native()->wr_id, 99u);
  EXPECT_EQ(wr.native()->num_sge, 2);
  EXPECT_EQ(wr.native()->sg_list, sge);
  EXPECT_EQ(wr.total_length(), 30u);
  EXPECT_EQ(wr.native()->send_flags, 0u);
  EXPECT_EQ(wr.native()->wr.rdma.remote_addr, 0u);
}

TEST(SendWr, ImmediateIsNetworkOrder) {
  ibv_sge sge{0x1000, 8, 1};
  SendWr a = SendWr::send_imm(&sge, 1, 0x01020304);
  EXPECT_EQ(a.opcode(), IBV_WR_SEND_WITH_IMM);
  EXPECT_EQ(a.native()->imm_data, htonl(0x01020304));
  SendWr b = SendWr::write_imm(&sge, 1, 0xabc000, 42, 77);
  EXPECT_EQ(b.opcode(), IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(b.native()->imm_data, htonl(77));
  EXPECT_EQ(b.native()->wr.rdma.remote_addr, 0xabc000u);
  EXPECT_EQ(b.native()->wr.rdma.rkey, 42u);
}

TEST(SendWr, WriteAndRead) {
  ibv_sge sge{0x1000, 64, 1};
  SendWr w = SendWr::write(&sge, 1, 0x5000, 9);
  EXPECT_EQ(w.opcode(), IBV_WR_RDMA_WRITE);
  EXPECT_EQ(w.native()->wr.rdma.remote_addr, 0x5000u);
  EXPECT_EQ(w.native()->wr.rdma.rkey, 9u);
  SendWr r = SendWr::read(&sge, 1, 0x6000, 10);
  EXPECT_EQ(r.opcode(), IBV_WR_RDMA_READ);
  EXPECT_EQ(r.native()->wr.rdma.remote_addr, 0x6000u);
}

TEST(SendWr, Atomics) {
  ibv_sge sge{0x1000, 8, 1};
  SendWr cas = SendWr::compare_swap(&sge, 0x7000, 11, 5, 6);
  EXPECT_EQ(cas.opcode(), IBV_WR_ATOMIC_CMP_AND_SWP);
  EXPECT_EQ(cas.native()->wr.atomic.remote_addr, 0x7000u);
  EXPECT_EQ(cas.native()->wr.atomic.rkey, 11u);
  EXPECT_EQ(cas.native()->wr.atomic.compare_add, 5u);
  EXPECT_EQ(cas.native()->wr.atomic.swap, 6u);
  SendWr faa = SendWr::fetch_add(&sge, 0x8000, 12, 3);
  EXPECT_EQ(faa.opcode(), IBV_WR_ATOMIC_FETCH_AND_ADD);
  EXPECT_EQ(faa.native()->wr.atomic.compare_add, 3u);
}

TEST(SendWr, FlagsToggle) {
  ibv_sge sge{0x1000, 8, 1};
  SendWr wr = SendWr::send(&sge, 1).signaled().inlined().solicited().fenced();
  EXPECT_EQ(wr.native()->send_flags,
            unsigned(IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_SOLICITED | IBV_SEND_FENCE));
  EXPECT_TRUE(wr.is_signaled());
  wr.signaled(false).inlined(false);
  EXPECT_EQ(wr.native()->send_flags, unsigned(IBV_SEND_SOLICITED | IBV_SEND_FENCE));
  EXPECT_FALSE(wr.is_signaled());
}

TEST(WrChain, LinksInOrder) {
  ibv_sge sge{0x1000, 8, 1};
  SendWr a = SendWr::send(&sge, 1).id(1), b = SendWr::send(&sge, 1).id(2), c = SendWr::send(&sge, 1).id(3);
  SendChain chain;
  EXPECT_TRUE(chain.empty());
  chain.append(a);
  chain.append(b);
  chain.append(c);
  EXPECT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain.head(), a.native());
  EXPECT_EQ(a.native()->next, b.native());
  EXPECT_EQ(b.native()->next, c.native());
  EXPECT_EQ(c.native()->next, nullptr);
  chain.clear();
  chain.append(c);
  EXPECT_EQ(chain.head(), c.native());
}

TEST(RecvWr, Fields) {
  ibv_sge sge{0x1000, 32, 1};
  RecvWr r = RecvWr::make(&sge, 1, 5);
  EXPECT_EQ(r.native()->wr_id, 5u);
  EXPECT_EQ(r.native()->num_sge, 1);
  EXPECT_EQ(r.native()->next, nullptr);
}

}  // namespace
}  // namespace conduit::verbs
