// Lists, hashes, sets, sorted sets and a minimal stream type.  Replies and errors follow
// Redis 7.0.  A collection that becomes empty is deleted, as in Redis.
#include <algorithm>
#include <climits>
#include <cmath>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

constexpr std::string_view kMustBePositive = "ERR value is out of range, must be positive";

Entry* create_typed(CommandContext& ctx, std::string_view key, Type t) {
  Entry* e = ctx.db->add(key);
  e->type = t;
  switch (t) {
    case Type::kList: e->list = std::make_unique<ListValue>(); break;
    case Type::kHash: e->hash_v = std::make_unique<HashValue>(); break;
    case Type::kSet: e->set = std::make_unique<SetValue>(); break;
    case Type::kZSet: e->zset = std::make_unique<ZSetValue>(); break;
    case Type::kStream: e->stream = std::make_unique<StreamValue>(); break;
    case Type::kString: break;
  }
  return e;
}

// Looks a key up for writing: the entry, or a new one of type t; null (after replying
// WRONGTYPE) when the key holds another type.
Entry* get_or_create(CommandContext& ctx, std::string_view key, Type t) {
  Entry* e = lookup_write(ctx, key);
  if (e == nullptr) return create_typed(ctx, key, t);
  if (!check_type(ctx, e, t)) return nullptr;
  return e;
}

// Redis' index normalisation for LRANGE/ZRANGE: false when the range is empty.
bool normalize_range(int64_t* start, int64_t* end, int64_t len) {
  if (*start < 0) *start += len;
  if (*end < 0) *end += len;
  if (*start < 0) *start = 0;
  if (*start > *end || *start >= len) return false;
  if (*end >= len) *end = len - 1;
  return true;
}

bool get_positive(CommandContext& ctx, std::string_view s, int64_t* out) {
  if (!string2ll(s, out) || *out < 0) {
    ctx.error(kMustBePositive);
    return false;
  }
  return true;
}

// --- lists ------------------------------------------------------------------------------------

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
  if (items.empty()) ctx.db->remove(e);
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
  if (items.empty()) ctx.db->remove(e);
  ctx.reply.ok();
}

// --- hashes -----------------------------------------------------------------------------------

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
  if (f.empty()) ctx.db->remove(e);
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
  ctx.reply.integer(v);
}

// --- sets -------------------------------------------------------------------------------------

void sadd_cmd(CommandContext& ctx) {
  Entry* e = get_or_create(ctx, ctx.arg(1), Type::kSet);
  if (e == nullptr) return;
  int64_t added = 0;
  for (size_t j = 2; j < ctx.argc(); ++j)
    if (e->set->members.emplace(ctx.arg(j)).second) ++added;
  ctx.dirty += static_cast<uint64_t>(added);
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
  if (m.empty()) ctx.db->remove(e);
  ctx.reply.integer(n);
}

