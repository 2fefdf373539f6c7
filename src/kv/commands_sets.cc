// Sets: commands, replies and errors as Redis 7.0.  A collection that becomes empty is
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

void sadd_cmd(CommandContext& ctx) {
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kSet);
  if (e == nullptr) return;
  int64_t added = 0;
  for (size_t j = 2; j < ctx.argc(); ++j)
    if (e->set->members.emplace(ctx.arg(j)).second) ++added;
  ctx.dirty += static_cast<uint64_t>(added);
  if (added > 0) ctx.notify(kNotifySet, "sadd", ctx.arg(1));
  ctx.reply.integer(added);
}

void srem_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kSet)) return;
  int64_t n = 0;
  auto& m = e->set->members;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    auto it = m.find(ctx.arg(j));
    if (it == m.end()) continue;
    m.erase(it);
    ++n;
  }
  ctx.dirty += static_cast<uint64_t>(n);
  if (n > 0) ctx.notify(kNotifySet, "srem", ctx.arg(1));
  if (m.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.reply.integer(n);
}

void spop_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  const bool has_count = ctx.argc() == 3;
  int64_t count = 1;
  if (has_count && !get_positive(ctx, ctx.arg(2), &count)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return has_count ? ctx.reply.set(0) : ctx.reply.null();
  if (!check_type(ctx, e, Type::kSet)) return;
  auto& m = e->set->members;
  const size_t n = std::min<size_t>(static_cast<size_t>(count), m.size());
  if (has_count) ctx.reply.set(n);
  if (n == 0) {
    if (has_count) return;
    return ctx.reply.null();
  }
  ctx.dirty += n;
  ctx.notify(kNotifySet, "spop", ctx.arg(1));
  if (n == m.size()) {
    // The whole set: propagated as DEL, as Redis does.
    for (const std::string& v : m) ctx.reply.bulk(v);
    ctx.propagate_as({"DEL", ctx.arg(1)});
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
    return;
  }
  // Propagated as SREMs of at most kBatch members (Redis' batch size), never one command
  // with more arguments than a client may send: the AOF must load under any limits.
  constexpr size_t kBatch = 1024;
  std::vector<std::string_view> prop;
  std::vector<std::string> popped;
  prop.reserve(std::min(n, kBatch) + 2);
  popped.reserve(std::min(n, kBatch));
  for (size_t i = 0; i < n; ++i) {
    auto it = random_pick(m, [&] { return ctx.server.random64(); });
    ctx.reply.bulk(*it);
    popped.push_back(std::move(m.extract(it).value()));
    if (popped.size() == kBatch || i + 1 == n) {
      prop.assign({"SREM", ctx.arg(1)});
      for (const std::string& v : popped) prop.push_back(v);
      ctx.also_propagate(prop);
      popped.clear();
    }
  }
}

void smembers_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.set(0);
  if (!check_type(ctx, e, Type::kSet)) return;
  ctx.reply.set(e->set->members.size());
  for (const auto& m : e->set->members) ctx.reply.bulk(m);
}

void scard_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kSet)) return;
  ctx.reply.integer(static_cast<int64_t>(e->set->members.size()));
}

void sismember_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kSet)) return;
  ctx.reply.integer(e->set->members.count(ctx.arg(2)) != 0 ? 1 : 0);
}

void smismember_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kSet)) return;
  ctx.reply.array(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) ctx.reply.integer(e != nullptr && e->set->members.count(ctx.arg(j)) ? 1 : 0);
}

void srandmember_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  const bool with_count = ctx.argc() == 3;
  int64_t count = 1;
  if (with_count && !get_ll(ctx, ctx.arg(2), &count)) return;
  // As Redis: -LONG_MAX .. LONG_MAX (the count is negated below).
  if (count == INT64_MIN) return ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return with_count ? ctx.reply.array(0) : ctx.reply.null();
  if (!check_type(ctx, e, Type::kSet)) return;
  auto& m = e->set->members;
  auto rng = [&] { return ctx.server.random64(); };
  if (!with_count) return ctx.reply.bulk(*random_pick(m, rng));
  if (count < 0) {
    const uint64_t n = 0 - static_cast<uint64_t>(count);
    ctx.reply.array(n);
    for (uint64_t i = 0; i < n && !ctx.reply.failed(); ++i) ctx.reply.bulk(*random_pick(m, rng));
    return;
  }
  const size_t n = std::min<size_t>(static_cast<size_t>(count), m.size());
  ctx.reply.array(n);
  if (n == m.size()) {
    for (const auto& v : m) ctx.reply.bulk(v);
    return;
  }
  std::unordered_set<std::string_view> picked;
  while (picked.size() < n) {
    auto it = random_pick(m, rng);
    if (picked.insert(*it).second) ctx.reply.bulk(*it);
  }
}

