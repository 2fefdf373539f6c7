// Attachments and the frame reader (src/rpc/buffer.{h,cc}) without a connection: the
// reader is driven over ByteSources that model the two kinds of transport it meets --
// one that copies (read_owned hands out heap memory: tcp, and every transport through the
// base class) and one that lends its receive ring (read_owned hands out views whose space
// the writer gets back only when released, oldest first, with a hold limit at which every
// read would-blocks: shm's documented semantics).  The real transports run the same code
// in rpc_call_test.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attachment_access.h"
#include "buffer.h"
#include "conduit/memory/pool.h"
#include "conduit/rpc/attachment.h"
#include "wire.h"

namespace conduit::rpc {
namespace {

using detail::ByteSource;
using detail::FrameReader;

std::string pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    s[i] = static_cast<char>(x >> 56);
  }
  return s;
}

struct WireFrame {
  wire::FrameHeader h;
  std::string meta_key, meta_value, body, attachment;
};

std::string encode(const WireFrame& f) {
  wire::Metadata m;
  if (!f.meta_key.empty()) m.emplace_back(f.meta_key, f.meta_value);
  wire::FrameHeader h = f.h;
  h.meta_len = static_cast<uint32_t>(wire::meta_size(m));
  h.body_len = static_cast<uint32_t>(f.body.size());
  h.attach_len = static_cast<uint32_t>(f.attachment.size());
  std::string out(wire::kHeaderSize + h.meta_len, '\0');
  wire::encode_header(h, reinterpret_cast<uint8_t*>(out.data()));
  wire::encode_meta(m, {}, reinterpret_cast<uint8_t*>(out.data()) + wire::kHeaderSize);
  return out + f.body + f.attachment;
}

// A receive ring of `cap` bytes filled by a writer the test drives (push/pump).  Views
// (read_owned) are slices of the ring itself; the writer may reuse ring space only up to
// the oldest byte still held, and once the held stretch (oldest held byte .. read position)
// reaches `hold` every read would-blocks -- as shm:// does.  With views = false read_owned
// copies into heap slices instead (a copying transport).
class RingSource final : public ByteSource {
 public:
  RingSource(size_t cap, size_t hold, bool views) : st_(std::make_shared<State>(cap)), hold_(hold), views_(views) {}
  // Bytes the writer will put into the ring as space allows.
  void push(const std::string& bytes) {
    st_->pending.append(bytes);
    pump();
  }
  void close_writer() { st_->closed = true; }
  // Moves pending bytes into free ring space; true if any moved.
  bool pump() {
    State& s = *st_;
    bool moved = false;
    while (!s.pending.empty() && s.head - s.tail() < s.mem.size()) {
      const size_t off = s.head % s.mem.size();
      const size_t n = std::min({s.pending.size() - s.pending_off, s.mem.size() - off,
                                 static_cast<size_t>(s.mem.size() - (s.head - s.tail()))});
      std::memcpy(s.mem.data() + off, s.pending.data() + s.pending_off, n);
      s.head += n;
      s.pending_off += n;
      moved = true;
      if (s.pending_off == s.pending.size()) s.pending.clear(), s.pending_off = 0;
    }
    return moved;
  }
  bool writer_done() const { return st_->pending.empty(); }
  size_t held() const { return st_->holds.size(); }

