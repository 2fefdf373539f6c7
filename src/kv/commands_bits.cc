// Bit commands on strings: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO, with
// Redis 7.0's bit order (bit 0 is the most significant bit of byte 0), errors and
// overflow rules.
#include <algorithm>
#include <climits>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

constexpr std::string_view kBadOffset = "ERR bit offset is not an integer or out of range";

// Redis' getBitOffsetFromArgument: "#n" multiplies by the field width when hash is allowed.
bool get_bit_offset(CommandContext& ctx, std::string_view s, uint64_t* out, bool hash, int bits) {
  bool mul = false;
  if (hash && !s.empty() && s[0] == '#') {
    mul = true;
    s.remove_prefix(1);
  }
  int64_t v;
  if (!string2ll(s, &v) || v < 0) {
    ctx.error(kBadOffset);
    return false;
  }
  if (mul) {
    if (v > INT64_MAX / bits) {
      ctx.error(kBadOffset);
      return false;
    }
    v *= bits;
  }
  if (static_cast<uint64_t>(v) >> 3 >= ctx.server.options_.limits.max_bulk_len) {
    ctx.error(kBadOffset);
    return false;
  }
  *out = static_cast<uint64_t>(v);
  return true;
}

// The string for writing, created empty if absent; null after WRONGTYPE.
Entry* string_for_write(CommandContext& ctx, std::string_view key, bool* created) {
  Entry* e = lookup_write(ctx, key);
  *created = false;
  if (e == nullptr) {
    e = add_key(ctx, key);
    *created = true;
    return e;
  }
  if (!check_type(ctx, e, Type::kString)) return nullptr;
  return e;
}

void setbit_cmd(CommandContext& ctx) {
  uint64_t offset;
  if (!get_bit_offset(ctx, ctx.arg(2), &offset, false, 0)) return;
  const std::string_view v = ctx.arg(3);
  if (v != "0" && v != "1") return ctx.error("ERR bit is not an integer or out of range");
  const bool on = v == "1";
  bool created;
  Entry* e = string_for_write(ctx, ctx.arg(1), &created);
  if (e == nullptr) return;
  const size_t byte = static_cast<size_t>(offset >> 3);
  bool grown = false;
  if (e->str.size() <= byte) {
    e->str.resize(byte + 1, '\0');
    grown = true;
  }
  const int bit = 7 - static_cast<int>(offset & 7);
  unsigned char b = static_cast<unsigned char>(e->str[byte]);
  const bool old = (b >> bit) & 1;
  b = static_cast<unsigned char>((b & ~(1u << bit)) | (static_cast<unsigned>(on) << bit));
  e->str[byte] = static_cast<char>(b);
  if (created || grown || old != on) {
    ++ctx.dirty;
    ctx.notify(kNotifyString, "setbit", ctx.arg(1));
  }
  ctx.reply.integer(old ? 1 : 0);
}

void getbit_cmd(CommandContext& ctx) {
  uint64_t offset;
  if (!get_bit_offset(ctx, ctx.arg(2), &offset, false, 0)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kString)) return;
  const size_t byte = static_cast<size_t>(offset >> 3);
  if (byte >= e->str.size()) return ctx.reply.integer(0);
  ctx.reply.integer((static_cast<unsigned char>(e->str[byte]) >> (7 - (offset & 7))) & 1);
}

// Normalises [start, end] (bytes or bits) over a string of `len` units: false when empty.
bool bit_range(int64_t* start, int64_t* end, int64_t len) {
  if (*start < 0) *start = len + *start;
  if (*end < 0) *end = len + *end;
  if (*start < 0) *start = 0;
  if (*end < 0) *end = 0;
  if (*end >= len) *end = len - 1;
  return !(*start > *end || len == 0);
}

uint64_t popcount_range(const std::string& s, uint64_t from, uint64_t to) {  // bytes [from, to]
  uint64_t n = 0;
  for (uint64_t i = from; i <= to; ++i) n += static_cast<uint64_t>(__builtin_popcount(static_cast<unsigned char>(s[i])));
  return n;
}

bool bit_at(const std::string& s, uint64_t bit) {
  return (static_cast<unsigned char>(s[bit >> 3]) >> (7 - (bit & 7))) & 1;
}

