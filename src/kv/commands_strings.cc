// String commands (GET SET ... LCS); the bit commands are in commands_bits.cc.  Replies
// and errors follow Redis 7.0.
#include <algorithm>
#include <climits>
#include <cmath>

#include "expiry.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

std::string invalid_expire(std::string_view cmd) { return "ERR invalid expire time in '" + std::string(cmd) + "' command"; }

// Stores a string under key (replacing any value of any type).  keep_ttl keeps the
// key's expiry; otherwise the key becomes persistent.
Entry* store_string(CommandContext& ctx, Entry* e, std::string_view key, std::string_view value, bool keep_ttl) {
  if (e == nullptr) {
    e = add_key(ctx, key);
  } else {
    if (e->type != Type::kString) e->clear_value();
    if (!keep_ttl) ctx.db->persist(e);
  }
  e->str.assign(value.data(), value.size());
  return e;
}

void reply_bulk_or_null(CommandContext& ctx, const Entry* e) {
  if (e == nullptr)
    ctx.reply.null();
  else
    ctx.reply.bulk(e->str);
}


void get_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.null();
  if (!check_type(ctx, e, Type::kString)) return;
  ctx.reply.bulk(e->str);
}

enum SetFlags : unsigned { kNX = 1, kXX = 2, kGET = 4, kKEEPTTL = 8, kEX = 16, kPX = 32, kEXAT = 64, kPXAT = 128 };

void set_cmd(CommandContext& ctx) {
  unsigned flags = 0;
  std::string_view expire_arg;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    const bool has_next = j + 1 < ctx.argc();
    if (eq_nocase(o, "nx") && !(flags & kXX)) {
      flags |= kNX;
    } else if (eq_nocase(o, "xx") && !(flags & kNX)) {
      flags |= kXX;
    } else if (eq_nocase(o, "get")) {
      flags |= kGET;
    } else if (eq_nocase(o, "keepttl") && !(flags & (kEX | kPX | kEXAT | kPXAT))) {
      flags |= kKEEPTTL;
    } else if (eq_nocase(o, "ex") && !(flags & (kKEEPTTL | kPX | kEXAT | kPXAT)) && has_next) {
      flags |= kEX;
      expire_arg = ctx.arg(++j);
    } else if (eq_nocase(o, "px") && !(flags & (kKEEPTTL | kEX | kEXAT | kPXAT)) && has_next) {
      flags |= kPX;
      expire_arg = ctx.arg(++j);
    } else if (eq_nocase(o, "exat") && !(flags & (kKEEPTTL | kEX | kPX | kPXAT)) && has_next) {
      flags |= kEXAT;
      expire_arg = ctx.arg(++j);
    } else if (eq_nocase(o, "pxat") && !(flags & (kKEEPTTL | kEX | kPX | kEXAT)) && has_next) {
      flags |= kPXAT;
      expire_arg = ctx.arg(++j);
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  int64_t when = -1;
  if (flags & (kEX | kPX | kEXAT | kPXAT)) {
    int64_t v;
    if (!get_ll(ctx, expire_arg, &v)) return;
    const bool seconds = (flags & (kEX | kEXAT)) != 0;
    if (v <= 0 || !expiry_ms(v, seconds ? 1000 : 1, (flags & (kEX | kPX)) ? ctx.now_ms() : 0, &when))
      return ctx.error(invalid_expire("set"));
  }
  const std::string_view key = ctx.arg(1);
  Entry* e = lookup_write(ctx, key);
  if (flags & kGET) {
    if (e != nullptr && e->type != Type::kString) return ctx.error(kWrongType);
    reply_bulk_or_null(ctx, e);
  }
  if (((flags & kNX) && e != nullptr) || ((flags & kXX) && e == nullptr)) {
    if (!(flags & kGET)) ctx.reply.null();
    return;
  }
  // Under GET, the old value was copied into the reply already.
  e = store_string(ctx, e, key, ctx.arg(2), (flags & kKEEPTTL) != 0);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "set", key);
  if (when >= 0) {
    if (when <= ctx.now_ms() && !ctx.server.loading()) {
      // Already expired (an absolute time in the past): the key simply goes away.
      ctx.db->remove(e);
      ctx.propagate_as({"DEL", key});
      ctx.notify(kNotifyGeneric, "del", key);
    } else {
      ctx.db->set_expire(e, when);
      ctx.notify(kNotifyGeneric, "expire", key);
      char buf[24];
      const size_t n = ll2string(buf, when);
      ctx.propagate_as({"SET", key, ctx.arg(2), "PXAT", ctx.own(std::string(buf, n))});
    }
  } else if (flags & (kGET | kNX | kXX)) {
    if (flags & kKEEPTTL)
      ctx.propagate_as({"SET", key, ctx.arg(2), "KEEPTTL"});
    else
      ctx.propagate_as({"SET", key, ctx.arg(2)});
  }
  if (!(flags & kGET)) ctx.reply.ok();
}

