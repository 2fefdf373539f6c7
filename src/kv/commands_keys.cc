// Keyspace commands (DEL EXPIRE SCAN COPY MOVE OBJECT ...).  Replies and errors follow Redis 7.0.
#include <algorithm>
#include <climits>
#include <cmath>

#include "expiry.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

namespace {

std::string invalid_expire(std::string_view cmd) { return "ERR invalid expire time in '" + std::string(cmd) + "' command"; }

// --- keys -------------------------------------------------------------------------------------

void del_cmd(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t j = 1; j < ctx.argc(); ++j) {
    Entry* e = lookup_write(ctx, ctx.arg(j));
    if (e == nullptr) continue;
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(j));
    ++n;
  }
  ctx.dirty += static_cast<uint64_t>(n);
  ctx.reply.integer(n);
}

void exists_cmd(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t j = 1; j < ctx.argc(); ++j)
    if (lookup_read_notouch(ctx, ctx.arg(j)) != nullptr) ++n;
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
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
    return ctx.reply.integer(1);
  }
  // Only the AOF loader gets here with a time in the past; a negative one would read as
  // "persistent" (-1): it is in the past all the same.
  when = std::max<int64_t>(when, 0);
  ctx.db->set_expire(e, when);
  char buf[24];
  const size_t n = ll2string(buf, when);
  ctx.propagate_as({"PEXPIREAT", ctx.arg(1), ctx.own(std::string(buf, n))});
  ctx.notify(kNotifyGeneric, "expire", ctx.arg(1));
  ctx.reply.integer(1);
}
void expire_cmd(CommandContext& ctx) { expire_generic(ctx, ctx.now_ms(), true); }
void pexpire_cmd(CommandContext& ctx) { expire_generic(ctx, ctx.now_ms(), false); }
void expireat_cmd(CommandContext& ctx) { expire_generic(ctx, 0, true); }
void pexpireat_cmd(CommandContext& ctx) { expire_generic(ctx, 0, false); }

void ttl_generic(CommandContext& ctx, bool ms, bool absolute) {
  Entry* e = lookup_read_notouch(ctx, ctx.arg(1));
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
  ctx.notify(kNotifyGeneric, "persist", ctx.arg(1));
  ctx.reply.integer(1);
}

void type_cmd(CommandContext& ctx) {
  Entry* e = lookup_read_notouch(ctx, ctx.arg(1));
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
  ctx.server.signal_flush(ctx.db->index());
  ctx.dirty += ctx.db->size() + 1;
  ctx.db->clear();
  ctx.reply.ok();
}

