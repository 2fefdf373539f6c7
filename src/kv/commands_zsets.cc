// Sorted sets: commands, replies and errors as Redis 7.0.  A sorted set that becomes empty
// is deleted, as in Redis.  The value is a hash table (member -> score) plus an ordered
// tree of (score, member): ranges by score are O(log n + m); ranks and index ranges walk the
// tree (O(rank)), where Redis' skiplist is O(log n).  This file: adding, scores, ranges,
// ranks, ZUNION/ZINTER/ZDIFF and ZSCAN; random members and popping (ZRANDMEMBER, ZPOPMIN,
// ZMPOP and the blocking forms) are in commands_zsets_pop.cc.
#include <algorithm>
#include <climits>
#include <cmath>

#include "collection_scan.h"
#include "numbers.h"
#include "zsets_common.h"

namespace conduit::kv {

Entry* zset_for_read(CommandContext& ctx, std::string_view key, bool* failed) {
  *failed = false;
  Entry* e = lookup_read(ctx, key);
  if (e != nullptr && !check_type(ctx, e, Type::kZSet)) {
    *failed = true;
    return nullptr;
  }
  return e;
}

namespace {

using ZOrder = std::set<ZItem>;

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
  if (added + changed > 0) ctx.notify(kNotifyZset, (f & kIncr) ? "zincr" : "zadd", ctx.arg(1));
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
  if (n > 0) ctx.notify(kNotifyZset, "zrem", ctx.arg(1));
  if (e->zset->size() == 0) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
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


// --- ranges -----------------------------------------------------------------------------------

struct ScoreRange {
  double min, max;
  bool minex = false, maxex = false;
  bool below_max(double v) const { return maxex ? v < max : v <= max; }
  bool above_min(double v) const { return minex ? v > min : v >= min; }
};

bool parse_score_bound(std::string_view s, double* v, bool* ex) {
  *ex = false;
  if (!s.empty() && s[0] == '(') {
    *ex = true;
    s.remove_prefix(1);
  }
  if (!string2d(s, v)) return false;
  return !std::isnan(*v);
}

bool parse_score_range(CommandContext& ctx, std::string_view a, std::string_view b, ScoreRange* r) {
  if (!parse_score_bound(a, &r->min, &r->minex) || !parse_score_bound(b, &r->max, &r->maxex)) {
    ctx.error("ERR min or max is not a float");
    return false;
  }
  return true;
}

// Lex bound: "-" (lowest), "+" (highest), "[x" inclusive, "(x" exclusive.
struct LexBound {
  enum { kMin, kMax, kValue } kind = kValue;
  std::string_view v;
  bool ex = false;
};
struct LexRange {
  LexBound min, max;
  bool above_min(std::string_view m) const {
    if (min.kind == LexBound::kMin) return true;
    if (min.kind == LexBound::kMax) return false;
    return min.ex ? m > min.v : m >= min.v;
  }
  bool below_max(std::string_view m) const {
    if (max.kind == LexBound::kMax) return true;
    if (max.kind == LexBound::kMin) return false;
    return max.ex ? m < max.v : m <= max.v;
  }
};

bool parse_lex_bound(std::string_view s, LexBound* b) {
  if (s == "-") b->kind = LexBound::kMin;
  else if (s == "+") b->kind = LexBound::kMax;
  else if (!s.empty() && (s[0] == '[' || s[0] == '(')) {
    b->kind = LexBound::kValue;
    b->ex = s[0] == '(';
    b->v = s.substr(1);
  } else {
    return false;
  }
  return true;
}

bool parse_lex_range(CommandContext& ctx, std::string_view a, std::string_view b, LexRange* r) {
  if (!parse_lex_bound(a, &r->min) || !parse_lex_bound(b, &r->max)) {
    ctx.error("ERR min or max not valid string range item");
    return false;
  }
  return true;
}

// The items of a range query, in reply order.
using ZPicked = std::vector<const ZItem*>;

void pick_by_rank(const ZOrder& o, int64_t start, int64_t end, bool rev, ZPicked* out) {
  if (!normalize_range(&start, &end, static_cast<int64_t>(o.size()))) return;
  const size_t n = static_cast<size_t>(end - start + 1);
  out->reserve(n);
  if (!rev) {
    auto it = std::next(o.begin(), start);
    for (size_t i = 0; i < n; ++i, ++it) out->push_back(&*it);
  } else {
    auto it = std::next(o.rbegin(), start);
    for (size_t i = 0; i < n; ++i, ++it) out->push_back(&*it);
  }
}

// ZRANGE's LIMIT over a walk of the order: skips `offset` items, then takes up to `limit`
// (< 0: all); take() is false once the limit is reached (the walk stops).
struct RangeWindow {
  int64_t offset, limit;
  ZPicked* out;
  bool take(const ZItem& x) {
    if (offset > 0) {
      --offset;
      return true;
    }
    if (limit == 0) return false;
    out->push_back(&x);
    if (limit > 0) --limit;
    return true;
  }
};

void pick_by_score(const ZOrder& o, const ScoreRange& r, bool rev, int64_t offset, int64_t limit, ZPicked* out) {
  RangeWindow w{offset, limit, out};
  if (!rev) {
    for (auto it = o.lower_bound({r.min, std::string()}); it != o.end(); ++it) {
      if (!r.above_min(it->first)) continue;
      if (!r.below_max(it->first)) break;
      if (!w.take(*it)) break;
    }
  } else {
    // Start after the last item scored <= max (members of that score sort after "").
    auto it = std::make_reverse_iterator(std::find_if(o.lower_bound({r.max, std::string()}), o.end(),
                                                      [&](const ZItem& x) { return x.first > r.max; }));
    for (; it != o.rend(); ++it) {
      if (!r.below_max(it->first)) continue;
      if (!r.above_min(it->first)) break;
      if (!w.take(*it)) break;
    }
  }
}

void pick_by_lex(const ZOrder& o, const LexRange& r, bool rev, int64_t offset, int64_t limit, ZPicked* out) {
  RangeWindow w{offset, limit, out};
  if (!rev) {
    for (const ZItem& x : o) {
      if (!r.above_min(x.second)) continue;
      if (!r.below_max(x.second)) break;
      if (!w.take(x)) break;
    }
  } else {
    for (auto it = o.rbegin(); it != o.rend(); ++it) {
      if (!r.below_max(it->second)) continue;
      if (!r.above_min(it->second)) break;
      if (!w.take(*it)) break;
    }
  }
}

void reply_items(CommandContext& ctx, const ZPicked& items, bool withscores) {
  const bool pairs = withscores && ctx.reply.resp3();
  ctx.reply.array(withscores && !pairs ? 2 * items.size() : items.size());
  for (const ZItem* x : items) {
    if (pairs) ctx.reply.array(2);
    ctx.reply.bulk(x->second);
    if (withscores) ctx.reply.dbl(x->first);
  }
}

enum class RangeBy { kRank, kScore, kLex };

// *STORE commands: the destination (argument 1) is replaced by z, or deleted when z is
// empty; replies its size.  `event`: the keyspace event of a stored result.
void store_result(CommandContext& ctx, std::unique_ptr<ZSetValue> z, std::string_view event) {
  Entry* d = lookup_write(ctx, ctx.arg(1));
  const bool existed = d != nullptr;
  if (existed) {
    ctx.db->remove(d);
    ++ctx.dirty;
  }
  const size_t n = z->size();
  if (n > 0) {
    d = create_typed(ctx, ctx.arg(1), Type::kZSet, !existed);
    d->zset = std::move(z);
    ++ctx.dirty;
    ctx.notify(kNotifyZset, event, ctx.arg(1));
  } else if (existed) {
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  if (ctx.dirty > 0) ctx.touched(ctx.arg(1));
  ctx.reply.integer(static_cast<int64_t>(n));
}

// ZRANGE / ZRANGESTORE / ZREV* / Z*BY*: one implementation (Redis' zrangeGenericCommand).
// argv[first], argv[first+1] are the bounds; options follow from opt_at.
void zrange_generic(CommandContext& ctx, size_t src_at, size_t first, RangeBy by, bool rev, bool store,
                    bool allow_options) {
  bool withscores = false, have_limit = false;
  int64_t offset = 0, limit = -1;
  for (size_t j = first + 2; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    const size_t left = ctx.argc() - j - 1;
    if (!store && eq_nocase(o, "withscores")) withscores = true;
    else if (eq_nocase(o, "limit") && left >= 2) {
      if (!get_ll(ctx, ctx.arg(j + 1), &offset) || !get_ll(ctx, ctx.arg(j + 2), &limit)) return;
      have_limit = true;
      j += 2;
    } else if (allow_options && by == RangeBy::kRank && eq_nocase(o, "byscore")) by = RangeBy::kScore;
    else if (allow_options && by == RangeBy::kRank && eq_nocase(o, "bylex")) by = RangeBy::kLex;
    else if (allow_options && eq_nocase(o, "rev")) rev = true;
    else return ctx.error(kSyntaxError);
  }
  if (have_limit && by == RangeBy::kRank)
    return ctx.error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
  if (withscores && by == RangeBy::kLex)
    return ctx.error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
  // With REV (and in ZREVRANGEBY*) the first bound is the maximum.
  const std::string_view lo = (rev && by != RangeBy::kRank) ? ctx.arg(first + 1) : ctx.arg(first);
  const std::string_view hi = (rev && by != RangeBy::kRank) ? ctx.arg(first) : ctx.arg(first + 1);
  int64_t start = 0, end = 0;
  ScoreRange sr{};
  LexRange lr{};
  if (by == RangeBy::kRank) {
    if (!get_ll(ctx, ctx.arg(first), &start) || !get_ll(ctx, ctx.arg(first + 1), &end)) return;
  } else if (by == RangeBy::kScore) {
    if (!parse_score_range(ctx, lo, hi, &sr)) return;
  } else if (!parse_lex_range(ctx, lo, hi, &lr)) {
    return;
  }
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(src_at), &failed);
  if (failed) return;
  ZPicked items;
  if (e != nullptr) {
    const ZOrder& o = e->zset->order;
    if (offset < 0) items.clear();
    else if (by == RangeBy::kRank) pick_by_rank(o, start, end, rev, &items);
    else if (by == RangeBy::kScore) pick_by_score(o, sr, rev, offset, limit, &items);
    else pick_by_lex(o, lr, rev, offset, limit, &items);
  }
  if (!store) return reply_items(ctx, items, withscores);
  auto z = std::make_unique<ZSetValue>();
  for (const ZItem* x : items) z->add(x->second, x->first);
  store_result(ctx, std::move(z), "zrangestore");
}

void zrange_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kRank, false, false, true); }
void zrangestore_cmd(CommandContext& ctx) { zrange_generic(ctx, 2, 3, RangeBy::kRank, false, true, true); }
void zrevrange_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kRank, true, false, false); }
void zrangebyscore_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kScore, false, false, false); }
void zrevrangebyscore_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kScore, true, false, false); }
void zrangebylex_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kLex, false, false, false); }
void zrevrangebylex_cmd(CommandContext& ctx) { zrange_generic(ctx, 1, 2, RangeBy::kLex, true, false, false); }