// Parses [start end [BYTE|BIT]] from argv[first]; *given false when absent.
bool parse_range_args(CommandContext& ctx, size_t first, bool end_optional, int64_t* start, int64_t* end,
                      bool* bit_mode, bool* have_start, bool* have_end) {
  *have_start = *have_end = *bit_mode = false;
  const size_t argc = ctx.argc();
  if (argc > first) {
    if (!get_ll(ctx, ctx.arg(first), start)) return false;
    *have_start = true;
  }
  if (argc > first + 1) {
    if (!get_ll(ctx, ctx.arg(first + 1), end)) return false;
    *have_end = true;
  } else if (*have_start && !end_optional) {
    ctx.error(kSyntaxError);
    return false;
  }
  if (argc > first + 2) {
    if (argc > first + 3) {
      ctx.error(kSyntaxError);
      return false;
    }
    if (eq_nocase(ctx.arg(first + 2), "bit")) *bit_mode = true;
    else if (!eq_nocase(ctx.arg(first + 2), "byte")) {
      ctx.error(kSyntaxError);
      return false;
    }
  }
  return true;
}

void bitcount_cmd(CommandContext& ctx) {
  int64_t start = 0, end = -1;
  bool bit_mode, hs, he;
  if (!parse_range_args(ctx, 2, false, &start, &end, &bit_mode, &hs, &he)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kString)) return;
  // Redis 7.0: two negative indexes with start > end are an empty range before clamping
  // (-6 -7 on a 5-byte string would clamp to 0 0 and count the first byte).
  if (hs && start < 0 && end < 0 && start > end) return ctx.reply.integer(0);
  const std::string& s = e->str;
  const int64_t len = static_cast<int64_t>(s.size()) * (bit_mode ? 8 : 1);
  if (!hs) start = 0, end = len - 1;
  if (!bit_range(&start, &end, len)) return ctx.reply.integer(0);
  if (!bit_mode) return ctx.reply.integer(static_cast<int64_t>(popcount_range(s, static_cast<uint64_t>(start), static_cast<uint64_t>(end))));
  uint64_t n = 0;
  for (int64_t b = start; b <= end; ++b) n += bit_at(s, static_cast<uint64_t>(b));
  ctx.reply.integer(static_cast<int64_t>(n));
}

void bitpos_cmd(CommandContext& ctx) {
  const std::string_view bv = ctx.arg(2);
  int64_t want;
  if (!get_ll(ctx, bv, &want)) return;
  if (want != 0 && want != 1) return ctx.error("ERR The bit argument must be 1 or 0.");
  int64_t start = 0, end = -1;
  bool bit_mode, hs, he;
  if (!parse_range_args(ctx, 3, true, &start, &end, &bit_mode, &hs, &he)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(want ? -1 : 0);
  if (!check_type(ctx, e, Type::kString)) return;
  const std::string& s = e->str;
  const int64_t len = static_cast<int64_t>(s.size()) * (bit_mode ? 8 : 1);
  if (!hs) start = 0;
  if (!he) end = len - 1;
  if (!bit_range(&start, &end, len)) return ctx.reply.integer(-1);
  const uint64_t first_bit = bit_mode ? static_cast<uint64_t>(start) : static_cast<uint64_t>(start) * 8;
  const uint64_t last_bit = bit_mode ? static_cast<uint64_t>(end) : static_cast<uint64_t>(end) * 8 + 7;
  for (uint64_t b = first_bit; b <= last_bit; ++b)
    if (bit_at(s, b) == (want == 1)) return ctx.reply.integer(static_cast<int64_t>(b));
  // Looking for a clear bit with no end given: the string is padded with zeros to the right.
  if (want == 0 && !he) return ctx.reply.integer(static_cast<int64_t>(last_bit + 1));
  ctx.reply.integer(-1);
}

void bitop_cmd(CommandContext& ctx) {
  const std::string_view op = ctx.arg(1);
  enum { kAnd, kOr, kXor, kNot } o;
  if (eq_nocase(op, "and")) o = kAnd;
  else if (eq_nocase(op, "or")) o = kOr;
  else if (eq_nocase(op, "xor")) o = kXor;
  else if (eq_nocase(op, "not")) o = kNot;
  else return ctx.error(kSyntaxError);
  if (o == kNot && ctx.argc() != 4) return ctx.error("ERR BITOP NOT must be called with a single source key.");
  std::vector<const std::string*> srcs;
  const std::string empty;
  size_t maxlen = 0;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    Entry* e = lookup_read(ctx, ctx.arg(j));
    if (e == nullptr) {
      srcs.push_back(&empty);
      continue;
    }
    if (!check_type(ctx, e, Type::kString)) return;
    srcs.push_back(&e->str);
    maxlen = std::max(maxlen, e->str.size());
  }
  std::string res(maxlen, '\0');
  for (size_t i = 0; i < maxlen; ++i) {
    auto byte = [&](size_t k) -> unsigned char { return i < srcs[k]->size() ? static_cast<unsigned char>((*srcs[k])[i]) : 0; };
    unsigned char r = byte(0);
    if (o == kNot) r = static_cast<unsigned char>(~r);
    for (size_t k = 1; k < srcs.size(); ++k) {
      if (o == kAnd) r &= byte(k);
      else if (o == kOr) r |= byte(k);
      else r ^= byte(k);
    }
    res[i] = static_cast<char>(r);
  }
  Entry* d = lookup_write(ctx, ctx.arg(2));
  ctx.touched(ctx.arg(2));
  if (maxlen == 0) {
    if (d != nullptr) {
      ctx.db->remove(d);
      ++ctx.dirty;
      ctx.notify(kNotifyGeneric, "del", ctx.arg(2));
    }
    return ctx.reply.integer(0);
  }
  if (d == nullptr) d = add_key(ctx, ctx.arg(2));
  else {
    d->clear_value();
    ctx.db->persist(d);
  }
  d->str = std::move(res);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "set", ctx.arg(2));
  ctx.reply.integer(static_cast<int64_t>(maxlen));
}

