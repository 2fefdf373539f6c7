// Strings and keyspace commands.  Replies and errors follow Redis 7.0.
#include <algorithm>
#include <climits>
#include <cmath>

#include "expiry.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

// --- shared helpers -------------------------------------------------------------------------

void CommandContext::propagate_as(std::initializer_list<std::string_view> args) {
  propagate_as(std::span<const std::string_view>(args.begin(), args.size()));
}

void CommandContext::propagate_as(std::span<const std::string_view> args) {
  server.prop_args_.assign(args.begin(), args.end());
  rewritten = true;
}

void CommandContext::also_propagate(std::span<const std::string_view> args) {
  server.propagate(db->index(), args);
  propagated = true;
}

std::string_view CommandContext::own(std::string s) {
  server.prop_storage_.push_back(std::move(s));  // a deque: earlier views stay valid
  return server.prop_storage_.back();
}

Entry* lookup_read(CommandContext& ctx, std::string_view key) {
  Entry* e = ctx.server.lookup(*ctx.db, key);
  if (e != nullptr)
    ++ctx.server.stats_.keyspace_hits;
  else
    ++ctx.server.stats_.keyspace_misses;
  return e;
}

Entry* lookup_write(CommandContext& ctx, std::string_view key) { return ctx.server.lookup(*ctx.db, key); }

bool check_type(CommandContext& ctx, const Entry* e, Type t) {
  if (e->type == t) return true;
  ctx.error(kWrongType);
  return false;
}

bool get_ll(CommandContext& ctx, std::string_view s, int64_t* out, std::string_view err) {
  if (string2ll(s, out)) return true;
  ctx.error(err);
  return false;
}

bool get_double(CommandContext& ctx, std::string_view s, double* out, std::string_view err) {
  if (string2d(s, out)) return true;
  ctx.error(err);
  return false;
}

bool eq_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string wrong_args(std::string_view cmd) { return "ERR wrong number of arguments for '" + std::string(cmd) + "' command"; }

void delete_entry(CommandContext& ctx, Entry* e) { ctx.db->remove(e); }