// A uniformly chosen bucket, then an element in it: O(1) expected at load factor <= 1.
StrSet::iterator random_member(StrSet& s, ServerImpl& server) {
  const size_t bc = s.bucket_count();
  for (;;) {
    const size_t b = server.random64() % bc;
    const size_t n = s.bucket_size(b);
    if (n == 0) continue;
    size_t k = server.random64() % n;
    auto lit = s.begin(b);
    while (k-- > 0) ++lit;
    return s.find(*lit);
  }
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
  if (n == m.size()) {
    // The whole set: propagated as DEL, as Redis does.
    for (const std::string& v : m) ctx.reply.bulk(v);
    ctx.propagate_as({"DEL", ctx.arg(1)});
    ctx.db->remove(e);
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
    auto it = random_member(m, ctx.server);
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

// --- sorted sets ------------------------------------------------------------------------------

void zadd_generic(CommandContext& ctx, bool incr_cmd) {
  enum { kNx = 1, kXx = 2, kGt = 4, kLt = 8, kCh = 16, kIncr = 32 };
  unsigned f = incr_cmd ? kIncr : 0;
  size_t j = 2;
  if (!incr_cmd) {
    for (; j < ctx.argc(); ++j) {
      const std::string_view o = ctx.arg(j);
      if (eq_nocase(o, "nx")) f |= kNx;
      else if (eq_nocase(o, "xx")) f |= kXx;
      else if (eq_nocase(o, "gt")) f |= kGt;
      else if (eq_nocase(o, "lt")) f |= kLt;
      else if (eq_nocase(o, "ch")) f |= kCh;
      else if (eq_nocase(o, "incr")) f |= kIncr;
      else break;
    }
  }
  const size_t elements = ctx.argc() - j;
  if (elements == 0 || elements % 2 != 0) return ctx.error(kSyntaxError);
  if ((f & kNx) && (f & kXx)) return ctx.error("ERR XX and NX options at the same time are not compatible");
  if (((f & kGt) && (f & kNx)) || ((f & kLt) && (f & kNx)) || ((f & kGt) && (f & kLt)))
    return ctx.error("ERR GT, LT, and/or NX options at the same time are not compatible");
  if ((f & kIncr) && elements > 2) return ctx.error("ERR INCR option supports a single increment-element pair");
  std::vector<double> scores(elements / 2);
  for (size_t i = 0; i < scores.size(); ++i)
    if (!get_double(ctx, ctx.arg(j + 2 * i), &scores[i])) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) {
    if (f & kXx) return (f & kIncr) ? ctx.reply.null() : ctx.reply.integer(0);
    e = create_typed(ctx, ctx.arg(1), Type::kZSet);
  } else if (!check_type(ctx, e, Type::kZSet)) {
    return;
  }
  ZSetValue& z = *e->zset;
  int64_t added = 0, changed = 0;
  double last = 0;
  bool aborted = false;
  for (size_t i = 0; i < scores.size(); ++i) {
    const std::string_view member = ctx.arg(j + 2 * i + 1);
    double score = scores[i];
    auto it = z.scores.find(member);
    if (it != z.scores.end()) {
      if (f & kNx) {
        aborted = true;
        continue;
      }
      const double cur = it->second;
      if (f & kIncr) {
        score += cur;
        if (std::isnan(score)) {
          if (z.size() == 0) ctx.db->remove(e);
          return ctx.error("ERR resulting score is not a number (NaN)");
        }
      }
      if (((f & kLt) && score >= cur) || ((f & kGt) && score <= cur)) {
        aborted = true;
        continue;
      }
      last = score;
      if (score != cur) {
        z.add(member, score);
        ++changed;
      }
    } else {
      if (f & kXx) {
        aborted = true;
        continue;
      }
      z.add(member, score);
      last = score;
      ++added;
    }
  }
  ctx.dirty += static_cast<uint64_t>(added + changed);
  if (z.size() == 0) ctx.db->remove(e);
  if (f & kIncr) return aborted ? ctx.reply.null() : ctx.reply.dbl(last);
  ctx.reply.integer((f & kCh) ? added + changed : added);
}
void zadd_cmd(CommandContext& ctx) { zadd_generic(ctx, false); }
void zincrby_cmd(CommandContext& ctx) { zadd_generic(ctx, true); }

void zrem_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  int64_t n = 0;
  for (size_t j = 2; j < ctx.argc(); ++j)
    if (e->zset->remove(ctx.arg(j))) ++n;
  ctx.dirty += static_cast<uint64_t>(n);
  if (e->zset->size() == 0) ctx.db->remove(e);
  ctx.reply.integer(n);
}

void zcard_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  ctx.reply.integer(static_cast<int64_t>(e->zset->size()));
}

void zscore_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.null();
  if (!check_type(ctx, e, Type::kZSet)) return;
  auto it = e->zset->scores.find(ctx.arg(2));
  if (it == e->zset->scores.end()) return ctx.reply.null();
  ctx.reply.dbl(it->second);
}

void zpop_generic(CommandContext& ctx, bool min) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  const bool has_count = ctx.argc() == 3;
  int64_t count = 1;
  if (has_count && !get_positive(ctx, ctx.arg(2), &count)) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.array(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  ZSetValue& z = *e->zset;
  const size_t n = std::min<size_t>(static_cast<size_t>(count), z.size());
  // RESP3 with a count: an array of [member, score] pairs; otherwise flat.
  const bool pairs = ctx.reply.resp3() && has_count;
  ctx.reply.array(pairs ? n : 2 * n);
  for (size_t i = 0; i < n; ++i) {
    auto it = min ? z.order.begin() : std::prev(z.order.end());
    const std::pair<double, std::string> item = *it;
    if (pairs) ctx.reply.array(2);
    ctx.reply.bulk(item.second);
    ctx.reply.dbl(item.first);
    z.remove(item.second);
  }
  ctx.dirty += n;
  if (z.size() == 0) ctx.db->remove(e);
}
void zpopmin_cmd(CommandContext& ctx) { zpop_generic(ctx, true); }
void zpopmax_cmd(CommandContext& ctx) { zpop_generic(ctx, false); }

