// Streams (XADD XLEN XRANGE XREVRANGE XDEL XTRIM XSETID; consumer groups and XREAD are in
// commands_stream_groups.cc): commands, replies and errors as Redis 7.0.  A collection that becomes empty is
// deleted, as in Redis.
#include <algorithm>
#include <climits>
#include <cmath>

#include "numbers.h"
#include "server_impl.h"
#include "streams.h"

namespace conduit::kv {

bool parse_stream_u64(std::string_view s, uint64_t* out) {
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

bool parse_stream_id(std::string_view s, StreamId* id, uint64_t missing_seq, bool* seq_auto) {
  const size_t dash = s.find('-');
  if (dash == std::string_view::npos) {
    if (!parse_stream_u64(s, &id->ms)) return false;
    id->seq = missing_seq;
    return true;
  }
  if (!parse_stream_u64(s.substr(0, dash), &id->ms)) return false;
  const std::string_view seq = s.substr(dash + 1);
  if (seq == "*" && seq_auto != nullptr) {
    *seq_auto = true;
    return true;
  }
  return parse_stream_u64(seq, &id->seq);
}

bool stream_incr_id(StreamId* id) {
  if (id->seq == UINT64_MAX) {
    if (id->ms == UINT64_MAX) return false;
    ++id->ms;
    id->seq = 0;
  } else {
    ++id->seq;
  }
  return true;
}

namespace {
bool stream_decr_id(StreamId* id) {
  if (id->seq == 0) {
    if (id->ms == 0) return false;
    --id->ms;
    id->seq = UINT64_MAX;
  } else {
    --id->seq;
  }
  return true;
}
}  // namespace

bool parse_range_id(CommandContext& ctx, std::string_view s, StreamId* id, bool is_start) {
  bool exclusive = false;
  if (s.size() > 1 && s[0] == '(') {
    exclusive = true;
    s.remove_prefix(1);
  }
  if (s == "-" && !exclusive) {
    *id = {0, 0};
    return true;
  }
  if (s == "+" && !exclusive) {
    *id = {UINT64_MAX, UINT64_MAX};
    return true;
  }
  if (!parse_stream_id(s, id, is_start ? 0 : UINT64_MAX)) {
    ctx.error(kInvalidStreamId);
    return false;
  }
  if (exclusive && !(is_start ? stream_incr_id(id) : stream_decr_id(id))) {
    ctx.error("ERR invalid start ID for the interval");
    return false;
  }
  return true;
}

void reply_stream_entry(ReplyWriter& reply, const StreamEntry& en) {
  reply.array(2);
  reply.bulk(en.first.to_string());
  reply.array(en.second.size());
  for (const auto& f : en.second) reply.bulk(f);
}

size_t stream_lower_bound(const StreamValue& s, const StreamId& from) {
  auto it = std::lower_bound(s.entries.begin(), s.entries.end(), from,
                             [](const StreamEntry& en, const StreamId& x) { return en.first < x; });
  return static_cast<size_t>(it - s.entries.begin());
}

const StreamEntry* stream_find(const StreamValue& s, const StreamId& id) {
  const size_t i = stream_lower_bound(s, id);
  return i < s.entries.size() && s.entries[i].first == id ? &s.entries[i] : nullptr;
}

bool stream_range_has_tombstones(const StreamValue& s, const StreamId* start, const StreamId* end) {
  const StreamId zero{};
  if (s.entries.empty() || s.max_deleted_id == zero) return false;
  if (s.max_deleted_id < s.first_id()) return false;
  const StreamId lo = start ? *start : StreamId{0, 0};
  const StreamId hi = end ? *end : StreamId{UINT64_MAX, UINT64_MAX};
  return lo <= s.max_deleted_id && s.max_deleted_id <= hi;
}

int64_t stream_estimate_distance(const StreamValue& s, const StreamId& id) {
  const int64_t added = static_cast<int64_t>(s.entries_added);
  const int64_t len = static_cast<int64_t>(s.entries.size());
  if (s.entries_added == 0) return 0;
  if (s.entries.empty() && id <= s.last_id) return added;
  if (id == s.last_id) return added;
  if (s.last_id < id) return StreamGroup::kEntriesReadUnknown;
  const StreamId first = s.first_id(), zero{};
  if (s.max_deleted_id == zero || s.max_deleted_id < first) {
    if (id < first) return added - len;
    if (id == first) return added - len + 1;
  }
  return StreamGroup::kEntriesReadUnknown;
}

bool stream_group_lag(const StreamValue& s, const StreamGroup& g, int64_t* lag) {
  if (s.entries_added == 0) {
    *lag = 0;
    return true;
  }
  if (g.entries_read != StreamGroup::kEntriesReadUnknown && !stream_range_has_tombstones(s, &g.last_id, nullptr)) {
    *lag = static_cast<int64_t>(s.entries_added) - g.entries_read;
    return true;
  }
  const int64_t read = stream_estimate_distance(s, g.last_id);
  if (read == StreamGroup::kEntriesReadUnknown) return false;
  *lag = static_cast<int64_t>(s.entries_added) - read;
  return true;
}

namespace {

constexpr std::string_view kInvalidId = kInvalidStreamId;

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
  uint64_t trimmed = 0;
  if (trim) stream_trim(s, by_maxlen, maxlen, minid, &trimmed);
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xadd", ctx.arg(1));
  if (trimmed > 0) ctx.notify(kNotifyStream, "xtrim", ctx.arg(1));
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

void emit_stream_entry(CommandContext& ctx, const StreamEntry& en) { reply_stream_entry(ctx.reply, en); }

void xrange_generic(CommandContext& ctx, bool rev) {
  StreamId lo, hi;
  const std::string_view a = ctx.arg(rev ? 3 : 2), b = ctx.arg(rev ? 2 : 3);
  if (!parse_range_id(ctx, a, &lo, true) || !parse_range_id(ctx, b, &hi, false)) return;
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
      if (e->stream->max_deleted_id < id) e->stream->max_deleted_id = id;
      ++n;
    }
  }
  ctx.dirty += static_cast<uint64_t>(n);
  if (n > 0) ctx.notify(kNotifyStream, "xdel", ctx.arg(1));
  ctx.reply.integer(n);
}

// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]: exact trimming (LIMIT only
// bounds approximate trimming, which trims exactly here, as Redis may).
void xtrim_cmd(CommandContext& ctx) {
  size_t j = 2;
  const std::string_view strategy = ctx.arg(j);
  const bool by_maxlen = eq_nocase(strategy, "maxlen");
  if (!by_maxlen && !eq_nocase(strategy, "minid")) return ctx.error(kSyntaxError);
  ++j;
  bool approx = false;
  if (j < ctx.argc() && (ctx.arg(j) == "=" || ctx.arg(j) == "~")) approx = ctx.arg(j++) == "~";
  if (j >= ctx.argc()) return ctx.error(kSyntaxError);
  uint64_t maxlen = 0;
  StreamId minid;
  if (by_maxlen) {
    int64_t v;
    if (!get_ll(ctx, ctx.arg(j), &v)) return;
    if (v < 0) return ctx.error("ERR The MAXLEN argument must be >= 0.");
    maxlen = static_cast<uint64_t>(v);
  } else if (!parse_stream_id(ctx.arg(j), &minid, 0)) {
    return ctx.error(kInvalidId);
  }
  ++j;
  for (; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "limit") && j + 1 < ctx.argc()) {
      int64_t limit;
      if (!get_ll(ctx, ctx.arg(++j), &limit)) return;
      if (limit < 0) return ctx.error("ERR The LIMIT argument must be >= 0.");
      if (!approx) return ctx.error("ERR syntax error, LIMIT cannot be used without the special ~ option");
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.reply.integer(0);
  if (!check_type(ctx, e, Type::kStream)) return;
  uint64_t removed = 0;
  stream_trim(*e->stream, by_maxlen, maxlen, minid, &removed);
  if (removed > 0) {
    ++ctx.dirty;
    ctx.notify(kNotifyStream, "xtrim", ctx.arg(1));
  }
  ctx.reply.integer(static_cast<int64_t>(removed));
}

// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id] (also what the AOF rewrite emits).
void xsetid_cmd(CommandContext& ctx) {
  StreamId id, max_deleted;
  int64_t entries_added = -1;
  if (!parse_stream_id(ctx.arg(2), &id, 0)) return ctx.error(kInvalidId);
  for (size_t j = 3; j < ctx.argc(); j += 2) {
    const bool more = j + 1 < ctx.argc();
    if (eq_nocase(ctx.arg(j), "entriesadded") && more) {
      if (!get_ll(ctx, ctx.arg(j + 1), &entries_added)) return;
      if (entries_added < 0) return ctx.error("ERR entries_added must be positive");
    } else if (eq_nocase(ctx.arg(j), "maxdeletedid") && more) {
      if (!parse_stream_id(ctx.arg(j + 1), &max_deleted, 0)) return ctx.error(kInvalidId);
      if (id < max_deleted)
        return ctx.error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e == nullptr) return ctx.error("ERR no such key");
  if (!check_type(ctx, e, Type::kStream)) return;
  StreamValue& s = *e->stream;
  if (id < s.max_deleted_id) return ctx.error("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
  if (!s.entries.empty()) {
    if (id < s.entries.back().first)
      return ctx.error("ERR The ID specified in XSETID is smaller than the target stream top item");
    if (entries_added != -1 && s.entries.size() > static_cast<uint64_t>(entries_added))
      return ctx.error("ERR The entries_added specified in XSETID is smaller than the target stream length");
  }
  s.last_id = id;
  if (entries_added != -1) s.entries_added = static_cast<uint64_t>(entries_added);
  if (!(max_deleted == StreamId{})) s.max_deleted_id = max_deleted;
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xsetid", ctx.arg(1));
  ctx.reply.ok();
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kCommands[] = {
    {"xadd", xadd_cmd, -5, kW | kM | kF, 1, 1, 1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"},
    {"xlen", xlen_cmd, 2, kR | kF, 1, 1, 1, "stream", "Return the number of messages in a stream.", "5.0.0"},
    {"xrange", xrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs.", "5.0.0"},
    {"xrevrange", xrevrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs in reverse order.", "5.0.0"},
    {"xtrim", xtrim_cmd, -4, kW, 1, 1, 1, "stream", "Deletes messages from the beginning of a stream.", "5.0.0"},
    {"xsetid", xsetid_cmd, -3, kW | kM | kF, 1, 1, 1, "stream", "An internal command for replicating stream values.", "5.0.0"},
    {"xdel", xdel_cmd, -3, kW | kF, 1, 1, 1, "stream", "Returns the number of messages after removing them from a stream.", "5.0.0"},
};

}  // namespace

std::span<const CommandDef> stream_commands() { return kCommands; }

}  // namespace conduit::kv