void setnx_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr) return ctx.reply.integer(0);
  store_string(ctx, nullptr, ctx.arg(1), ctx.arg(2), false);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "set", ctx.arg(1));
  ctx.reply.integer(1);
}

void setex_generic(CommandContext& ctx, bool seconds) {
  int64_t v;
  if (!get_ll(ctx, ctx.arg(2), &v)) return;
  const std::string_view name = seconds ? "setex" : "psetex";
  if (v <= 0 || !expiry_ms(v, seconds ? 1000 : 1, ctx.now_ms(), &v)) return ctx.error(invalid_expire(name));
  Entry* e = store_string(ctx, lookup_write(ctx, ctx.arg(1)), ctx.arg(1), ctx.arg(3), false);
  ctx.db->set_expire(e, v);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "set", ctx.arg(1));
  ctx.notify(kNotifyGeneric, "expire", ctx.arg(1));
  char buf[24];
  const size_t n = ll2string(buf, v);
  ctx.propagate_as({"SET", ctx.arg(1), ctx.arg(3), "PXAT", ctx.own(std::string(buf, n))});
  ctx.reply.ok();
}
void setex_cmd(CommandContext& ctx) { setex_generic(ctx, true); }
void psetex_cmd(CommandContext& ctx) { setex_generic(ctx, false); }

void getset_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kString)) return;
  reply_bulk_or_null(ctx, e);
  store_string(ctx, e, ctx.arg(1), ctx.arg(2), false);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "set", ctx.arg(1));
  ctx.propagate_as({"SET", ctx.arg(1), ctx.arg(2)});
}

void getdel_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.null();
  if (!check_type(ctx, e, Type::kString)) return;
  ctx.reply.bulk(e->str);
  ctx.db->remove(e);
  ++ctx.dirty;
  ctx.propagate_as({"DEL", ctx.arg(1)});
  ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
}

void mget_cmd(CommandContext& ctx) {
  ctx.reply.array(ctx.argc() - 1);
  for (size_t j = 1; j < ctx.argc(); ++j) {
    Entry* e = lookup_read(ctx, ctx.arg(j));
    if (e == nullptr || e->type != Type::kString)
      ctx.reply.null();
    else
      ctx.reply.bulk(e->str);
  }
}

void mset_cmd(CommandContext& ctx) {
  if (ctx.argc() % 2 == 0) return ctx.error(wrong_args("mset"));
  for (size_t j = 1; j < ctx.argc(); j += 2) {
    store_string(ctx, lookup_write(ctx, ctx.arg(j)), ctx.arg(j), ctx.arg(j + 1), false);
    ++ctx.dirty;
    ctx.notify(kNotifyString, "set", ctx.arg(j));
  }
  ctx.reply.ok();
}