// --- BITFIELD -------------------------------------------------------------------------------

uint64_t get_unsigned_field(const std::string& s, uint64_t offset, int bits) {
  uint64_t v = 0;
  for (int i = 0; i < bits; ++i) {
    const uint64_t bit = offset + static_cast<uint64_t>(i);
    const size_t byte = static_cast<size_t>(bit >> 3);
    const unsigned bv = byte < s.size() ? (static_cast<unsigned char>(s[byte]) >> (7 - (bit & 7))) & 1 : 0;
    v = (v << 1) | bv;
  }
  return v;
}

int64_t get_signed_field(const std::string& s, uint64_t offset, int bits) {
  uint64_t v = get_unsigned_field(s, offset, bits);
  if (bits < 64 && (v & (1ull << (bits - 1)))) v |= ~0ull << bits;  // sign-extend
  return static_cast<int64_t>(v);
}

void set_field(std::string& s, uint64_t offset, int bits, uint64_t value) {
  for (int i = 0; i < bits; ++i) {
    const uint64_t bitval = (value >> (bits - 1 - i)) & 1;
    const uint64_t bit = offset + static_cast<uint64_t>(i);
    const size_t byte = static_cast<size_t>(bit >> 3);
    unsigned char b = static_cast<unsigned char>(s[byte]);
    const int sh = 7 - static_cast<int>(bit & 7);
    b = static_cast<unsigned char>((b & ~(1u << sh)) | (bitval << sh));
    s[byte] = static_cast<char>(b);
  }
}

enum class Overflow : uint8_t { kWrap, kSat, kFail };

// Redis' checkUnsignedBitfieldOverflow: returns 1/-1 on overflow/underflow with *limit the
// saturated or wrapped value, 0 when it fits.
int unsigned_overflow(uint64_t value, int64_t incr, int bits, Overflow ov, uint64_t* limit) {
  const uint64_t max = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
  const int64_t maxincr = static_cast<int64_t>(max - value);
  const int64_t minincr = static_cast<int64_t>(0 - value);
  const uint64_t wrapped = (value + static_cast<uint64_t>(incr)) & max;
  if (value > max || (incr > 0 && incr > maxincr)) {
    *limit = ov == Overflow::kSat ? max : wrapped;
    return 1;
  }
  if (incr < 0 && incr < minincr) {
    *limit = ov == Overflow::kSat ? 0 : wrapped;
    return -1;
  }
  return 0;
}