void zcount_cmd(CommandContext& ctx) {
  ScoreRange r{};
  if (!parse_score_range(ctx, ctx.arg(2), ctx.arg(3), &r)) return;
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  ZPicked items;
  if (e != nullptr) pick_by_score(e->zset->order, r, false, 0, -1, &items);
  ctx.reply.integer(static_cast<int64_t>(items.size()));
}

void zlexcount_cmd(CommandContext& ctx) {
  LexRange r{};
  if (!parse_lex_range(ctx, ctx.arg(2), ctx.arg(3), &r)) return;
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  ZPicked items;
  if (e != nullptr) pick_by_lex(e->zset->order, r, false, 0, -1, &items);
  ctx.reply.integer(static_cast<int64_t>(items.size()));
}

void zrank_generic(CommandContext& ctx, bool rev) {
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  if (e == nullptr) return ctx.reply.null();
  const ZSetValue& z = *e->zset;
  auto it = z.scores.find(ctx.arg(2));
  if (it == z.scores.end()) return ctx.reply.null();
  const auto pos = z.order.find({it->second, it->first});
  const int64_t rank = static_cast<int64_t>(std::distance(z.order.begin(), pos));
  ctx.reply.integer(rev ? static_cast<int64_t>(z.size()) - 1 - rank : rank);
}
void zrank_cmd(CommandContext& ctx) { zrank_generic(ctx, false); }
void zrevrank_cmd(CommandContext& ctx) { zrank_generic(ctx, true); }

