// XREAD, XREADGROUP and the consumer groups (XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM;
// XINFO's subcommands are in commands_stream_info.cc) as Redis 7.0.15: replies, error texts, keyspace events, entries-read / lag.
//
// The groups live in the stream value (store.h StreamGroup): COPY deep-copies them, DEL
// frees them, the AOF rewrite writes them back (aof_rewrite.cc: XSETID, XGROUP CREATE ...
// ENTRIESREAD, XCLAIM ... FORCE JUSTID, XGROUP CREATECONSUMER).
//
// Propagation (AOF): XREADGROUP, XCLAIM and XAUTOCLAIM are never logged as sent -- what
// they do depends on the clock (idle times, delivery times) and, for XREADGROUP, on which
// entries were there when it ran.  As Redis, each entry they assign is logged as
// `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID last-id`
// (which reproduces the pending entry exactly: owner, delivery time and count), a group
// whose last-delivered id moved as `XGROUP SETID key group id ENTRIESREAD n`, and a
// consumer created without claiming anything as `XGROUP CREATECONSUMER`.
//
// Blocking: XREAD / XREADGROUP BLOCK use blocking.cc.  A blocked XREAD stores "$" resolved
// to the stream's last id at the time, so being tried again after an XADD reads what came
// after it.  Inside MULTI (or for the AOF loader) they answer nil at once.
#include <algorithm>

#include "numbers.h"
#include "server_impl.h"
#include "streams.h"

