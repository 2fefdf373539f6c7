// Hashes: commands, replies and errors as Redis 7.0.  A collection that becomes empty is
// deleted, as in Redis.
#include <algorithm>
#include <climits>
#include <cmath>
#include <unordered_set>

#include "collection_scan.h"
#include "numbers.h"
#include "random_pick.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

void hset_cmd(CommandContext& ctx) {
  if (ctx.argc() % 2 == 1) return ctx.error(wrong_args(ctx.cmd->name));
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kHash);
  if (e == nullptr) return;
  int64_t created = 0;
  auto& f = e->hash_v->fields;
  for (size_t j = 2; j < ctx.argc(); j += 2) {
    auto it = f.find(ctx.arg(j));
    if (it == f.end()) {
      f.emplace(std::string(ctx.arg(j)), std::string(ctx.arg(j + 1)));
      ++created;
    } else {
      it->second.assign(ctx.arg(j + 1));
    }
  }
  ctx.dirty += (ctx.argc() - 2) / 2;
  ctx.notify(kNotifyHash, "hset", ctx.arg(1));
  if (ctx.cmd->name[1] == 'm')  // hmset
    ctx.reply.ok();
  else
    ctx.reply.integer(created);
}

void hsetnx_cmd(CommandContext& ctx) {
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kHash);
  if (e == nullptr) return;
  auto& f = e->hash_v->fields;
  if (f.find(ctx.arg(2)) != f.end()) return ctx.reply.integer(0);
  f.emplace(std::string(ctx.arg(2)), std::string(ctx.arg(3)));
  ++ctx.dirty;
  ctx.notify(kNotifyHash, "hset", ctx.arg(1));
  ctx.reply.integer(1);
}

Entry* hash_for_read(CommandContext& ctx, bool* failed) {
  *failed = false;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kHash)) {
    *failed = true;
    return nullptr;
  }
  return e;
}

void hget_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  if (e == nullptr) return ctx.reply.null();
  auto it = e->hash_v->fields.find(ctx.arg(2));
  if (it == e->hash_v->fields.end()) return ctx.reply.null();
  ctx.reply.bulk(it->second);
}

void hmget_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  ctx.reply.array(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) {
    if (e == nullptr) {
      ctx.reply.null();
      continue;
    }
    auto it = e->hash_v->fields.find(ctx.arg(j));
    if (it == e->hash_v->fields.end())
      ctx.reply.null();
    else
      ctx.reply.bulk(it->second);
  }
}

void hdel_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kHash)) return;
  int64_t n = 0;
  auto& f = e->hash_v->fields;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    auto it = f.find(ctx.arg(j));
    if (it == f.end()) continue;
    f.erase(it);
    ++n;
  }
  ctx.dirty += static_cast<uint64_t>(n);
  if (n > 0) ctx.notify(kNotifyHash, "hdel", ctx.arg(1));
  if (f.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.reply.integer(n);
}

void hgetall_generic(CommandContext& ctx, bool keys, bool values) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  if (e == nullptr) return keys && values ? ctx.reply.map(0) : ctx.reply.array(0);
  const auto& f = e->hash_v->fields;
  if (keys && values)
    ctx.reply.map(f.size());
  else
    ctx.reply.array(f.size());
  for (const auto& [k, v] : f) {
    if (keys) ctx.reply.bulk(k);
    if (values) ctx.reply.bulk(v);
  }
}
void hgetall_cmd(CommandContext& ctx) { hgetall_generic(ctx, true, true); }
void hkeys_cmd(CommandContext& ctx) { hgetall_generic(ctx, true, false); }
void hvals_cmd(CommandContext& ctx) { hgetall_generic(ctx, false, true); }

void hlen_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  ctx.reply.integer(e == nullptr ? 0 : static_cast<int64_t>(e->hash_v->fields.size()));
}

void hexists_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  ctx.reply.integer(e != nullptr && e->hash_v->fields.count(ctx.arg(2)) != 0 ? 1 : 0);
}

