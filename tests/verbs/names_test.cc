#include <gtest/gtest.h>

#include <cstring>

#include "conduit/verbs/verbs.h"

namespace conduit::verbs {
namespace {

Completion make_wc(ibv_wc_status status, ibv_wc_opcode op) {
  Completion wc;
  std::memset(&wc, 0, sizeof wc);
  wc.ibv_wc::status = status;
  wc.opcode = op;
  wc.qp_num = 17;
  wc.wr_id = 3;
  wc.byte_len = 64;
  return wc;
}

TEST(Completion, SuccessIsOk) {
  Completion wc = make_wc(IBV_WC_SUCCESS, IBV_WC_RECV);
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = htobe32(1234);
  EXPECT_TRUE(wc.ok());
  EXPECT_TRUE(wc.as_status().ok());
  EXPECT_EQ(wc.imm(), 1234u);
  EXPECT_EQ(wc.to_string(), "RECV ok qp=17 wr_id=3 len=64 imm=1234");
}

TEST(Completion, RemoteAccessErrorBecomesIoErrorWithDetail) {
  Completion wc = make_wc(IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
  conduit::Status s = wc.as_status();
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_EQ(s.detail_kind(), DetailKind::kWcStatus);
  EXPECT_EQ(s.detail(), IBV_WC_REM_ACCESS_ERR);
  EXPECT_NE(s.to_string().find(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)), std::string::npos) << s.to_string();
  EXPECT_NE(wc.to_string().find("error"), std::string::npos);
}

TEST(Completion, FlushIsCancelled) {
  EXPECT_EQ(make_wc(IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV).as_status().code(), Code::kCancelled);
}

TEST(Names, StatesAndOpcodes) {
  EXPECT_EQ(qp_state_name(QpState::kRts), "RTS");
  EXPECT_EQ(qp_state_name(to_qp_state(IBV_QPS_ERR)), "ERR");
  EXPECT_EQ(wr_opcode_name(IBV_WR_RDMA_WRITE_WITH_IMM), "RDMA_WRITE_WITH_IMM");
  EXPECT_EQ(wc_opcode_name(IBV_WC_FETCH_ADD), "FETCH_ADD");
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096);
  Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[15] = 1;
  EXPECT_EQ(gid_to_string(g), "fe80:0000:0000:0000:0000:0000:0000:0001");
}

TEST(Access, RemoteRightsAreExplicit) {
  EXPECT_FALSE(has(kLocalOnly, Access::kRemoteWrite));
  EXPECT_FALSE(has(kLocalOnly, Access::kRemoteRead));
  EXPECT_TRUE(has(kRemoteAll, Access::kRemoteAtomic));
}

TEST(Devices, ListingWithoutDevicesIsNotAnError) {
  // On a machine without RDMA support this is an empty list; in the testbed, non-empty.
  auto devs = list_devices();
  ASSERT_TRUE(devs.ok()) << devs.status().to_string();
}

TEST(Devices, OpeningAMissingDeviceSaysSo) {
  auto ctx = Context::open("no-such-device0");
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), Code::kNotFound) << ctx.status().to_string();
}

}  // namespace
}  // namespace conduit::verbs