namespace conduit::kv {
namespace {

std::string nogroup(std::string_view key, std::string_view group) {
  return "NOGROUP No such key '" + std::string(key) + "' or consumer group '" + std::string(group) + "'";
}

// Redis' streamParseStrictIDOrReply: "ms[-seq]" only.
bool parse_strict_id(CommandContext& ctx, std::string_view s, StreamId* id) {
  if (!parse_stream_id(s, id, 0)) {
    ctx.error(kInvalidStreamId);
    return false;
  }
  return true;
}

// Redis' streamCreateConsumer (SCC_DEFAULT): dirty, "xgroup-createconsumer".
StreamConsumer* create_consumer(CommandContext& ctx, StreamGroup& g, std::string_view key, std::string_view name) {
  auto [it, inserted] = g.consumers.try_emplace(std::string(name));
  if (!inserted) return nullptr;
  it->second.seen_time = ctx.now_ms();
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xgroup-createconsumer", key);
  return &it->second;
}

StreamConsumer* find_consumer(StreamGroup& g, std::string_view name) {
  auto it = g.consumers.find(name);
  return it == g.consumers.end() ? nullptr : &it->second;
}

void propagate_xclaim(CommandContext& ctx, std::string_view key, std::string_view group, const StreamGroup& g,
                      const StreamId& id, const StreamPending& p) {
  const std::string_view args[] = {"XCLAIM", key, group, ctx.own(p.consumer), "0", ctx.own(id.to_string()),
                                   "TIME", ctx.own(std::to_string(p.delivery_time)), "RETRYCOUNT",
                                   ctx.own(std::to_string(p.delivery_count)), "FORCE", "JUSTID", "LASTID",
                                   ctx.own(g.last_id.to_string())};
  ctx.also_propagate(args);
}

void propagate_group_id(CommandContext& ctx, std::string_view key, std::string_view group, const StreamGroup& g) {
  const std::string_view args[] = {"XGROUP", "SETID", key, group, ctx.own(g.last_id.to_string()), "ENTRIESREAD",
                                   ctx.own(std::to_string(g.entries_read))};
  ctx.also_propagate(args);
}

// Moves (or creates) the pending entry id to consumer `to`.
void assign_pending(StreamGroup& g, StreamPending& p, const StreamId& id, std::string_view to) {
  if (p.consumer == to) return;
  if (!p.consumer.empty())
    if (StreamConsumer* old = find_consumer(g, p.consumer)) old->pending.erase(id);
  p.consumer = std::string(to);
  g.consumers[p.consumer].pending.insert(id);
}

// --- XREAD / XREADGROUP ---------------------------------------------------------------------

// Position of STREAMS among the options (Redis' key spec: keyword search from `from`).
size_t find_streams(std::span<const std::string_view> argv, size_t from) {
  for (size_t i = from; i < argv.size(); ++i)
    if (eq_nocase(argv[i], "streams")) return i;
  return 0;
}
template <size_t From>
void xread_keys(std::span<const std::string_view> argv, std::vector<size_t>* out) {
  const size_t s = find_streams(argv, From);
  if (s == 0) return;
  const size_t n = (argv.size() - s - 1) / 2;
  for (size_t i = 0; i < n; ++i) out->push_back(s + 1 + i);
}

constexpr StreamId kMaxId{UINT64_MAX, UINT64_MAX};

void xread_generic(CommandContext& ctx, bool xreadgroup) {
  int64_t timeout_ms = -1, count = 0;
  size_t streams_arg = 0, nstreams = 0;
  std::string_view group_name, consumer_name;
  bool noack = false, have_group = false;
  for (size_t i = 1; i < ctx.argc(); ++i) {
    const size_t more = ctx.argc() - i - 1;
    const std::string_view o = ctx.arg(i);
    if (eq_nocase(o, "block") && more) {
      ++i;
      if (!get_ll(ctx, ctx.arg(i), &timeout_ms, "ERR timeout is not an integer or out of range")) return;
      if (timeout_ms < 0) return ctx.error("ERR timeout is negative");
    } else if (eq_nocase(o, "count") && more) {
      if (!get_ll(ctx, ctx.arg(++i), &count)) return;
      if (count < 0) count = 0;
    } else if (eq_nocase(o, "streams") && more) {
      streams_arg = i + 1;
      nstreams = ctx.argc() - streams_arg;
      if (nstreams % 2 != 0) {
        return ctx.error(std::string("ERR Unbalanced '") + (xreadgroup ? "xreadgroup" : "xread") +
                         "' list of streams: for each stream key an ID or '" + (xreadgroup ? ">" : "$") +
                         "' must be specified.");
      }
      nstreams /= 2;
      break;
    } else if (eq_nocase(o, "group") && more >= 2) {
      if (!xreadgroup) return ctx.error("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
      group_name = ctx.arg(i + 1);
      consumer_name = ctx.arg(i + 2);
      have_group = true;
      i += 2;
    } else if (eq_nocase(o, "noack")) {
      if (!xreadgroup) return ctx.error("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
      noack = true;
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  if (streams_arg == 0) return ctx.error(kSyntaxError);
  if (xreadgroup && !have_group) return ctx.error("ERR Missing GROUP option for XREADGROUP");

  std::vector<StreamId> ids(nstreams);
  std::vector<StreamGroup*> groups(nstreams, nullptr);
  std::vector<Entry*> entries(nstreams, nullptr);
  for (size_t k = 0; k < nstreams; ++k) {
    const std::string_view key = ctx.arg(streams_arg + k), id_arg = ctx.arg(streams_arg + nstreams + k);
    Entry* e = lookup_read(ctx, key);
    if (e != nullptr && !check_type(ctx, e, Type::kStream)) return;
    entries[k] = e;
    if (have_group) {
      if (e == nullptr || (groups[k] = find_group(*e->stream, group_name)) == nullptr)
        return ctx.error("NOGROUP No such key '" + std::string(key) + "' or consumer group '" + std::string(group_name) +
                         "' in XREADGROUP with GROUP option");
    }
    if (id_arg == "$") {
      if (xreadgroup)
        return ctx.error(
            "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by "
            "specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
      ids[k] = e != nullptr ? e->stream->last_id : StreamId{};
    } else if (id_arg == ">") {
      if (!xreadgroup)
        return ctx.error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
      ids[k] = kMaxId;
    } else if (!parse_strict_id(ctx, id_arg, &ids[k])) {
      return;
    }
  }

  // Which streams can be served now (Redis: a group reading its history always is).
  struct Served {
    size_t k;
    StreamId after;
    bool history;
    StreamConsumer* consumer;
  };
  std::vector<Served> served;
  const int64_t now = ctx.now_ms();
  for (size_t k = 0; k < nstreams; ++k) {
    Entry* e = entries[k];
    if (e == nullptr) continue;
    StreamValue& s = *e->stream;
    bool serve = false, history = false;
    StreamId after = ids[k];
    StreamConsumer* consumer = nullptr;
    if (have_group) {
      StreamGroup& g = *groups[k];
      if (!(ids[k] == kMaxId)) {
        serve = history = true;
      } else if (!s.entries.empty() && g.last_id < s.entries.back().first) {
        serve = true;
        after = g.last_id;
      }
      if (serve) {  // as Redis 7.0: the consumer is created when it is served
        const std::string_view key = ctx.arg(streams_arg + k);
        consumer = find_consumer(g, consumer_name);
        if (consumer == nullptr) {
          consumer = create_consumer(ctx, g, key, consumer_name);
          const std::string_view args[] = {"XGROUP", "CREATECONSUMER", key, group_name, consumer_name};
          ctx.also_propagate(args);
        }
        consumer->seen_time = now;
      }
    } else if (!s.entries.empty() && after < s.entries.back().first) {
      serve = true;
    }
    if (serve) served.push_back({k, after, history, consumer});
  }

  if (served.empty()) {
    if (timeout_ms >= 0 && ctx.server.can_block(ctx)) {
      const std::span<const std::string_view> keys = ctx.argv.subspan(streams_arg, nstreams);
      const bool retry = ctx.client.blocked != nullptr;  // tried again for a waiter
      ctx.server.block(ctx, keys, timeout_ms == 0 ? 0 : ctx.now_ms() + timeout_ms, BlockState::kNullArray);
      if (!retry && ctx.client.blocked) {
        BlockState& b = *ctx.client.blocked;
        b.unblock_on_delete = have_group;
        for (size_t k = 0; k < nstreams; ++k)  // "$" means the last id as of now
          if (b.argv[streams_arg + nstreams + k] == "$") b.argv[streams_arg + nstreams + k] = ids[k].to_string();
      }
      return;
    }
    return ctx.reply.null_array();
  }

  const bool resp2 = ctx.reply.version() == RespVersion::kResp2;
  if (resp2) ctx.reply.array(served.size());
  else ctx.reply.map(served.size());
  for (const Served& sv : served) {
    const std::string_view key = ctx.arg(streams_arg + sv.k);
    StreamValue& s = *entries[sv.k]->stream;
    if (resp2) ctx.reply.array(2);
    ctx.reply.bulk(key);
    StreamId start = sv.after;
    const bool more = stream_incr_id(&start);
    if (!have_group) {
      size_t i = more ? stream_lower_bound(s, start) : s.entries.size();
      size_t n = s.entries.size() - i;
      if (count > 0) n = std::min<size_t>(n, static_cast<size_t>(count));
      ctx.reply.array(n);
      for (size_t j = 0; j < n; ++j) reply_stream_entry(ctx.reply, s.entries[i + j]);
      continue;
    }
    StreamGroup& g = *groups[sv.k];
    if (sv.history) {
      // The consumer's own pending entries after the id; a deleted entry shows as [id, nil].
      std::vector<StreamId> pend;
      if (more)
        for (auto it = sv.consumer->pending.lower_bound(start);
             it != sv.consumer->pending.end() && (count == 0 || pend.size() < static_cast<size_t>(count)); ++it)
          pend.push_back(*it);
      ctx.reply.array(pend.size());
      for (const StreamId& id : pend) {
        if (const StreamEntry* en = stream_find(s, id)) {
          reply_stream_entry(ctx.reply, *en);
          if (auto pit = g.pel.find(id); pit != g.pel.end()) {
            pit->second.delivery_time = now;
            ++pit->second.delivery_count;
          }
        } else {
          ctx.reply.array(2);
          ctx.reply.bulk(id.to_string());
          ctx.reply.null_array();
        }
      }
      ++ctx.dirty;
      continue;
    }
    size_t i = more ? stream_lower_bound(s, start) : s.entries.size();
    size_t n = s.entries.size() - i;
    if (count > 0) n = std::min<size_t>(n, static_cast<size_t>(count));
    ctx.reply.array(n);
    bool moved = false;
    for (size_t j = 0; j < n; ++j) {
      const StreamEntry& en = s.entries[i + j];
      const StreamId& id = en.first;
      if (g.last_id < id) {
        if (g.entries_read != StreamGroup::kEntriesReadUnknown && !stream_range_has_tombstones(s, &id, nullptr))
          ++g.entries_read;
        else if (s.entries_added != 0)
          g.entries_read = stream_estimate_distance(s, id);
        g.last_id = id;
        moved = true;
      }
      reply_stream_entry(ctx.reply, en);
      if (!noack) {
        auto [it, inserted] = g.pel.try_emplace(id);
        StreamPending& p = it->second;
        assign_pending(g, p, id, consumer_name);
        p.delivery_time = now;
        p.delivery_count = 1;
        propagate_xclaim(ctx, key, group_name, g, id, p);
      }
    }
    if (moved) propagate_group_id(ctx, key, group_name, g);
    ++ctx.dirty;
  }
  if (have_group) ctx.propagated = true;
}

void xread_cmd(CommandContext& ctx) { xread_generic(ctx, false); }
void xreadgroup_cmd(CommandContext& ctx) { xread_generic(ctx, true); }

// --- XGROUP -----------------------------------------------------------------------------------

// The stream of XGROUP's key (argv[2]) and group (argv[3]) with Redis' checks; false after
// replying.  *s null only when `mkstream` allows it.
bool xgroup_target(CommandContext& ctx, bool mkstream, bool need_group, Entry** e, StreamGroup** g) {
  *e = lookup_write(ctx, ctx.arg(2));
  *g = nullptr;
  if (*e != nullptr && !check_type(ctx, *e, Type::kStream)) return false;
  if (*e == nullptr) {
    if (mkstream) return true;
    ctx.error(
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM "
        "option to create an empty stream automatically.");
    return false;
  }
  *g = find_group(*(*e)->stream, ctx.arg(3));
  if (*g == nullptr && need_group) {
    ctx.error("NOGROUP No such consumer group '" + std::string(ctx.arg(3)) + "' for key name '" +
              std::string(ctx.arg(2)) + "'");
    return false;
  }
  return true;
}

// CREATE / SETID options: [MKSTREAM] (CREATE) [ENTRIESREAD n].
bool xgroup_options(CommandContext& ctx, bool create, bool* mkstream, int64_t* entries_read) {
  for (size_t i = 5; i < ctx.argc();) {
    if (create && eq_nocase(ctx.arg(i), "mkstream")) {
      *mkstream = true;
      ++i;
    } else if (eq_nocase(ctx.arg(i), "entriesread") && i + 1 < ctx.argc()) {
      if (!get_ll(ctx, ctx.arg(i + 1), entries_read)) return false;
      if (*entries_read < 0 && *entries_read != StreamGroup::kEntriesReadUnknown) {
        ctx.error("ERR value for ENTRIESREAD must be positive or -1");
        return false;
      }
      i += 2;
    } else {
      ctx.error("ERR unknown subcommand or wrong number of arguments for '" + std::string(ctx.arg(1)) +
                "'. Try XGROUP HELP.");
      return false;
    }
  }
  return true;
}

void xgroup_create_cmd(CommandContext& ctx) {
  bool mkstream = false;
  int64_t entries_read = StreamGroup::kEntriesReadUnknown;
  if (ctx.argc() > 8) return ctx.error(kSyntaxError);
  if (!xgroup_options(ctx, true, &mkstream, &entries_read)) return;
  Entry* e;
  StreamGroup* g;
  if (!xgroup_target(ctx, mkstream, false, &e, &g)) return;
  StreamId id;
  if (ctx.arg(4) == "$") {
    if (e != nullptr) id = e->stream->last_id;
  } else if (!parse_strict_id(ctx, ctx.arg(4), &id)) {
    return;
  }
  if (g != nullptr) return ctx.error("BUSYGROUP Consumer Group name already exists");
  if (e == nullptr) {
    e = create_typed(ctx, ctx.arg(2), Type::kStream);
    ++ctx.dirty;
  }
  StreamGroup& ng = e->stream->groups[std::string(ctx.arg(3))];
  ng.last_id = id;
  ng.entries_read = entries_read;
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xgroup-create", ctx.arg(2));
  ctx.reply.ok();
}

void xgroup_setid_cmd(CommandContext& ctx) {
  bool mkstream = false;
  int64_t entries_read = StreamGroup::kEntriesReadUnknown;
  if (ctx.argc() != 5 && ctx.argc() != 7)
    return ctx.error("ERR unknown subcommand or wrong number of arguments for '" + std::string(ctx.arg(1)) +
                     "'. Try XGROUP HELP.");
  if (!xgroup_options(ctx, false, &mkstream, &entries_read)) return;
  Entry* e;
  StreamGroup* g;
  if (!xgroup_target(ctx, false, true, &e, &g)) return;
  StreamId id;
  if (ctx.arg(4) == "$") {
    id = e->stream->last_id;
  } else if (!parse_range_id(ctx, ctx.arg(4), &id, true)) {
    return;
  }
  g->last_id = id;
  g->entries_read = entries_read;
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xgroup-setid", ctx.arg(2));
  ctx.reply.ok();
}

void xgroup_destroy_cmd(CommandContext& ctx) {
  Entry* e;
  StreamGroup* g;
  if (!xgroup_target(ctx, false, false, &e, &g)) return;
  if (g == nullptr) return ctx.reply.integer(0);
  e->stream->groups.erase(e->stream->groups.find(ctx.arg(3)));
  ++ctx.dirty;  // call() signals the key: XREADGROUPs blocked on the group get NOGROUP
  ctx.notify(kNotifyStream, "xgroup-destroy", ctx.arg(2));
  ctx.reply.integer(1);
}

void xgroup_createconsumer_cmd(CommandContext& ctx) {
  Entry* e;
  StreamGroup* g;
  if (!xgroup_target(ctx, false, true, &e, &g)) return;
  ctx.reply.integer(create_consumer(ctx, *g, ctx.arg(2), ctx.arg(4)) != nullptr ? 1 : 0);
}

void xgroup_delconsumer_cmd(CommandContext& ctx) {
  Entry* e;
  StreamGroup* g;
  if (!xgroup_target(ctx, false, true, &e, &g)) return;
  auto it = g->consumers.find(ctx.arg(4));
  if (it == g->consumers.end()) return ctx.reply.integer(0);
  const int64_t pending = static_cast<int64_t>(it->second.pending.size());
  for (const StreamId& id : it->second.pending) g->pel.erase(id);
  g->consumers.erase(it);
  ++ctx.dirty;
  ctx.notify(kNotifyStream, "xgroup-delconsumer", ctx.arg(2));
  ctx.reply.integer(pending);
}

void xgroup_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "XGROUP",
             {"CREATE <key> <groupname> <id|$> [option]",
              "    Create a new consumer group. Options are:",
              "    * MKSTREAM",
              "      Create the empty stream if it does not exist.",
              "    * ENTRIESREAD entries_read",
              "      Set the group's entries_read counter (internal use).",
              "CREATECONSUMER <key> <groupname> <consumer>",
              "    Create a new consumer in the specified group.",
              "DELCONSUMER <key> <groupname> <consumer>",
              "    Remove the specified consumer.",
              "DESTROY <key> <groupname>",
              "    Remove the specified group.",
              "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
              "    Set the current group ID and entries_read counter."});
}

// --- XACK / XPENDING --------------------------------------------------------------------------

void xack_cmd(CommandContext& ctx) {
  std::vector<StreamId> ids(ctx.argc() - 3);
  for (size_t j = 3; j < ctx.argc(); ++j)
    if (!parse_strict_id(ctx, ctx.arg(j), &ids[j - 3])) return;
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kStream)) return;
  StreamGroup* g = e != nullptr ? find_group(*e->stream, ctx.arg(2)) : nullptr;
  if (g == nullptr) return ctx.reply.integer(0);
  int64_t acked = 0;
  for (const StreamId& id : ids) {
    auto it = g->pel.find(id);
    if (it == g->pel.end()) continue;
    if (StreamConsumer* c = find_consumer(*g, it->second.consumer)) c->pending.erase(id);
    g->pel.erase(it);
    ++acked;
    ++ctx.dirty;
  }
  ctx.reply.integer(acked);
}

void xpending_cmd(CommandContext& ctx) {
  const bool summary = ctx.argc() == 3;
  if (!summary && (ctx.argc() < 6 || ctx.argc() > 9)) return ctx.error(kSyntaxError);
  StreamId start, end;
  int64_t count = 0, min_idle = 0;
  std::string_view consumer_name;
  bool by_consumer = false;
  if (!summary) {
    size_t at = 3;
    if (eq_nocase(ctx.arg(3), "idle")) {
      if (!get_ll(ctx, ctx.arg(4), &min_idle)) return;
      if (ctx.argc() < 8) return ctx.error(kSyntaxError);
      at += 2;
    }
    if (!get_ll(ctx, ctx.arg(at + 2), &count)) return;
    if (count < 0) count = 0;
    if (!parse_range_id(ctx, ctx.arg(at), &start, true) || !parse_range_id(ctx, ctx.arg(at + 1), &end, false)) return;
    if (at + 3 < ctx.argc()) {
      consumer_name = ctx.arg(at + 3);
      by_consumer = true;
    }
  }
  Entry* e = lookup_read(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kStream)) return;
  StreamGroup* g = e != nullptr ? find_group(*e->stream, ctx.arg(2)) : nullptr;
  if (g == nullptr) return ctx.error(nogroup(ctx.arg(1), ctx.arg(2)));
  if (summary) {
    ctx.reply.array(4);
    ctx.reply.integer(static_cast<int64_t>(g->pel.size()));
    if (g->pel.empty()) {
      ctx.reply.null();
      ctx.reply.null();
      ctx.reply.null_array();
      return;
    }
    ctx.reply.bulk(g->pel.begin()->first.to_string());
    ctx.reply.bulk(g->pel.rbegin()->first.to_string());
    size_t n = 0;
    for (const auto& [name, c] : g->consumers) n += c.pending.empty() ? 0 : 1;
    ctx.reply.array(n);
    for (const auto& [name, c] : g->consumers) {
      if (c.pending.empty()) continue;
      ctx.reply.array(2);
      ctx.reply.bulk(name);
      ctx.reply.bulk(std::to_string(c.pending.size()));
    }
    return;
  }
  const StreamConsumer* c = nullptr;
  if (by_consumer && (c = find_consumer(*g, consumer_name)) == nullptr) return ctx.reply.array(0);
  const int64_t now = ctx.now_ms();
  std::vector<std::pair<StreamId, const StreamPending*>> out;
  auto take = [&](const StreamId& id, const StreamPending& p) {
    if (min_idle > 0 && now - p.delivery_time < min_idle) return;
    out.emplace_back(id, &p);
  };
  if (c != nullptr) {
    for (auto it = c->pending.lower_bound(start); count > 0 && it != c->pending.end() && *it <= end; ++it) {
      auto pit = g->pel.find(*it);
      if (pit == g->pel.end()) continue;
      const size_t before = out.size();
      take(*it, pit->second);
      if (out.size() > before) --count;
    }
  } else {
    for (auto it = g->pel.lower_bound(start); count > 0 && it != g->pel.end() && it->first <= end; ++it) {
      const size_t before = out.size();
      take(it->first, it->second);
      if (out.size() > before) --count;
    }
  }
  ctx.reply.array(out.size());
  for (const auto& [id, p] : out) {
    ctx.reply.array(4);
    ctx.reply.bulk(id.to_string());
    ctx.reply.bulk(p->consumer);
    ctx.reply.integer(std::max<int64_t>(now - p->delivery_time, 0));
    ctx.reply.integer(static_cast<int64_t>(p->delivery_count));
  }
}

// --- XCLAIM / XAUTOCLAIM ----------------------------------------------------------------------

// A pending entry whose stream entry is gone: dropped (logged as the XCLAIM that drops it
// on replay too).
void drop_deleted_pending(CommandContext& ctx, StreamGroup& g, std::map<StreamId, StreamPending>::iterator it) {
  propagate_xclaim(ctx, ctx.arg(1), ctx.arg(2), g, it->first, it->second);
  if (StreamConsumer* c = find_consumer(g, it->second.consumer)) c->pending.erase(it->first);
  ++ctx.dirty;
  g.pel.erase(it);
}

void xclaim_cmd(CommandContext& ctx) {
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kStream)) return;
  StreamGroup* g = e != nullptr ? find_group(*e->stream, ctx.arg(2)) : nullptr;
  if (g == nullptr) return ctx.error(nogroup(ctx.arg(1), ctx.arg(2)));
  int64_t min_idle;
  if (!get_ll(ctx, ctx.arg(4), &min_idle, "ERR Invalid min-idle-time argument for XCLAIM")) return;
  if (min_idle < 0) min_idle = 0;
  size_t j = 5;
  std::vector<StreamId> ids;
  for (StreamId id; j < ctx.argc() && parse_stream_id(ctx.arg(j), &id, 0); ++j) ids.push_back(id);
  const int64_t now = ctx.now_ms();
  int64_t delivery = -1, retrycount = -1;
  bool force = false, justid = false;
  StreamId last_id;
  for (; j < ctx.argc(); ++j) {
    const bool more = j + 1 < ctx.argc();
    const std::string_view o = ctx.arg(j);
    if (eq_nocase(o, "force")) {
      force = true;
    } else if (eq_nocase(o, "justid")) {
      justid = true;
    } else if (eq_nocase(o, "idle") && more) {
      if (!get_ll(ctx, ctx.arg(++j), &delivery, "ERR Invalid IDLE option argument for XCLAIM")) return;
      delivery = now - delivery;
    } else if (eq_nocase(o, "time") && more) {
      if (!get_ll(ctx, ctx.arg(++j), &delivery, "ERR Invalid TIME option argument for XCLAIM")) return;
    } else if (eq_nocase(o, "retrycount") && more) {
      if (!get_ll(ctx, ctx.arg(++j), &retrycount, "ERR Invalid RETRYCOUNT option argument for XCLAIM")) return;
    } else if (eq_nocase(o, "lastid") && more) {
      if (!parse_strict_id(ctx, ctx.arg(++j), &last_id)) return;
    } else {
      return ctx.error("ERR Unrecognized XCLAIM option '" + std::string(o) + "'");
    }
  }
  bool propagate_last_id = false;
  if (g->last_id < last_id) {
    g->last_id = last_id;
    propagate_last_id = true;
  }
  if (delivery < 0 || delivery > now) delivery = now;
  StreamValue& s = *e->stream;
  const std::string_view name = ctx.arg(3);
  bool have_consumer = false;
  std::vector<const StreamEntry*> claimed_entries;
  std::vector<StreamId> claimed;
  for (const StreamId& id : ids) {
    auto it = g->pel.find(id);
    const StreamEntry* en = stream_find(s, id);
    if (en == nullptr) {
      if (it != g->pel.end()) {
        drop_deleted_pending(ctx, *g, it);
        propagate_last_id = false;
      }
      continue;
    }
    bool created = false;
    if (it == g->pel.end()) {
      if (!force) continue;
      it = g->pel.try_emplace(id).first;  // delivery_count 1, no owner yet
      created = true;
    }
    StreamPending& p = it->second;
    if (!created && min_idle > 0 && now - p.delivery_time < min_idle) continue;
    if (!have_consumer) {
      if (find_consumer(*g, name) == nullptr) create_consumer(ctx, *g, ctx.arg(1), name);
      have_consumer = true;
    }
    assign_pending(*g, p, id, name);
    p.delivery_time = delivery;
    if (retrycount >= 0) p.delivery_count = static_cast<uint64_t>(retrycount);
    else if (!justid) ++p.delivery_count;
    claimed.push_back(id);
    claimed_entries.push_back(en);
    propagate_xclaim(ctx, ctx.arg(1), ctx.arg(2), *g, id, p);
    propagate_last_id = false;
    ++ctx.dirty;
  }
  if (have_consumer) g->consumers[std::string(name)].seen_time = now;
  if (propagate_last_id) {
    propagate_group_id(ctx, ctx.arg(1), ctx.arg(2), *g);
    ++ctx.dirty;
  }
  ctx.propagated = true;
  ctx.reply.array(claimed.size());
  for (size_t k = 0; k < claimed.size(); ++k) {
    if (justid) ctx.reply.bulk(claimed[k].to_string());
    else reply_stream_entry(ctx.reply, *claimed_entries[k]);
  }
}

