// What the command implementations share: lookups that count hits and expire lazily,
// argument parsing with Redis' errors, propagation helpers, typed entry creation.
#include <algorithm>
#include <cmath>

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

namespace {
Entry* lookup_read_counted(CommandContext& ctx, std::string_view key, bool touch) {
  Entry* e = ctx.server.lookup(*ctx.db, key, touch);
  if (e != nullptr) {
    ++ctx.server.stats_.keyspace_hits;
  } else {
    ++ctx.server.stats_.keyspace_misses;
    ctx.notify(kNotifyKeyMiss, "keymiss", key);
  }
  return e;
}
}  // namespace

Entry* lookup_read(CommandContext& ctx, std::string_view key) { return lookup_read_counted(ctx, key, true); }
Entry* lookup_read_notouch(CommandContext& ctx, std::string_view key) { return lookup_read_counted(ctx, key, false); }

Entry* lookup_write(CommandContext& ctx, std::string_view key) { return ctx.server.lookup(*ctx.db, key); }

bool check_type(CommandContext& ctx, const Entry* e, Type t) {
  if (e->type == t) return true;
  ctx.error(kWrongType);
  return false;
}

bool first_of_type(CommandContext& ctx, std::span<const std::string_view> keys, Type t, Entry** out, size_t* which) {
  *out = nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    Entry* e = lookup_write(ctx, keys[i]);
    if (e == nullptr) continue;
    if (!check_type(ctx, e, t)) return false;
    *out = e;
    *which = i;
    return true;
  }
  return true;
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

std::string wrong_args(std::string_view cmd) { return "ERR wrong number of arguments for '" + std::string(cmd) + "' command"; }

void delete_entry(CommandContext& ctx, Entry* e) { ctx.db->remove(e); }

bool get_positive(CommandContext& ctx, std::string_view s, int64_t* out) {
  if (!string2ll(s, out) || *out < 0) {
    ctx.error(kMustBePositive);
    return false;
  }
  return true;
}

// Redis' getTimeoutFromObjectOrReply (seconds, as a double): negative is an error, 0 is
// forever.
bool parse_mpop(CommandContext& ctx, size_t first, bool blocking, std::string_view end0, std::string_view end1,
                MpopArgs* out) {
  MpopArgs a;
  if (blocking && !get_timeout(ctx, ctx.arg(1), &a.deadline_ms)) return false;
  int64_t numkeys;
  if (!string2ll(ctx.arg(first), &numkeys) || numkeys <= 0) {
    ctx.error("ERR numkeys should be greater than 0");
    return false;
  }
  if (static_cast<uint64_t>(numkeys) > ctx.argc() - first - 2) {
    ctx.error(kSyntaxError);
    return false;
  }
  const size_t end_at = first + 1 + static_cast<size_t>(numkeys);
  if (eq_nocase(ctx.arg(end_at), end0)) {
    a.end0 = true;
  } else if (eq_nocase(ctx.arg(end_at), end1)) {
    a.end0 = false;
  } else {
    ctx.error(kSyntaxError);
    return false;
  }
  bool counted = false;
  for (size_t j = end_at + 1; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "count") && j + 1 < ctx.argc() && !counted) {
      counted = true;
      if (!string2ll(ctx.arg(++j), &a.count) || a.count <= 0) {
        ctx.error("ERR count should be greater than 0");
        return false;
      }
    } else {
      ctx.error(kSyntaxError);
      return false;
    }
  }
  a.keys = ctx.argv.subspan(first + 1, static_cast<size_t>(numkeys));
  *out = a;
  return true;
}

