#include "rdma/protocol.h"

#include <gtest/gtest.h>

namespace conduit::transport::rdma {
namespace {

TEST(RdmaProtocol, RegisterXferMemoryLayoutMatchesValkey) {
  uint8_t b[kCtrlSize];
  CtrlMsg::register_xfer(0x0102030405060708ull, 1 << 20, 0xaabbccdd).encode(b);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 3);  // opcode, big-endian
  for (int i = 2; i < 16; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(b[16], 0x01);
  EXPECT_EQ(b[23], 0x08);
  EXPECT_EQ(b[24], 0x00);
  EXPECT_EQ(b[25], 0x10);  // 1 MiB = 0x00100000
  EXPECT_EQ(b[28], 0xaa);
  EXPECT_EQ(b[31], 0xdd);
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->addr, 0x0102030405060708ull);
  EXPECT_EQ(m->length, 1u << 20);
  EXPECT_EQ(m->rkey, 0xaabbccddu);
}

TEST(RdmaProtocol, FeatureLayout) {
  uint8_t b[kCtrlSize];
  CtrlMsg f = CtrlMsg::feature(Opcode::kSetClientFeature, 0x8000000000000001ull);
  f.select = 2;
  f.encode(b);
  EXPECT_EQ(b[1], 1);
  EXPECT_EQ(b[3], 2);
  EXPECT_EQ(b[24], 0x80);
  EXPECT_EQ(b[31], 0x01);
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->select, 2);
  EXPECT_EQ(m->features, 0x8000000000000001ull);
}

TEST(RdmaProtocol, KeepaliveIsOpcodeTwoAndZeros) {
  uint8_t b[kCtrlSize];
  CtrlMsg::keepalive().encode(b);
  EXPECT_EQ(b[1], 2);
  for (int i = 2; i < 32; ++i) EXPECT_EQ(b[i], 0);
}

TEST(RdmaProtocol, RejectsMalformedMessages) {
  uint8_t b[kCtrlSize] = {};
  b[1] = 9;
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::keepalive().encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, 16).status().code(), Code::kProtocolError);
  EXPECT_EQ(CtrlMsg::decode(b, 33).status().code(), Code::kProtocolError);
  CtrlMsg::register_xfer(0x1000, 100, 1).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::register_xfer(0x1000, (16u << 20) + 1, 1).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::register_xfer(0, 1u << 20, 1).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::register_xfer(0x1000, 64 * 1024, 1).encode(b);
  EXPECT_TRUE(CtrlMsg::decode(b, kCtrlSize).ok());
}

TEST(RdmaProtocol, CreditLayout) {
  uint8_t b[kCtrlSize];
  CtrlMsg::credit(0x40000).encode(b);
  EXPECT_EQ(b[0], 0x80);  // Conduit's opcodes start at 0x8000
  EXPECT_EQ(b[1], 0x01);
  for (int i = 2; i < 24; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(b[29], 0x04);  // 0x40000, big-endian u64 at 24
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->opcode, static_cast<uint16_t>(Opcode::kCredit));
  EXPECT_EQ(m->bytes, 0x40000u);
  EXPECT_EQ(m->to_string(), "Credit bytes=262144");
  // Zero credits and more than the largest buffer are malformed.
  CtrlMsg::credit(0).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::credit(uint64_t{kMaxRxBuffer} + 1).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
}

TEST(RdmaProtocol, ExtensionBitsAreTheDocumentedOnes) {
  EXPECT_EQ(kFeatureRing, 1u);
  EXPECT_EQ(kFeatureSolicited, 2u);
  EXPECT_EQ(kFeatureRendezvous, 4u);
  EXPECT_EQ(kFeatureHalfClose, 8u);
  // Every extension bit is offered, rendezvous included (PROTOCOL.md's feature table).
  EXPECT_EQ(kFeatureKnownMask, 15u);
}

// HalfClose (0x8004): the stream position where EOF falls, big-endian u64 at 24, the rest 0.
TEST(RdmaProtocol, HalfCloseLayout) {
  uint8_t b[kCtrlSize];
  CtrlMsg::half_close(0x0102030405060708ull).encode(b);
  EXPECT_EQ(b[0], 0x80);
  EXPECT_EQ(b[1], 0x04);
  for (int i = 2; i < 24; ++i) EXPECT_EQ(b[i], 0) << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b[24 + i], i + 1) << i;
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->opcode, static_cast<uint16_t>(Opcode::kHalfClose));
  EXPECT_EQ(m->bytes, 0x0102030405060708ull);
  EXPECT_EQ(opcode_name(m->opcode), "HalfClose");
  CtrlMsg::half_close(0).encode(b);  // nothing written before it: well-formed
  auto z = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->to_string(), "HalfClose at=0");
  EXPECT_EQ(CtrlMsg::decode(b, 31).status().code(), Code::kProtocolError);
}

