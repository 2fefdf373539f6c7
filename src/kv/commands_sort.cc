// SORT and SORT_RO: Redis 7.0.15's behaviour (sort.c), option by option.
//
//   SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
//
// What is Redis' and kept here on purpose:
// - Options are parsed left to right before the key is looked at (a syntax error wins over
//   WRONGTYPE); the last ASC/DESC, LIMIT, BY and STORE win, but one BY without '*' makes
//   the whole command "nosort" even if a later BY has one.  SORT_RO has no STORE: the word
//   is a syntax error there.
// - A missing key is an empty list; a key that is not a list, set or sorted set is WRONGTYPE.
// - Numeric order parses each value as strtod does (leading blanks, hex, "inf" accepted;
//   anything after the number, overflow, underflow to a denormal, NaN rejected: "One or
//   more scores can't be converted into double"); a missing BY value counts as 0.  Equal
//   scores are ordered by the elements' bytes.
// - ALPHA compares as Redis' strcoll under the C locale, i.e. strcmp: bytes up to the
//   first NUL.  With STORE, Redis compares whole byte strings (memcmp, then length) instead,
//   and so does this.  With ALPHA BY, a missing value sorts first; equal values keep their
//   input order (Redis' qsort is glibc's merge sort: stable).
// - BY / GET patterns: the first '*' is replaced by the element; "->field" after it reads a
//   hash field; "#" is the element itself; a pattern without '*' finds nothing (GET replies
//   null, BY does not sort).  Patterns are read as C strings up to a NUL, as Redis does.
// - LIMIT is clamped to the collection (no overflow with huge counts); with nosort a list
//   or sorted set keeps its own order (DESC reverses it) and LIMIT picks that range.  A set
//   with nosort and STORE is sorted ALPHA, so the stored list does not depend on the set's
//   hash order.
// - STORE replaces dst with a list (no TTL), or deletes dst when the result is empty;
//   replies the stored length.  Events: "sortstore" (l), or "del" (g) for the deletion.
//
// Determinism (what the AOF relies on: SORT ... STORE is propagated as sent, and loading
// runs it again on the same data, where nothing expires): every order above is a function
// of the data except ties under ALPHA BY, which keep the input order.  Redis' input order
// for sets and sorted sets is its hash table's; here a sorted set is read in score order
// and, for ALPHA BY, a set's members are put in byte order first, so a replay stores the
// same list.  Redis' partial quicksort for BY + LIMIT may order such ties differently.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "server_impl.h"

