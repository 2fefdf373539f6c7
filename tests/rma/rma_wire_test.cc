// rma's wire formats: the descriptor codec, the emulation protocol against hostile peers
// (malformed input closes that endpoint only), URL options and their docs table.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"
#include "conduit/transport/connection.h"
#include "tagged_wire.h"
#include "wire.h"

namespace conduit::rma {
namespace {

TEST(RmaDescriptor, RoundTripsAndPinsTheLayout) {
  Descriptor d{0x1122334455667788, 4096, 0xdeadbeef, Rights::kRead | Rights::kAtomic, 7};
  auto w = d.encode();
  const uint8_t expect[32] = {1, 5, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                              0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 7, 0, 0, 0, 0};
  EXPECT_EQ(0, std::memcmp(w.data(), expect, 32));
  auto back = Descriptor::decode(w);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, d);
  EXPECT_EQ(rights_name(d.rights), "read|atomic");
  EXPECT_EQ(rights_name(Rights::kNone), "none");
}

TEST(RmaDescriptor, DecodeRefusesEveryBadField) {
  const Descriptor d{0x1000, 64, 1, Rights::kWrite, 1};
  auto bad = [&](auto mutate) {
    auto w = d.encode();
    mutate(w);
    return Descriptor::decode(w).status().code();
  };
  EXPECT_EQ(bad([](auto& w) { w[0] = 2; }), Code::kProtocolError);          // version
  EXPECT_EQ(bad([](auto& w) { w[1] = 0x08; }), Code::kProtocolError);       // unknown rights
  EXPECT_EQ(bad([](auto& w) { w[3] = 1; }), Code::kProtocolError);          // reserved
  EXPECT_EQ(bad([](auto& w) { w[31] = 1; }), Code::kProtocolError);         // reserved
  EXPECT_EQ(bad([](auto& w) { std::memset(&w[16], 0, 8); }), Code::kProtocolError);  // zero length
  EXPECT_EQ(bad([](auto& w) { std::memset(&w[8], 0xff, 8); }), Code::kProtocolError);  // wraps
  auto w = d.encode();
  EXPECT_EQ(Descriptor::decode(std::span<const uint8_t>(w.data(), 31)).status().code(), Code::kInvalidArgument);
}

TEST(RmaOptions, BadUrlsAreErrors) {
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok());
  auto cb = [](Endpoint&, Status) {};
  EXPECT_EQ(Endpoint::connect(**loop, "tcp://127.0.0.1:1?depth=0", cb).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Endpoint::connect(**loop, "tcp://127.0.0.1:1?depth=8&signal_every=9", cb).status().code(),
            Code::kInvalidArgument);
  EXPECT_FALSE(Endpoint::connect(**loop, "tcp://127.0.0.1:1?no_such_option=1", cb).ok());
  EXPECT_FALSE(Endpoint::connect(**loop, "rdma://127.0.0.1:1?ring=1", cb).ok());
  EXPECT_EQ(Endpoint::connect(**loop, "udp://127.0.0.1:1", cb).status().code(), Code::kInvalidArgument);
}

TEST(RmaOptions, DocsShowTheOptionTable) {
  std::ifstream f(std::string(CONDUIT_SOURCE_DIR) + "/docs/RMA.md");
  ASSERT_TRUE(f) << "docs/RMA.md";
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find(options_markdown()), std::string::npos)
      << "docs/RMA.md must contain the option table exactly:\n" << options_markdown();
}

bool run_until(reactor::EventLoop& loop, const std::function<bool()>& pred, int ms = 20000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    (void)loop.run_once(5);
  }
  return true;
}

