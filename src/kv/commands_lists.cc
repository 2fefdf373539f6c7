// Lists: commands, replies and errors as Redis 7.0.  A collection that becomes empty is
// deleted, as in Redis.
#include <algorithm>
#include <climits>
#include <cmath>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

void push_generic(CommandContext& ctx, bool left, bool only_existing) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) {
    if (only_existing) return ctx.reply.integer(0);
    e = create_typed(ctx, ctx.arg(1), Type::kList);
  } else if (!check_type(ctx, e, Type::kList)) {
    return;
  }
  auto& items = e->list->items;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    if (left)
      items.emplace_front(ctx.arg(j));
    else
      items.emplace_back(ctx.arg(j));
  }
  ctx.dirty += ctx.argc() - 2;
  ctx.notify(kNotifyList, left ? "lpush" : "rpush", ctx.arg(1));
  ctx.reply.integer(static_cast<int64_t>(items.size()));
}
void lpush_cmd(CommandContext& ctx) { push_generic(ctx, true, false); }
void rpush_cmd(CommandContext& ctx) { push_generic(ctx, false, false); }
void lpushx_cmd(CommandContext& ctx) { push_generic(ctx, true, true); }
void rpushx_cmd(CommandContext& ctx) { push_generic(ctx, false, true); }

void pop_generic(CommandContext& ctx, bool left) {
  if (ctx.argc() > 3) return ctx.error(wrong_args(ctx.cmd->name));
  const bool has_count = ctx.argc() == 3;
  int64_t count = 1;
  if (has_count && !get_positive(ctx, ctx.arg(2), &count)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return has_count ? ctx.reply.null_array() : ctx.reply.null();
  if (!check_type(ctx, e, Type::kList)) return;
  auto& items = e->list->items;
  if (has_count && count == 0) return ctx.reply.array(0);
  const size_t n = std::min<size_t>(static_cast<size_t>(count), items.size());
  if (has_count) ctx.reply.array(n);
  for (size_t i = 0; i < n; ++i) {
    if (left) {
      ctx.reply.bulk(items.front());
      items.pop_front();
    } else {
      ctx.reply.bulk(items.back());
      items.pop_back();
    }
  }
  ctx.dirty += n;
  ctx.notify(kNotifyList, left ? "lpop" : "rpop", ctx.arg(1));
  if (items.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
}
void lpop_cmd(CommandContext& ctx) { pop_generic(ctx, true); }
void rpop_cmd(CommandContext& ctx) { pop_generic(ctx, false); }

void lrange_cmd(CommandContext& ctx) {
  int64_t start, end;
  if (!get_ll(ctx, ctx.arg(2), &start) || !get_ll(ctx, ctx.arg(3), &end)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.array(0);
  if (!check_type(ctx, e, Type::kList)) return;
  const auto& items = e->list->items;
  if (!normalize_range(&start, &end, static_cast<int64_t>(items.size()))) return ctx.reply.array(0);
  ctx.reply.array(static_cast<size_t>(end - start + 1));
  auto it = items.begin() + start;
  for (int64_t i = start; i <= end; ++i, ++it) ctx.reply.bulk(*it);
}

void llen_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kList)) return;
  ctx.reply.integer(static_cast<int64_t>(e->list->items.size()));
}

void lindex_cmd(CommandContext& ctx) {
  int64_t idx;
  if (!get_ll(ctx, ctx.arg(2), &idx)) return;
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.null();
  if (!check_type(ctx, e, Type::kList)) return;
  const auto& items = e->list->items;
  if (idx < 0) idx += static_cast<int64_t>(items.size());
  if (idx < 0 || idx >= static_cast<int64_t>(items.size())) return ctx.reply.null();
  ctx.reply.bulk(items[static_cast<size_t>(idx)]);
}