  Result<std::span<const uint8_t>> peek() override {
    State& s = *st_;
    const size_t n = readable();
    peeked_ = 0;
    if (n == 0) {
      auto e = end_or_block();
      if (!e.ok()) return e.status();
      return std::span<const uint8_t>();
    }
    const size_t off = s.rpos % s.mem.size();
    peeked_ = std::min(n, s.mem.size() - off);
    return std::span<const uint8_t>(s.mem.data() + off, peeked_);
  }
  Status consume(size_t n) override {
    if (n > peeked_) return Status(Code::kInvalidArgument, "consume: more than peek() returned");
    peeked_ -= n;
    st_->rpos += n;
    pump();
    return {};
  }
  Result<size_t> read(std::span<uint8_t> buf) override {
    State& s = *st_;
    peeked_ = 0;
    size_t n = std::min(buf.size(), readable());
    if (n == 0) return buf.empty() ? Result<size_t>(size_t{0}) : end_or_block();
    for (size_t done = 0; done < n;) {
      const size_t off = s.rpos % s.mem.size();
      const size_t k = std::min(n - done, s.mem.size() - off);
      std::memcpy(buf.data() + done, s.mem.data() + off, k);
      s.rpos += k;
      done += k;
    }
    pump();
    return n;
  }
  Result<size_t> read_owned(memory::Chain& out, size_t max) override {
    State& s = *st_;
    peeked_ = 0;
    const size_t n0 = std::min(max, readable());
    if (n0 == 0) return end_or_block();
    const size_t off = s.rpos % s.mem.size();
    const size_t n = std::min(n0, s.mem.size() - off);
    if (!views_) {
      out.append(memory::Slice::copy_of({s.mem.data() + off, n}));
      s.rpos += n;
      pump();
      return n;
    }
    const uint64_t ticket = s.next_ticket++;
    s.holds.push_back({ticket, s.rpos, false});
    s.rpos += n;
    std::weak_ptr<State> w = st_;
    out.append(memory::Slice::foreign(s.mem.data() + off, n, [w, ticket] {
      if (auto p = w.lock()) p->release(ticket);
    }, nullptr, 0, this));
    return n;
  }

 private:
  struct Hold {
    uint64_t ticket;
    uint64_t start;
    bool released;
  };
  struct State {
    explicit State(size_t cap) : mem(cap) {}
    std::vector<uint8_t> mem;
    uint64_t head = 0, rpos = 0, next_ticket = 1;
    std::deque<Hold> holds;
    std::string pending;
    size_t pending_off = 0;
    bool closed = false;
    uint64_t tail() const { return holds.empty() ? rpos : holds.front().start; }
    void release(uint64_t t) {
      for (Hold& h : holds)
        if (h.ticket == t) h.released = true;
      while (!holds.empty() && holds.front().released) holds.pop_front();
    }
  };
  // Readable now, at most what the hold limit still allows.
  size_t readable() const {
    const State& s = *st_;
    const uint64_t stretch = s.holds.empty() ? 0 : s.rpos - s.holds.front().start;
    const uint64_t room = stretch >= hold_ ? 0 : hold_ - stretch;
    return static_cast<size_t>(std::min<uint64_t>(s.head - s.rpos, room));
  }
  Result<size_t> end_or_block() const {
    const State& s = *st_;
    if (s.closed && s.pending.empty() && s.head == s.rpos) return size_t{0};
    return Status::WouldBlock();
  }
  std::shared_ptr<State> st_;
  size_t hold_;
  bool views_;
  size_t peeked_ = 0;
};

// Reads frames until the writer is done and nothing is readable; `on_frame` sees each one.
// Fails the test if the reader stalls while bytes are still to come.
template <typename Fn>
void drive(FrameReader& r, RingSource& src, Fn on_frame, size_t expect_frames) {
  size_t frames = 0;
  for (int idle = 0; frames < expect_frames;) {
    FrameReader::Event ev = r.next(src);
    if (ev.kind == FrameReader::Kind::kFrame) {
      on_frame(r.frame());
      r.finish(src);
      ++frames;
      idle = 0;
      continue;
    }
    ASSERT_EQ(ev.kind, FrameReader::Kind::kWouldBlock) << ev.error.to_string();
    if (!src.pump()) {
      ASSERT_LT(++idle, 3) << "the reader stalled after " << frames << " frames (" << src.held()
                           << " views held, writer done: " << src.writer_done() << ")";
    }
  }
}

std::vector<WireFrame> make_frames(size_t n, const std::vector<size_t>& att_sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<WireFrame> out;
  for (size_t i = 0; i < n; ++i) {
    WireFrame f;
    f.h.type = wire::FrameType::kRequest;
    f.h.call_id = i + 1;
    if (rng() % 2) f.meta_key = "k" + std::to_string(i), f.meta_value = pattern(rng() % 40, i);
    f.body = pattern(rng() % 3 == 0 ? rng() % 5000 : rng() % 100, seed + i);
    f.attachment = pattern(att_sizes[rng() % att_sizes.size()], seed * 31 + i);
    out.push_back(std::move(f));
  }
  return out;
}