// A raw transport connection speaking garbage to an rma listener: only that endpoint goes.
class RmaHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = reactor::EventLoop::create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    loop_->adopt_current_thread();
    auto l = Listener::listen(*loop_, "tcp://127.0.0.1:0", [this](std::unique_ptr<Endpoint> ep) {
      ep->set_close_handler([this](Endpoint& e) { closed_errors_.push_back(e.error()); });
      accepted_.push_back(std::move(ep));
    });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    listener_ = std::move(*l);
    // A good endpoint first: it must survive everything below.
    bool up = false;
    auto ep = Endpoint::connect(*loop_, listener_->url(), [&](Endpoint&, Status s) { up = s.ok(); });
    ASSERT_TRUE(ep.ok());
    good_ = std::move(*ep);
    ASSERT_TRUE(run_until(*loop_, [&] { return up && accepted_.size() == 1; }));
  }

  // Sends `bytes` on a raw connection; returns whether the server side of it was closed
  // with a protocol error (after a valid hello when `hello`).
  void send_raw(const std::vector<uint8_t>& bytes) {
    bool up = false;
    auto c = transport::connect(*loop_, listener_->url(), [&](transport::Connection&, Status s) { up = s.ok(); });
    ASSERT_TRUE(c.ok());
    raw_ = std::move(*c);
    ASSERT_TRUE(run_until(*loop_, [&] { return up; }));
    size_t off = 0;
    ASSERT_TRUE(run_until(*loop_, [&] {
      auto n = raw_->write(std::span<const uint8_t>(bytes.data() + off, bytes.size() - off));
      if (n.ok()) off += *n;
      return off == bytes.size();
    }));
  }

  static std::vector<uint8_t> hello() {
    std::vector<uint8_t> h(16, 0);
    wire::put32(h.data(), 0x43524D41);
    h[4] = 1;
    wire::put64(h.data() + 8, 1 << 20);
    return h;
  }

  void expect_only_that_one_closes(size_t before_errors) {
    // The server closed the raw connection (the peer reads end of stream)...
    std::vector<uint8_t> sink(4096);
    ASSERT_TRUE(run_until(*loop_, [&] {
      auto n = raw_->read(sink);
      return (n.ok() && *n == 0) || (!n.ok() && !n.status().would_block());
    }));
    // ...either in its handshake (never accepted) or as an accepted endpoint, with a protocol error.
    if (closed_errors_.size() > before_errors) {
      EXPECT_EQ(closed_errors_.back().code(), Code::kProtocolError) << closed_errors_.back().to_string();
    }
    // The good endpoint still works.
    std::vector<uint8_t> mem(64, 0);
    auto d = accepted_.front()->expose(mem.data(), mem.size(), Rights::kWrite);
    ASSERT_TRUE(d.ok());
    std::vector<uint8_t> buf(64, 3);
    bool done = false;
    ASSERT_TRUE(good_->submit(Op::write(buf, *d, 0, [&](const OpResult& r) { done = r.status.ok(); })).ok());
    ASSERT_TRUE(run_until(*loop_, [&] { return done; }));
    EXPECT_EQ(mem[63], 3);
  }

  std::unique_ptr<reactor::EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Endpoint>> accepted_;
  std::vector<Status> closed_errors_;
  std::unique_ptr<Endpoint> good_;
  std::unique_ptr<transport::Connection> raw_;
};

TEST_F(RmaHostile, ABadHelloClosesOnlyThatEndpoint) {
  send_raw(std::vector<uint8_t>(16, 'x'));
  expect_only_that_one_closes(0);
}

TEST_F(RmaHostile, UnknownOpcodeAfterHelloClosesOnlyThatEndpoint) {
  std::vector<uint8_t> b = hello();
  std::vector<uint8_t> req(32, 0);
  req[0] = 1;
  req[1] = 9;  // no such opcode
  b.insert(b.end(), req.begin(), req.end());
  send_raw(b);
  ASSERT_TRUE(run_until(*loop_, [&] { return !closed_errors_.empty(); }));
  expect_only_that_one_closes(0);
}

TEST_F(RmaHostile, AnOversizedWriteClosesOnlyThatEndpoint) {
  std::vector<uint8_t> b = hello();
  std::vector<uint8_t> req(32, 0);
  req[0] = 1;
  req[1] = 2;                        // write
  wire::put32(&req[24], 0xffffffff);  // far above max_op
  b.insert(b.end(), req.begin(), req.end());
  send_raw(b);
  ASSERT_TRUE(run_until(*loop_, [&] { return !closed_errors_.empty(); }));
  expect_only_that_one_closes(0);
}

TEST_F(RmaHostile, AnUnsolicitedResponseClosesOnlyThatEndpoint) {
  std::vector<uint8_t> b = hello();
  std::vector<uint8_t> resp(24, 0);
  resp[0] = 1;
  resp[1] = 0x81;
  b.insert(b.end(), resp.begin(), resp.end());
  send_raw(b);
  ASSERT_TRUE(run_until(*loop_, [&] { return !closed_errors_.empty(); }));
  expect_only_that_one_closes(0);
}