void smove_cmd(CommandContext& ctx) {
  Entry* s = lookup_write(ctx, ctx.arg(1));
  Entry* d = lookup_write(ctx, ctx.arg(2));
  if (s != nullptr && !check_type(ctx, s, Type::kSet)) return;
  if (d != nullptr && !check_type(ctx, d, Type::kSet)) return;
  if (s == nullptr) return ctx.reply.integer(0);
  const std::string_view member = ctx.arg(3);
  if (s == d) return ctx.reply.integer(s->set->members.count(member) ? 1 : 0);
  auto it = s->set->members.find(member);
  if (it == s->set->members.end()) return ctx.reply.integer(0);
  s->set->members.erase(it);
  ctx.notify(kNotifySet, "srem", ctx.arg(1));
  if (s->set->members.empty()) {
    ctx.db->remove(s);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.touched(ctx.arg(1));
  if (d == nullptr) d = create_typed(ctx, ctx.arg(2), Type::kSet);
  // A member dst already holds leaves dst unchanged: its WATCHers are not failed (Redis).
  if (d->set->members.emplace(member).second) {
    ctx.touched(ctx.arg(2));
    ctx.notify(kNotifySet, "sadd", ctx.arg(2));
  }
  ++ctx.dirty;
  ctx.reply.integer(1);
}

// The sets named by keys (null for a missing key); false after WRONGTYPE.
bool load_sets(CommandContext& ctx, std::span<const std::string_view> keys, std::vector<const StrSet*>* out) {
  for (std::string_view k : keys) {
    Entry* e = lookup_read(ctx, k);
    if (e != nullptr && !check_type(ctx, e, Type::kSet)) return false;
    out->push_back(e != nullptr ? &e->set->members : nullptr);
  }
  return true;
}

enum class SetOp { kInter, kUnion, kDiff };

StrSet compute(const std::vector<const StrSet*>& sets, SetOp op, size_t limit = 0) {
  StrSet r;
  if (sets.empty()) return r;
  if (op == SetOp::kUnion) {
    for (const StrSet* s : sets)
      if (s != nullptr) r.insert(s->begin(), s->end());
    return r;
  }
  if (op == SetOp::kDiff) {
    if (sets[0] == nullptr) return r;
    for (const std::string& m : *sets[0]) {
      bool keep = true;
      for (size_t i = 1; i < sets.size() && keep; ++i)
        if (sets[i] != nullptr && (sets[i] == sets[0] || sets[i]->count(m))) keep = false;
      if (keep) r.insert(m);
    }
    return r;
  }
  // Intersection: walk the smallest set.
  const StrSet* smallest = nullptr;
  for (const StrSet* s : sets) {
    if (s == nullptr) return r;
    if (smallest == nullptr || s->size() < smallest->size()) smallest = s;
  }
  for (const std::string& m : *smallest) {
    bool all = true;
    for (const StrSet* s : sets)
      if (s != smallest && !s->count(m)) {
        all = false;
        break;
      }
    if (all) {
      r.insert(m);
      if (limit > 0 && r.size() >= limit) break;
    }
  }
  return r;
}

void setop_generic(CommandContext& ctx, SetOp op, bool store) {
  const size_t first = store ? 2 : 1;
  std::vector<const StrSet*> sets;
  if (!load_sets(ctx, ctx.argv.subspan(first), &sets)) return;
  StrSet r = compute(sets, op);
  if (!store) {
    ctx.reply.set(r.size());
    for (const auto& m : r) ctx.reply.bulk(m);
    return;
  }
  Entry* d = lookup_write(ctx, ctx.arg(1));
  const bool existed = d != nullptr;
  if (existed) {
    ctx.db->remove(d);
    ++ctx.dirty;
  }
  const size_t n = r.size();
  if (n > 0) {
    d = create_typed(ctx, ctx.arg(1), Type::kSet, !existed);
    d->set->members = std::move(r);
    ++ctx.dirty;
    ctx.notify(kNotifySet, op == SetOp::kInter ? "sinterstore" : op == SetOp::kUnion ? "sunionstore" : "sdiffstore",
               ctx.arg(1));
  } else if (existed) {
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  if (ctx.dirty > 0) ctx.touched(ctx.arg(1));
  if (n == 0 && ctx.dirty > 0) ctx.propagate_as({"DEL", ctx.arg(1)});
  ctx.reply.integer(static_cast<int64_t>(n));
}
void sinter_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kInter, false); }
void sunion_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kUnion, false); }
void sdiff_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kDiff, false); }
void sinterstore_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kInter, true); }
void sunionstore_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kUnion, true); }
void sdiffstore_cmd(CommandContext& ctx) { setop_generic(ctx, SetOp::kDiff, true); }

