// Streams (XADD XLEN XRANGE XREVRANGE XDEL): commands, replies and errors as Redis 7.0.  A collection that becomes empty is
// deleted, as in Redis.
#include <algorithm>
#include <climits>
#include <cmath>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

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
  if (n > 0) ctx.notify(kNotifyStream, "xdel", ctx.arg(1));
  ctx.reply.integer(n);
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast;

const CommandDef kCommands[] = {
    {"xadd", xadd_cmd, -5, kW | kM | kF, 1, 1, 1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"},
    {"xlen", xlen_cmd, 2, kR | kF, 1, 1, 1, "stream", "Return the number of messages in a stream.", "5.0.0"},
    {"xrange", xrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs.", "5.0.0"},
    {"xrevrange", xrevrange_cmd, -4, kR, 1, 1, 1, "stream", "Returns the messages from a stream within a range of IDs in reverse order.", "5.0.0"},
    {"xdel", xdel_cmd, -3, kW | kF, 1, 1, 1, "stream", "Returns the number of messages after removing them from a stream.", "5.0.0"},
};

}  // namespace

std::span<const CommandDef> stream_commands() { return kCommands; }

}  // namespace conduit::kv