int signed_overflow(int64_t value, int64_t incr, int bits, Overflow ov, int64_t* limit) {
  const int64_t max = bits == 64 ? INT64_MAX : (1ll << (bits - 1)) - 1;
  const int64_t min = -max - 1;
  // As Redis: the differences may wrap, and are only used once value is in range.
  const int64_t maxincr = static_cast<int64_t>(static_cast<uint64_t>(max) - static_cast<uint64_t>(value));
  const int64_t minincr = static_cast<int64_t>(static_cast<uint64_t>(min) - static_cast<uint64_t>(value));
  uint64_t c = static_cast<uint64_t>(value) + static_cast<uint64_t>(incr);
  if (bits < 64) {
    const uint64_t mask = ~0ull << bits;
    c = (c & (1ull << (bits - 1))) ? (c | mask) : (c & ~mask);
  }
  const int64_t wrapped = static_cast<int64_t>(c);
  if (value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr)) {
    *limit = ov == Overflow::kSat ? max : wrapped;
    return 1;
  }
  if (value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr)) {
    *limit = ov == Overflow::kSat ? min : wrapped;
    return -1;
  }
  return 0;
}

struct FieldOp {
  enum { kGet, kSet, kIncr } op;
  bool sign;
  int bits;
  uint64_t offset;
  int64_t value;
  Overflow ov;
};