void flushall_cmd(CommandContext& ctx) {
  if (!flush_mode_ok(ctx)) return;
  ctx.server.signal_flush(-1);
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
  move_entry(*ctx.db, s, *ctx.db, dst);
  ctx.dirty += 2;
  ctx.notify(kNotifyNew, "new", dst);
  ctx.notify(kNotifyGeneric, "rename_from", src);
  ctx.notify(kNotifyGeneric, "rename_to", dst);
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


// A key as OBJECT and TYPE-less inspection see it: no access-time update, no stats.
Entry* peek(CommandContext& ctx, std::string_view key) {
  Entry* e = ctx.db->find(key);
  if (e != nullptr && e->expire_ms >= 0 && e->expire_ms < ctx.now_ms() && !ctx.server.loading()) {
    ctx.server.expire_entry(*ctx.db, e);
    return nullptr;
  }
  return e;
}

bool get_db_index(CommandContext& ctx, std::string_view s, int* out) {
  int64_t id;
  if (!string2ll(s, &id)) {
    ctx.error(kNotInteger);
    return false;
  }
  if (id < 0 || id >= ctx.server.num_dbs()) {
    ctx.error("ERR DB index is out of range");
    return false;
  }
  *out = static_cast<int>(id);
  return true;
}

void move_cmd(CommandContext& ctx) {
  int to;
  if (!get_db_index(ctx, ctx.arg(2), &to)) return;
  if (to == ctx.db->index()) return ctx.error("ERR source and destination objects are the same");
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  Database& dst = ctx.server.db(to);
  if (ctx.server.lookup(dst, ctx.arg(1)) != nullptr) return ctx.reply.integer(0);
  move_entry(*ctx.db, e, dst, ctx.arg(1));
  ctx.touched(ctx.arg(1), to);
  ctx.notify(kNotifyNew, "new", ctx.arg(1), to);
  ctx.notify(kNotifyGeneric, "move_from", ctx.arg(1));
  ctx.notify(kNotifyGeneric, "move_to", ctx.arg(1), to);
  ++ctx.dirty;
  ctx.reply.integer(1);
}

void copy_cmd(CommandContext& ctx) {
  int to = ctx.db->index();
  bool replace = false;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "replace")) {
      replace = true;
    } else if (eq_nocase(ctx.arg(j), "db") && j + 1 < ctx.argc()) {
      if (!get_db_index(ctx, ctx.arg(++j), &to)) return;
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  const std::string_view src = ctx.arg(1), dst = ctx.arg(2);
  if (src == dst && to == ctx.db->index()) return ctx.error("ERR source and destination objects are the same");
  Entry* e = lookup_write(ctx, src);
  if (e == nullptr) return ctx.reply.integer(0);
  Database& ddb = ctx.server.db(to);
  Entry* d = ctx.server.lookup(ddb, dst);
  if (d != nullptr) {
    if (!replace) return ctx.reply.integer(0);
    ddb.remove(d);
  }
  d = ddb.add(dst);
  copy_value(e, d);
  if (e->expire_ms >= 0) ddb.set_expire(d, e->expire_ms);
  ctx.touched(dst, to);
  ctx.notify(kNotifyNew, "new", dst, to);
  ctx.notify(kNotifyGeneric, "copy_to", dst, to);
  ++ctx.dirty;
  ctx.reply.integer(1);
}

void touch_cmd(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t j = 1; j < ctx.argc(); ++j)
    if (ctx.server.lookup(*ctx.db, ctx.arg(j)) != nullptr) ++n;
  ctx.reply.integer(n);
}

void swapdb_cmd(CommandContext& ctx) {
  int a, b;
  int64_t x, y;
  if (!string2ll(ctx.arg(1), &x)) return ctx.error("ERR invalid first DB index");
  if (!string2ll(ctx.arg(2), &y)) return ctx.error("ERR invalid second DB index");
  if (x < 0 || x >= ctx.server.num_dbs() || y < 0 || y >= ctx.server.num_dbs())
    return ctx.error("ERR DB index is out of range");
  a = static_cast<int>(x);
  b = static_cast<int>(y);
  if (a != b) {
    ctx.server.signal_flush(a, b);
    ctx.server.signal_flush(b, a);
    ctx.server.db(a).swap_contents(ctx.server.db(b));
    ctx.server.swapped_dbs(a, b);
  }
  ++ctx.dirty;
  ctx.reply.ok();
}

// OBJECT ENCODING names what conduit-kv really uses (docs/KV.md): strings are byte strings
// ("raw"), lists double-ended queues ("deque"), hashes and sets hash tables ("hashtable"),
// sorted sets a hash table plus an ordered tree ("rbtree"), streams a vector ("vector").
std::string_view encoding_name(const Entry* e) {
  switch (e->type) {
    case Type::kString: return "raw";
    case Type::kList: return "deque";
    case Type::kHash:
    case Type::kSet: return "hashtable";
    case Type::kZSet: return "rbtree";
    case Type::kStream: return "vector";
  }
  return "raw";
}