namespace {

std::string invalid_expire(std::string_view cmd) { return "ERR invalid expire time in '" + std::string(cmd) + "' command"; }

// Stores a string under key (replacing any value of any type).  keep_ttl keeps the
// key's expiry; otherwise the key becomes persistent.
Entry* store_string(CommandContext& ctx, Entry* e, std::string_view key, std::string_view value, bool keep_ttl) {
  if (e == nullptr) {
    e = ctx.db->add(key);
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

// --- strings ----------------------------------------------------------------------------------

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
  if (when >= 0) {
    if (when <= ctx.now_ms() && !ctx.server.loading()) {
      // Already expired (an absolute time in the past): the key simply goes away.
      ctx.db->remove(e);
      ctx.propagate_as({"DEL", key});
    } else {
      ctx.db->set_expire(e, when);
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
  if (e == nullptr) e = ctx.db->add(ctx.arg(1));
  e->str.assign(buf, n);
  ++ctx.dirty;
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
  if (e == nullptr) e = ctx.db->add(ctx.arg(1));
  e->str = s;
  ++ctx.dirty;
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
  if (e == nullptr) e = ctx.db->add(ctx.arg(1));
  e->str.append(ctx.arg(2));
  ++ctx.dirty;
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

// --- keys -------------------------------------------------------------------------------------

void del_cmd(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t j = 1; j < ctx.argc(); ++j) {
    Entry* e = lookup_write(ctx, ctx.arg(j));
    if (e == nullptr) continue;
    ctx.db->remove(e);
    ++n;
  }
  ctx.dirty += static_cast<uint64_t>(n);
  ctx.reply.integer(n);
}

void exists_cmd(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t j = 1; j < ctx.argc(); ++j)
    if (lookup_read(ctx, ctx.arg(j)) != nullptr) ++n;
  ctx.reply.integer(n);
}

void expire_generic(CommandContext& ctx, int64_t base_ms, bool seconds) {
  int64_t when;
  if (!get_ll(ctx, ctx.arg(2), &when)) return;
  const std::string_view name = ctx.cmd->name;
  enum { kNx = 1, kXx = 2, kGt = 4, kLt = 8 };
  unsigned f = 0;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    if (eq_nocase(o, "nx")) f |= kNx;
    else if (eq_nocase(o, "xx")) f |= kXx;
    else if (eq_nocase(o, "gt")) f |= kGt;
    else if (eq_nocase(o, "lt")) f |= kLt;
    else return ctx.error("ERR Unsupported option " + std::string(o));
  }
  if ((f & kNx) && (f & (kXx | kGt | kLt)))
    return ctx.error("ERR NX and XX, GT or LT options at the same time are not compatible");
  if ((f & kGt) && (f & kLt)) return ctx.error("ERR GT and LT options at the same time are not compatible");
  if (!expiry_ms(when, seconds ? 1000 : 1, base_ms, &when)) return ctx.error(invalid_expire(name));
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  const int64_t cur = e->expire_ms;
  if ((f & kNx) && cur >= 0) return ctx.reply.integer(0);
  if ((f & kXx) && cur < 0) return ctx.reply.integer(0);
  if ((f & kGt) && (cur < 0 || when <= cur)) return ctx.reply.integer(0);
  if ((f & kLt) && cur >= 0 && when >= cur) return ctx.reply.integer(0);
  ++ctx.dirty;
  if (when <= ctx.now_ms() && !ctx.server.loading()) {
    ctx.db->remove(e);
    ctx.propagate_as({"DEL", ctx.arg(1)});
    return ctx.reply.integer(1);
  }
  // Only the AOF loader gets here with a time in the past; a negative one would read as
  // "persistent" (-1): it is in the past all the same.
  when = std::max<int64_t>(when, 0);
  ctx.db->set_expire(e, when);
  char buf[24];
  const size_t n = ll2string(buf, when);
  ctx.propagate_as({"PEXPIREAT", ctx.arg(1), ctx.own(std::string(buf, n))});
  ctx.reply.integer(1);
}
void expire_cmd(CommandContext& ctx) { expire_generic(ctx, ctx.now_ms(), true); }
void pexpire_cmd(CommandContext& ctx) { expire_generic(ctx, ctx.now_ms(), false); }
void expireat_cmd(CommandContext& ctx) { expire_generic(ctx, 0, true); }
void pexpireat_cmd(CommandContext& ctx) { expire_generic(ctx, 0, false); }

void ttl_generic(CommandContext& ctx, bool ms, bool absolute) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(-2);
  if (e->expire_ms < 0) return ctx.reply.integer(-1);
  // Redis 7.0 rounds with (ms + 500) / 1000, which overflows for a key expiring at
  // LLONG_MAX (EXPIRETIME then answers a negative number); the result is the same for
  // every other value.
  if (absolute) return ctx.reply.integer(ms ? e->expire_ms : ms_to_seconds_rounded(e->expire_ms));
  int64_t ttl = e->expire_ms - ctx.now_ms();
  if (ttl < 0) ttl = 0;
  ctx.reply.integer(ms ? ttl : ms_to_seconds_rounded(ttl));
}
void ttl_cmd(CommandContext& ctx) { ttl_generic(ctx, false, false); }
void pttl_cmd(CommandContext& ctx) { ttl_generic(ctx, true, false); }
void expiretime_cmd(CommandContext& ctx) { ttl_generic(ctx, false, true); }
void pexpiretime_cmd(CommandContext& ctx) { ttl_generic(ctx, true, true); }

void persist_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr || e->expire_ms < 0) return ctx.reply.integer(0);
  ctx.db->persist(e);
  ++ctx.dirty;
  ctx.reply.integer(1);
}

void type_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  ctx.reply.simple(e == nullptr ? "none" : type_name(e->type));
}

void keys_cmd(CommandContext& ctx) {
  const std::string_view pattern = ctx.arg(1);
  const bool all = pattern == "*";
  std::vector<const Entry*> out;
  ctx.db->table().for_each([&](const Entry* e) {
    if (e->expire_ms >= 0 && e->expire_ms < ctx.now_ms() && !ctx.server.loading()) return;
    if (all || glob_match(pattern, e->key())) out.push_back(e);
  });
  ctx.reply.array(out.size());
  for (const Entry* e : out) ctx.reply.bulk(e->key());
}

