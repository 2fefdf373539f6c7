// Sorted sets, the commands that take members out at random or by score: ZRANDMEMBER,
// ZPOPMIN/ZPOPMAX, ZMPOP and the blocking forms BZPOPMIN/BZPOPMAX/BZMPOP.  Replies and
// errors as Redis 7.0; a sorted set that becomes empty is deleted.  The rest of the sorted
// set commands are in commands_zsets.cc.
#include <algorithm>
#include <climits>
#include <unordered_set>

#include "random_pick.h"
#include "zsets_common.h"

namespace conduit::kv {
namespace {

// --- ZRANDMEMBER ---------------------------------------------------------------------------------

void zrandmember_cmd(CommandContext& ctx) {
  if (ctx.argc() > 4 || (ctx.argc() == 4 && !eq_nocase(ctx.arg(3), "withscores"))) return ctx.error(kSyntaxError);
  const bool with_count = ctx.argc() >= 3;
  const bool withscores = ctx.argc() == 4;
  int64_t count = 1;
  if (with_count) {
    if (!get_ll(ctx, ctx.arg(2), &count)) return;
    // As Redis: -LONG_MAX .. LONG_MAX (the count is negated below).
    if (count == INT64_MIN) return ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    if (count < -INT64_MAX / 2 && withscores) return ctx.error("ERR value is out of range");
  }
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  if (e == nullptr) return with_count ? ctx.reply.array(0) : ctx.reply.null();
  auto& sc = e->zset->scores;
  auto rng = [&] { return ctx.server.random64(); };
  if (!with_count) return ctx.reply.bulk(random_pick(sc, rng)->first);
  const bool pairs = withscores && ctx.reply.resp3();
  auto emit = [&](const std::pair<const std::string, double>& kv) {
    if (pairs) ctx.reply.array(2);
    ctx.reply.bulk(kv.first);
    if (withscores) ctx.reply.dbl(kv.second);
  };
  auto header = [&](size_t k) { ctx.reply.array(withscores && !pairs ? 2 * k : k); };
  if (count < 0) {
    const size_t k = static_cast<size_t>(-count);
    header(k);
    for (size_t i = 0; i < k && !ctx.reply.failed(); ++i) emit(*random_pick(sc, rng));
    return;
  }
  const size_t k = std::min<size_t>(static_cast<size_t>(count), sc.size());
  header(k);
  if (k == sc.size()) {
    for (const auto& kv : sc) emit(kv);
    return;
  }
  std::unordered_set<std::string_view> picked;
  while (picked.size() < k) {
    auto it = random_pick(sc, rng);
    if (picked.insert(it->first).second) emit(*it);
  }
}

// --- popping: ZPOPMIN/MAX, ZMPOP, and the blocking forms ---------------------------------------

// Pops up to count from e; reply shapes: kFlat (ZPOPMIN: member, score ... or RESP3 pairs
// with a count), kKeyed (BZPOPMIN: key, member, score), kMpop (ZMPOP: key, [[m, s] ...]).
enum class PopShape { kFlat, kKeyed, kMpop };

void zpop_reply(CommandContext& ctx, Entry* e, std::string_view key, bool min, int64_t count, PopShape shape,
                bool has_count) {
  ZSetValue& z = *e->zset;
  const size_t n = std::min<size_t>(static_cast<size_t>(count), z.size());
  if (shape == PopShape::kFlat) {
    const bool pairs = ctx.reply.resp3() && has_count;
    ctx.reply.array(pairs ? n : 2 * n);
    for (size_t i = 0; i < n; ++i) {
      const ZItem item = min ? *z.order.begin() : *std::prev(z.order.end());
      if (pairs) ctx.reply.array(2);
      ctx.reply.bulk(item.second);
      ctx.reply.dbl(item.first);
      z.remove(item.second);
    }
  } else if (shape == PopShape::kKeyed) {
    const ZItem item = min ? *z.order.begin() : *std::prev(z.order.end());
    ctx.reply.array(3);
    ctx.reply.bulk(key);
    ctx.reply.bulk(item.second);
    ctx.reply.dbl(item.first);
    z.remove(item.second);
  } else {
    ctx.reply.array(2);
    ctx.reply.bulk(key);
    ctx.reply.array(n);
    for (size_t i = 0; i < n; ++i) {
      const ZItem item = min ? *z.order.begin() : *std::prev(z.order.end());
      ctx.reply.array(2);
      ctx.reply.bulk(item.second);
      ctx.reply.dbl(item.first);
      z.remove(item.second);
    }
  }
  const size_t popped = shape == PopShape::kKeyed ? 1 : n;
  ctx.dirty += popped;
  char buf[24];
  ctx.propagate_as({min ? "ZPOPMIN" : "ZPOPMAX", key, ctx.own(std::string(buf, ll2string(buf, static_cast<int64_t>(popped))))});
  if (popped > 0) ctx.notify(kNotifyZset, min ? "zpopmin" : "zpopmax", key);
  if (z.size() == 0) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", key);
  }
}

void zpop_generic(CommandContext& ctx, bool min) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  const bool has_count = ctx.argc() == 3;
  int64_t count = 1;
  if (has_count && !get_positive(ctx, ctx.arg(2), &count)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.array(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  if (count == 0) return ctx.reply.array(0);
  zpop_reply(ctx, e, ctx.arg(1), min, count, PopShape::kFlat, has_count);
}
void zpopmin_cmd(CommandContext& ctx) { zpop_generic(ctx, true); }
void zpopmax_cmd(CommandContext& ctx) { zpop_generic(ctx, false); }

void bzpop_generic(CommandContext& ctx, bool min) {
  int64_t deadline;
  if (!get_timeout(ctx, ctx.arg(ctx.argc() - 1), &deadline)) return;
  const auto keys = ctx.argv.subspan(1, ctx.argc() - 2);
  Entry* e;
  size_t which = 0;
  if (!first_of_type(ctx, keys, Type::kZSet, &e, &which)) return;
  if (e != nullptr) return zpop_reply(ctx, e, keys[which], min, 1, PopShape::kKeyed, false);
  if (!ctx.server.can_block(ctx)) return ctx.reply.null_array();
  ctx.server.block(ctx, keys, deadline, BlockState::kNullArray);
}
void bzpopmin_cmd(CommandContext& ctx) { bzpop_generic(ctx, true); }
void bzpopmax_cmd(CommandContext& ctx) { bzpop_generic(ctx, false); }

void zmpop_generic(CommandContext& ctx, size_t first, bool blocking) {
  MpopArgs a;
  if (!parse_mpop(ctx, first, blocking, "min", "max", &a)) return;
  Entry* e;
  size_t which = 0;
  if (!first_of_type(ctx, a.keys, Type::kZSet, &e, &which)) return;
  if (e != nullptr) return zpop_reply(ctx, e, a.keys[which], a.end0, a.count, PopShape::kMpop, true);
  if (!blocking || !ctx.server.can_block(ctx)) return ctx.reply.null_array();
  ctx.server.block(ctx, a.keys, a.deadline_ms, BlockState::kNullArray);
}
void zmpop_cmd(CommandContext& ctx) { zmpop_generic(ctx, 1, false); }
void bzmpop_cmd(CommandContext& ctx) { zmpop_generic(ctx, 2, true); }

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kF = kCmdFast, kB = kCmdBlocking;

const CommandDef kCommands[] = {
    {"zpopmin", zpopmin_cmd, -2, kW | kF, 1, 1, 1, "sorted_set", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0"},
    {"zpopmax", zpopmax_cmd, -2, kW | kF, 1, 1, 1, "sorted_set", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", "5.0.0"},
    {"bzpopmin", bzpopmin_cmd, -3, kW | kF | kB, 1, -2, 1, "sorted_set", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise.", "5.0.0"},
    {"bzpopmax", bzpopmax_cmd, -3, kW | kF | kB, 1, -2, 1, "sorted_set", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.", "5.0.0"},
    {"zmpop", zmpop_cmd, -4, kW, 0, 0, 0, "sorted_set", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.", "7.0.0", {}, numkeys_keys<1>},
    {"bzmpop", bzmpop_cmd, -5, kW | kB, 0, 0, 0, "sorted_set", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise.", "7.0.0", {}, numkeys_keys<2>},
    {"zrandmember", zrandmember_cmd, -2, kR, 1, 1, 1, "sorted_set", "Returns one or more random members from a sorted set.", "6.2.0"},
};

}  // namespace

std::span<const CommandDef> zset_pop_commands() { return kCommands; }

}  // namespace conduit::kv