void ltrim_cmd(CommandContext& ctx) {
  int64_t start, end;
  if (!get_ll(ctx, ctx.arg(2), &start) || !get_ll(ctx, ctx.arg(3), &end)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.ok();
  if (!check_type(ctx, e, Type::kList)) return;
  auto& items = e->list->items;
  const int64_t len = static_cast<int64_t>(items.size());
  if (!normalize_range(&start, &end, len)) {
    items.clear();
  } else {
    items.erase(items.begin() + end + 1, items.end());
    items.erase(items.begin(), items.begin() + start);
  }
  ++ctx.dirty;
  ctx.notify(kNotifyList, "ltrim", ctx.arg(1));
  if (items.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.reply.ok();
}

// --- LPOS LSET LINSERT LREM --------------------------------------------------------------------

void lpos_cmd(CommandContext& ctx) {
  int64_t rank = 1, count = -1, maxlen = 0;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    if (j + 1 >= ctx.argc()) return ctx.error(kSyntaxError);
    if (eq_nocase(o, "rank")) {
      if (!get_ll(ctx, ctx.arg(++j), &rank)) return;
      if (rank == 0)
        return ctx.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use "
                         "negative to start from the end of the list");
      if (rank == INT64_MIN) return ctx.error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    } else if (eq_nocase(o, "count")) {
      if (!get_ll(ctx, ctx.arg(++j), &count)) return;
      if (count < 0) return ctx.error("ERR COUNT can't be negative");
    } else if (eq_nocase(o, "maxlen")) {
      if (!get_ll(ctx, ctx.arg(++j), &maxlen)) return;
      if (maxlen < 0) return ctx.error("ERR MAXLEN can't be negative");
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kList)) return;
  std::vector<int64_t> found;
  if (e != nullptr) {
    const auto& items = e->list->items;
    const int64_t len = static_cast<int64_t>(items.size());
    const std::string_view want = ctx.arg(2);
    int64_t matches = 0, scanned = 0;
    const int64_t wanted = count == 0 ? INT64_MAX : (count < 0 ? 1 : count);
    for (int64_t k = 0; k < len && (maxlen == 0 || scanned < maxlen); ++k, ++scanned) {
      const int64_t i = rank > 0 ? k : len - 1 - k;
      if (items[static_cast<size_t>(i)] != want) continue;
      if (++matches < (rank > 0 ? rank : -rank)) continue;
      found.push_back(i);
      if (static_cast<int64_t>(found.size()) >= wanted) break;
    }
  }
  if (count < 0) return found.empty() ? ctx.reply.null() : ctx.reply.integer(found[0]);
  ctx.reply.array(found.size());
  for (int64_t i : found) ctx.reply.integer(i);
}

void lset_cmd(CommandContext& ctx) {
  int64_t idx;
  if (!get_ll(ctx, ctx.arg(2), &idx)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.error("ERR no such key");
  if (!check_type(ctx, e, Type::kList)) return;
  auto& items = e->list->items;
  if (idx < 0) idx += static_cast<int64_t>(items.size());
  if (idx < 0 || idx >= static_cast<int64_t>(items.size())) return ctx.error("ERR index out of range");
  items[static_cast<size_t>(idx)].assign(ctx.arg(3));
  ++ctx.dirty;
  ctx.notify(kNotifyList, "lset", ctx.arg(1));
  ctx.reply.ok();
}

void linsert_cmd(CommandContext& ctx) {
  bool after;
  if (eq_nocase(ctx.arg(2), "after")) after = true;
  else if (eq_nocase(ctx.arg(2), "before")) after = false;
  else return ctx.error(kSyntaxError);
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kList)) return;
  auto& items = e->list->items;
  auto it = std::find(items.begin(), items.end(), ctx.arg(3));
  if (it == items.end()) return ctx.reply.integer(-1);
  if (after) ++it;
  items.emplace(it, ctx.arg(4));
  ++ctx.dirty;
  ctx.notify(kNotifyList, "linsert", ctx.arg(1));
  ctx.reply.integer(static_cast<int64_t>(items.size()));
}