void msetnx_cmd(CommandContext& ctx) {
  if (ctx.argc() % 2 == 0) return ctx.error(wrong_args("msetnx"));
  for (size_t j = 1; j < ctx.argc(); j += 2)
    if (lookup_write(ctx, ctx.arg(j)) != nullptr) return ctx.reply.integer(0);
  for (size_t j = 1; j < ctx.argc(); j += 2) {
    store_string(ctx, lookup_write(ctx, ctx.arg(j)), ctx.arg(j), ctx.arg(j + 1), false);
    ++ctx.dirty;
    ctx.notify(kNotifyString, "set", ctx.arg(j));
  }
  ctx.reply.integer(1);
}

void incr_generic(CommandContext& ctx, int64_t by) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  int64_t v = 0;
  if (e != nullptr) {
    if (!check_type(ctx, e, Type::kString)) return;
    if (!string2ll(e->str, &v)) return ctx.error(kNotInteger);
  }
  if ((by < 0 && v < 0 && by < (LLONG_MIN - v)) || (by > 0 && v > 0 && by > (LLONG_MAX - v)))
    return ctx.error("ERR increment or decrement would overflow");
  v += by;
  char buf[24];
  const size_t n = ll2string(buf, v);
  if (e == nullptr) e = add_key(ctx, ctx.arg(1));
  e->str.assign(buf, n);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "incrby", ctx.arg(1));
  ctx.reply.integer(v);
}
void incr_cmd(CommandContext& ctx) { incr_generic(ctx, 1); }
void decr_cmd(CommandContext& ctx) { incr_generic(ctx, -1); }
void incrby_cmd(CommandContext& ctx) {
  int64_t by;
  if (!get_ll(ctx, ctx.arg(2), &by)) return;
  incr_generic(ctx, by);
}
void decrby_cmd(CommandContext& ctx) {
  int64_t by;
  if (!get_ll(ctx, ctx.arg(2), &by)) return;
  if (by == LLONG_MIN) return ctx.error("ERR decrement would overflow");
  incr_generic(ctx, -by);
}

void incrbyfloat_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  // long double arithmetic and "%.17Lf" without trailing zeros, as Redis: 0.1 + 0.2 is
  // "0.3" (in double it would be 0.30000000000000004).
  long double v = 0, by;
  if (e != nullptr) {
    if (!check_type(ctx, e, Type::kString)) return;
    if (!string2ld(e->str, &v)) return ctx.error(kNotFloat);
  }
  if (!string2ld(ctx.arg(2), &by)) return ctx.error(kNotFloat);
  v += by;
  if (std::isnan(v) || std::isinf(v)) return ctx.error("ERR increment would produce NaN or Infinity");
  const std::string s = ld2string_human(v);
  if (e == nullptr) e = add_key(ctx, ctx.arg(1));
  e->str = s;
  ++ctx.dirty;
  ctx.notify(kNotifyString, "incrbyfloat", ctx.arg(1));
  ctx.reply.bulk(s);
  ctx.propagate_as({"SET", ctx.arg(1), ctx.own(s), "KEEPTTL"});
}

void append_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kString)) return;
  const size_t cur = e != nullptr ? e->str.size() : 0;
  // The AOF loader obeys what the file says: the limit of the moment is a client limit.
  if (!ctx.client.internal && cur + ctx.arg(2).size() > ctx.server.options_.limits.max_bulk_len)
    return ctx.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  if (e == nullptr) e = add_key(ctx, ctx.arg(1));
  e->str.append(ctx.arg(2));
  ++ctx.dirty;
  ctx.notify(kNotifyString, "append", ctx.arg(1));
  ctx.reply.integer(static_cast<int64_t>(e->str.size()));
}

void strlen_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kString)) return;
  ctx.reply.integer(static_cast<int64_t>(e->str.size()));
}