void sintercard_cmd(CommandContext& ctx) {
  int64_t numkeys;
  if (!string2ll(ctx.arg(1), &numkeys) || numkeys <= 0) return ctx.error("ERR numkeys should be greater than 0");
  if (static_cast<uint64_t>(numkeys) > ctx.argc() - 2) return ctx.error("ERR Number of keys can't be greater than number of args");
  int64_t limit = 0;
  for (size_t j = 2 + static_cast<size_t>(numkeys); j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "limit") && j + 1 < ctx.argc()) {
      if (!string2ll(ctx.arg(++j), &limit) || limit < 0) return ctx.error("ERR LIMIT can't be negative");
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  std::vector<const StrSet*> sets;
  if (!load_sets(ctx, ctx.argv.subspan(2, static_cast<size_t>(numkeys)), &sets)) return;
  ctx.reply.integer(static_cast<int64_t>(compute(sets, SetOp::kInter, static_cast<size_t>(limit)).size()));
}

void sintercard_keys(std::span<const std::string_view> argv, std::vector<size_t>* out) {
  int64_t n;
  if (argv.size() < 2 || !string2ll(argv[1], &n) || n <= 0) return;
  for (size_t i = 0; i < static_cast<size_t>(n) && 2 + i < argv.size(); ++i) out->push_back(2 + i);
}

void sscan_cmd(CommandContext& ctx) {
  ScanArgs a;
  if (!parse_scan_args(ctx, 2, &a)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kSet)) return;
  std::vector<const std::string*> out;
  uint64_t next = 0;
  if (e != nullptr)
    next = scan_buckets(e->set->members, a.cursor, a.count, [&](const std::string& m) {
      if (!a.use_pattern || glob_match(a.pattern, m)) out.push_back(&m);
    });
  reply_scan_cursor(ctx, next);
  ctx.reply.array(out.size());
  for (const std::string* m : out) ctx.reply.bulk(*m);
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast, kT = kCmdTouchesOwnKeys;

const CommandDef kCommands[] = {
    {"sadd", sadd_cmd, -3, kW | kM | kF, 1, 1, 1, "set", "Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0"},
    {"srem", srem_cmd, -3, kW | kF, 1, 1, 1, "set", "Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0"},
    {"spop", spop_cmd, -2, kW | kF, 1, 1, 1, "set", "Returns one or more random members from a set after removing them.", "1.0.0"},
    {"smembers", smembers_cmd, 2, kR, 1, 1, 1, "set", "Returns all members of a set.", "1.0.0"},
    {"scard", scard_cmd, 2, kR | kF, 1, 1, 1, "set", "Returns the number of members in a set.", "1.0.0"},
    {"sismember", sismember_cmd, 3, kR | kF, 1, 1, 1, "set", "Determines whether a member belongs to a set.", "1.0.0"},
    {"smismember", smismember_cmd, -3, kR | kF, 1, 1, 1, "set", "Determines whether multiple members belong to a set.", "6.2.0"},
    {"srandmember", srandmember_cmd, -2, kR, 1, 1, 1, "set", "Get one or multiple random members from a set", "1.0.0"},
    {"smove", smove_cmd, 4, kW | kF | kT, 1, 2, 1, "set", "Moves a member from one set to another.", "1.0.0"},
    {"sinter", sinter_cmd, -2, kR, 1, -1, 1, "set", "Returns the intersect of multiple sets.", "1.0.0"},
    {"sunion", sunion_cmd, -2, kR, 1, -1, 1, "set", "Returns the union of multiple sets.", "1.0.0"},
    {"sdiff", sdiff_cmd, -2, kR, 1, -1, 1, "set", "Returns the difference of multiple sets.", "1.0.0"},
    {"sinterstore", sinterstore_cmd, -3, kW | kM | kT, 1, -1, 1, "set", "Stores the intersect of multiple sets in a key.", "1.0.0"},
    {"sunionstore", sunionstore_cmd, -3, kW | kM | kT, 1, -1, 1, "set", "Stores the union of multiple sets in a key.", "1.0.0"},
    {"sdiffstore", sdiffstore_cmd, -3, kW | kM | kT, 1, -1, 1, "set", "Stores the difference of multiple sets in a key.", "1.0.0"},
    {"sintercard", sintercard_cmd, -3, kR, 0, 0, 0, "set", "Returns the number of members of the intersect of multiple sets.", "7.0.0", {}, sintercard_keys},
    {"sscan", sscan_cmd, -3, kR, 1, 1, 1, "set", "Iterates over members of a set.", "2.6.0"},
};

}  // namespace

std::span<const CommandDef> set_commands() { return kCommands; }

}  // namespace conduit::kv