void lrem_cmd(CommandContext& ctx) {
  int64_t count;
  if (!get_ll(ctx, ctx.arg(2), &count)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kList)) return;
  auto& items = e->list->items;
  const std::string_view v = ctx.arg(3);
  int64_t removed = 0;
  const int64_t limit = count == 0 ? INT64_MAX : (count > 0 ? count : -count);
  if (count >= 0) {
    for (auto it = items.begin(); it != items.end() && removed < limit;) {
      if (*it == v) {
        it = items.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
  } else {
    for (size_t i = items.size(); i-- > 0 && removed < limit;) {
      if (items[i] == v) {
        items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
        ++removed;
      }
    }
  }
  ctx.dirty += static_cast<uint64_t>(removed);
  if (removed > 0) ctx.notify(kNotifyList, "lrem", ctx.arg(1));
  if (items.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.reply.integer(removed);
}

// --- moving and popping from several lists (and their blocking forms) ---------------------------

bool parse_where(std::string_view s, bool* left) {
  if (eq_nocase(s, "left")) *left = true;
  else if (eq_nocase(s, "right")) *left = false;
  else return false;
  return true;
}

// Moves one element from src (left/right) to dst (left/right).  Replies the element, or
// null when src is absent (*empty set).  WRONGTYPE on either key, before anything moves.
void lmove_generic(CommandContext& ctx, std::string_view src, std::string_view dst, bool from_left, bool to_left,
                   bool* empty) {
  *empty = false;
  Entry* s = lookup_write(ctx, src);
  if (s != nullptr && !check_type(ctx, s, Type::kList)) return;
  if (s == nullptr) {  // as Redis: an absent source answers null before dst's type is looked at
    *empty = true;
    return;
  }
  Entry* d = lookup_write(ctx, dst);
  if (d != nullptr && !check_type(ctx, d, Type::kList)) return;
  auto& from = s->list->items;
  std::string v = from_left ? std::move(from.front()) : std::move(from.back());
  if (from_left) from.pop_front();
  else from.pop_back();
  bool src_deleted = false;
  if (src == dst) d = s;  // a rotation: never empty in between for long
  else if (from.empty()) ctx.db->remove(s), src_deleted = true;
  if (d == nullptr) d = create_typed(ctx, dst, Type::kList);
  if (to_left) d->list->items.push_front(v);
  else d->list->items.push_back(v);
  ctx.dirty += 2;
  // Redis' order: the push, then the pop, then the source's deletion.
  ctx.notify(kNotifyList, to_left ? "lpush" : "rpush", dst);
  ctx.notify(kNotifyList, from_left ? "lpop" : "rpop", src);
  if (src_deleted) ctx.notify(kNotifyGeneric, "del", src);
  ctx.reply.bulk(v);
}

void rpoplpush_cmd(CommandContext& ctx) {
  bool empty;
  lmove_generic(ctx, ctx.arg(1), ctx.arg(2), false, true, &empty);
  if (empty) ctx.reply.null();
}

void lmove_cmd(CommandContext& ctx) {
  bool from_left, to_left, empty;
  if (!parse_where(ctx.arg(3), &from_left) || !parse_where(ctx.arg(4), &to_left)) return ctx.error(kSyntaxError);
  lmove_generic(ctx, ctx.arg(1), ctx.arg(2), from_left, to_left, &empty);
  if (empty) ctx.reply.null();
}

// BRPOPLPUSH src dst timeout / BLMOVE src dst from to timeout: propagated as the
// non-blocking form when served.
void blmove_generic(CommandContext& ctx, bool from_left, bool to_left, std::string_view timeout) {
  int64_t deadline;
  if (!get_timeout(ctx, timeout, &deadline)) return;
  bool empty;
  lmove_generic(ctx, ctx.arg(1), ctx.arg(2), from_left, to_left, &empty);
  if (!empty) {
    if (ctx.dirty > 0)
      ctx.propagate_as({"LMOVE", ctx.arg(1), ctx.arg(2), from_left ? "LEFT" : "RIGHT", to_left ? "LEFT" : "RIGHT"});
    return;
  }
  if (!ctx.server.can_block(ctx)) return ctx.reply.null();
  const std::string_view keys[1] = {ctx.arg(1)};
  ctx.server.block(ctx, keys, deadline, BlockState::kNullBulk);
}
void brpoplpush_cmd(CommandContext& ctx) { blmove_generic(ctx, false, true, ctx.arg(3)); }
void blmove_cmd(CommandContext& ctx) {
  bool from_left, to_left;
  if (!parse_where(ctx.arg(3), &from_left) || !parse_where(ctx.arg(4), &to_left)) return ctx.error(kSyntaxError);
  blmove_generic(ctx, from_left, to_left, ctx.arg(5));
}

// Pops up to count elements from the list e (key), replying [key, [elements]] (mpop) or
// [key, element] (BLPOP), propagated as LPOP/RPOP key [count].
void pop_reply(CommandContext& ctx, Entry* e, std::string_view key, bool left, int64_t count, bool mpop) {
  auto& items = e->list->items;
  const size_t n = std::min<size_t>(static_cast<size_t>(count), items.size());
  ctx.reply.array(2);
  ctx.reply.bulk(key);
  if (mpop) ctx.reply.array(n);
  for (size_t i = 0; i < n; ++i) {
    ctx.reply.bulk(left ? items.front() : items.back());
    if (left) items.pop_front();
    else items.pop_back();
  }
  ctx.dirty += n;
  char buf[24];
  if (mpop)
    ctx.propagate_as({left ? "LPOP" : "RPOP", key, ctx.own(std::string(buf, ll2string(buf, static_cast<int64_t>(n))))});
  else
    ctx.propagate_as({left ? "LPOP" : "RPOP", key});
  ctx.notify(kNotifyList, left ? "lpop" : "rpop", key);
  if (items.empty()) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", key);
  }
}

void bpop_generic(CommandContext& ctx, bool left) {
  int64_t deadline;
  if (!get_timeout(ctx, ctx.arg(ctx.argc() - 1), &deadline)) return;
  const auto keys = ctx.argv.subspan(1, ctx.argc() - 2);
  Entry* e;
  size_t which = 0;
  if (!first_of_type(ctx, keys, Type::kList, &e, &which)) return;
  if (e != nullptr) return pop_reply(ctx, e, keys[which], left, 1, false);
  if (!ctx.server.can_block(ctx)) return ctx.reply.null_array();
  ctx.server.block(ctx, keys, deadline, BlockState::kNullArray);
}
void blpop_cmd(CommandContext& ctx) { bpop_generic(ctx, true); }
void brpop_cmd(CommandContext& ctx) { bpop_generic(ctx, false); }

// [B]LMPOP [timeout] numkeys key... LEFT|RIGHT [COUNT n]: argv[first] is numkeys.
void mpop_generic(CommandContext& ctx, size_t first, bool blocking) {
  MpopArgs a;
  if (!parse_mpop(ctx, first, blocking, "left", "right", &a)) return;
  Entry* e;
  size_t which = 0;
  if (!first_of_type(ctx, a.keys, Type::kList, &e, &which)) return;
  if (e != nullptr) return pop_reply(ctx, e, a.keys[which], a.end0, a.count, true);
  if (!blocking || !ctx.server.can_block(ctx)) return ctx.reply.null_array();
  ctx.server.block(ctx, a.keys, a.deadline_ms, BlockState::kNullArray);
}
void lmpop_cmd(CommandContext& ctx) { mpop_generic(ctx, 1, false); }
void blmpop_cmd(CommandContext& ctx) { mpop_generic(ctx, 2, true); }

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast, kB = kCmdBlocking;

const CommandDef kCommands[] = {
    {"lpush", lpush_cmd, -3, kW | kM | kF, 1, 1, 1, "list", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"},
    {"rpush", rpush_cmd, -3, kW | kM | kF, 1, 1, 1, "list", "Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"},
    {"lpushx", lpushx_cmd, -3, kW | kM | kF, 1, 1, 1, "list", "Prepends one or more elements to a list only when the list exists.", "2.2.0"},
    {"rpushx", rpushx_cmd, -3, kW | kM | kF, 1, 1, 1, "list", "Appends an element to a list only when the list exists.", "2.2.0"},
    {"lpop", lpop_cmd, -2, kW | kF, 1, 1, 1, "list", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0"},
    {"rpop", rpop_cmd, -2, kW | kF, 1, 1, 1, "list", "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "1.0.0"},
    {"lrange", lrange_cmd, 4, kR, 1, 1, 1, "list", "Returns a range of elements from a list.", "1.0.0"},
    {"llen", llen_cmd, 2, kR | kF, 1, 1, 1, "list", "Returns the length of a list.", "1.0.0"},
    {"lindex", lindex_cmd, 3, kR, 1, 1, 1, "list", "Returns an element from a list by its index.", "1.0.0"},
    {"ltrim", ltrim_cmd, 4, kW, 1, 1, 1, "list", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0"},
    {"lpos", lpos_cmd, -3, kR, 1, 1, 1, "list", "Returns the index of matching elements in a list.", "6.0.6"},
    {"lset", lset_cmd, 4, kW | kM, 1, 1, 1, "list", "Sets the value of an element in a list by its index.", "1.0.0"},
    {"linsert", linsert_cmd, 5, kW | kM, 1, 1, 1, "list", "Inserts an element before or after another element in a list.", "2.2.0"},
    {"lrem", lrem_cmd, 4, kW, 1, 1, 1, "list", "Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0"},
    {"rpoplpush", rpoplpush_cmd, 3, kW | kM, 1, 2, 1, "list", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "1.2.0"},
    {"lmove", lmove_cmd, 5, kW | kM, 1, 2, 1, "list", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "6.2.0"},
    {"lmpop", lmpop_cmd, -4, kW, 0, 0, 0, "list", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "7.0.0", {}, numkeys_keys<1>},
    {"blpop", blpop_cmd, -3, kW | kB, 1, -2, 1, "list", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"},
    {"brpop", brpop_cmd, -3, kW | kB, 1, -2, 1, "list", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"},
    {"brpoplpush", brpoplpush_cmd, 4, kW | kM | kB, 1, 2, 1, "list", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "2.2.0"},
    {"blmove", blmove_cmd, 6, kW | kM | kB, 1, 2, 1, "list", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "6.2.0"},
    {"blmpop", blmpop_cmd, -5, kW | kB, 0, 0, 0, "list", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "7.0.0", {}, numkeys_keys<2>},
};

}  // namespace

std::span<const CommandDef> list_commands() { return kCommands; }

}  // namespace conduit::kv