TEST(RdmaProtocol, ReadOfferLayout) {
  uint8_t b[kCtrlSize];
  CtrlMsg::read_offer(0x01020304, 0x1112131415161718ull, 0x00100000, 0xa1a2a3a4, 0x2122232425262728ull).encode(b);
  EXPECT_EQ(b[0], 0x80);
  EXPECT_EQ(b[1], 0x02);
  EXPECT_EQ(b[2], 0);
  EXPECT_EQ(b[3], 0);
  const uint8_t want[32] = {0x80, 0x02, 0,    0,    0x01, 0x02, 0x03, 0x04, 0x11, 0x12, 0x13,
                            0x14, 0x15, 0x16, 0x17, 0x18, 0x00, 0x10, 0x00, 0x00, 0xa1, 0xa2,
                            0xa3, 0xa4, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b[i], want[i]) << i;
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->opcode, static_cast<uint16_t>(Opcode::kReadOffer));
  EXPECT_EQ(m->tag, 0x01020304u);
  EXPECT_EQ(m->addr, 0x1112131415161718ull);
  EXPECT_EQ(m->length, 0x00100000u);
  EXPECT_EQ(m->rkey, 0xa1a2a3a4u);
  EXPECT_EQ(m->position, 0x2122232425262728ull);
  EXPECT_EQ(m->to_string(), "ReadOffer tag=16909060 length=1048576 rkey=2711790500 position=2387509390608836392");
}

TEST(RdmaProtocol, ReadDoneLayout) {
  uint8_t b[kCtrlSize];
  CtrlMsg::read_done(7, 65536).encode(b);
  const uint8_t want[32] = {0x80, 0x03, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0,
                            0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b[i], want[i]) << i;
  auto m = CtrlMsg::decode(b, kCtrlSize);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->tag, 7u);
  EXPECT_EQ(m->bytes, 65536u);
  EXPECT_EQ(m->to_string(), "ReadDone tag=7 length=65536");
}

TEST(RdmaProtocol, RejectsMalformedRendezvousMessages) {
  uint8_t b[kCtrlSize];
  // Lengths 0 and above 16 MiB.
  CtrlMsg::read_offer(0, 0x1000, 0, 1, 0).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::read_offer(0, 0x1000, kMaxRendezvous + 1, 1, 0).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::read_offer(0, 0x1000, kMaxRendezvous, 1, 0).encode(b);
  EXPECT_TRUE(CtrlMsg::decode(b, kCtrlSize).ok());
  CtrlMsg::read_offer(0, 0x1000, 1, 1, 0).encode(b);
  EXPECT_TRUE(CtrlMsg::decode(b, kCtrlSize).ok());
  // Non-zero reserved bytes.
  b[3] = 1;
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::read_done(1, 0).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  CtrlMsg::read_done(1, uint64_t{kMaxRendezvous} + 1).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError);
  for (int at : {2, 3, 8, 15, 23}) {
    CtrlMsg::read_done(1, 4096).encode(b);
    ASSERT_TRUE(CtrlMsg::decode(b, kCtrlSize).ok());
    b[at] = 0xff;
    EXPECT_EQ(CtrlMsg::decode(b, kCtrlSize).status().code(), Code::kProtocolError) << at;
  }
  // The size rule holds for them as for every control message.
  CtrlMsg::read_done(1, 4096).encode(b);
  EXPECT_EQ(CtrlMsg::decode(b, 31).status().code(), Code::kProtocolError);
}

// The Hello of rdma_connect / rdma_accept private data (cm_features).
TEST(RdmaProtocol, HelloLayout) {
  uint8_t b[kHelloSize];
  encode_hello(0x0102030405060708ull, b);
  const uint8_t want[kHelloSize] = {'C', 'D', 'H', 'L', 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  for (size_t i = 0; i < kHelloSize; ++i) EXPECT_EQ(b[i], want[i]) << i;
  EXPECT_EQ(decode_hello(b), 0x0102030405060708ull);
  // rdma_cm hands over more than was sent, zero-filled (rdma_get_cm_event(3)): still a Hello.
  uint8_t padded[56] = {};
  encode_hello(kFeatureRing | kFeatureHalfClose, *reinterpret_cast<uint8_t(*)[kHelloSize]>(padded));
  EXPECT_EQ(decode_hello(padded), kFeatureRing | kFeatureHalfClose);
}

TEST(RdmaProtocol, NoHelloInZeroesOtherRecordsOrOtherVersions) {
  const uint8_t zeroes[56] = {};  // what a Valkey peer's request or reply carries
  EXPECT_FALSE(decode_hello(zeroes).has_value());
  EXPECT_FALSE(decode_hello({}).has_value());
  uint8_t b[kHelloSize];
  encode_hello(3, b);
  EXPECT_FALSE(decode_hello(std::span<const uint8_t>(b, kHelloSize - 1)).has_value());  // cut short
  b[kHelloVersionOff] = 2;
  EXPECT_FALSE(decode_hello(b).has_value());  // a later version: asked with messages instead
  uint8_t refusal[kRefusalSize];
  encode_refusal(Refusal::kNotAdmitted, refusal);
  EXPECT_FALSE(decode_hello(refusal).has_value());
}

}  // namespace
}  // namespace conduit::transport::rdma