bool get_timeout(CommandContext& ctx, std::string_view s, int64_t* deadline_ms) {
  long double secs;
  if (!string2ld(s, &secs)) {
    ctx.error("ERR timeout is not a float or out of range");
    return false;
  }
  if (secs < 0) {
    ctx.error("ERR timeout is negative");
    return false;
  }
  const long double ms = secs * 1000.0L;
  if (ms > static_cast<long double>(INT64_MAX / 2)) {
    ctx.error("ERR timeout is out of range");
    return false;
  }
  const int64_t t = static_cast<int64_t>(std::ceil(ms));  // Redis: ceill(seconds * 1000)
  *deadline_ms = t == 0 ? 0 : ctx.now_ms() + t;
  return true;
}

std::string unknown_subcommand(std::string_view sub, std::string_view cmd) {
  return "ERR unknown subcommand '" + std::string(sub.substr(0, 128)) + "'. Try " + std::string(cmd) + " HELP.";
}

Entry* add_key(CommandContext& ctx, std::string_view key) {
  Entry* e = ctx.db->add(key);
  ctx.notify(kNotifyNew, "new", key);
  return e;
}

Entry* create_typed(CommandContext& ctx, std::string_view key, Type t, bool is_new) {
  Entry* e = is_new ? add_key(ctx, key) : ctx.db->add(key);
  e->type = t;
  switch (t) {
    case Type::kList: e->list = std::make_unique<ListValue>(); break;
    case Type::kHash: e->hash_v = std::make_unique<HashValue>(); break;
    case Type::kSet: e->set = std::make_unique<SetValue>(); break;
    case Type::kZSet: e->zset = std::make_unique<ZSetValue>(); break;
    case Type::kStream: e->stream = std::make_unique<StreamValue>(); break;
    case Type::kString: break;
  }
  ctx.server.record_access(e);
  return e;
}

Entry* get_or_create(CommandContext& ctx, std::string_view key, Type t) {
  Entry* e = lookup_write(ctx, key);
  if (e == nullptr) return create_typed(ctx, key, t);
  if (!check_type(ctx, e, t)) return nullptr;
  return e;
}

bool normalize_range(int64_t* start, int64_t* end, int64_t len) {
  if (*start < 0) *start += len;
  if (*end < 0) *end += len;
  if (*start < 0) *start = 0;
  if (*start > *end || *start >= len) return false;
  if (*end >= len) *end = len - 1;
  return true;
}

void reply_help(CommandContext& ctx, std::string_view cmd, std::initializer_list<const char*> lines) {
  ctx.reply.array(lines.size() + 3);
  ctx.reply.simple(std::string(cmd) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  for (const char* l : lines) ctx.reply.simple(l);
  ctx.reply.simple("HELP");
  ctx.reply.simple("    Print this help.");
}

void CommandContext::touched(std::string_view key, int d) {
  if (server.watching_clients_active() || server.blocked_clients() > 0 || server.tracking_active())
    server.extra_touched_.emplace_back(d < 0 ? db->index() : d, std::string(key));
}

void copy_value(const Entry* from, Entry* to) {
  to->type = from->type;
  switch (from->type) {
    case Type::kString: to->str = from->str; break;
    case Type::kList: to->list = std::make_unique<ListValue>(*from->list); break;
    case Type::kHash: to->hash_v = std::make_unique<HashValue>(*from->hash_v); break;
    case Type::kSet: to->set = std::make_unique<SetValue>(*from->set); break;
    case Type::kZSet: to->zset = std::make_unique<ZSetValue>(*from->zset); break;
    case Type::kStream: to->stream = std::make_unique<StreamValue>(*from->stream); break;
  }
}

Entry* move_entry(Database& a, Entry* from, Database& b, std::string_view key) {
  Entry* d = b.add(key);
  d->type = from->type;
  d->str = std::move(from->str);
  d->list = std::move(from->list);
  d->hash_v = std::move(from->hash_v);
  d->set = std::move(from->set);
  d->zset = std::move(from->zset);
  d->stream = std::move(from->stream);
  d->access = from->access;
  if (from->expire_ms >= 0) b.set_expire(d, from->expire_ms);
  a.remove(from);
  return d;
}

}  // namespace conduit::kv
