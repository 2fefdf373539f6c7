#include "wire.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

namespace conduit::preload {
namespace {

FourTuple sample() {
  sockaddr_in c{}, s{};
  c.sin_family = s.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &c.sin_addr);
  inet_pton(AF_INET, "127.0.0.2", &s.sin_addr);
  c.sin_port = htons(40000);
  s.sin_port = htons(6379);
  return FourTuple::from(reinterpret_cast<sockaddr*>(&c), reinterpret_cast<sockaddr*>(&s));
}

TEST(PreloadWire, RoundTripAndLayout) {
  Msg m;
  m.type = MsgType::kReject;
  m.reason = Reject::kDuplicate;
  m.tuple = sample();
  m.pid = 0x01020304;
  uint8_t buf[kWireSize];
  encode(m, buf);
  EXPECT_EQ(std::memcmp(buf, "CDPL", 4), 0);
  EXPECT_EQ(buf[4], 1);
  EXPECT_EQ(buf[5], 4);
  EXPECT_EQ(buf[7], 2);
  EXPECT_EQ(buf[8], 40000 >> 8);
  EXPECT_EQ(buf[10], 6379 >> 8);
  EXPECT_EQ(buf[12], 4);
  EXPECT_EQ(buf[16], 127);
  EXPECT_EQ(buf[35], 2);
  EXPECT_EQ(buf[48], 1);
  Result<Msg> d = decode(buf);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->type, MsgType::kReject);
  EXPECT_EQ(d->reason, Reject::kDuplicate);
  EXPECT_EQ(d->tuple, m.tuple);
  EXPECT_EQ(d->pid, m.pid);
  EXPECT_EQ(m.tuple.client_text(), "127.0.0.1:40000");
  EXPECT_EQ(m.tuple.server_text(), "127.0.0.2:6379");
}

TEST(PreloadWire, DecodeRejectsEveryBadField) {
  Msg m;
  m.type = MsgType::kAnnounce;
  m.tuple = sample();
  uint8_t good[kWireSize];
  encode(m, good);
  auto mutated = [&](size_t off, uint8_t v) {
    uint8_t b[kWireSize];
    std::memcpy(b, good, kWireSize);
    b[off] = v;
    return decode(b);
  };
  EXPECT_EQ(mutated(0, 'X').status().code(), Code::kProtocolError) << "magic";
  EXPECT_EQ(mutated(4, 2).status().code(), Code::kNotSupported) << "version";
  EXPECT_FALSE(mutated(5, 0).ok()) << "type 0";
  EXPECT_FALSE(mutated(5, 9).ok()) << "type 9";
  EXPECT_FALSE(mutated(7, 1).ok()) << "a reason on an announce";
  EXPECT_FALSE(mutated(12, 5).ok()) << "family";
  EXPECT_FALSE(mutated(14, 1).ok()) << "reserved";
  EXPECT_FALSE(mutated(20, 1).ok()) << "IPv4 address with more bytes";
  EXPECT_FALSE(mutated(60, 1).ok()) << "reserved tail";
  m.type = MsgType::kReject;
  m.reason = Reject::kNone;
  encode(m, good);
  EXPECT_FALSE(decode(good).ok()) << "a reject without a reason";
}

TEST(PreloadWire, MappedAddressesNormaliseToIpv4) {
  sockaddr_in6 c{};
  c.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &c.sin6_addr);
  c.sin6_port = htons(40000);
  sockaddr_in s{};
  s.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.2", &s.sin_addr);
  s.sin_port = htons(6379);
  EXPECT_EQ(FourTuple::from(reinterpret_cast<sockaddr*>(&c), reinterpret_cast<sockaddr*>(&s)), sample());
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::1", &v6.sin6_addr);
  v6.sin6_port = htons(1);
  FourTuple t = FourTuple::from(reinterpret_cast<sockaddr*>(&v6), reinterpret_cast<sockaddr*>(&v6));
  EXPECT_EQ(t.family, 6);
  EXPECT_EQ(t.client_text(), "[::1]:1");
}

}  // namespace
}  // namespace conduit::preload
