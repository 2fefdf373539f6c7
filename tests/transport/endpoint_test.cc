#include "conduit/transport/endpoint.h"

#include <gtest/gtest.h>

namespace conduit::transport {
namespace {

Endpoint parse(std::string_view url) {
  auto ep = Endpoint::parse(url);
  EXPECT_TRUE(ep.ok()) << url << ": " << ep.status().to_string();
  return ep.ok() ? *ep : Endpoint{};
}

TEST(Endpoint, ParsesSchemeAddressAndOptions) {
  Endpoint ep = parse("shm://svc?ring=4096&busy_poll_us=50");
  EXPECT_EQ(ep.scheme, "shm");
  EXPECT_EQ(ep.address, "svc");
  EXPECT_EQ(ep.options.at("ring"), "4096");
  EXPECT_EQ(ep.options.at("busy_poll_us"), "50");
  auto hp = parse("tcp://[::1]:7000").host_port();
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->first, "::1");
  EXPECT_EQ(hp->second, 7000);
  EXPECT_FALSE(Endpoint::parse("no-scheme").ok());
  EXPECT_FALSE(parse("tcp://127.0.0.1:99999").host_port().ok());
}

TEST(OptionReader, NumbersAreRangeCheckedAndUnknownKeysRejected) {
  Endpoint ep = parse("tcp://127.0.0.1:1?backlog=10&typo=1");
  OptionReader r(ep);
  auto b = r.get_u64("backlog", 5, 1, 100);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, 10u);
  EXPECT_EQ(*r.get_u64("absent", 7, 1, 100), 7u);
  EXPECT_FALSE(r.get_u64("backlog", 5, 11, 100).ok()) << "below min";
  Status s = r.finish();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("typo"), std::string::npos) << s.to_string();
}

TEST(OptionReader, ByteCountsTakeBinarySuffixes) {
  Endpoint ep = parse("shm://x?a=4096&b=4K&c=2m&d=1GiB&e=3kib&f=12x&g=K&h=5G&i=-1&j=1b");
  OptionReader r(ep);
  const uint64_t max = uint64_t{1} << 31;
  EXPECT_EQ(*r.get_bytes("a", 0, 0, max), 4096u);
  EXPECT_EQ(*r.get_bytes("b", 0, 0, max), 4096u);
  EXPECT_EQ(*r.get_bytes("c", 0, 0, max), 2u << 20);
  EXPECT_EQ(*r.get_bytes("d", 0, 0, max), 1u << 30);
  EXPECT_EQ(*r.get_bytes("e", 0, 0, max), 3072u);
  EXPECT_EQ(*r.get_bytes("j", 0, 0, max), 1u);
  EXPECT_EQ(*r.get_bytes("absent", 99, 0, max), 99u);
  auto f = r.get_bytes("f", 0, 0, max);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().to_string().find("not a byte count"), std::string::npos);
  EXPECT_FALSE(r.get_bytes("g", 0, 0, max).ok()) << "a suffix alone";
  auto h = r.get_bytes("h", 0, 0, max);
  ASSERT_FALSE(h.ok()) << "5G is above the 2G max";
  EXPECT_NE(h.status().to_string().find("outside"), std::string::npos);
  EXPECT_FALSE(r.get_bytes("i", 0, 0, max).ok());
  EXPECT_FALSE(r.get_bytes("b", 0, 8192, max).ok()) << "4K below the 8K min";
  EXPECT_TRUE(r.finish().ok());
}

}  // namespace
}  // namespace conduit::transport