void hincrby_cmd(CommandContext& ctx) {
  int64_t by;
  if (!get_ll(ctx, ctx.arg(3), &by)) return;
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kHash);
  if (e == nullptr) return;
  auto& f = e->hash_v->fields;
  auto it = f.find(ctx.arg(2));
  int64_t v = 0;
  if (it != f.end() && !string2ll(it->second, &v)) {
    if (f.empty()) ctx.db->remove(e);
    return ctx.error("ERR hash value is not an integer");
  }
  if ((by < 0 && v < 0 && by < (LLONG_MIN - v)) || (by > 0 && v > 0 && by > (LLONG_MAX - v))) {
    if (f.empty()) ctx.db->remove(e);
    return ctx.error("ERR increment or decrement would overflow");
  }
  v += by;
  char buf[24];
  const std::string s(buf, ll2string(buf, v));
  if (it == f.end())
    f.emplace(std::string(ctx.arg(2)), s);
  else
    it->second = s;
  ++ctx.dirty;
  ctx.notify(kNotifyHash, "hincrby", ctx.arg(1));
  ctx.reply.integer(v);
}

void hincrbyfloat_cmd(CommandContext& ctx) {
  long double by;
  if (!string2ld(ctx.arg(3), &by)) return ctx.error(kNotFloat);
  if (std::isinf(by)) return ctx.error("ERR value is NaN or Infinity");  // Redis 7.0's check of the increment
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kHash);
  if (e == nullptr) return;
  auto& f = e->hash_v->fields;
  auto it = f.find(ctx.arg(2));
  long double v = 0;
  if (it != f.end() && !string2ld(it->second, &v)) {
    if (f.empty()) ctx.db->remove(e);
    return ctx.error("ERR hash value is not a float");
  }
  v += by;
  if (std::isnan(v) || std::isinf(v)) {
    if (f.empty()) ctx.db->remove(e);
    return ctx.error("ERR increment would produce NaN or Infinity");
  }
  const std::string s = ld2string_human(v);
  if (it == f.end()) f.emplace(std::string(ctx.arg(2)), s);
  else it->second = s;
  ++ctx.dirty;
  ctx.notify(kNotifyHash, "hincrbyfloat", ctx.arg(1));
  ctx.reply.bulk(s);
  // Replayed as HSET of the result, so that the AOF does not depend on float rounding.
  ctx.propagate_as({"HSET", ctx.arg(1), ctx.arg(2), ctx.own(s)});
}

void hstrlen_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  if (e == nullptr) return ctx.reply.integer(0);
  auto it = e->hash_v->fields.find(ctx.arg(2));
  ctx.reply.integer(it == e->hash_v->fields.end() ? 0 : static_cast<int64_t>(it->second.size()));
}

// HRANDFIELD key [count [WITHVALUES]]: count > 0 distinct fields, < 0 with repetitions.
void hrandfield_cmd(CommandContext& ctx) {
  if (ctx.argc() > 4 || (ctx.argc() == 4 && !eq_nocase(ctx.arg(3), "withvalues"))) return ctx.error(kSyntaxError);
  const bool with_count = ctx.argc() >= 3;
  const bool withvalues = ctx.argc() == 4;
  int64_t count = 1;
  if (with_count) {
    if (!get_ll(ctx, ctx.arg(2), &count)) return;
    // As Redis: -LONG_MAX .. LONG_MAX (the count is negated below).
    if (count == INT64_MIN) return ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    if (count < -INT64_MAX / 2 && withvalues) return ctx.error("ERR value is out of range");
  }
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  if (e == nullptr) return with_count ? ctx.reply.array(0) : ctx.reply.null();
  auto& f = e->hash_v->fields;
  auto rng = [&] { return ctx.server.random64(); };
  if (!with_count) return ctx.reply.bulk(random_pick(f, rng)->first);
  const bool pairs = withvalues && ctx.reply.resp3();
  auto emit = [&](const std::pair<const std::string, std::string>& kv) {
    if (pairs) ctx.reply.array(2);
    ctx.reply.bulk(kv.first);
    if (withvalues) ctx.reply.bulk(kv.second);
  };
  auto header = [&](size_t n) { ctx.reply.array(withvalues && !pairs ? 2 * n : n); };
  if (count < 0) {
    const size_t n = static_cast<size_t>(-count);
    header(n);
    for (size_t i = 0; i < n && !ctx.reply.failed(); ++i) emit(*random_pick(f, rng));
    return;
  }
  const size_t n = std::min<size_t>(static_cast<size_t>(count), f.size());
  header(n);
  if (n == f.size()) {
    for (const auto& kv : f) emit(kv);
    return;
  }
  // Distinct fields: sample without replacement (a set of picked names).
  std::unordered_set<std::string_view> picked;
  while (picked.size() < n) {
    auto it = random_pick(f, rng);
    if (picked.insert(it->first).second) emit(*it);
  }
}

