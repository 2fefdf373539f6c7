// libFuzzer target: the rpc frame parser (src/rpc/wire.cc) and receive buffer
// (src/rpc/buffer.cc) over arbitrary bytes, fed in arbitrary chunks as a connection would
// see them.  Every header the parser accepts must re-encode to the same 40 bytes, every
// metadata section must decode or be refused, and nothing may crash or read out of
// bounds (ASan/UBSan).
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "buffer.h"
#include "wire.h"

using namespace conduit::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t chunk_seed = data[0];
  data += 1;
  size -= 1;
  wire::Limits limits;
  limits.max_meta = 4096;
  limits.max_payload = 1 << 16;
  wire::FrameParser parser(limits);
  detail::RxBuffer rx(256);  // small blocks: frames straddle and outgrow them
  size_t off = 0, want = 0;
  uint64_t discard = 0;
  unsigned step = chunk_seed | 1u;
  while (off < size) {
    step = step * 1103515245u + 12345u;
    std::span<uint8_t> room = rx.writable(want);
    const size_t n = std::min({room.size(), size - off, size_t{1} + size_t{(step >> 16) % 97}});
    std::memcpy(room.data(), data + off, n);
    rx.produced(n);
    off += n;
    for (;;) {
      auto in = rx.readable();
      if (discard != 0) {
        const size_t d = static_cast<size_t>(std::min<uint64_t>(discard, in.size()));
        rx.consume(d);
        discard -= d;
        if (discard != 0) break;
        continue;
      }
      auto ev = parser.next(in);
      if (ev.kind == wire::FrameParser::Kind::kNeedMore) {
        want = ev.need;
        break;
      }
      if (ev.kind == wire::FrameParser::Kind::kError) return 0;  // the connection would close
      want = 0;
      if (ev.kind == wire::FrameParser::Kind::kOversized) {
        discard = ev.frame_bytes;
        continue;
      }
      uint8_t again[wire::kHeaderSize];
      wire::encode_header(ev.header, again);
      if (std::memcmp(again, in.data(), wire::kHeaderSize) != 0) __builtin_trap();
      wire::Metadata m;
      std::string message;
      const uint8_t* p = in.data() + wire::kHeaderSize;
      (void)wire::decode_meta({p, ev.header.meta_len}, &m, &message);
      for (const auto& [k, v] : m)
        if (!wire::valid_meta_key(k)) __builtin_trap();
      if (ev.header.attach_len != 0) {
        Attachment a;
        a.append_slice(rx.slice(wire::kHeaderSize + ev.header.meta_len + ev.header.body_len, ev.header.attach_len));
        if (a.size() != ev.header.attach_len) __builtin_trap();
        (void)a.to_string();
      }
      rx.consume(ev.frame_bytes);
    }
  }
  return 0;
}