void zrange_cmd(CommandContext& ctx) {
  int64_t start, end;
  if (!get_ll(ctx, ctx.arg(2), &start) || !get_ll(ctx, ctx.arg(3), &end)) return;
  bool withscores = false, rev = false;
  for (size_t j = 4; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "withscores")) withscores = true;
    else if (eq_nocase(ctx.arg(j), "rev")) rev = true;
    else return ctx.error(kSyntaxError);
  }
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.array(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  const ZSetValue& z = *e->zset;
  if (!normalize_range(&start, &end, static_cast<int64_t>(z.size()))) return ctx.reply.array(0);
  const size_t n = static_cast<size_t>(end - start + 1);
  const bool pairs = withscores && ctx.reply.resp3();
  ctx.reply.array(withscores && !pairs ? 2 * n : n);
  auto emit = [&](const std::pair<double, std::string>& item) {
    if (pairs) ctx.reply.array(2);
    ctx.reply.bulk(item.second);
    if (withscores) ctx.reply.dbl(item.first);
  };
  if (!rev) {
    auto it = std::next(z.order.begin(), start);
    for (size_t i = 0; i < n; ++i, ++it) emit(*it);
  } else {
    auto it = std::next(z.order.rbegin(), start);
    for (size_t i = 0; i < n; ++i, ++it) emit(*it);
  }
}

// --- streams (minimal: XADD, XLEN, XRANGE, XDEL) ---------------------------------------------

constexpr std::string_view kInvalidId = "ERR Invalid stream ID specified as stream command argument";

bool parse_u64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// "ms-seq" or "ms" (seq = missing_seq); *seq_auto for "ms-*".
bool parse_stream_id(std::string_view s, StreamId* id, uint64_t missing_seq, bool* seq_auto = nullptr) {
  const size_t dash = s.find('-');
  if (dash == std::string_view::npos) {
    if (!parse_u64(s, &id->ms)) return false;
    id->seq = missing_seq;
    return true;
  }
  if (!parse_u64(s.substr(0, dash), &id->ms)) return false;
  const std::string_view seq = s.substr(dash + 1);
  if (seq == "*" && seq_auto != nullptr) {
    *seq_auto = true;
    return true;
  }
  return parse_u64(seq, &id->seq);
}

void stream_trim(StreamValue& s, bool by_maxlen, uint64_t maxlen, const StreamId& minid, uint64_t* removed) {
  auto& v = s.entries;
  size_t drop = 0;
  if (by_maxlen) {
    if (v.size() > maxlen) drop = v.size() - static_cast<size_t>(maxlen);
  } else {
    while (drop < v.size() && v[drop].first < minid) ++drop;
  }
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(drop));
  *removed = drop;
}