void zremrange_generic(CommandContext& ctx, RangeBy by) {
  int64_t start = 0, end = 0;
  ScoreRange sr{};
  LexRange lr{};
  if (by == RangeBy::kRank) {
    if (!get_ll(ctx, ctx.arg(2), &start) || !get_ll(ctx, ctx.arg(3), &end)) return;
  } else if (by == RangeBy::kScore) {
    if (!parse_score_range(ctx, ctx.arg(2), ctx.arg(3), &sr)) return;
  } else if (!parse_lex_range(ctx, ctx.arg(2), ctx.arg(3), &lr)) {
    return;
  }
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kZSet)) return;
  ZPicked items;
  const ZOrder& o = e->zset->order;
  if (by == RangeBy::kRank) pick_by_rank(o, start, end, false, &items);
  else if (by == RangeBy::kScore) pick_by_score(o, sr, false, 0, -1, &items);
  else pick_by_lex(o, lr, false, 0, -1, &items);
  std::vector<std::string> names;
  names.reserve(items.size());
  for (const ZItem* x : items) names.push_back(x->second);
  for (const std::string& m : names) e->zset->remove(m);
  ctx.dirty += names.size();
  if (!names.empty())
    ctx.notify(kNotifyZset, by == RangeBy::kRank ? "zremrangebyrank" : by == RangeBy::kScore ? "zremrangebyscore" : "zremrangebylex",
               ctx.arg(1));
  if (e->zset->size() == 0) {
    ctx.db->remove(e);
    ctx.notify(kNotifyGeneric, "del", ctx.arg(1));
  }
  ctx.reply.integer(static_cast<int64_t>(names.size()));
}
void zremrangebyrank_cmd(CommandContext& ctx) { zremrange_generic(ctx, RangeBy::kRank); }
void zremrangebyscore_cmd(CommandContext& ctx) { zremrange_generic(ctx, RangeBy::kScore); }
void zremrangebylex_cmd(CommandContext& ctx) { zremrange_generic(ctx, RangeBy::kLex); }