void getrange_cmd(CommandContext& ctx) {
  int64_t start, end;
  if (!get_ll(ctx, ctx.arg(2), &start) || !get_ll(ctx, ctx.arg(3), &end)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.bulk("");
  if (!check_type(ctx, e, Type::kString)) return;
  const int64_t len = static_cast<int64_t>(e->str.size());
  if (start < 0 && end < 0 && start > end) return ctx.reply.bulk("");
  if (start < 0) start += len;
  if (end < 0) end += len;
  if (start < 0) start = 0;
  if (end < 0) end = 0;
  if (end >= len) end = len - 1;
  if (start > end || len == 0) return ctx.reply.bulk("");
  ctx.reply.bulk(std::string_view(e->str).substr(static_cast<size_t>(start), static_cast<size_t>(end - start + 1)));
}


// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: propagated as PEXPIREAT, PERSIST
// or DEL (an expiry in the past), as Redis 7.0.
void getex_cmd(CommandContext& ctx) {
  enum { kNone, kEx, kPx, kExat, kPxat, kPersist } mode = kNone;
  std::string_view arg;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    const bool more = j + 1 < ctx.argc();
    if (eq_nocase(o, "persist") && mode == kNone) mode = kPersist;
    else if (eq_nocase(o, "ex") && mode == kNone && more) mode = kEx, arg = ctx.arg(++j);
    else if (eq_nocase(o, "px") && mode == kNone && more) mode = kPx, arg = ctx.arg(++j);
    else if (eq_nocase(o, "exat") && mode == kNone && more) mode = kExat, arg = ctx.arg(++j);
    else if (eq_nocase(o, "pxat") && mode == kNone && more) mode = kPxat, arg = ctx.arg(++j);
    else return ctx.error(kSyntaxError);
  }
  int64_t when = -1;
  if (mode != kNone && mode != kPersist) {
    int64_t v;
    if (!get_ll(ctx, arg, &v)) return;
    const bool seconds = mode == kEx || mode == kExat;
    if (v <= 0 || !expiry_ms(v, seconds ? 1000 : 1, (mode == kEx || mode == kPx) ? ctx.now_ms() : 0, &when))
      return ctx.error(invalid_expire("getex"));
  }
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.null();
  if (!check_type(ctx, e, Type::kString)) return;
  ctx.reply.bulk(e->str);
  if (when >= 0) {
    ++ctx.dirty;
    if (when <= ctx.now_ms() && !ctx.server.loading()) {
      ctx.db->remove(e);
      ctx.propagate_as({"DEL", ctx.arg(1)});
      ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
    } else {
      ctx.db->set_expire(e, when);
      char buf[24];
      ctx.propagate_as({"PEXPIREAT", ctx.arg(1), ctx.own(std::string(buf, ll2string(buf, when)))});
      ctx.notify(kNotifyGeneric, "expire", ctx.arg(1));
    }
  } else if (mode == kPersist && e->expire_ms >= 0) {
    ctx.db->persist(e);
    ++ctx.dirty;
    ctx.propagate_as({"PERSIST", ctx.arg(1)});
    ctx.notify(kNotifyGeneric, "persist", ctx.arg(1));
  }
}

bool string_size_ok(CommandContext& ctx, uint64_t size) {
  if (ctx.client.internal || size <= ctx.server.options_.limits.max_bulk_len) return true;
  ctx.error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
  return false;
}