void scan_cmd(CommandContext& ctx) {
  const std::string_view cur = ctx.arg(1);
  uint64_t cursor = 0;
  if (!string2cursor(cur, &cursor)) return ctx.error("ERR invalid cursor");
  int64_t count = 10;
  std::string_view pattern;
  bool use_pattern = false;
  std::string_view type_filter;
  for (size_t j = 2; j < ctx.argc(); j += 2) {
    const std::string_view o = ctx.arg(j);
    if (j + 1 >= ctx.argc()) return ctx.error(kSyntaxError);
    if (eq_nocase(o, "count")) {
      if (!get_ll(ctx, ctx.arg(j + 1), &count)) return;
      if (count < 1) return ctx.error(kSyntaxError);
    } else if (eq_nocase(o, "match")) {
      pattern = ctx.arg(j + 1);
      use_pattern = pattern != "*";
    } else if (eq_nocase(o, "type")) {
      type_filter = ctx.arg(j + 1);
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  std::vector<Entry*> found;
  int64_t iterations = count > INT64_MAX / 10 ? INT64_MAX : count * 10;
  do {
    cursor = ctx.db->table().scan(cursor, [&](Entry* e) { found.push_back(e); });
  } while (cursor != 0 && iterations-- > 0 && static_cast<int64_t>(found.size()) < count);
  std::vector<std::string> keys;
  keys.reserve(found.size());
  for (Entry* e : found) {
    if (use_pattern && !glob_match(pattern, e->key())) continue;
    if (!type_filter.empty() && !eq_nocase(type_filter, type_name(e->type))) continue;
    if (e->expire_ms >= 0 && e->expire_ms < ctx.now_ms() && !ctx.server.loading()) continue;
    keys.emplace_back(e->key());
  }
  // Expired keys met on the way are deleted after the walk (deleting moves slots).
  for (Entry* e : found)
    if (e->expire_ms >= 0 && e->expire_ms < ctx.now_ms() && !ctx.server.loading()) ctx.server.expire_entry(*ctx.db, e);
  ctx.reply.array(2);
  char buf[24];
  ctx.reply.bulk(std::string_view(buf, ull2string(buf, cursor)));
  ctx.reply.array(keys.size());
  for (const std::string& k : keys) ctx.reply.bulk(k);
}

void dbsize_cmd(CommandContext& ctx) { ctx.reply.integer(static_cast<int64_t>(ctx.db->size())); }

bool flush_mode_ok(CommandContext& ctx) {
  if (ctx.argc() > 2) {
    ctx.error(kSyntaxError);
    return false;
  }
  if (ctx.argc() == 2 && !eq_nocase(ctx.arg(1), "async") && !eq_nocase(ctx.arg(1), "sync")) {
    ctx.error(kSyntaxError);
    return false;
  }
  return true;
}

void flushdb_cmd(CommandContext& ctx) {
  if (!flush_mode_ok(ctx)) return;
  ctx.dirty += ctx.db->size() + 1;
  ctx.db->clear();
  ctx.reply.ok();
}

void flushall_cmd(CommandContext& ctx) {
  if (!flush_mode_ok(ctx)) return;
  for (int i = 0; i < ctx.server.num_dbs(); ++i) {
    ctx.dirty += ctx.server.db(i).size();
    ctx.server.db(i).clear();
  }
  ++ctx.dirty;
  ctx.reply.ok();
}

void rename_generic(CommandContext& ctx, bool nx) {
  const std::string_view src = ctx.arg(1), dst = ctx.arg(2);
  Entry* s = lookup_write(ctx, src);
  if (s == nullptr) return ctx.error("ERR no such key");
  if (src == dst) return nx ? ctx.reply.integer(0) : ctx.reply.ok();
  Entry* d = lookup_write(ctx, dst);
  if (d != nullptr) {
    if (nx) return ctx.reply.integer(0);
    ctx.db->remove(d);
  }
  d = ctx.db->add(dst);
  d->type = s->type;
  d->str = std::move(s->str);
  d->list = std::move(s->list);
  d->hash_v = std::move(s->hash_v);
  d->set = std::move(s->set);
  d->zset = std::move(s->zset);
  d->stream = std::move(s->stream);
  if (s->expire_ms >= 0) ctx.db->set_expire(d, s->expire_ms);
  ctx.db->remove(s);
  ctx.dirty += 2;
  nx ? ctx.reply.integer(1) : ctx.reply.ok();
}
void rename_cmd(CommandContext& ctx) { rename_generic(ctx, false); }
void renamenx_cmd(CommandContext& ctx) { rename_generic(ctx, true); }

void randomkey_cmd(CommandContext& ctx) {
  for (int tries = 0; tries < 100; ++tries) {
    Entry* e = ctx.db->random_entry(ctx.server.random64());
    if (e == nullptr) return ctx.reply.null();
    if (e->expire_ms >= 0 && e->expire_ms < ctx.now_ms() && !ctx.server.loading()) {
      ctx.server.expire_entry(*ctx.db, e);
      continue;
    }
    return ctx.reply.bulk(e->key());
  }
  ctx.reply.null();
}

void select_cmd(CommandContext& ctx) {
  int64_t id;
  if (!get_ll(ctx, ctx.arg(1), &id)) return;
  if (id < 0 || id >= ctx.server.num_dbs()) return ctx.error("ERR DB index is out of range");
  ctx.client.db = static_cast<int>(id);
  ctx.db = &ctx.server.db(ctx.client.db);
  ctx.reply.ok();
}

constexpr int64_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

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
    {"del", del_cmd, -2, kW, 1, -1, 1, "generic", "Deletes one or more keys.", "1.0.0"},
    {"unlink", del_cmd, -2, kW | kF, 1, -1, 1, "generic", "Asynchronously deletes one or more keys.", "4.0.0"},
    {"exists", exists_cmd, -2, kR | kF, 1, -1, 1, "generic", "Determines whether one or more keys exist.", "1.0.0"},
    {"expire", expire_cmd, -3, kW | kF, 1, 1, 1, "generic", "Sets the expiration time of a key in seconds.", "1.0.0"},
    {"pexpire", pexpire_cmd, -3, kW | kF, 1, 1, 1, "generic", "Sets the expiration time of a key in milliseconds.", "2.6.0"},
    {"expireat", expireat_cmd, -3, kW | kF, 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix timestamp.", "1.2.0"},
    {"pexpireat", pexpireat_cmd, -3, kW | kF, 1, 1, 1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", "2.6.0"},
    {"ttl", ttl_cmd, 2, kR | kF, 1, 1, 1, "generic", "Returns the expiration time in seconds of a key.", "1.0.0"},
    {"pttl", pttl_cmd, 2, kR | kF, 1, 1, 1, "generic", "Returns the expiration time in milliseconds of a key.", "2.6.0"},
    {"expiretime", expiretime_cmd, 2, kR | kF, 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix timestamp.", "7.0.0"},
    {"pexpiretime", pexpiretime_cmd, 2, kR | kF, 1, 1, 1, "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp.", "7.0.0"},
    {"persist", persist_cmd, 2, kW | kF, 1, 1, 1, "generic", "Removes the expiration time of a key.", "2.2.0"},
    {"type", type_cmd, 2, kR | kF, 1, 1, 1, "generic", "Determines the type of value stored at a key.", "1.0.0"},
    {"keys", keys_cmd, 2, kR, 0, 0, 0, "generic", "Returns all key names that match a pattern.", "1.0.0"},
    {"scan", scan_cmd, -2, kR, 0, 0, 0, "generic", "Iterates over the key names in the database.", "2.8.0"},
    {"dbsize", dbsize_cmd, 1, kR | kF, 0, 0, 0, "server", "Returns the number of keys in the database.", "1.0.0"},
    {"flushdb", flushdb_cmd, -1, kW, 0, 0, 0, "server", "Remove all keys from the current database.", "1.0.0"},
    {"flushall", flushall_cmd, -1, kW, 0, 0, 0, "server", "Removes all keys from all databases.", "1.0.0"},
    {"rename", rename_cmd, 3, kW, 1, 2, 1, "generic", "Renames a key and overwrites the destination.", "1.0.0"},
    {"renamenx", renamenx_cmd, 3, kW | kF, 1, 2, 1, "generic", "Renames a key only when the target key name doesn't exist.", "1.0.0"},
    {"randomkey", randomkey_cmd, 1, kR, 0, 0, 0, "generic", "Returns a random key name from the database.", "1.0.0"},
    {"select", select_cmd, 2, kCmdLoading | kF, 0, 0, 0, "connection", "Changes the selected database.", "1.0.0"},
};

}  // namespace

std::span<const CommandDef> string_key_commands() { return kCommands; }

}  // namespace conduit::kv