// The tagged layer's formats (docs/PROTOCOL.md, "rma tagged"): layout pinned, every bad
// field refused.
TEST(RmaTaggedWire, HelloRoundTripsAndRefusesBadFields) {
  using namespace tagged_wire;
  const Descriptor f{0x1000, 64 * 288, 0x11, Rights::kWrite, 1}, c{0x9000, 64 * 128, 0x22, Rights::kWrite, 2};
  auto h = encode_hello(64, f, c);
  EXPECT_EQ(wire::get32(h.data()), 0x43544147u);
  EXPECT_EQ(h[4], 1);
  EXPECT_EQ(wire::get16(h.data() + 6), 64);
  auto back = decode_hello(h);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->slots, 64u);
  EXPECT_EQ(back->fifo, f);
  EXPECT_EQ(back->cmpl, c);
  for (size_t at : {size_t{0}, size_t{4}, size_t{5}, size_t{6}, size_t{8}, size_t{16}, size_t{49}}) {
    auto bad = h;
    bad[at] ^= 0xff;
    if (at == 6) bad[7] = 0, bad[6] = 0;  // slots 0
    EXPECT_EQ(decode_hello(bad).status().code(), Code::kProtocolError) << "byte " << at;
  }
  EXPECT_EQ(decode_hello(std::span<const uint8_t>(h.data(), 79)).status().code(), Code::kProtocolError);
  const Descriptor ro{0x1000, 64 * 288, 0x11, Rights::kRead, 1};
  EXPECT_EQ(decode_hello(encode_hello(64, ro, c)).status().code(), Code::kProtocolError);
}

TEST(RmaTaggedWire, FifoSlotAndRecordPinTheLayout) {
  using namespace tagged_wire;
  FifoSlot s;
  s.seq = 0x01020304;
  s.count = 2;
  s.elems[0] = FifoElem{0x1122334455667788, 4096, 0xaabbccdd, 5, 77};
  s.elems[1] = FifoElem{0, 0, 0, 0, 78};
  std::array<uint8_t, kFifoSlotBytes> w{};
  encode_fifo_slot(s, w);
  EXPECT_EQ(w[0], 1);
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(wire::get32(w.data() + 4), 0x01020304u);
  EXPECT_EQ(wire::get64(w.data() + 32), 0x1122334455667788u);
  EXPECT_EQ(wire::get64(w.data() + 40), 4096u);
  EXPECT_EQ(wire::get32(w.data() + 48), 0xaabbccddu);
  EXPECT_EQ(wire::get32(w.data() + 52), 5u);
  EXPECT_EQ(wire::get32(w.data() + 56), 77u);
  EXPECT_EQ(wire::get32(w.data() + 64 + 24), 78u);
  auto back = decode_fifo_slot(w);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->count, 2u);
  EXPECT_EQ(back->elems[0].tag, 77u);
  EXPECT_EQ(back->elems[0].addr, 0x1122334455667788u);
  for (size_t at : {size_t{0}, size_t{2}, size_t{8}, size_t{31}, size_t{60}, size_t{96}, size_t{287}}) {
    auto bad = w;
    bad[at] ^= 0x40;
    EXPECT_EQ(decode_fifo_slot(bad).status().code(), Code::kProtocolError) << "byte " << at;
  }
  for (uint8_t count : {uint8_t{0}, uint8_t{9}}) {
    auto bad = w;
    bad[1] = count;
    EXPECT_EQ(decode_fifo_slot(bad).status().code(), Code::kProtocolError) << "count " << int(count);
  }
  uint8_t r[kRecordBytes];
  encode_record(r, kRecordTooLarge, 9, 1ull << 33);
  const uint8_t expect[16] = {1, 1, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 0, 0, 0};
  EXPECT_EQ(0, std::memcmp(r, expect, 16));
  auto rec = decode_record(r);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->size, 1ull << 33);
  for (size_t at : {size_t{0}, size_t{1}, size_t{2}}) {
    uint8_t bad[kRecordBytes];
    std::memcpy(bad, r, sizeof bad);
    bad[at] ^= 0x02;
    EXPECT_EQ(decode_record(bad).status().code(), Code::kProtocolError) << "byte " << at;
  }
  EXPECT_EQ(imm_kind(fifo_imm(4095)), ImmKind::kFifoPost);
  EXPECT_EQ(fifo_imm_slot(fifo_imm(4095)), 4095u);
  EXPECT_EQ(imm_kind(record_imm(4095, 7)), ImmKind::kRecord);
  EXPECT_EQ(record_imm_slot(record_imm(4095, 7)), 4095u);
  EXPECT_EQ(record_imm_index(record_imm(4095, 7)), 7u);
  EXPECT_EQ(imm_kind(1u << 20), ImmKind::kBad);
}

}  // namespace
}  // namespace conduit::rma
