// XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS as Redis 7.0.15: a stream's
// entries, its groups with their entries-read / lag, pending entries and consumers.  The
// XINFO container itself is registered with the groups' commands (commands_stream_groups.cc).
#include <algorithm>

#include "numbers.h"
#include "server_impl.h"
#include "streams.h"

namespace conduit::kv {
namespace {

// --- XINFO ------------------------------------------------------------------------------------

void reply_lag(CommandContext& ctx, const StreamValue& s, const StreamGroup& g) {
  int64_t lag;
  if (stream_group_lag(s, g, &lag)) ctx.reply.integer(lag);
  else ctx.reply.null();
}

void reply_entries_read(CommandContext& ctx, const StreamGroup& g) {
  if (g.entries_read != StreamGroup::kEntriesReadUnknown) ctx.reply.integer(g.entries_read);
  else ctx.reply.null();
}

void xinfo_stream_cmd(CommandContext& ctx) {
  bool full = false;
  int64_t count = 10;
  Entry* e = lookup_read(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.error("ERR no such key");
  if (!check_type(ctx, e, Type::kStream)) return;
  if (ctx.argc() > 3) {
    const std::string usage = "ERR unknown subcommand or wrong number of arguments for '" +
                              std::string(ctx.arg(1).substr(0, 128)) + "'. Try XINFO HELP.";
    if ((ctx.argc() != 4 && ctx.argc() != 6) || !eq_nocase(ctx.arg(3), "full")) return ctx.error(usage);
    full = true;
    if (ctx.argc() == 6) {
      if (!eq_nocase(ctx.arg(4), "count")) return ctx.error(usage);
      if (!get_ll(ctx, ctx.arg(5), &count)) return;
      if (count < 0) count = 10;
    }
  }
  const StreamValue& s = *e->stream;
  // conduit-kv keeps a stream in one vector: the radix-tree figures are those of Redis'
  // listpack nodes of 100 entries (stream-node-max-entries), for tools that show them.
  const int64_t nodes = static_cast<int64_t>((s.entries.size() + 99) / 100);
  ctx.reply.map(full ? 9 : 10);
  ctx.reply.bulk("length");
  ctx.reply.integer(static_cast<int64_t>(s.entries.size()));
  ctx.reply.bulk("radix-tree-keys");
  ctx.reply.integer(nodes);
  ctx.reply.bulk("radix-tree-nodes");
  ctx.reply.integer(nodes + 1);
  ctx.reply.bulk("last-generated-id");
  ctx.reply.bulk(s.last_id.to_string());
  ctx.reply.bulk("max-deleted-entry-id");
  ctx.reply.bulk(s.max_deleted_id.to_string());
  ctx.reply.bulk("entries-added");
  ctx.reply.integer(static_cast<int64_t>(s.entries_added));
  ctx.reply.bulk("recorded-first-entry-id");
  ctx.reply.bulk(s.first_id().to_string());
  if (!full) {
    ctx.reply.bulk("groups");
    ctx.reply.integer(static_cast<int64_t>(s.groups.size()));
    ctx.reply.bulk("first-entry");
    if (s.entries.empty()) ctx.reply.null();
    else reply_stream_entry(ctx.reply, s.entries.front());
    ctx.reply.bulk("last-entry");
    if (s.entries.empty()) ctx.reply.null();
    else reply_stream_entry(ctx.reply, s.entries.back());
    return;
  }
  auto limit = [count](size_t n) { return count == 0 ? n : std::min<size_t>(n, static_cast<size_t>(count)); };
  ctx.reply.bulk("entries");
  const size_t ne = limit(s.entries.size());
  ctx.reply.array(ne);
  for (size_t i = 0; i < ne; ++i) reply_stream_entry(ctx.reply, s.entries[i]);
  ctx.reply.bulk("groups");
  ctx.reply.array(s.groups.size());
  for (const auto& [name, g] : s.groups) {
    ctx.reply.map(7);
    ctx.reply.bulk("name");
    ctx.reply.bulk(name);
    ctx.reply.bulk("last-delivered-id");
    ctx.reply.bulk(g.last_id.to_string());
    ctx.reply.bulk("entries-read");
    reply_entries_read(ctx, g);
    ctx.reply.bulk("lag");
    reply_lag(ctx, s, g);
    ctx.reply.bulk("pel-count");
    ctx.reply.integer(static_cast<int64_t>(g.pel.size()));
    ctx.reply.bulk("pending");
    const size_t np = limit(g.pel.size());
    ctx.reply.array(np);
    size_t k = 0;
    for (auto it = g.pel.begin(); k < np; ++it, ++k) {
      ctx.reply.array(4);
      ctx.reply.bulk(it->first.to_string());
      ctx.reply.bulk(it->second.consumer);
      ctx.reply.integer(it->second.delivery_time);
      ctx.reply.integer(static_cast<int64_t>(it->second.delivery_count));
    }
    ctx.reply.bulk("consumers");
    ctx.reply.array(g.consumers.size());
    for (const auto& [cname, c] : g.consumers) {
      ctx.reply.map(4);
      ctx.reply.bulk("name");
      ctx.reply.bulk(cname);
      ctx.reply.bulk("seen-time");
      ctx.reply.integer(c.seen_time);
      ctx.reply.bulk("pel-count");
      ctx.reply.integer(static_cast<int64_t>(c.pending.size()));
      ctx.reply.bulk("pending");
      const size_t nc = limit(c.pending.size());
      ctx.reply.array(nc);
      size_t m = 0;
      for (auto it = c.pending.begin(); m < nc; ++it, ++m) {
        auto pit = g.pel.find(*it);
        ctx.reply.array(3);
        ctx.reply.bulk(it->to_string());
        ctx.reply.integer(pit != g.pel.end() ? pit->second.delivery_time : 0);
        ctx.reply.integer(pit != g.pel.end() ? static_cast<int64_t>(pit->second.delivery_count) : 0);
      }
    }
  }
}

void xinfo_groups_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.error("ERR no such key");
  if (!check_type(ctx, e, Type::kStream)) return;
  const StreamValue& s = *e->stream;
  ctx.reply.array(s.groups.size());
  for (const auto& [name, g] : s.groups) {
    ctx.reply.map(6);
    ctx.reply.bulk("name");
    ctx.reply.bulk(name);
    ctx.reply.bulk("consumers");
    ctx.reply.integer(static_cast<int64_t>(g.consumers.size()));
    ctx.reply.bulk("pending");
    ctx.reply.integer(static_cast<int64_t>(g.pel.size()));
    ctx.reply.bulk("last-delivered-id");
    ctx.reply.bulk(g.last_id.to_string());
    ctx.reply.bulk("entries-read");
    reply_entries_read(ctx, g);
    ctx.reply.bulk("lag");
    reply_lag(ctx, s, g);
  }
}

void xinfo_consumers_cmd(CommandContext& ctx) {
  Entry* e = lookup_read(ctx, ctx.arg(2));
  if (e == nullptr) return ctx.error("ERR no such key");
  if (!check_type(ctx, e, Type::kStream)) return;
  StreamGroup* g = find_group(*e->stream, ctx.arg(3));
  if (g == nullptr)
    return ctx.error("NOGROUP No such consumer group '" + std::string(ctx.arg(3)) + "' for key name '" +
                     std::string(ctx.arg(2)) + "'");
  const int64_t now = ctx.now_ms();
  ctx.reply.array(g->consumers.size());
  for (const auto& [name, c] : g->consumers) {
    ctx.reply.map(3);
    ctx.reply.bulk("name");
    ctx.reply.bulk(name);
    ctx.reply.bulk("pending");
    ctx.reply.integer(static_cast<int64_t>(c.pending.size()));
    ctx.reply.bulk("idle");
    ctx.reply.integer(std::max<int64_t>(now - c.seen_time, 0));
  }
}

void xinfo_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "XINFO",
             {"CONSUMERS <key> <groupname>", "    Show consumers of <groupname>.", "GROUPS <key>",
              "    Show the stream consumer groups.", "STREAM <key> [FULL [COUNT <count>]",
              "    Show information about the stream."});
}

constexpr uint32_t kR = kCmdReadonly, kL = kCmdLoading, kS = kCmdStale;

const CommandDef kXinfoSubs[] = {
    {"stream", xinfo_stream_cmd, -3, kR, 2, 2, 1, "stream", "Returns information about a stream.", "5.0.0"},
    {"groups", xinfo_groups_cmd, 3, kR, 2, 2, 1, "stream", "Returns a list of the consumer groups of a stream.", "5.0.0"},
    {"consumers", xinfo_consumers_cmd, 4, kR, 2, 2, 1, "stream", "Returns a list of the consumers in a consumer group.", "5.0.0"},
    {"help", xinfo_help_cmd, 2, kL | kS, 0, 0, 0, "stream", "Returns helpful text about the different subcommands.", "5.0.0"},
};

}  // namespace

std::span<const CommandDef> xinfo_subcommands() { return kXinfoSubs; }

}  // namespace conduit::kv