void zmscore_cmd(CommandContext& ctx) {
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  ctx.reply.array(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) {
    if (e == nullptr) {
      ctx.reply.null();
      continue;
    }
    auto it = e->zset->scores.find(ctx.arg(j));
    if (it == e->zset->scores.end()) ctx.reply.null();
    else ctx.reply.dbl(it->second);
  }
}

// --- ZUNION / ZINTER / ZDIFF (and STORE, ZINTERCARD) ------------------------------------------

enum class ZOp { kUnion, kInter, kDiff };
enum class Agg { kSum, kMin, kMax };

double aggregate(Agg a, double acc, double v) {
  if (a == Agg::kSum) {
    const double r = acc + v;
    return std::isnan(r) ? 0.0 : r;  // inf + -inf
  }
  return a == Agg::kMin ? std::min(acc, v) : std::max(acc, v);
}

// One input (a sorted set or a set, whose members score 1) as (member, score) pairs.
struct ZInput {
  const ZSetValue* z = nullptr;
  const StrSet* s = nullptr;
  size_t size() const { return z ? z->size() : (s ? s->size() : 0); }
  bool find(std::string_view m, double* score) const {
    if (z) {
      auto it = z->scores.find(m);
      if (it == z->scores.end()) return false;
      *score = it->second;
      return true;
    }
    if (s && s->count(m)) {
      *score = 1.0;
      return true;
    }
    return false;
  }
  template <typename Fn>
  void each(Fn&& fn) const {
    if (z)
      for (const auto& [m, sc] : z->scores) fn(m, sc);
    else if (s)
      for (const auto& m : *s) fn(m, 1.0);
  }
};