void expect_same(const detail::Frame& got, const WireFrame& want) {
  ASSERT_EQ(got.h.call_id, want.h.call_id);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.body.data()), got.body.size()), want.body);
  wire::Metadata m;
  ASSERT_TRUE(wire::decode_meta(got.meta, &m, nullptr).ok());
  if (!want.meta_key.empty()) {
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].second, want.meta_value);
  }
  ASSERT_EQ(got.attachment.size(), want.attachment.size()) << "call " << want.h.call_id;
  EXPECT_TRUE(got.attachment.to_string() == want.attachment) << "call " << want.h.call_id;
}

// --- Attachment -------------------------------------------------------------------------

TEST(RpcAttachment, SharesPrivateSlicesAndCopiesOut) {
  Attachment a("hello ");
  Attachment b("world");
  Attachment c;
  c.append(a);
  c.append(b);
  EXPECT_EQ(c.size(), 11u);
  ASSERT_EQ(c.slice_count(), 2u);
  EXPECT_EQ(c.slice(0).data(), a.slice(0).data());  // shared, not copied
  EXPECT_EQ(c.to_string(), "hello world");
  uint8_t out[5];
  EXPECT_EQ(c.copy_to(out, 4), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(out), 5), "o wor");
  memory::Chain chain = c.to_chain();  // shares
  EXPECT_EQ(chain.slice(0).data(), a.slice(0).data());
  c.compact();
  EXPECT_EQ(c.slice_count(), 1u);
  EXPECT_TRUE(c == Attachment("hello world"));
  Attachment moved(std::move(b));
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(moved.to_string(), "world");
}

TEST(RpcAttachment, BuiltFromAChainWithoutCopying) {
  auto pool = memory::BlockPool::create().value();
  memory::Chain c = allocate_attachment(pool.get(), 10000, 0, 4096).value();
  ASSERT_EQ(c.count(), 3u);  // 4096 + 4096 + 1808
  const uint8_t* first = c.slice(0).data();
  std::memset(c.slice(0).writable_data(), 'x', c.slice(0).size());
  Attachment a(std::move(c));
  EXPECT_EQ(a.size(), 10000u);
  EXPECT_EQ(a.slice(0).data(), first);
  EXPECT_EQ(a.slice(0).owner(), pool.get());  // the pool's memory: the rdma transport sends it in place
  memory::Chain back = a.release();
  EXPECT_EQ(back.slice(0).data(), first);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(allocate_attachment(nullptr, 3, 0).value().size(), 3u);  // no pool: heap
}

TEST(RpcAttachment, KeepingAViewCopiesIt) {
  std::string ring = "receive memory";
  int released = 0;
  memory::Chain c(memory::Slice::foreign(reinterpret_cast<uint8_t*>(ring.data()), ring.size(), [&] { ++released; },
                                         nullptr, 0, &ring));
  Attachment view;
  detail::AttachmentAccess::set_view(view, std::move(c));
  ASSERT_TRUE(view.is_view());
  EXPECT_EQ(view.slice(0).data(), reinterpret_cast<uint8_t*>(ring.data()));  // in place
  Attachment copied(view);
  Attachment assigned;
  assigned = view;
  Attachment appended;
  appended.append(view);
  memory::Chain as_chain = view.to_chain();
  for (const Attachment* a : {&copied, &assigned, &appended}) {
    EXPECT_FALSE(a->is_view());
    EXPECT_NE(a->slice(0).data(), reinterpret_cast<uint8_t*>(ring.data()));
    EXPECT_EQ(a->to_string(), "receive memory");
  }
  EXPECT_NE(as_chain.slice(0).data(), reinterpret_cast<uint8_t*>(ring.data()));
  Attachment moved(std::move(view));  // a move copies too: the view stays where it was
  EXPECT_FALSE(moved.is_view());
  EXPECT_NE(moved.slice(0).data(), reinterpret_cast<uint8_t*>(ring.data()));
  EXPECT_EQ(released, 1);  // the move left `view` empty: the receive memory went back
  ring.assign(ring.size(), 'z');
  EXPECT_EQ(moved.to_string(), "receive memory");
  EXPECT_EQ(as_chain.to_string(), "receive memory");
}

