#include "conduit/memory/buffer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace conduit::memory {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(Slice, HeapCopyAndReferenceCounting) {
  auto v = bytes(100);
  Slice a = Slice::copy_of(v);
  EXPECT_EQ(a.size(), 100u);
  EXPECT_TRUE(a.unique());
  EXPECT_EQ(std::memcmp(a.data(), v.data(), 100), 0);
  Slice b = a;  // shares
  EXPECT_FALSE(a.unique());
  EXPECT_EQ(a.data(), b.data());
  b = Slice();
  EXPECT_TRUE(a.unique());
  Slice c = std::move(a);
  EXPECT_FALSE(a);  // NOLINT: moved-from is empty
  EXPECT_EQ(c.size(), 100u);
  EXPECT_FALSE(c.registered(0)) << "heap memory carries no keys";
}

TEST(Slice, ForeignMemoryIsReleasedOnceWhenTheLastViewGoes) {
  int released = 0;
  uint8_t mem[64] = {};
  RegionKeys keys[kMaxDomains] = {{1, 2}, {3, 4}};
  {
    Slice s = Slice::foreign(mem, sizeof mem, [&] { ++released; }, keys, 0b10, &released);
    EXPECT_FALSE(s.registered(0));
    EXPECT_TRUE(s.registered(1));
    EXPECT_EQ(s.keys(1).lkey, 3u);
    EXPECT_EQ(s.owner(), &released);
    Slice part = s.sub(8, 16);
    s = Slice();
    EXPECT_EQ(released, 0) << "a sub-view keeps the memory";
    EXPECT_EQ(part.data(), mem + 8);
  }
  EXPECT_EQ(released, 1);
}

TEST(Slice, HeadroomAndViews) {
  Slice s = Slice::heap(64);
  s.advance(16);  // reserve 16 bytes of headroom for a header
  EXPECT_EQ(s.headroom(), 16u);
  EXPECT_EQ(s.size(), 48u);
  std::memcpy(s.writable_data(), "payload", 7);
  s.set_size(7);
  EXPECT_EQ(s.tailroom(), 64u - 16 - 7);
  s.prepend(4);
  std::memcpy(s.writable_data(), "HDR:", 4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.data()), s.size()), "HDR:payload");
  s.trim(3);
  EXPECT_EQ(s.size(), 8u);
}

TEST(Chain, AppendConsumeSplit) {
  Chain c;
  EXPECT_TRUE(c.empty());
  c.append(Slice::copy_of(bytes(10, 0)));
  c.append(Slice());  // dropped
  c.append(Slice::copy_of(bytes(10, 10)));
  Chain more(Slice::copy_of(bytes(10, 20)));
  c.append(std::move(more));
  EXPECT_TRUE(more.empty());  // NOLINT: moved-from chains are empty
  EXPECT_EQ(c.size(), 30u);
  EXPECT_EQ(c.count(), 3u);
  c.consume(5);
  EXPECT_EQ(c.size(), 25u);
  EXPECT_EQ(c.front().data()[0], 5);
  Chain head = c.split(12);  // 5..16: one full slice part and a shared boundary slice
  EXPECT_EQ(head.size(), 12u);
  EXPECT_EQ(c.size(), 13u);
  std::string h = head.to_string();
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(static_cast<uint8_t>(h[i]), 5 + i);
  std::string t = c.to_string();
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(static_cast<uint8_t>(t[i]), 17 + i);
  c.prepend(Slice::copy_of(bytes(1, 99)));
  EXPECT_EQ(static_cast<uint8_t>(c.to_string()[0]), 99);
  c.consume(c.size());
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.count(), 0u);
}

TEST(Chain, GatherArraysWithoutAllocation) {
  uint8_t a[8], b[8];
  RegionKeys keys[kMaxDomains] = {{7, 8}};
  Chain c;
  c.append(Slice::foreign(a, 8, nullptr, keys, 1));
  c.append(Slice::foreign(b, 8, nullptr, keys, 1));
  c.append(Slice::heap(8));  // unregistered
  iovec iov[4];
  size_t got = 0;
  EXPECT_EQ(c.to_iovec(iov, 3, SIZE_MAX, &got), 3u);
  EXPECT_EQ(got, 21u);
  EXPECT_EQ(iov[0].iov_base, a + 3);
  EXPECT_EQ(iov[0].iov_len, 5u);
  EXPECT_EQ(c.to_iovec(std::span(iov, 1), 0, SIZE_MAX, &got), 1u);
  EXPECT_EQ(got, 8u);
  SgEntry sg[4];
  EXPECT_EQ(c.to_sg(sg, 0, 0, SIZE_MAX, &got), 2u) << "stops at the unregistered slice";
  EXPECT_EQ(got, 16u);
  EXPECT_EQ(sg[1].addr, reinterpret_cast<uintptr_t>(b));
  EXPECT_EQ(sg[1].lkey, 7u);
  EXPECT_EQ(c.to_sg(sg, 0, 4, 6, &got), 2u);  // skip 4, at most 6 bytes
  EXPECT_EQ(got, 6u);
  EXPECT_EQ(sg[0].length, 4u);
  EXPECT_EQ(sg[1].length, 2u);
  EXPECT_EQ(c.to_sg(sg, 1, 0, SIZE_MAX, &got), 0u) << "no keys in domain 1";
}

}  // namespace
}  // namespace conduit::memory