// numkeys at argv[nk]; the store forms have the destination at argv[1].
void zsetop_generic(CommandContext& ctx, ZOp op, bool store, bool card = false) {
  const size_t nk = store || card ? (card ? 1 : 2) : 1;
  int64_t numkeys;
  if (!get_ll(ctx, ctx.arg(nk), &numkeys)) return;
  // Redis 7.0's zunionInterDiffGenericCommand: the same errors for ZINTERCARD.
  if (numkeys < 1)
    return ctx.error("ERR at least 1 input key is needed for '" + std::string(ctx.cmd->name) + "' command");
  if (static_cast<uint64_t>(numkeys) > ctx.argc() - nk - 1) return ctx.error(kSyntaxError);
  const size_t first = nk + 1;
  const size_t n = static_cast<size_t>(numkeys);
  std::vector<double> weights(n, 1.0);
  Agg agg = Agg::kSum;
  bool withscores = false;
  int64_t limit = 0;
  for (size_t j = first + n; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    const size_t left = ctx.argc() - j - 1;
    if (card) {
      if (eq_nocase(o, "limit") && left >= 1) {
        if (!string2ll(ctx.arg(++j), &limit) || limit < 0) return ctx.error("ERR LIMIT can't be negative");
        continue;
      }
      return ctx.error(kSyntaxError);
    }
    if (op != ZOp::kDiff && eq_nocase(o, "weights") && left >= n) {
      for (size_t i = 0; i < n; ++i)
        if (!string2d(ctx.arg(j + 1 + i), &weights[i])) return ctx.error("ERR weight value is not a float");
      j += n;
    } else if (op != ZOp::kDiff && eq_nocase(o, "aggregate") && left >= 1) {
      const std::string_view a = ctx.arg(++j);
      if (eq_nocase(a, "sum")) agg = Agg::kSum;
      else if (eq_nocase(a, "min")) agg = Agg::kMin;
      else if (eq_nocase(a, "max")) agg = Agg::kMax;
      else return ctx.error(kSyntaxError);
    } else if (!store && eq_nocase(o, "withscores")) {
      withscores = true;
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  std::vector<ZInput> in(n);
  for (size_t i = 0; i < n; ++i) {
    Entry* e = lookup_read(ctx, ctx.arg(first + i));
    if (e == nullptr) continue;
    if (e->type == Type::kZSet) in[i].z = e->zset.get();
    else if (e->type == Type::kSet) in[i].s = &e->set->members;
    else return ctx.error(kWrongType);
  }
  auto weighted = [](double score, double w) {
    const double r = score * w;
    return std::isnan(r) ? 0.0 : r;
  };
  std::unordered_map<std::string, double, StrHash, std::equal_to<>> acc;
  if (op == ZOp::kUnion) {
    for (size_t i = 0; i < n; ++i)
      in[i].each([&](const std::string& m, double sc) {
        const double v = weighted(sc, weights[i]);
        auto [it, fresh] = acc.emplace(m, v);
        if (!fresh) it->second = aggregate(agg, it->second, v);
      });
  } else if (op == ZOp::kInter) {
    size_t smallest = 0;
    for (size_t i = 0; i < n; ++i)
      if (in[i].size() < in[smallest].size()) smallest = i;
    if (in[smallest].size() > 0)
      in[smallest].each([&](const std::string& m, double) {
        if (limit > 0 && static_cast<int64_t>(acc.size()) >= limit) return;
        double total = 0;
        bool first_one = true;
        for (size_t i = 0; i < n; ++i) {
          double sc;
          if (!in[i].find(m, &sc)) return;
          const double v = weighted(sc, weights[i]);
          total = first_one ? v : aggregate(agg, total, v);
          first_one = false;
        }
        acc.emplace(m, total);
      });
  } else {
    in[0].each([&](const std::string& m, double sc) {
      double x;
      for (size_t i = 1; i < n; ++i)
        if (in[i].find(m, &x)) return;
      acc.emplace(m, sc);
    });
  }
  if (card) return ctx.reply.integer(static_cast<int64_t>(acc.size()));
  auto z = std::make_unique<ZSetValue>();
  for (auto& [m, sc] : acc) z->add(m, sc);
  if (!store) {
    ZPicked items;
    for (const ZItem& x : z->order) items.push_back(&x);
    return reply_items(ctx, items, withscores);
  }
  store_result(ctx, std::move(z), op == ZOp::kUnion ? "zunionstore" : op == ZOp::kInter ? "zinterstore" : "zdiffstore");
}
void zunion_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kUnion, false); }
void zinter_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kInter, false); }
void zdiff_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kDiff, false); }
void zunionstore_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kUnion, true); }
void zinterstore_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kInter, true); }
void zdiffstore_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kDiff, true); }
void zintercard_cmd(CommandContext& ctx) { zsetop_generic(ctx, ZOp::kInter, false, true); }