void bitfield_generic(CommandContext& ctx, bool readonly) {
  std::vector<FieldOp> ops;
  Overflow ov = Overflow::kWrap;
  bool writes = false;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    const std::string_view sub = ctx.arg(j);
    const size_t remaining = ctx.argc() - j - 1;
    FieldOp f{};
    if (eq_nocase(sub, "get") && remaining >= 2) f.op = FieldOp::kGet;
    else if (eq_nocase(sub, "set") && remaining >= 3) f.op = FieldOp::kSet;
    else if (eq_nocase(sub, "incrby") && remaining >= 3) f.op = FieldOp::kIncr;
    else if (eq_nocase(sub, "overflow") && remaining >= 1) {
      const std::string_view o = ctx.arg(++j);
      if (eq_nocase(o, "wrap")) ov = Overflow::kWrap;
      else if (eq_nocase(o, "sat")) ov = Overflow::kSat;
      else if (eq_nocase(o, "fail")) ov = Overflow::kFail;
      else return ctx.error("ERR Invalid OVERFLOW type specified");
      continue;
    } else {
      return ctx.error(kSyntaxError);
    }
    const std::string_view type = ctx.arg(j + 1);
    int64_t bits = 0;
    const bool sign = !type.empty() && (type[0] == 'i' || type[0] == 'I');
    if (type.size() < 2 || (!sign && type[0] != 'u' && type[0] != 'U') || !string2ll(type.substr(1), &bits) ||
        (sign && (bits < 1 || bits > 64)) || (!sign && (bits < 1 || bits > 63)))
      return ctx.error("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.");
    f.sign = sign;
    f.bits = static_cast<int>(bits);
    if (!get_bit_offset(ctx, ctx.arg(j + 2), &f.offset, true, f.bits)) return;
    f.ov = ov;
    if (f.op != FieldOp::kGet) {
      if (!get_ll(ctx, ctx.arg(j + 3), &f.value)) return;
      writes = true;
      j += 3;
    } else {
      j += 2;
    }
    ops.push_back(f);
  }
  if (readonly && writes) return ctx.error("ERR BITFIELD_RO only supports the GET subcommand");
  Entry* e;
  bool created = false;
  if (writes) {
    e = string_for_write(ctx, ctx.arg(1), &created);
    if (e == nullptr) return;
    uint64_t maxbit = 0;
    for (const FieldOp& f : ops)
      if (f.op != FieldOp::kGet) maxbit = std::max(maxbit, f.offset + static_cast<uint64_t>(f.bits) - 1);
    const size_t need = static_cast<size_t>(maxbit >> 3) + 1;
    if (e->str.size() < need) {
      e->str.resize(need, '\0');
      created = true;
    }
  } else {
    e = lookup_read(ctx, ctx.arg(1));
    if (e != nullptr && !check_type(ctx, e, Type::kString)) return;
  }
  // As Redis' bitfieldGeneric: one change per write that changed its field, or every write
  // when the key was created or grown (created doubles as "grown" from here on).
  static const std::string kEmpty;
  bool changed = false;  // a write that did not FAIL (Redis notifies "setbit" then)
  ctx.reply.array(ops.size());
  for (const FieldOp& f : ops) {
    const std::string& s = e != nullptr ? e->str : kEmpty;
    if (f.op == FieldOp::kGet) {
      if (f.sign) ctx.reply.integer(get_signed_field(s, f.offset, f.bits));
      else ctx.reply.integer(static_cast<int64_t>(get_unsigned_field(s, f.offset, f.bits)));
      continue;
    }
    if (f.sign) {
      const int64_t old = get_signed_field(s, f.offset, f.bits);
      int64_t nv = f.op == FieldOp::kSet ? f.value : static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(f.value));
      int64_t lim = 0;
      const int o = f.op == FieldOp::kSet ? signed_overflow(f.value, 0, f.bits, f.ov, &lim)
                                          : signed_overflow(old, f.value, f.bits, f.ov, &lim);
      if (o != 0) nv = lim;
      if (o != 0 && f.ov == Overflow::kFail) {
        ctx.reply.null();
        continue;
      }
      set_field(e->str, f.offset, f.bits, static_cast<uint64_t>(nv));
      changed = true;
      if (created || nv != old) ++ctx.dirty;
      ctx.reply.integer(f.op == FieldOp::kSet ? old : nv);
    } else {
      const uint64_t old = get_unsigned_field(s, f.offset, f.bits);
      uint64_t nv = f.op == FieldOp::kSet ? static_cast<uint64_t>(f.value) : old + static_cast<uint64_t>(f.value);
      uint64_t lim = 0;
      const int o = f.op == FieldOp::kSet ? unsigned_overflow(static_cast<uint64_t>(f.value), 0, f.bits, f.ov, &lim)
                                          : unsigned_overflow(old, f.value, f.bits, f.ov, &lim);
      if (o != 0) nv = lim;
      if (o != 0 && f.ov == Overflow::kFail) {
        ctx.reply.null();
        continue;
      }
      set_field(e->str, f.offset, f.bits, nv);
      changed = true;
      if (created || nv != old) ++ctx.dirty;
      ctx.reply.integer(static_cast<int64_t>(f.op == FieldOp::kSet ? old : nv));
    }
  }
  // A key created (or grown) by writes that all FAILed: Redis counts no change and so does
  // not propagate it; conduit-kv does, so the AOF holds what memory holds.
  if (created && ctx.dirty == 0) ctx.dirty = 1;
  if (changed) ctx.notify(kNotifyString, "setbit", ctx.arg(1));
}
void bitfield_cmd(CommandContext& ctx) { bitfield_generic(ctx, false); }
void bitfield_ro_cmd(CommandContext& ctx) { bitfield_generic(ctx, true); }

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kCommands[] = {
    {"setbit", setbit_cmd, 4, kW | kM, 1, 1, 1, "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "2.2.0"},
    {"getbit", getbit_cmd, 3, kR | kF, 1, 1, 1, "bitmap", "Returns a bit value by offset.", "2.2.0"},
    {"bitcount", bitcount_cmd, -2, kR, 1, 1, 1, "bitmap", "Counts the number of set bits (population counting) in a string.", "2.6.0"},
    {"bitpos", bitpos_cmd, -3, kR, 1, 1, 1, "bitmap", "Finds the first set (1) or clear (0) bit in a string.", "2.8.7"},
    {"bitop", bitop_cmd, -4, kW | kM | kCmdTouchesOwnKeys, 2, -1, 1, "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", "2.6.0"},
    {"bitfield", bitfield_cmd, -2, kW | kM, 1, 1, 1, "bitmap", "Performs arbitrary bitfield integer operations on strings.", "3.2.0"},
    {"bitfield_ro", bitfield_ro_cmd, -2, kR | kF, 1, 1, 1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", "6.0.0"},
};

}  // namespace

std::span<const CommandDef> bit_commands() { return kCommands; }

}  // namespace conduit::kv