void hscan_cmd(CommandContext& ctx) {
  ScanArgs a;
  if (!parse_scan_args(ctx, 2, &a)) return;
  bool failed;
  Entry* e = hash_for_read(ctx, &failed);
  if (failed) return;
  std::vector<const std::pair<const std::string, std::string>*> out;
  uint64_t next = 0;
  if (e != nullptr)
    next = scan_buckets(e->hash_v->fields, a.cursor, a.count, [&](const auto& kv) {
      if (!a.use_pattern || glob_match(a.pattern, kv.first)) out.push_back(&kv);
    });
  reply_scan_cursor(ctx, next);
  ctx.reply.array(out.size() * 2);
  for (const auto* kv : out) {
    ctx.reply.bulk(kv->first);
    ctx.reply.bulk(kv->second);
  }
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kCommands[] = {
    {"hset", hset_cmd, -4, kW | kM | kF, 1, 1, 1, "hash", "Creates or modifies the value of a field in a hash.", "2.0.0"},
    {"hmset", hset_cmd, -4, kW | kM | kF, 1, 1, 1, "hash", "Sets the values of multiple fields.", "2.0.0"},
    {"hsetnx", hsetnx_cmd, 4, kW | kM | kF, 1, 1, 1, "hash", "Sets the value of a field in a hash only when the field doesn't exist.", "2.0.0"},
    {"hget", hget_cmd, 3, kR | kF, 1, 1, 1, "hash", "Returns the value of a field in a hash.", "2.0.0"},
    {"hmget", hmget_cmd, -3, kR | kF, 1, 1, 1, "hash", "Returns the values of all fields in a hash.", "2.0.0"},
    {"hdel", hdel_cmd, -3, kW | kF, 1, 1, 1, "hash", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "2.0.0"},
    {"hgetall", hgetall_cmd, 2, kR, 1, 1, 1, "hash", "Returns all fields and values in a hash.", "2.0.0"},
    {"hkeys", hkeys_cmd, 2, kR, 1, 1, 1, "hash", "Returns all fields in a hash.", "2.0.0"},
    {"hvals", hvals_cmd, 2, kR, 1, 1, 1, "hash", "Returns all values in a hash.", "2.0.0"},
    {"hlen", hlen_cmd, 2, kR | kF, 1, 1, 1, "hash", "Returns the number of fields in a hash.", "2.0.0"},
    {"hexists", hexists_cmd, 3, kR | kF, 1, 1, 1, "hash", "Determines whether a field exists in a hash.", "2.0.0"},
    {"hincrby", hincrby_cmd, 4, kW | kM | kF, 1, 1, 1, "hash", "Increments the integer value of a field in a hash by a number.", "2.0.0"},
    {"hincrbyfloat", hincrbyfloat_cmd, 4, kW | kM | kF, 1, 1, 1, "hash", "Increments the floating point value of a field by a number.", "2.6.0"},
    {"hstrlen", hstrlen_cmd, 3, kR | kF, 1, 1, 1, "hash", "Returns the length of the value of a field.", "3.2.0"},
    {"hrandfield", hrandfield_cmd, -2, kR, 1, 1, 1, "hash", "Returns one or more random fields from a hash.", "6.2.0"},
    {"hscan", hscan_cmd, -3, kR, 1, 1, 1, "hash", "Iterates over fields and values of a hash.", "2.8.0"},
};

}  // namespace

std::span<const CommandDef> hash_commands() { return kCommands; }

}  // namespace conduit::kv