void xautoclaim_cmd(CommandContext& ctx) {
  int64_t min_idle;
  if (!get_ll(ctx, ctx.arg(4), &min_idle, "ERR Invalid min-idle-time argument for XAUTOCLAIM")) return;
  if (min_idle < 0) min_idle = 0;
  StreamId start;
  if (!parse_range_id(ctx, ctx.arg(5), &start, true)) return;
  constexpr int64_t kAttemptsFactor = 10;
  int64_t count = 100;
  bool justid = false;
  for (size_t j = 6; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "count") && j + 1 < ctx.argc()) {
      if (!get_ll(ctx, ctx.arg(j + 1), &count, "ERR COUNT must be > 0")) return;
      if (count < 1 || count > INT64_MAX / static_cast<int64_t>(std::max<size_t>(sizeof(StreamId), kAttemptsFactor)))
        return ctx.error("ERR COUNT must be > 0");
      ++j;
    } else if (eq_nocase(ctx.arg(j), "justid")) {
      justid = true;
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  Entry* e = lookup_write(ctx, ctx.arg(1));
  if (e != nullptr && !check_type(ctx, e, Type::kStream)) return;
  StreamGroup* g = e != nullptr ? find_group(*e->stream, ctx.arg(2)) : nullptr;
  if (g == nullptr) return ctx.error(nogroup(ctx.arg(1), ctx.arg(2)));
  StreamValue& s = *e->stream;
  const std::string_view name = ctx.arg(3);
  const int64_t now = ctx.now_ms();
  int64_t attempts = count * kAttemptsFactor;
  bool have_consumer = false;
  std::vector<std::pair<StreamId, const StreamEntry*>> claimed;
  std::vector<StreamId> deleted;
  auto it = g->pel.lower_bound(start);
  while (attempts-- > 0 && count > 0 && it != g->pel.end()) {
    const StreamId id = it->first;
    const StreamEntry* en = stream_find(s, id);
    if (en == nullptr) {
      auto next = std::next(it);
      drop_deleted_pending(ctx, *g, it);
      it = next;
      deleted.push_back(id);
      --count;
      continue;
    }
    StreamPending& p = it->second;
    if (min_idle > 0 && now - p.delivery_time < min_idle) {
      ++it;
      continue;
    }
    if (!have_consumer) {
      if (find_consumer(*g, name) == nullptr) create_consumer(ctx, *g, ctx.arg(1), name);
      have_consumer = true;
    }
    assign_pending(*g, p, id, name);
    p.delivery_time = now;
    if (!justid) ++p.delivery_count;
    claimed.emplace_back(id, en);
    --count;
    propagate_xclaim(ctx, ctx.arg(1), ctx.arg(2), *g, id, p);
    ++ctx.dirty;
    ++it;
  }
  if (have_consumer) g->consumers[std::string(name)].seen_time = now;
  const StreamId next = it == g->pel.end() ? StreamId{} : it->first;
  ctx.propagated = true;
  ctx.reply.array(3);
  ctx.reply.bulk(next.to_string());
  ctx.reply.array(claimed.size());
  for (const auto& [id, en] : claimed) {
    if (justid) ctx.reply.bulk(id.to_string());
    else reply_stream_entry(ctx.reply, *en);
  }
  ctx.reply.array(deleted.size());
  for (const StreamId& id : deleted) ctx.reply.bulk(id.to_string());
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kM = kCmdDenyOom, kF = kCmdFast, kB = kCmdBlocking,
                   kL = kCmdLoading, kS = kCmdStale;

const CommandDef kXgroupSubs[] = {
    {"create", xgroup_create_cmd, -5, kW | kM, 2, 2, 1, "stream", "Creates a consumer group.", "5.0.0"},
    {"setid", xgroup_setid_cmd, -5, kW, 2, 2, 1, "stream", "Sets the last-delivered ID of a consumer group.", "5.0.0"},
    {"destroy", xgroup_destroy_cmd, 4, kW, 2, 2, 1, "stream", "Destroys a consumer group.", "5.0.0"},
    {"createconsumer", xgroup_createconsumer_cmd, 5, kW | kM, 2, 2, 1, "stream", "Creates a consumer in a consumer group.", "6.2.0"},
    {"delconsumer", xgroup_delconsumer_cmd, 5, kW, 2, 2, 1, "stream", "Deletes a consumer from a consumer group.", "5.0.0"},
    {"help", xgroup_help_cmd, 2, kL | kS, 0, 0, 0, "stream", "Returns helpful text about the different subcommands.", "5.0.0"},
};

const CommandDef kCommands[] = {
    {"xread", xread_cmd, -4, kR | kB, 0, 0, 0, "stream", "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", "5.0.0", {}, xread_keys<1>},
    // Its writes are the group's bookkeeping, not the key's value: like Redis it does not
    // touch WATCHed keys (kCmdTouchesOwnKeys with nothing touched).
    {"xreadgroup", xreadgroup_cmd, -7, kW | kB | kCmdTouchesOwnKeys, 0, 0, 0, "stream", "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", "5.0.0", {}, xread_keys<4>},
    {"xack", xack_cmd, -4, kW | kF, 1, 1, 1, "stream", "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", "5.0.0"},
    {"xpending", xpending_cmd, -3, kR, 1, 1, 1, "stream", "Returns the information and entries from a stream consumer group's pending entries list.", "5.0.0"},
    {"xclaim", xclaim_cmd, -6, kW | kF, 1, 1, 1, "stream", "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", "5.0.0"},
    {"xautoclaim", xautoclaim_cmd, -6, kW | kF, 1, 1, 1, "stream", "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", "6.2.0"},
    {"xgroup", nullptr, -2, 0, 0, 0, 0, "stream", "A container for consumer groups commands.", "5.0.0", kXgroupSubs},
    {"xinfo", nullptr, -2, 0, 0, 0, 0, "stream", "A container for stream introspection commands.", "5.0.0", xinfo_subcommands()},
};

}  // namespace

std::span<const CommandDef> stream_group_commands() { return kCommands; }

}  // namespace conduit::kv