TEST(RpcAttachment, AllocationFromAnExhaustedPoolFailsClearlyOrWaits) {
  memory::PoolOptions o;
  o.classes = {4096, 65536};
  o.region_bytes = 65536;
  o.cap_bytes = 4 * 65536;
  o.thread_cache_bytes = 0;
  o.hugepages = false;
  o.name = "small";
  auto pool = memory::BlockPool::create(o).value();
  std::vector<memory::Chain> held;
  for (int i = 0; i < 4; ++i) held.push_back(allocate_attachment(pool.get(), 65536, 0, 65536).value());
  auto none = allocate_attachment(pool.get(), 65536, 0, 65536);
  ASSERT_EQ(none.status().code(), Code::kResourceExhausted);
  EXPECT_NE(none.status().message().find("pool 'small'"), std::string::npos) << none.status().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  auto late = allocate_attachment(pool.get(), 65536, 50, 65536);
  EXPECT_EQ(late.status().code(), Code::kResourceExhausted);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  // Memory that comes back while a caller waits is taken.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    held.pop_back();
  });
  auto got = allocate_attachment(pool.get(), 65536, 30000, 65536);
  releaser.join();
  EXPECT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(allocate_attachment(pool.get(), 8 * 65536, 0).status().code(), Code::kInvalidArgument);  // above the cap
}

// --- FrameReader ------------------------------------------------------------------------

// A ring smaller than the big attachments, a transport hold limit below the ring, and a
// reader hold cap below that: every frame arrives byte for byte, small attachments as views
// of the ring, larger ones copied out as they arrive; attachments the "handler" keeps (a
// copy of the Attachment) survive the ring's reuse, and the ring never stalls.
TEST(RpcFrameReader, ViewsUpToTheHoldCapCopiesBeyondAndNeverStalls) {
  RingSource src(64 << 10, 32 << 10, /*views=*/true);
  FrameReader r(wire::Limits{}, 16 << 10);
  const auto frames = make_frames(300, {0, 1, 100, 4096, 16 << 10, 20 << 10, 100 << 10}, 7);
  for (const auto& f : frames) src.push(encode(f));
  src.close_writer();
  std::vector<std::pair<size_t, Attachment>> kept;
  size_t i = 0, views = 0;
  drive(r, src, [&](detail::Frame& f) {
    expect_same(f, frames[i]);
    if (f.attachment.is_view()) {
      ++views;
      EXPECT_LE(f.attachment.size(), size_t{16} << 10);
    }
    if (i % 3 == 0) kept.emplace_back(i, f.attachment);  // the handler keeps a copy
    ++i;
  }, frames.size());
  EXPECT_EQ(i, frames.size());
  EXPECT_GT(views, 0u);
  EXPECT_EQ(r.stats().views, views);
  // The 20 KiB and 100 KiB ones are above the cap: read straight into buffers of their own,
  // never taken as views first (so nothing is copied out of views).
  EXPECT_EQ(r.stats().copied_out, 0u);
  EXPECT_EQ(r.stats().copied_bytes, 0u);
  EXPECT_EQ(r.stats().views_kept, 0u);
  EXPECT_EQ(src.held(), 0u);
  for (const auto& [n, a] : kept) EXPECT_TRUE(a.to_string() == frames[n].attachment) << "kept attachment of call " << n + 1;
}

// A transport whose own hold limit is below the reader's cap: the reader notices the
// would-block while it holds views and copies them out, so the frame still completes.
TEST(RpcFrameReader, ATransportHoldLimitBelowTheCapStillCompletes) {
  RingSource src(16 << 10, 4 << 10, /*views=*/true);
  FrameReader r(wire::Limits{}, 256 << 10);
  const auto frames = make_frames(40, {3000, 10000, 60000}, 11);
  for (const auto& f : frames) src.push(encode(f));
  src.close_writer();
  size_t i = 0;
  drive(r, src, [&](detail::Frame& f) { expect_same(f, frames[i++]); }, frames.size());
  EXPECT_GT(r.stats().copied_out, 0u);
}