void xadd_cmd(CommandContext& ctx) {
  size_t j = 2;
  bool nomkstream = false, trim = false, by_maxlen = true;
  uint64_t maxlen = 0;
  StreamId minid;
  for (; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    const bool more = j + 1 < ctx.argc();
    if (eq_nocase(o, "nomkstream")) {
      nomkstream = true;
    } else if ((eq_nocase(o, "maxlen") || eq_nocase(o, "minid")) && more) {
      trim = true;
      by_maxlen = eq_nocase(o, "maxlen");
      ++j;
      if ((ctx.arg(j) == "=" || ctx.arg(j) == "~") && j + 1 < ctx.argc()) ++j;
      if (by_maxlen) {
        int64_t v;
        if (!get_ll(ctx, ctx.arg(j), &v)) return;
        if (v < 0) return ctx.error("ERR The MAXLEN argument must be >= 0.");
        maxlen = static_cast<uint64_t>(v);
      } else if (!parse_stream_id(ctx.arg(j), &minid, 0)) {
        return ctx.error(kInvalidId);
      }
    } else if (eq_nocase(o, "limit") && more) {
      ++j;  // approximate trimming knob: exact trimming ignores it
    } else {
      break;
    }
  }
  if (j >= ctx.argc()) return ctx.error(kSyntaxError);
  const size_t id_index = j;
  const size_t fields = ctx.argc() - j - 1;
  if (fields == 0 || fields % 2 != 0) return ctx.error(wrong_args("xadd"));
  const std::string_view id_arg = ctx.arg(id_index);
  StreamId id;
  bool auto_id = id_arg == "*", seq_auto = false;
  if (!auto_id && !parse_stream_id(id_arg, &id, 0, &seq_auto)) return ctx.error(kInvalidId);
  if (!auto_id && !seq_auto && id.ms == 0 && id.seq == 0)
    return ctx.error("ERR The ID specified in XADD must be greater than 0-0");
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) {
    if (nomkstream) return ctx.reply.null();
    e = create_typed(ctx, ctx.arg(1), Type::kStream);
  } else if (!check_type(ctx, e, Type::kStream)) {
    return;
  }
  StreamValue& s = *e->stream;
  const StreamId last = s.last_id;
  if (auto_id) {
    const uint64_t now = static_cast<uint64_t>(ctx.now_ms());
    if (now > last.ms) {
      id = {now, 0};
    } else {
      if (last.seq == UINT64_MAX) {
        if (last.ms == UINT64_MAX) return ctx.error("ERR The stream has exhausted the last possible ID, unable to add more items");
        id = {last.ms + 1, 0};
      } else {
        id = {last.ms, last.seq + 1};
      }
    }
  } else if (seq_auto) {
    if (id.ms < last.ms || (id.ms == last.ms && last.seq == UINT64_MAX))
      return ctx.error("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    id.seq = id.ms == last.ms ? last.seq + 1 : 0;
  } else if (id <= last) {
    if (s.entries.empty() && s.entries_added == 0 && e->stream) {
      // A brand-new stream: last is 0-0, any id > 0-0 is fine (checked above).
    }
    if (id <= last) {
      if (s.entries.empty() && s.entries_added == 0) ctx.db->remove(e);
      return ctx.error("ERR The ID specified in XADD is equal or smaller than the target stream top item");
    }
  }
  std::vector<std::string> fv;
  fv.reserve(fields);
  for (size_t k = id_index + 1; k < ctx.argc(); ++k) fv.emplace_back(ctx.arg(k));
  s.entries.emplace_back(id, std::move(fv));
  s.last_id = id;
  ++s.entries_added;
  if (trim) {
    uint64_t removed;
    stream_trim(s, by_maxlen, maxlen, minid, &removed);
  }
  ++ctx.dirty;
  const std::string id_text = id.to_string();
  ctx.reply.bulk(id_text);
  // Propagate with the concrete id so replay is deterministic.
  std::vector<std::string_view> prop(ctx.argv.begin(), ctx.argv.end());
  prop[id_index] = ctx.own(id_text);
  ctx.propagate_as(prop);
}

void xlen_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kStream)) return;
  ctx.reply.integer(static_cast<int64_t>(e->stream->entries.size()));
}

void emit_stream_entry(CommandContext& ctx, const std::pair<StreamId, std::vector<std::string>>& en) {
  ctx.reply.array(2);
  ctx.reply.bulk(en.first.to_string());
  ctx.reply.array(en.second.size());
  for (const auto& f : en.second) ctx.reply.bulk(f);
}

void xrange_generic(CommandContext& ctx, bool rev) {
  StreamId lo, hi;
  const std::string_view a = ctx.arg(rev ? 3 : 2), b = ctx.arg(rev ? 2 : 3);
  if (a == "-") lo = {0, 0};
  else if (!parse_stream_id(a, &lo, 0)) return ctx.error(kInvalidId);
  if (b == "+") hi = {UINT64_MAX, UINT64_MAX};
  else if (!parse_stream_id(b, &hi, UINT64_MAX)) return ctx.error(kInvalidId);
  int64_t count = -1;
  if (ctx.argc() > 4) {
    if (ctx.argc() != 6 || !eq_nocase(ctx.arg(4), "count")) return ctx.error(kSyntaxError);
    if (!get_ll(ctx, ctx.arg(5), &count)) return;
    if (count < 0) count = 0;
  }
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.array(0);
  if (!check_type(ctx, e, Type::kStream)) return;
  std::vector<const std::pair<StreamId, std::vector<std::string>>*> out;
  const auto& v = e->stream->entries;
  if (!rev) {
    for (const auto& en : v) {
      if (count >= 0 && static_cast<int64_t>(out.size()) >= count) break;
      if (lo <= en.first && en.first <= hi) out.push_back(&en);
    }
  } else {
    for (auto it = v.rbegin(); it != v.rend(); ++it) {
      if (count >= 0 && static_cast<int64_t>(out.size()) >= count) break;
      if (lo <= it->first && it->first <= hi) out.push_back(&*it);
    }
  }
  ctx.reply.array(out.size());
  for (const auto* en : out) emit_stream_entry(ctx, *en);
}
void xrange_cmd(CommandContext& ctx) { xrange_generic(ctx, false); }
void xrevrange_cmd(CommandContext& ctx) { xrange_generic(ctx, true); }