void setrange_cmd(CommandContext& ctx) {
  int64_t offset;
  if (!get_ll(ctx, ctx.arg(2), &offset)) return;
  if (offset < 0) return ctx.error("ERR offset is out of range");
  const std::string_view value = ctx.arg(3);
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kString)) return;
  if (value.empty()) return ctx.reply.integer(e == nullptr ? 0 : static_cast<int64_t>(e->str.size()));
  if (!string_size_ok(ctx, static_cast<uint64_t>(offset) + value.size())) return;
  if (e == nullptr) e = add_key(ctx, ctx.arg(1));
  const size_t end = static_cast<size_t>(offset) + value.size();
  if (e->str.size() < end) e->str.resize(end, '\0');
  e->str.replace(static_cast<size_t>(offset), value.size(), value);
  ++ctx.dirty;
  ctx.notify(kNotifyString, "setrange", ctx.arg(1));
  ctx.reply.integer(static_cast<int64_t>(e->str.size()));
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: Redis 7.0's dynamic programming
// table (memory (len1+1)*(len2+1)*4 bytes, refused above proto-max-bulk-len as Redis does).
void lcs_cmd(CommandContext& ctx) {
  Entry* ea = lookup_read(ctx, ctx.arg(1));
  Entry* eb = lookup_read(ctx, ctx.arg(2));
  if ((ea != nullptr && ea->type != Type::kString) || (eb != nullptr && eb->type != Type::kString))
    return ctx.error("ERR The specified keys must contain string values");
  bool getlen = false, getidx = false, withmatchlen = false;
  int64_t minmatchlen = 0;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    if (eq_nocase(o, "idx")) getidx = true;
    else if (eq_nocase(o, "len")) getlen = true;
    else if (eq_nocase(o, "withmatchlen")) withmatchlen = true;
    else if (eq_nocase(o, "minmatchlen") && j + 1 < ctx.argc()) {
      if (!get_ll(ctx, ctx.arg(++j), &minmatchlen)) return;
      if (minmatchlen < 0) minmatchlen = 0;
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  if (getlen && getidx) return ctx.error("ERR If you want both the length and indexes, please just use IDX.");
  const std::string a = ea != nullptr ? ea->str : std::string();
  const std::string b = eb != nullptr ? eb->str : std::string();
  if (a.size() >= UINT32_MAX - 1 || b.size() >= UINT32_MAX - 1) return ctx.error("ERR String too long for LCS");
  const uint64_t alen = a.size(), blen = b.size();
  const uint64_t cells = (alen + 1) * (blen + 1);
  if (cells * sizeof(uint32_t) > ctx.server.options_.limits.max_bulk_len)
    return ctx.error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
  std::vector<uint32_t> lcs(cells, 0);
  auto L = [&](uint64_t i, uint64_t j) -> uint32_t& { return lcs[j + i * (blen + 1)]; };
  for (uint64_t i = 1; i <= alen; ++i)
    for (uint64_t j = 1; j <= blen; ++j)
      L(i, j) = a[i - 1] == b[j - 1] ? L(i - 1, j - 1) + 1 : std::max(L(i - 1, j), L(i, j - 1));
  uint32_t idx = L(alen, blen);
  const bool compute = getidx || !getlen;
  std::string result(compute ? idx : 0, '\0');
  struct Range {
    uint32_t as, ae, bs, be;
  };
  std::vector<Range> ranges;
  uint64_t arange_start = alen, arange_end = 0, brange_start = 0, brange_end = 0;
  uint64_t i = alen, j = blen;
  while (compute && i > 0 && j > 0) {
    bool emit = false;
    if (a[i - 1] == b[j - 1]) {
      result[idx - 1] = a[i - 1];
      if (arange_start == alen) {
        arange_start = arange_end = i - 1;
        brange_start = brange_end = j - 1;
      } else if (arange_start == i && brange_start == j) {
        --arange_start;
        --brange_start;
      } else {
        emit = true;
      }
      if (arange_start == 0 || brange_start == 0) emit = true;
      --idx, --i, --j;
    } else {
      if (L(i - 1, j) > L(i, j - 1)) --i;
      else --j;
      if (arange_start != alen) emit = true;
    }
    const uint64_t match_len = arange_end - arange_start + 1;
    if (emit) {
      if (minmatchlen == 0 || match_len >= static_cast<uint64_t>(minmatchlen))
        ranges.push_back({static_cast<uint32_t>(arange_start), static_cast<uint32_t>(arange_end),
                          static_cast<uint32_t>(brange_start), static_cast<uint32_t>(brange_end)});
      arange_start = alen;
    }
  }
  if (getidx) {
    ctx.reply.map(2);
    ctx.reply.bulk("matches");
    ctx.reply.array(ranges.size());
    for (const Range& r : ranges) {
      ctx.reply.array(withmatchlen ? 3 : 2);
      ctx.reply.array(2);
      ctx.reply.integer(r.as);
      ctx.reply.integer(r.ae);
      ctx.reply.array(2);
      ctx.reply.integer(r.bs);
      ctx.reply.integer(r.be);
      if (withmatchlen) ctx.reply.integer(r.ae - r.as + 1);
    }
    ctx.reply.bulk("len");
    ctx.reply.integer(L(alen, blen));
  } else if (getlen) {
    ctx.reply.integer(L(alen, blen));
  } else {
    ctx.reply.bulk(result);
  }
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kCommands[] = {
    {"get", get_cmd, 2, kR | kF, 1, 1, 1, "string", "Returns the string value of a key.", "1.0.0"},
    {"set", set_cmd, -3, kW | kM, 1, 1, 1, "string", "Sets the string value of a key, ignoring its type.", "1.0.0"},
    {"setnx", setnx_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Set the string value of a key only when the key doesn't exist.", "1.0.0"},
    {"setex", setex_cmd, 4, kW | kM, 1, 1, 1, "string", "Sets the string value and expiration time of a key.", "2.0.0"},
    {"psetex", psetex_cmd, 4, kW | kM, 1, 1, 1, "string", "Sets both string value and expiration time in milliseconds of a key.", "2.6.0"},
    {"getset", getset_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Returns the previous string value of a key after setting it to a new value.", "1.0.0"},
    {"getdel", getdel_cmd, 2, kW | kF, 1, 1, 1, "string", "Returns the string value of a key after deleting the key.", "6.2.0"},
    {"mget", mget_cmd, -2, kR | kF, 1, -1, 1, "string", "Atomically returns the string values of one or more keys.", "1.0.0"},
    {"mset", mset_cmd, -3, kW | kM, 1, -1, 2, "string", "Atomically creates or modifies the string values of one or more keys.", "1.0.1"},
    {"msetnx", msetnx_cmd, -3, kW | kM, 1, -1, 2, "string", "Atomically modifies the string values of one or more keys only when all keys don't exist.", "1.0.1"},
    {"incr", incr_cmd, 2, kW | kM | kF, 1, 1, 1, "string", "Increments the integer value of a key by one.", "1.0.0"},
    {"decr", decr_cmd, 2, kW | kM | kF, 1, 1, 1, "string", "Decrements the integer value of a key by one.", "1.0.0"},
    {"incrby", incrby_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Increments the integer value of a key by a number.", "1.0.0"},
    {"decrby", decrby_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Decrements a number from the integer value of a key.", "1.0.0"},
    {"incrbyfloat", incrbyfloat_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Increment the floating point value of a key by a number.", "2.6.0"},
    {"append", append_cmd, 3, kW | kM | kF, 1, 1, 1, "string", "Appends a string to the value of a key.", "2.0.0"},
    {"strlen", strlen_cmd, 2, kR | kF, 1, 1, 1, "string", "Returns the length of a string value.", "2.2.0"},
    {"getrange", getrange_cmd, 4, kR, 1, 1, 1, "string", "Returns a substring of the string stored at a key.", "2.4.0"},
    {"getex", getex_cmd, -2, kW | kF, 1, 1, 1, "string", "Returns the string value of a key after setting its expiration time.", "6.2.0"},
    {"setrange", setrange_cmd, 4, kW | kM, 1, 1, 1, "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "2.2.0"},
    {"substr", getrange_cmd, 4, kR, 1, 1, 1, "string", "Returns a substring from a string value.", "1.0.0"},
    {"lcs", lcs_cmd, -3, kR, 1, 2, 1, "string", "Finds the longest common substring.", "7.0.0"},
};

}  // namespace

std::span<const CommandDef> string_commands() { return kCommands; }

}  // namespace conduit::kv