void zscan_cmd(CommandContext& ctx) {
  ScanArgs a;
  if (!parse_scan_args(ctx, 2, &a)) return;
  bool failed;
  Entry* e = zset_for_read(ctx, ctx.arg(1), &failed);
  if (failed) return;
  std::vector<const std::pair<const std::string, double>*> out;
  uint64_t next = 0;
  if (e != nullptr)
    next = scan_buckets(e->zset->scores, a.cursor, a.count, [&](const auto& kv) {
      if (!a.use_pattern || glob_match(a.pattern, kv.first)) out.push_back(&kv);
    });
  reply_scan_cursor(ctx, next);
  ctx.reply.array(out.size() * 2);
  for (const auto* kv : out) {
    ctx.reply.bulk(kv->first);
    ctx.reply.dbl(kv->second);
  }
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast, kB = kCmdBlocking,
                   kT = kCmdTouchesOwnKeys;

const CommandDef kCommands[] = {
    {"zadd", zadd_cmd, -4, kW | kM | kF, 1, 1, 1, "sorted_set", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "1.2.0"},
    {"zincrby", zincrby_cmd, 4, kW | kM | kF, 1, 1, 1, "sorted_set", "Increments the score of a member in a sorted set.", "1.2.0"},
    {"zrem", zrem_cmd, -3, kW | kF, 1, 1, 1, "sorted_set", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "1.2.0"},
    {"zcard", zcard_cmd, 2, kR | kF, 1, 1, 1, "sorted_set", "Returns the number of members in a sorted set.", "1.2.0"},
    {"zscore", zscore_cmd, 3, kR | kF, 1, 1, 1, "sorted_set", "Returns the score of a member in a sorted set.", "1.2.0"},
    {"zmscore", zmscore_cmd, -3, kR | kF, 1, 1, 1, "sorted_set", "Returns the score of one or more members in a sorted set.", "6.2.0"},
    {"zrange", zrange_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a range of indexes.", "1.2.0"},
    {"zrangestore", zrangestore_cmd, -5, kW | kM | kT, 1, 2, 1, "sorted_set", "Stores a range of members from sorted set in a key.", "6.2.0"},
    {"zrevrange", zrevrange_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a range of indexes in reverse order.", "1.2.0"},
    {"zrangebyscore", zrangebyscore_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a range of scores.", "1.0.5"},
    {"zrevrangebyscore", zrevrangebyscore_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a range of scores in reverse order.", "2.2.0"},
    {"zrangebylex", zrangebylex_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a lexicographical range.", "2.8.9"},
    {"zrevrangebylex", zrevrangebylex_cmd, -4, kR, 1, 1, 1, "sorted_set", "Returns members in a sorted set within a lexicographical range in reverse order.", "2.8.9"},
    {"zcount", zcount_cmd, 4, kR | kF, 1, 1, 1, "sorted_set", "Returns the count of members in a sorted set that have scores within a range.", "2.0.0"},
    {"zlexcount", zlexcount_cmd, 4, kR | kF, 1, 1, 1, "sorted_set", "Returns the number of members in a sorted set within a lexicographical range.", "2.8.9"},
    {"zrank", zrank_cmd, 3, kR | kF, 1, 1, 1, "sorted_set", "Returns the index of a member in a sorted set ordered by ascending scores.", "2.0.0"},
    {"zrevrank", zrevrank_cmd, 3, kR | kF, 1, 1, 1, "sorted_set", "Returns the index of a member in a sorted set ordered by descending scores.", "2.0.0"},
    {"zremrangebyrank", zremrangebyrank_cmd, 4, kW, 1, 1, 1, "sorted_set", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", "2.0.0"},
    {"zremrangebyscore", zremrangebyscore_cmd, 4, kW, 1, 1, 1, "sorted_set", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", "1.2.0"},
    {"zremrangebylex", zremrangebylex_cmd, 4, kW, 1, 1, 1, "sorted_set", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", "2.8.9"},
    {"zunion", zunion_cmd, -3, kR, 0, 0, 0, "sorted_set", "Returns the union of multiple sorted sets.", "6.2.0", {}, numkeys_keys<1>},
    {"zinter", zinter_cmd, -3, kR, 0, 0, 0, "sorted_set", "Returns the intersect of multiple sorted sets.", "6.2.0", {}, numkeys_keys<1>},
    {"zdiff", zdiff_cmd, -3, kR, 0, 0, 0, "sorted_set", "Returns the difference between multiple sorted sets.", "6.2.0", {}, numkeys_keys<1>},
    {"zunionstore", zunionstore_cmd, -4, kW | kM | kT, 1, 1, 1, "sorted_set", "Stores the union of multiple sorted sets in a key.", "2.0.0"},
    {"zinterstore", zinterstore_cmd, -4, kW | kM | kT, 1, 1, 1, "sorted_set", "Stores the intersect of multiple sorted sets in a key.", "2.0.0"},
    {"zdiffstore", zdiffstore_cmd, -4, kW | kM | kT, 1, 1, 1, "sorted_set", "Stores the difference of multiple sorted sets in a key.", "6.2.0"},
    {"zintercard", zintercard_cmd, -3, kR, 0, 0, 0, "sorted_set", "Returns the number of members of the intersect of multiple sorted sets.", "7.0.0", {}, numkeys_keys<1>},
    {"zscan", zscan_cmd, -3, kR, 1, 1, 1, "sorted_set", "Iterates over members and scores of a sorted set.", "2.8.0"},
};

}  // namespace

std::span<const CommandDef> zset_commands() { return kCommands; }

}  // namespace conduit::kv