void xdel_cmd(CommandContext& ctx) {
  std::vector<StreamId> ids(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j)
    if (!parse_stream_id(ctx.arg(j), &ids[j - 2], 0)) return ctx.error(kInvalidId);
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kStream)) return;
  auto& v = e->stream->entries;
  int64_t n = 0;
  for (const StreamId& id : ids) {
    auto it = std::lower_bound(v.begin(), v.end(), id, [](const auto& en, const StreamId& x) { return en.first < x; });
    if (it != v.end() && it->first == id) {
      v.erase(it);
      ++n;
    }
  }
  ctx.dirty += static_cast<uint64_t>(n);
  ctx.reply.integer(n);
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

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
    {"sadd", sadd_cmd, -3, kW | kM | kF, 1, 1, 1, "set", "Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0"},
    {"srem", srem_cmd, -3, kW | kF, 1, 1, 1, "set", "Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0"},
    {"spop", spop_cmd, -2, kW | kF, 1, 1, 1, "set", "Returns one or more random members from a set after removing them.", "1.0.0"},
    {"smembers", smembers_cmd, 2, kR, 1, 1, 1, "set", "Returns all members of a set.", "1.0.0"},
    {"scard", scard_cmd, 2, kR | kF, 1, 1, 1, "set", "Returns the number of members in a set.", "1.0.0"},
    {"sismember", sismember_cmd, 3, kR | kF, 1, 1, 1, "set", "Determines whether a member belongs to a set.", "1.0.0"},
    {"zadd", zadd_cmd, -4, kW | kM | kF, 1, 1, 1, "sorted_set", "Adds one or more members to a sorted set, or updates their scores.", "1.2.0"},
    {"zincrby", zincrby_cmd, 4, kW | kM | kF, 1, 1, 1, "sorted_set", "Increments the score of a member in a sorted set.", "1.2.0"},
    {"zrem", zrem_cmd, -3, kW | kF, 1, 1, 1, "sorted_set", "Removes one or more members from a sorted set.", "1.2.0"},
    {"zcard", zcard_cmd, 2, kR | kF, 1, 1, 1, "sorted_set", "Returns the number of members in a sorted set.", "1.2.0"},
    {"zscore", zscore_cmd, 3, kR | kF, 1, 1, 1, "sorted_set", "Returns the score of a member in a sorted set.", "1.2.0"},
    {"zpopmin", zpopmin_cmd, -2, kW | kF, 1, 1, 1, "sorted_set", "Returns the lowest-scoring members from a sorted set after removing them.", "5.0.0"},
    {"zpopmax", zpopmax_cmd, -2, kW | kF, 1, 1, 1, "sorted_set", "Returns the highest-scoring members from a sorted set after removing them.", "5.0.0"},
    {"zrange", zrange_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a range of indexes.", "1.2.0"},
    {"xadd", xadd_cmd, -5, kW | kM | kF, 1, 1, 1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"},
    {"xlen", xlen_cmd, 2, kR | kF, 1, 1, 1, "stream", "Return the number of messages in a stream.", "5.0.0"},
    {"xrange", xrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs.", "5.0.0"},
    {"xrevrange", xrevrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs in reverse order.", "5.0.0"},
    {"xdel", xdel_cmd, -3, kW | kF, 1, 1, 1, "stream", "Returns the number of messages after removing them from a stream.", "5.0.0"},
};

}  // namespace

std::span<const CommandDef> collection_commands() { return kCommands; }

}  // namespace conduit::kv
