#include "wire.h"

#include <cstdio>
#include <cstring>

namespace conduit::rpc::wire {
namespace {

// Layout checks: offsets of the header fields (docs/PROTOCOL.md).
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffType = 5, kOffFlags = 6, kOffCallId = 8, kOffCode = 16,
                 kOffMeta = 20, kOffBody = 24, kOffAttach = 28, kOffArg = 32;
static_assert(kOffArg + 8 == kHeaderSize, "header is 40 bytes");
static_assert(kOffCallId % 8 == 0 && kOffArg % 8 == 0, "u64 fields are 8-byte aligned in the header");

constexpr std::string_view kTypeNames[] = {"?",      "HELLO",      "REQUEST", "RESPONSE", "MESSAGE", "HALF_CLOSE",
                                           "CANCEL", "WINDOW",     "PING",    "PONG",     "GOAWAY"};
constexpr std::string_view kMessageKey = ":message";

}  // namespace

std::string_view frame_type_name(FrameType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kTypeNames) ? kTypeNames[i] : "?";
}

bool valid_frame_type(uint8_t t) { return t >= 1 && t <= static_cast<uint8_t>(FrameType::kGoaway); }

std::string FrameHeader::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s call %llu flags 0x%x code 0x%x meta %u body %u att %u arg %llu",
                std::string(frame_type_name(type)).c_str(), static_cast<unsigned long long>(call_id), flags, code,
                meta_len, body_len, attach_len, static_cast<unsigned long long>(arg));
  return buf;
}

void encode_header(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  put_u32(out + kOffMagic, kMagic);
  out[kOffVersion] = h.version;
  out[kOffType] = static_cast<uint8_t>(h.type);
  put_u16(out + kOffFlags, h.flags);
  put_u64(out + kOffCallId, h.call_id);
  put_u32(out + kOffCode, h.code);
  put_u32(out + kOffMeta, h.meta_len);
  put_u32(out + kOffBody, h.body_len);
  put_u32(out + kOffAttach, h.attach_len);
  put_u64(out + kOffArg, h.arg);
}

Result<FrameHeader> decode_header(std::span<const uint8_t> in, const Limits& limits) {
  if (in.size() < kHeaderSize) return Status(Code::kInvalidArgument, "rpc frame header: short");
  const uint8_t* p = in.data();
  const uint32_t magic = get_u32(p + kOffMagic);
  if (magic != kMagic) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "rpc frame: bad magic 0x%08x (not a Conduit RPC peer?)", magic);
    return Status(Code::kProtocolError, buf);
  }
  FrameHeader h;
  h.version = p[kOffVersion];
  if (h.version != kVersion) {
    return Status(Code::kNotSupported, "rpc frame: peer speaks wire version " + std::to_string(h.version) +
                                           ", this side speaks version " + std::to_string(kVersion));
  }
  if (!valid_frame_type(p[kOffType]))
    return Status(Code::kProtocolError, "rpc frame: unknown type " + std::to_string(p[kOffType]));
  h.type = static_cast<FrameType>(p[kOffType]);
  h.flags = get_u16(p + kOffFlags);
  if ((h.flags & ~kFlagMask) != 0)
    return Status(Code::kProtocolError, "rpc frame: reserved flag bits set: " + std::to_string(h.flags));
  h.call_id = get_u64(p + kOffCallId);
  h.code = get_u32(p + kOffCode);
  h.meta_len = get_u32(p + kOffMeta);
  h.body_len = get_u32(p + kOffBody);
  h.attach_len = get_u32(p + kOffAttach);
  h.arg = get_u64(p + kOffArg);
  if (h.meta_len > limits.max_meta) {
    return Status(Code::kProtocolError, "rpc frame: metadata of " + std::to_string(h.meta_len) +
                                            " bytes exceeds the limit of " + std::to_string(limits.max_meta));
  }
  // Frames other than REQUEST/RESPONSE/MESSAGE carry no body or attachment.
  const bool carries = h.type == FrameType::kRequest || h.type == FrameType::kResponse || h.type == FrameType::kMessage;
  if (!carries && (h.body_len != 0 || h.attach_len != 0))
    return Status(Code::kProtocolError, "rpc frame: " + std::string(frame_type_name(h.type)) + " with a body");
  if (h.type == FrameType::kResponse || h.type == FrameType::kGoaway) {
    if (h.code > 255) return Status(Code::kProtocolError, "rpc frame: error code out of range: " + std::to_string(h.code));
  }
  return h;
}

bool valid_meta_key(std::string_view k) {
  if (k.empty() || k.size() > 255) return false;
  for (char c : k)
    if (c <= ' ' || c > '~') return false;
  return true;
}

size_t meta_size(const Metadata& m, std::string_view message) {
  size_t n = 0;
  for (const auto& [k, v] : m) n += 6 + k.size() + v.size();
  if (!message.empty()) n += 6 + kMessageKey.size() + message.size();
  return n;
}

void encode_meta(const Metadata& m, std::string_view message, uint8_t* out) {
  auto put = [&out](std::string_view k, std::string_view v) {
    put_u16(out, static_cast<uint16_t>(k.size()));
    put_u32(out + 2, static_cast<uint32_t>(v.size()));
    std::memcpy(out + 6, k.data(), k.size());
    if (!v.empty()) std::memcpy(out + 6 + k.size(), v.data(), v.size());
    out += 6 + k.size() + v.size();
  };
  for (const auto& [k, v] : m) put(k, v);
  if (!message.empty()) put(kMessageKey, message);
}

Status decode_meta(std::span<const uint8_t> in, Metadata* m, std::string* message) {
  size_t off = 0;
  while (off < in.size()) {
    if (in.size() - off < 6) return Status(Code::kProtocolError, "rpc metadata: truncated entry header");
    const size_t kl = get_u16(in.data() + off);
    const size_t vl = get_u32(in.data() + off + 2);
    off += 6;
    if (kl > in.size() - off || vl > in.size() - off - kl)
      return Status(Code::kProtocolError, "rpc metadata: entry runs past the section");
    std::string_view k(reinterpret_cast<const char*>(in.data() + off), kl);
    std::string_view v(reinterpret_cast<const char*>(in.data() + off + kl), vl);
    off += kl + vl;
    if (!valid_meta_key(k)) return Status(Code::kProtocolError, "rpc metadata: invalid key");
    if (k[0] == ':') {
      if (k != kMessageKey) return Status(Code::kProtocolError, "rpc metadata: unknown reserved key " + std::string(k));
      if (message != nullptr) message->assign(v);
      continue;
    }
    if (m != nullptr) m->emplace_back(std::string(k), std::string(v));
  }
  return Status::Ok();
}

uint32_t method_id(std::string_view full_name) {
  uint32_t h = 2166136261u;
  for (char c : full_name) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

FrameParser::Event FrameParser::next(std::span<const uint8_t> in) const {
  Event ev;
  if (in.size() < kHeaderSize) {
    ev.need = kHeaderSize;
    return ev;
  }
  auto h = decode_header(in, limits_);
  if (!h.ok()) {
    ev.kind = Kind::kError;
    ev.error = h.status();
    return ev;
  }
  ev.header = *h;
  ev.frame_bytes = kHeaderSize + h->payload();
  if (uint64_t{h->body_len} + h->attach_len > limits_.max_payload) {
    ev.kind = Kind::kOversized;
    return ev;
  }
  if (in.size() < ev.frame_bytes) {
    ev.need = ev.frame_bytes;
    return ev;
  }
  ev.kind = Kind::kFrame;
  return ev;
}

}  // namespace conduit::rpc::wire
