// libFuzzer target: the rpc frame reader (src/rpc/buffer.cc) and frame codec
// (src/rpc/wire.cc) over arbitrary bytes.  The first input byte seeds how the bytes arrive:
// in what pieces, how much peek() shows at once, whether read_owned() hands out views of
// the input (a lending transport) or heap copies, and the reader's hold cap.  The reader
// must report exactly the frames that wire::FrameParser finds in the same bytes taken
// whole -- same headers, metadata, bodies and attachment bytes, the same oversized frames,
// the same first malformed header -- and nothing may crash or read out of bounds
// (ASan/UBSan).  Every header accepted must re-encode to its 40 bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "buffer.h"
#include "wire.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

struct Rng {
  uint32_t s;
  uint32_t next() {
    s = s * 1103515245u + 12345u;
    return s >> 8;
  }
};

// The input as a connection: bytes become available piecewise; peek() shows a bounded
// contiguous part; read_owned() lends views of the input or copies.
class FuzzSource final : public detail::ByteSource {
 public:
  FuzzSource(const uint8_t* d, size_t n, Rng& rng, bool views) : d_(d), n_(n), rng_(rng), views_(views) {}
  // More bytes arrive; false once all have.
  bool arrive() {
    if (avail_ == n_) return false;
    avail_ = std::min(n_, avail_ + 1 + rng_.next() % 300);
    return true;
  }
  Result<std::span<const uint8_t>> peek() override {
    peeked_ = 0;
    if (pos_ == avail_) {
      auto e = end_or_block();
      if (!e.ok()) return e.status();
      return std::span<const uint8_t>();
    }
    peeked_ = std::min<size_t>(avail_ - pos_, 1 + rng_.next() % 200);
    return std::span<const uint8_t>(d_ + pos_, peeked_);
  }
  conduit::Status consume(size_t n) override {
    if (n > peeked_) __builtin_trap();  // the reader consumed more than it was shown
    peeked_ -= n;
    pos_ += n;
    return {};
  }
  Result<size_t> read(std::span<uint8_t> buf) override {
    peeked_ = 0;
    if (pos_ == avail_) return buf.empty() ? Result<size_t>(size_t{0}) : end_or_block();
    const size_t n = std::min({buf.size(), avail_ - pos_, size_t{1} + rng_.next() % 500});
    std::memcpy(buf.data(), d_ + pos_, n);
    pos_ += n;
    return n;
  }
  Result<size_t> read_owned(memory::Chain& out, size_t max) override {
    peeked_ = 0;
    if (pos_ == avail_) return end_or_block();
    const size_t n = std::min({max, avail_ - pos_, size_t{1} + rng_.next() % 500});
    if (views_) {
      out.append(memory::Slice::foreign(const_cast<uint8_t*>(d_ + pos_), n, [] {}, nullptr, 0, this));
    } else {
      out.append(memory::Slice::copy_of({d_ + pos_, n}));
    }
    pos_ += n;
    return n;
  }

 private:
  Result<size_t> end_or_block() const {
    if (avail_ == n_) return size_t{0};
    return Status::WouldBlock();
  }
  const uint8_t* d_;
  size_t n_;
  size_t avail_ = 0, pos_ = 0, peeked_ = 0;
  Rng& rng_;
  bool views_;
};

struct Expected {
  wire::FrameParser::Kind kind;
  wire::FrameHeader h;
  const uint8_t* frame;  // start of the frame in the input
};

bool same_header(const wire::FrameHeader& a, const wire::FrameHeader& b) {
  uint8_t x[wire::kHeaderSize], y[wire::kHeaderSize];
  wire::encode_header(a, x);
  wire::encode_header(b, y);
  return std::memcmp(x, y, sizeof x) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Rng rng{static_cast<uint32_t>(data[0]) * 2654435761u + 1};
  const bool views = (data[0] & 1) != 0;
  data += 1;
  size -= 1;
  wire::Limits limits;
  limits.max_meta = 4096;
  limits.max_payload = 1 << 16;

  // The reference: the parser over the whole input.
  std::vector<Expected> want;
  wire::FrameParser parser(limits);
  for (size_t off = 0; off < size;) {
    auto ev = parser.next({data + off, size - off});
    if (ev.kind == wire::FrameParser::Kind::kNeedMore) break;
    want.push_back({ev.kind, ev.header, data + off});
    if (ev.kind == wire::FrameParser::Kind::kError) break;
    uint8_t again[wire::kHeaderSize];
    wire::encode_header(ev.header, again);
    if (std::memcmp(again, data + off, wire::kHeaderSize) != 0) __builtin_trap();
    off += ev.frame_bytes;
  }

  FuzzSource src(data, size, rng, views);
  detail::FrameReader reader(limits, rng.next() % 2 ? 64 : 1 << 16);
  size_t got = 0;
  for (int stalls = 0; stalls < 2;) {
    const auto ev = reader.next(src);
    if (ev.kind == detail::FrameReader::Kind::kWouldBlock) {
      if (!src.arrive()) ++stalls;
      continue;
    }
    if (ev.kind == detail::FrameReader::Kind::kEof || ev.kind == detail::FrameReader::Kind::kIoError) break;
    if (got == want.size()) __builtin_trap();  // a frame the parser did not find
    const Expected& w = want[got++];
    if (ev.kind == detail::FrameReader::Kind::kProtocol) {
      if (w.kind != wire::FrameParser::Kind::kError) __builtin_trap();
      return 0;
    }
    const detail::Frame& f = reader.frame();
    if (!same_header(f.h, w.h)) __builtin_trap();
    if (ev.kind == detail::FrameReader::Kind::kOversized) {
      if (w.kind != wire::FrameParser::Kind::kOversized) __builtin_trap();
      continue;
    }
    if (w.kind != wire::FrameParser::Kind::kFrame) __builtin_trap();
    const uint8_t* p = w.frame + wire::kHeaderSize;
    auto same = [](std::span<const uint8_t> a, const uint8_t* b) { return a.empty() || std::memcmp(a.data(), b, a.size()) == 0; };
    if (f.meta.size() != w.h.meta_len || !same(f.meta, p)) __builtin_trap();
    p += w.h.meta_len;
    if (f.body.size() != w.h.body_len || !same(f.body, p)) __builtin_trap();
    p += w.h.body_len;
    if (f.attachment.size() != w.h.attach_len) __builtin_trap();
    if (f.attachment.to_string() != std::string(reinterpret_cast<const char*>(p), w.h.attach_len)) __builtin_trap();
    wire::Metadata m;
    std::string message;
    if (wire::decode_meta(f.meta, &m, &message).ok())
      for (const auto& [k, v] : m)
        if (!wire::valid_meta_key(k)) __builtin_trap();
    reader.finish(src);
  }
  if (got != want.size()) __builtin_trap();  // a frame the reader missed
  return 0;
}