namespace conduit::kv {
namespace {

// The part of s a C function sees: up to the first NUL.
std::string_view c_string(std::string_view s) {
  const size_t nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

// Redis' strcoll under the C locale: strcmp on the C strings.
int collate(std::string_view a, std::string_view b) {
  const int c = c_string(a).compare(c_string(b));
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

int compare_bytes(std::string_view a, std::string_view b) {
  const int c = a.compare(b);  // unsigned bytes, then length: Redis' compareStringObjects
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

// strtod as Redis' SORT uses it.  `buf` is scratch (a NUL-terminated copy: strtod stops at
// an embedded NUL, as in Redis).
bool sort_score(std::string_view s, std::string& buf, double* out) {
  buf.assign(s);
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(buf.c_str(), &end);
  *out = d;
  return *end == '\0' && errno != ERANGE && !std::isnan(d);
}

// A BY / GET pattern (Redis' lookupKeyByPattern).  Looks like a read of the key it names
// (hit/miss statistics, keymiss event, lazy expiry).  The value is a view into the keyspace:
// valid while no key is written (lookups only delete keys already expired at this
// command's time, never one this function returned).
struct Pattern {
  bool self = false;              // "#"
  bool constant = false;          // no '*': names nothing
  std::string_view prefix, postfix, field;
  bool has_field = false;

  explicit Pattern(std::string_view p) {
    const std::string_view c = c_string(p);
    if (c == "#") {
      self = true;
      return;
    }
    const size_t star = c.find('*');
    if (star == std::string_view::npos) {
      constant = true;
      return;
    }
    const size_t arrow = c.find("->", star + 1);
    size_t field_len = 0;
    if (arrow != std::string_view::npos && arrow + 2 < c.size()) {
      has_field = true;
      field = p.substr(arrow + 2);
      field_len = field.size();
    }
    prefix = p.substr(0, star);
    postfix = p.substr(star + 1, p.size() - star - 1 - (has_field ? field_len + 2 : 0));
  }

  std::optional<std::string_view> lookup(CommandContext& ctx, std::string_view element, std::string& key) const {
    if (self) return element;
    if (constant) return std::nullopt;
    key.assign(prefix);
    key.append(element);
    key.append(postfix);
    const Entry* e = lookup_read(ctx, key);
    if (e == nullptr) return std::nullopt;
    if (has_field) {
      if (e->type != Type::kHash) return std::nullopt;
      auto it = e->hash_v->fields.find(field);
      if (it == e->hash_v->fields.end()) return std::nullopt;
      return std::string_view(it->second);
    }
    if (e->type != Type::kString) return std::nullopt;
    return std::string_view(e->str);
  }
};

struct SortItem {
  std::string_view element;  // into the source collection, which nothing changes meanwhile
  double score = 0;
  std::optional<std::string_view> by;  // ALPHA BY: the value compared (none: missing)
};

struct SortOptions {
  bool desc = false, alpha = false, dontsort = false;
  int64_t limit_start = 0, limit_count = -1;
  std::optional<Pattern> by;
  std::vector<Pattern> gets;
  std::optional<std::string_view> store;
};

// False after replying the error.
bool parse_options(CommandContext& ctx, bool readonly, SortOptions* o) {
  for (size_t j = 2; j < ctx.argc(); ++j) {
    const std::string_view a = ctx.arg(j);
    const size_t left = ctx.argc() - j - 1;
    if (eq_nocase(a, "asc")) {
      o->desc = false;
    } else if (eq_nocase(a, "desc")) {
      o->desc = true;
    } else if (eq_nocase(a, "alpha")) {
      o->alpha = true;
    } else if (eq_nocase(a, "limit") && left >= 2) {
      if (!get_ll(ctx, ctx.arg(j + 1), &o->limit_start) || !get_ll(ctx, ctx.arg(j + 2), &o->limit_count)) return false;
      j += 2;
    } else if (!readonly && eq_nocase(a, "store") && left >= 1) {
      o->store = ctx.arg(++j);
    } else if (eq_nocase(a, "by") && left >= 1) {
      o->by.emplace(ctx.arg(++j));
      // No '*' ("nosort", also "#"): nothing to sort by.  Stays set whatever later BYs say.
      if (c_string(ctx.arg(j)).find('*') == std::string_view::npos) o->dontsort = true;
    } else if (eq_nocase(a, "get") && left >= 1) {
      o->gets.emplace_back(ctx.arg(++j));
    } else {
      ctx.error(kSyntaxError);
      return false;
    }
  }
  return true;
}

// The elements to sort, and the [start, end] range of the result that is output.  With
// nosort a list or sorted set yields just that range, in its own order (reversed by DESC),
// and the range becomes [0, n-1].
void load_items(const Entry* src, const SortOptions& o, int64_t* start, int64_t* end, std::vector<SortItem>* items) {
  if (src == nullptr) return;
  const auto take = [&](const std::string& s) { items->push_back(SortItem{s, 0, std::nullopt}); };
  const bool range_only = o.dontsort && src->type != Type::kSet;
  if (range_only && *end < *start) {
    *start = 0;
    *end = -1;
    return;
  }
  const int64_t n = range_only ? *end - *start + 1 : 0;
  switch (src->type) {
    case Type::kList: {
      const auto& l = src->list->items;
      if (!range_only) {
        items->reserve(l.size());
        for (const auto& s : l) take(s);
        break;
      }
      items->reserve(static_cast<size_t>(n));
      if (o.desc) {
        for (int64_t i = 0; i < n; ++i) take(l[l.size() - 1 - static_cast<size_t>(*start + i)]);
      } else {
        for (int64_t i = 0; i < n; ++i) take(l[static_cast<size_t>(*start + i)]);
      }
      break;
    }
    case Type::kSet:
      items->reserve(src->set->members.size());
      for (const auto& s : src->set->members) take(s);
      // Ties under ALPHA BY keep the input order: for a stored result make it the members'
      // byte order, not the hash table's (which differs between processes), so that the
      // AOF's replay stores the same list.
      if (o.alpha && o.by && !o.dontsort && o.store)
        std::sort(items->begin(), items->end(),
                  [](const SortItem& a, const SortItem& b) { return a.element < b.element; });
      break;
    case Type::kZSet: {
      const auto& order = src->zset->order;
      if (!range_only) {
        items->reserve(order.size());
        for (const auto& [score, member] : order) take(member);
        break;
      }
      items->reserve(static_cast<size_t>(n));
      if (o.desc) {
        auto it = std::next(order.rbegin(), *start);
        for (int64_t i = 0; i < n; ++i, ++it) take(it->second);
      } else {
        auto it = std::next(order.begin(), *start);
        for (int64_t i = 0; i < n; ++i, ++it) take(it->second);
      }
      break;
    }
    default:
      break;
  }
  if (range_only) {
    *end -= *start;
    *start = 0;
  }
}

void sort_generic(CommandContext& ctx, bool readonly) {
  SortOptions o;
  if (!parse_options(ctx, readonly, &o)) return;
  const Entry* src = lookup_read(ctx, ctx.arg(1));
  if (src != nullptr && src->type != Type::kList && src->type != Type::kSet && src->type != Type::kZSet)
    return ctx.error(kWrongType);
  // A set has no order of its own: stored, it is sorted (Redis: for scripts and replicas).
  if (o.dontsort && src != nullptr && src->type == Type::kSet && o.store) {
    o.dontsort = false;
    o.alpha = true;
    o.by.reset();
  }
  int64_t len = 0;
  if (src != nullptr) {
    len = static_cast<int64_t>(src->type == Type::kList  ? src->list->items.size()
                               : src->type == Type::kSet ? src->set->members.size()
                                                         : src->zset->size());
  }
  // Redis' clamping: offsets beyond the collection give an empty range, counts < 0 all.
  int64_t start = std::clamp<int64_t>(o.limit_start, 0, len);
  const int64_t count = std::min(std::max<int64_t>(o.limit_count, -1), len);
  int64_t end = count < 0 ? len - 1 : start + count - 1;
  if (start >= len) {
    start = len - 1;
    end = len - 2;
  }
  if (end >= len) end = len - 1;

  std::vector<SortItem> items;
  load_items(src, o, &start, &end, &items);

  std::string scratch;
  bool bad_score = false;
  if (!o.dontsort) {
    for (SortItem& it : items) {
      std::optional<std::string_view> v = it.element;
      if (o.by) {
        v = o.by->lookup(ctx, it.element, scratch);
        if (!v) continue;  // missing: score 0, sorts first under ALPHA
      }
      if (o.alpha) {
        if (o.by) it.by = v;
      } else if (!sort_score(*v, scratch, &it.score)) {
        bad_score = true;
      }
    }
    if (!bad_score) {
      const bool bytes = o.store.has_value();
      const auto cmp = [&](const SortItem& a, const SortItem& b) {
        int c;
        if (!o.alpha) {
          c = a.score < b.score ? -1 : a.score > b.score ? 1 : compare_bytes(a.element, b.element);
        } else if (o.by) {
          if (!a.by || !b.by) c = a.by.has_value() == b.by.has_value() ? 0 : a.by ? 1 : -1;
          else c = bytes ? compare_bytes(*a.by, *b.by) : collate(*a.by, *b.by);
        } else {
          c = bytes ? compare_bytes(a.element, b.element) : collate(a.element, b.element);
        }
        return (o.desc ? -c : c) < 0;
      };
      std::stable_sort(items.begin(), items.end(), cmp);
    }
  }
  if (bad_score) return ctx.error("ERR One or more scores can't be converted into double");

  const size_t n = end >= start ? static_cast<size_t>(end - start + 1) : 0;
  const auto range = std::span<const SortItem>(items).subspan(static_cast<size_t>(std::max<int64_t>(start, 0)), n);
  if (!o.store) {
    ctx.reply.array(o.gets.empty() ? n : n * o.gets.size());
    for (const SortItem& it : range) {
      if (o.gets.empty()) ctx.reply.bulk(it.element);
      for (const Pattern& g : o.gets) {
        const auto v = g.lookup(ctx, it.element, scratch);
        if (v) ctx.reply.bulk(*v);
        else ctx.reply.null();
      }
    }
    return;
  }

  // STORE: the whole result first (GET may read dst, and dst may be the source).
  auto result = std::make_unique<ListValue>();
  for (const SortItem& it : range) {
    if (o.gets.empty()) result->items.emplace_back(it.element);
    for (const Pattern& g : o.gets) result->items.emplace_back(g.lookup(ctx, it.element, scratch).value_or(""));
  }
  const std::string_view dst = *o.store;
  const size_t stored = result->items.size();
  if (stored > 0) {
    Entry* d = lookup_write(ctx, dst);  // an expired dst goes first (its own events)
    const bool existed = d != nullptr;
    if (existed) ctx.db->remove(d);
    d = create_typed(ctx, dst, Type::kList, !existed);
    d->list = std::move(result);
    ctx.dirty += stored;
    ctx.notify(kNotifyList, "sortstore", dst);
    ctx.touched(dst);
  } else if (Entry* d = ctx.db->find(dst)) {  // Redis' dbDelete: also a logically expired dst
    ctx.db->remove(d);
    ++ctx.dirty;
    ctx.notify(kNotifyGeneric, "del", dst);
    ctx.touched(dst);
  }
  ctx.reply.integer(static_cast<int64_t>(stored));
}

void sort_cmd(CommandContext& ctx) { sort_generic(ctx, false); }
void sort_ro_cmd(CommandContext& ctx) { sort_generic(ctx, true); }

// SORT's keys: the sorted key, and the last STORE's destination (Redis' sortGetKeys, which
// skips LIMIT's two arguments and GET's and BY's one while it looks for STORE).
void sort_keys(std::span<const std::string_view> argv, std::vector<size_t>* out) {
  if (argv.size() < 2) return;
  out->push_back(1);
  size_t store_at = 0;
  for (size_t i = 2; i < argv.size(); ++i) {
    if (eq_nocase(argv[i], "limit")) i += 2;
    else if (eq_nocase(argv[i], "get") || eq_nocase(argv[i], "by")) i += 1;
    else if (eq_nocase(argv[i], "store") && i + 1 < argv.size()) store_at = i + 1;
  }
  if (store_at != 0) out->push_back(store_at);
}

// SORT writes only with STORE, and names the destination itself (kCmdTouchesOwnKeys): a
// WATCH of the sorted key must not fail.  Like Redis, SORT without STORE is still a write
// command (refused above maxmemory, held by CLIENT PAUSE WRITE); SORT_RO is the read.
const CommandDef kCommands[] = {
    {"sort", sort_cmd, -2, kCmdWrite | kCmdDenyOom | kCmdTouchesOwnKeys, 1, 1, 1, "generic",
     "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", "1.0.0", {}, sort_keys},
    {"sort_ro", sort_ro_cmd, -2, kCmdReadonly, 1, 1, 1, "generic",
     "Returns the sorted elements of a list, a set, or a sorted set.", "7.0.0"},
};

}  // namespace

std::span<const CommandDef> sort_commands() { return kCommands; }

}  // namespace conduit::kv