void object_encoding_cmd(CommandContext& ctx) {
  Entry* e = peek(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.reply.null();
  ctx.reply.bulk(encoding_name(e));
}

void object_refcount_cmd(CommandContext& ctx) {
  Entry* e = peek(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.reply.null();
  ctx.reply.integer(1);  // values are never shared between keys
}

void object_idletime_cmd(CommandContext& ctx) {
  Entry* e = peek(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.reply.null();
  if (ctx.server.lfu_policy())
    return ctx.error(
        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between "
        "policies at runtime LRU and LFU data will take some time to adjust.");
  ctx.reply.integer(ctx.server.idle_seconds(e));
}

void object_freq_cmd(CommandContext& ctx) {
  Entry* e = peek(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.reply.null();
  if (!ctx.server.lfu_policy())
    return ctx.error(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching "
        "between policies at runtime LRU and LFU data will take some time to adjust.");
  ctx.reply.integer(ctx.server.lfu_counter(e));
}

void object_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "OBJECT",
             {"ENCODING <key>", "    Return the kind of internal representation used in order to store the value",
              "    associated with a <key>.", "FREQ <key>",
              "    Return the access frequency index of the <key>. The returned integer is",
              "    proportional to the logarithm of the recent access frequency of the key.", "IDLETIME <key>",
              "    Return the idle time of the <key>, that is the approximated number of", "    seconds elapsed since the last access to the key.",
              "REFCOUNT <key>", "    Return the number of references of the value associated with the specified", "    <key>."});
}

void wait_cmd(CommandContext& ctx) {
  int64_t n;
  if (!get_ll(ctx, ctx.arg(1), &n)) return;
  int64_t deadline;
  int64_t t;
  if (!get_ll(ctx, ctx.arg(2), &t, "ERR timeout is not an integer or out of range")) return;
  if (t < 0) return ctx.error("ERR timeout is negative");
  // No replicas: nothing to wait for unless some were asked for, then the whole timeout
  // (0 = forever) passes and the answer is 0, as Redis without replicas does.
  if (n <= 0 || ctx.client.in_exec || ctx.client.conn == nullptr) return ctx.reply.integer(0);
  deadline = t == 0 ? 0 : ctx.now_ms() + t;
  ctx.server.block(ctx, {}, deadline, BlockState::kZero);
}

void select_cmd(CommandContext& ctx) {
  int64_t id;
  if (!get_ll(ctx, ctx.arg(1), &id)) return;
  if (id < 0 || id >= ctx.server.num_dbs()) return ctx.error("ERR DB index is out of range");
  ctx.client.db = static_cast<int>(id);
  ctx.db = &ctx.server.db(ctx.client.db);
  ctx.reply.ok();
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kObjectSubs[] = {
    {"encoding", object_encoding_cmd, 3, kR, 2, 2, 1, "generic", "Returns the internal encoding of a Redis object.", "2.2.3"},
    {"freq", object_freq_cmd, 3, kR, 2, 2, 1, "generic", "Returns the logarithmic access frequency counter of a Redis object.", "4.0.0"},
    {"idletime", object_idletime_cmd, 3, kR, 2, 2, 1, "generic", "Returns the time since the last access to a Redis object.", "2.2.3"},
    {"refcount", object_refcount_cmd, 3, kR, 2, 2, 1, "generic", "Returns the reference count of a value of a key.", "2.2.3"},
    {"help", object_help_cmd, 2, kCmdLoading | kCmdStale, 0, 0, 0, "generic", "Returns helpful text about the different subcommands.", "6.2.0"},
};

const CommandDef kCommands[] = {
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
    {"move", move_cmd, 3, kW | kF, 1, 1, 1, "generic", "Moves a key to another database.", "1.0.0"},
    {"copy", copy_cmd, -3, kW | kM | kCmdTouchesOwnKeys, 1, 2, 1, "generic", "Copies the value of a key to a new key.", "6.2.0"},
    {"touch", touch_cmd, -2, kR | kF, 1, -1, 1, "generic", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", "3.2.1"},
    {"swapdb", swapdb_cmd, 3, kW | kF, 0, 0, 0, "server", "Swaps two Redis databases.", "4.0.0"},
    {"object", nullptr, -2, kR, 0, 0, 0, "generic", "A container for object introspection commands.", "2.2.3", kObjectSubs},
    {"wait", wait_cmd, 3, kCmdBlocking, 0, 0, 0, "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", "3.0.0"},
    {"select", select_cmd, 2, kCmdLoading | kF, 0, 0, 0, "connection", "Changes the selected database.", "1.0.0"},
};

}  // namespace

std::span<const CommandDef> key_commands() { return kCommands; }

}  // namespace conduit::kv
