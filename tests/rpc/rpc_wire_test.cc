// The frame codec, metadata, attachments and histogram, without any connection.
#include <gtest/gtest.h>

#include <cstring>

#include "buffer.h"
#include "conduit/rpc/errors.h"
#include "histogram.h"
#include "wire.h"

namespace conduit::rpc {
namespace {

TEST(RpcWire, HeaderRoundTripsBigEndian) {
  wire::FrameHeader h;
  h.type = wire::FrameType::kRequest;
  h.flags = wire::kFlagEndStream | wire::kFlagIdempotent;
  h.call_id = 0x0102030405060708ull;
  h.code = 0xa1b2c3d4;
  h.meta_len = 7;
  h.body_len = 300;
  h.attach_len = 1 << 20;
  h.arg = 250000;
  uint8_t b[wire::kHeaderSize];
  wire::encode_header(h, b);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b), 4), "CRPC");
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(b[5], 2);
  EXPECT_EQ(b[8], 0x01);  // call id, most significant byte first
  EXPECT_EQ(b[15], 0x08);
  auto d = wire::decode_header(b, {});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->call_id, h.call_id);
  EXPECT_EQ(d->code, h.code);
  EXPECT_EQ(d->attach_len, h.attach_len);
  EXPECT_EQ(d->arg, h.arg);
  EXPECT_EQ(d->flags, h.flags);
}

TEST(RpcWire, MalformedHeadersAreRefusedWithAReason) {
  wire::FrameHeader h;
  h.type = wire::FrameType::kPing;
  uint8_t b[wire::kHeaderSize];
  wire::encode_header(h, b);
  auto expect = [&](Code code, const char* what) {
    auto d = wire::decode_header(b, {});
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), code) << d.status().to_string();
    EXPECT_NE(d.status().to_string().find(what), std::string::npos) << d.status().to_string();
    wire::encode_header(h, b);
  };
  b[0] = 'G';
  expect(Code::kProtocolError, "bad magic");
  b[4] = 2;
  expect(Code::kNotSupported, "wire version 2");
  b[5] = 99;
  expect(Code::kProtocolError, "unknown type");
  b[6] = 0x80;
  expect(Code::kProtocolError, "reserved flag");
  wire::put_u32(b + 24, 5);  // a PING with a body
  expect(Code::kProtocolError, "with a body");
  wire::put_u32(b + 20, 1 << 30);
  expect(Code::kProtocolError, "metadata");
}

TEST(RpcWire, ParserReportsNeedMoreFramesAndOversized) {
  wire::Limits l;
  l.max_payload = 100;
  wire::FrameParser p(l);
  wire::FrameHeader h;
  h.type = wire::FrameType::kMessage;
  h.body_len = 10;
  std::vector<uint8_t> b(wire::kHeaderSize + 10);
  wire::encode_header(h, b.data());
  EXPECT_EQ(p.next({b.data(), 3}).kind, wire::FrameParser::Kind::kNeedMore);
  auto ev = p.next({b.data(), wire::kHeaderSize + 5});
  EXPECT_EQ(ev.kind, wire::FrameParser::Kind::kNeedMore);
  EXPECT_EQ(ev.need, wire::kHeaderSize + 10);
  EXPECT_EQ(p.next(b).kind, wire::FrameParser::Kind::kFrame);
  h.body_len = 101;
  wire::encode_header(h, b.data());
  ev = p.next({b.data(), wire::kHeaderSize});
  EXPECT_EQ(ev.kind, wire::FrameParser::Kind::kOversized);
  EXPECT_EQ(ev.frame_bytes, wire::kHeaderSize + 101);
}

TEST(RpcWire, MetadataRoundTripsAndRejectsBadKeys) {
  wire::Metadata m = {{"token", "abc"}, {"bin", std::string("\0\xff", 2)}};
  std::vector<uint8_t> b(wire::meta_size(m, "oops"));
  wire::encode_meta(m, "oops", b.data());
  wire::Metadata out;
  std::string msg;
  ASSERT_TRUE(wire::decode_meta(b, &out, &msg).ok());
  EXPECT_EQ(out, m);
  EXPECT_EQ(msg, "oops");
  EXPECT_FALSE(wire::decode_meta({b.data(), b.size() - 1}, &out, &msg).ok());  // truncated
  wire::Metadata bad = {{":secret", "x"}};
  std::vector<uint8_t> b2(wire::meta_size(bad));
  wire::encode_meta(bad, {}, b2.data());
  EXPECT_FALSE(wire::decode_meta(b2, &out, &msg).ok());  // unknown reserved key
  EXPECT_FALSE(wire::valid_meta_key("has space"));
  EXPECT_FALSE(wire::valid_meta_key(""));
}

TEST(RpcWire, MethodIdsAreStable) {
  // FNV-1a 32: part of the wire format (docs/PROTOCOL.md); must never change.
  EXPECT_EQ(wire::method_id(""), 2166136261u);
  EXPECT_EQ(wire::method_id("a"), 0xe40c292cu);
}

TEST(RpcErrors, TableMapsBothWays) {
  for (uint32_t v = 0; v <= 7; ++v) {
    const ErrorCode c = error_code_from_wire(v);
    EXPECT_EQ(static_cast<uint32_t>(c), v);
    EXPECT_EQ(from_status_code(to_status_code(c)), c) << error_code_name(c);
  }
  EXPECT_EQ(error_code_from_wire(200), ErrorCode::kInternal);
  EXPECT_EQ(from_status_code(Code::kClosed), ErrorCode::kUnavailable);
  EXPECT_EQ(error_code_name(ErrorCode::kDeadlineExceeded), "deadline-exceeded");
}

TEST(RpcAttachment, SharesSlicesAndCopiesOut) {
  Attachment a("hello ");
  Attachment b("world");
  Attachment c;
  c.append(a);
  c.append(b);
  EXPECT_EQ(c.size(), 11u);
  EXPECT_EQ(c.slices().size(), 2u);
  EXPECT_EQ(c.slices()[0].block, a.slices()[0].block);  // shared, not copied
  EXPECT_EQ(c.to_string(), "hello world");
  uint8_t out[5];
  EXPECT_EQ(c.copy_to(out, 4), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(out), 5), "o wor");
  c.compact();
  EXPECT_EQ(c.slices().size(), 1u);
  EXPECT_EQ(c.to_string(), "hello world");
  EXPECT_TRUE(c == Attachment("hello world"));
}

TEST(RpcBuffer, KeptSlicesNeverBlockTheReceiveBuffer) {
  detail::RxBuffer rx(64);
  auto room = rx.writable(0);
  std::memcpy(room.data(), "abcdefgh", 8);
  rx.produced(8);
  Attachment kept;
  kept.append_slice(rx.slice(2, 4));
  rx.consume(8);
  // The block is shared by `kept`: the next read goes to a fresh block, the slice stays.
  room = rx.writable(0);
  std::memset(room.data(), 'z', room.size());
  EXPECT_EQ(kept.to_string(), "cdef");
}

TEST(RpcHistogram, QuantilesWithinABucket) {
  detail::Histogram h;
  for (int i = 1; i <= 1000; ++i) h.add(static_cast<uint64_t>(i) * 1000);
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.quantile(0.5), 500e3, 500e3 * 0.13);
  EXPECT_NEAR(h.quantile(0.99), 990e3, 990e3 * 0.13);
  EXPECT_GE(h.quantile(1.0), 1000e3);
}

}  // namespace
}  // namespace conduit::rpc