// Keeping a view's slices (not the Attachment) is the misuse the rule forbids: it is
// counted, and it pins the ring until released -- which is why copies are the rule.
TEST(RpcFrameReader, KeptViewSlicesAreCountedAndPinTheRing) {
  RingSource src(16 << 10, 8 << 10, /*views=*/true);
  FrameReader r(wire::Limits{}, 4096);
  const auto frames = make_frames(200, {1000}, 3);
  for (const auto& f : frames) src.push(encode(f));
  src.close_writer();
  auto ev = r.next(src);
  ASSERT_EQ(ev.kind, FrameReader::Kind::kFrame);
  ASSERT_TRUE(r.frame().attachment.is_view());
  memory::Slice pinned = r.frame().attachment.slice(0);  // misuse
  r.finish(src);
  EXPECT_EQ(r.stats().views_kept, 1u);
  size_t got = 1;
  for (int rounds = 0; rounds < 1000; ++rounds) {
    ev = r.next(src);
    if (ev.kind == FrameReader::Kind::kFrame) {
      r.finish(src);
      ++got;
      continue;
    }
    if (!src.pump()) break;
  }
  EXPECT_LT(got, frames.size()) << "the pinned slice should stop the ring at its hold limit";
  pinned = memory::Slice();  // released: the ring moves again
  drive(r, src, [&](detail::Frame&) { ++got; }, frames.size() - got);
  EXPECT_EQ(got, frames.size());
}

// A copying transport (heap read_owned slices): an attachment is at most two slices -- the
// bytes already staged, then the rest read straight into one buffer -- and frames without
// attachments that lie in one span are parsed in place.
TEST(RpcFrameReader, CopyingTransportGetsOneBufferPerAttachment) {
  RingSource src(64 << 10, 64 << 10, /*views=*/false);
  FrameReader r(wire::Limits{}, 256 << 10);
  const auto frames = make_frames(100, {0, 0, 10, 5000, 200000}, 5);
  for (const auto& f : frames) src.push(encode(f));
  src.close_writer();
  size_t i = 0;
  drive(r, src, [&](detail::Frame& f) {
    expect_same(f, frames[i++]);
    EXPECT_FALSE(f.attachment.is_view());
    EXPECT_LE(f.attachment.slice_count(), 2u);  // what one owned read got, then the rest
  }, frames.size());
  EXPECT_GT(r.stats().in_place, 0u);
  EXPECT_EQ(r.stats().views, 0u);
}

TEST(RpcFrameReader, OversizedFramesAreSkippedAndBadHeadersRefused) {
  RingSource src(8192, 8192, true);
  wire::Limits lim;
  lim.max_payload = 1000;
  FrameReader r(lim, 4096);
  WireFrame big;
  big.h.type = wire::FrameType::kRequest;
  big.h.call_id = 1;
  big.attachment = pattern(5000, 1);
  WireFrame small = big;
  small.h.call_id = 2;
  small.attachment = "ok";
  src.push(encode(big) + encode(small));
  auto ev = r.next(src);
  ASSERT_EQ(ev.kind, FrameReader::Kind::kOversized);
  EXPECT_EQ(r.frame().h.call_id, 1u);
  for (int i = 0; i < 100 && ev.kind != FrameReader::Kind::kFrame; ++i) {
    ev = r.next(src);
    if (ev.kind == FrameReader::Kind::kWouldBlock) src.pump();
  }
  ASSERT_EQ(ev.kind, FrameReader::Kind::kFrame);
  EXPECT_EQ(r.frame().h.call_id, 2u);
  EXPECT_EQ(r.frame().attachment.to_string(), "ok");
  r.finish(src);
  src.push(std::string(wire::kHeaderSize, 'x'));
  ev = r.next(src);
  EXPECT_EQ(ev.kind, FrameReader::Kind::kProtocol);
  EXPECT_NE(ev.error.message().find("magic"), std::string::npos) << ev.error.to_string();
}

TEST(RpcFrameReader, EndOfStreamMidFrame) {
  RingSource src(8192, 8192, true);
  FrameReader r(wire::Limits{}, 4096);
  WireFrame f;
  f.h.type = wire::FrameType::kRequest;
  f.attachment = pattern(3000, 2);
  const std::string bytes = encode(f);
  src.push(bytes.substr(0, bytes.size() - 10));
  src.close_writer();
  FrameReader::Event ev{};
  for (int i = 0; i < 10; ++i) {
    ev = r.next(src);
    if (ev.kind != FrameReader::Kind::kWouldBlock) break;
  }
  EXPECT_EQ(ev.kind, FrameReader::Kind::kEof);
}

}  // namespace
}  // namespace conduit::rpc
