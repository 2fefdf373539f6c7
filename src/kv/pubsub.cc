// Pub/sub (SUBSCRIBE PSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB) and MONITOR, and
// the delivery of bytes produced for a client on another thread.
//
// A message goes into each subscriber's inbox under the server lock and the subscriber's
// worker sends it (deliver_inbox): PUBLISH may run on any io thread.  A subscriber that
// does not read is bounded by client-output-buffer-limit's pubsub class (Redis' 32mb 8mb
// 60 by default): past the hard limit, or above the soft limit for its seconds, it is
// disconnected -- it never grows the server without limit.
//
// RESP2: a subscribed client may only (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT and RESET
// (execute() refuses the rest), and messages are arrays; RESP3 clients get push types
// (>3) and may run any command.
#include <sys/time.h>

#include <algorithm>
#include <cinttypes>
#include <unordered_set>

#include "client_limits.h"
#include "conduit/base/log.h"
#include "server_impl.h"

namespace conduit::kv {

ReplyWriter ServerImpl::deliver_writer(ClientConn* c) { return ReplyWriter(&c->inbox, c->state.resp); }

// What a client may have queued by other threads: a subscriber the pubsub class' hard
// limit; any other client (a tracking client's invalidations, a blocked command's reply)
// the normal class' -- except MONITOR clients (Redis' replica class, unlimited here).
uint64_t ServerImpl::pubsub_budget(const ClientConn* c) const {
  if (c->state.subscriptions() > 0)
    return options_.pubsub_hard_limit == 0 ? 0 : options_.pubsub_hard_limit + kUncountedOutput;
  if (c->state.monitor || options_.output_hard_limit == 0) return 0;
  return options_.output_hard_limit + kUncountedOutput;
}

void ServerImpl::deliver_done(ClientConn* c) {
  if (c->inbox.empty() || c->closed || c->kill_requested) return;
  const uint64_t budget = pubsub_budget(c);
  if (budget > 0 && c->inbox.size() + c->pub_obuf.load(std::memory_order_relaxed) > budget) {
    const bool sub = c->state.subscriptions() > 0;
    CONDUIT_LOG(kWarn) << "conduit-kv: closing " << (sub ? "subscriber" : "client") << " id=" << c->state.id << " "
                       << c->peer << ": unsent messages exceed client-output-buffer-limit "
                       << (sub ? "pubsub " : "normal ") << (sub ? options_.pubsub_hard_limit : options_.output_hard_limit);
    c->inbox.release();
    return kill_client(c);
  }
  if (c->inbox_posted) return;
  c->inbox_posted = true;
  Worker* w = c->worker;
  const uint64_t id = c->state.id;
  post_to(*w, [this, w, id] {
    ClientConn* x = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (ClientConn* y = w->clients_head; y != nullptr; y = y->next)
        if (y->state.id == id) x = y;
    }
    if (x != nullptr && !x->closed) deliver_inbox(x);
  });
}

// On c's worker: the inbox joins the output, which goes out (after the AOF write when the
// bytes may show data the AOF does not hold yet).
void ServerImpl::deliver_inbox(ClientConn* c) {
  bool wait_aof = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->inbox_posted = false;
    if (c->closed) return;
    if (!c->inbox.empty()) {
      c->out.append(c->inbox.data(), c->inbox.size());
      c->inbox.clear();
      if (c->inbox.capacity() > (64u << 10)) c->inbox.release();
    }
    wait_aof = aof_ && aof_->has_pending() && aof_->last_write_status().ok();
  }
  if (wait_aof) {
    if (!c->pending_commit) {
      c->pending_commit = true;
      c->worker->pending_commit.push_back(c);
    }
    schedule_commit(*c->worker);
    publish(c);
    return;
  }
  resume_paused(c);
}

// --- subscriptions ------------------------------------------------------------------------------

namespace {

void reply_subscription(ReplyWriter& r, std::string_view kind, std::string_view channel, bool null_channel, size_t count) {
  r.push(3);
  r.bulk(kind);
  if (null_channel) r.null();
  else r.bulk(channel);
  r.integer(static_cast<int64_t>(count));
}

}  // namespace

void ServerImpl::subscribe(ClientState& c, std::string_view channel, bool pattern) {
  ClientConn* conn = c.conn;
  auto& mine = pattern ? c.patterns : c.channels;
  if (conn != nullptr && mine.find(channel) == mine.end()) {
    mine.emplace(channel);
    if (pattern) patterns_.emplace_back(std::string(channel), conn);
    else channels_[std::string(channel)].push_back(conn);
  }
}

void ServerImpl::unsubscribe(ClientState& c, std::string_view channel, bool pattern, bool) {
  auto& mine = pattern ? c.patterns : c.channels;
  auto it = mine.find(channel);
  if (it == mine.end()) return;
  mine.erase(it);
  if (pattern) {
    patterns_.erase(std::remove_if(patterns_.begin(), patterns_.end(),
                                   [&](const auto& p) { return p.second == c.conn && p.first == channel; }),
                    patterns_.end());
  } else {
    auto ch = channels_.find(channel);
    if (ch != channels_.end()) {
      auto& v = ch->second;
      v.erase(std::remove(v.begin(), v.end(), c.conn), v.end());
      if (v.empty()) channels_.erase(ch);
    }
  }
}

void ServerImpl::unsubscribe_all(ClientState& c, bool pattern, bool notify) {
  auto& mine = pattern ? c.patterns : c.channels;
  const std::vector<std::string> names(mine.begin(), mine.end());
  for (const std::string& n : names) unsubscribe(c, n, pattern, notify);
}

int64_t ServerImpl::publish_message(std::string_view channel, std::string_view message) {
  // Copies: a subscriber over its output limit is closed inside deliver_done, which
  // unsubscribes it from the lists walked here.  It still counts, as in Redis (whose
  // close is asynchronous).
  int64_t receivers = 0;
  auto it = channels_.find(channel);
  if (it != channels_.end()) {
    const std::vector<ClientConn*> subscribers = it->second;
    for (ClientConn* c : subscribers) {
      ++receivers;
      if (c->closed || c->kill_requested) continue;
      ReplyWriter w = deliver_writer(c);
      w.push(3);
      w.bulk("message");
      w.bulk(channel);
      w.bulk(message);
      deliver_done(c);
    }
  }
  std::vector<std::pair<std::string, ClientConn*>> matched;
  for (const auto& [pat, c] : patterns_)
    if (glob_match(pat, channel)) matched.emplace_back(pat, c);
  for (const auto& [pat, c] : matched) {
    ++receivers;
    if (c->closed || c->kill_requested) continue;
    ReplyWriter w = deliver_writer(c);
    w.push(4);
    w.bulk("pmessage");
    w.bulk(pat);
    w.bulk(channel);
    w.bulk(message);
    deliver_done(c);
  }
  return receivers;
}

size_t ServerImpl::num_patterns() const {
  std::unordered_set<std::string_view> distinct;
  for (const auto& [pat, c] : patterns_) distinct.insert(pat);
  return distinct.size();
}

std::vector<std::string> ServerImpl::active_channels(std::string_view pattern) const {
  std::vector<std::string> out;
  for (const auto& [name, subs] : channels_)
    if (pattern.empty() || glob_match(pattern, name)) out.push_back(name);
  return out;
}

size_t ServerImpl::channel_subscribers(std::string_view channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.size();
}

// --- MONITOR ------------------------------------------------------------------------------------

namespace {

// Redis' sdscatrepr: "..." with \n \r \t \a \b, \" \\ and \xHH for the rest.
void append_repr(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char ch : s) {
    switch (ch) {
      case '\\': *out += "\\\\"; break;
      case '"': *out += "\\\""; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\a': *out += "\\a"; break;
      case '\b': *out += "\\b"; break;
      default:
        if (ch >= 32 && ch < 127) {
          out->push_back(static_cast<char>(ch));
        } else {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", ch);
          *out += b;
        }
    }
  }
  out->push_back('"');
}

}  // namespace

void ServerImpl::feed_monitors(const ClientState& c, std::span<const std::string_view> argv) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  char head[96];
  std::snprintf(head, sizeof head, "%ld.%06ld [%d %s]", static_cast<long>(tv.tv_sec), static_cast<long>(tv.tv_usec),
                c.db, c.conn != nullptr ? c.conn->peer.c_str() : (c.internal ? "lua" : "unix"));
  std::string line = head;
  for (std::string_view a : argv) {
    line.push_back(' ');
    append_repr(&line, a);
  }
  for (ClientConn* m : monitors_) {
    if (m == c.conn) continue;
    ReplyWriter w = deliver_writer(m);
    w.simple(line);
    deliver_done(m);
  }
}

namespace {

void subscribe_generic(CommandContext& ctx, bool pattern) {
  for (size_t j = 1; j < ctx.argc(); ++j) {
    ctx.server.subscribe(ctx.client, ctx.arg(j), pattern);
    reply_subscription(ctx.reply, pattern ? "psubscribe" : "subscribe", ctx.arg(j), false, ctx.client.subscriptions());
  }
}
void subscribe_cmd(CommandContext& ctx) { subscribe_generic(ctx, false); }
void psubscribe_cmd(CommandContext& ctx) { subscribe_generic(ctx, true); }

void unsubscribe_generic(CommandContext& ctx, bool pattern) {
  const char* kind = pattern ? "punsubscribe" : "unsubscribe";
  if (ctx.argc() == 1) {
    auto& mine = pattern ? ctx.client.patterns : ctx.client.channels;
    if (mine.empty()) return reply_subscription(ctx.reply, kind, {}, true, ctx.client.subscriptions());
    const std::vector<std::string> names(mine.begin(), mine.end());
    for (const std::string& n : names) {
      ctx.server.unsubscribe(ctx.client, n, pattern, true);
      reply_subscription(ctx.reply, kind, n, false, ctx.client.subscriptions());
    }
    return;
  }
  for (size_t j = 1; j < ctx.argc(); ++j) {
    ctx.server.unsubscribe(ctx.client, ctx.arg(j), pattern, true);
    reply_subscription(ctx.reply, kind, ctx.arg(j), false, ctx.client.subscriptions());
  }
}
void unsubscribe_cmd(CommandContext& ctx) { unsubscribe_generic(ctx, false); }
void punsubscribe_cmd(CommandContext& ctx) { unsubscribe_generic(ctx, true); }

void publish_cmd(CommandContext& ctx) { ctx.reply.integer(ctx.server.publish_message(ctx.arg(1), ctx.arg(2))); }

void pubsub_channels_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(wrong_args("pubsub|channels"));
  const auto names = ctx.server.active_channels(ctx.argc() == 3 ? ctx.arg(2) : std::string_view());
  ctx.reply.array(names.size());
  for (const auto& n : names) ctx.reply.bulk(n);
}

void pubsub_numsub_cmd(CommandContext& ctx) {
  ctx.reply.map(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) {
    ctx.reply.bulk(ctx.arg(j));
    ctx.reply.integer(static_cast<int64_t>(ctx.server.channel_subscribers(ctx.arg(j))));
  }
}

void pubsub_numpat_cmd(CommandContext& ctx) { ctx.reply.integer(static_cast<int64_t>(ctx.server.num_patterns())); }

void pubsub_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "PUBSUB",
             {"CHANNELS [<pattern>]", "    Return the currently active channels matching a <pattern> (default: '*').",
              "NUMPAT", "    Return number of subscriptions to patterns.", "NUMSUB [<channel> ...]",
              "    Return the number of subscribers for the specified channels, excluding", "    pattern subscriptions(default: no channels)."});
}

void monitor_cmd(CommandContext& ctx) {
  if (ctx.client.in_exec) return ctx.error("ERR MONITOR isn't allowed for DENY BLOCKING client");
  if (ctx.client.conn == nullptr || ctx.client.monitor) return;
  ctx.client.monitor = true;
  ctx.server.monitors_.push_back(ctx.client.conn);
  ctx.reply.ok();
}

constexpr uint32_t kP = kCmdPubsub, kL = kCmdLoading, kS = kCmdStale, kF = kCmdFast, kNS = kCmdNoScript;

const CommandDef kPubsubSubs[] = {
    {"channels", pubsub_channels_cmd, -2, kP | kL | kS, 0, 0, 0, "pubsub", "Returns the active channels.", "2.8.0"},
    {"numsub", pubsub_numsub_cmd, -2, kP | kL | kS, 0, 0, 0, "pubsub", "Returns a count of subscribers to channels.", "2.8.0"},
    {"numpat", pubsub_numpat_cmd, 2, kP | kL | kS, 0, 0, 0, "pubsub", "Returns a count of unique pattern subscriptions.", "2.8.0"},
    {"help", pubsub_help_cmd, 2, kL | kS, 0, 0, 0, "pubsub", "Returns helpful text about the different subcommands.", "6.2.0"},
};

const CommandDef kCommands[] = {
    {"subscribe", subscribe_cmd, -2, kP | kNS | kL | kS | kCmdPushes, 0, 0, 0, "pubsub", "Listens for messages published to channels.", "2.0.0"},
    {"psubscribe", psubscribe_cmd, -2, kP | kNS | kL | kS | kCmdPushes, 0, 0, 0, "pubsub", "Listens for messages published to channels that match one or more patterns.", "2.0.0"},
    {"unsubscribe", unsubscribe_cmd, -1, kP | kNS | kL | kS | kCmdPushes, 0, 0, 0, "pubsub", "Stops listening to messages posted to channels.", "2.0.0"},
    {"punsubscribe", punsubscribe_cmd, -1, kP | kNS | kL | kS | kCmdPushes, 0, 0, 0, "pubsub", "Stops listening to messages published to channels that match one or more patterns.", "2.0.0"},
    {"publish", publish_cmd, 3, kP | kL | kS | kF | kCmdMayReplicate, 0, 0, 0, "pubsub", "Posts a message to a channel.", "2.0.0"},
    {"pubsub", nullptr, -2, 0, 0, 0, 0, "pubsub", "A container for Pub/Sub commands.", "2.8.0", kPubsubSubs},
    {"monitor", monitor_cmd, 1, kCmdAdmin | kNS | kL | kS, 0, 0, 0, "server", "Listens for all requests received by the server in real-time.", "1.0.0"},
};

}  // namespace

std::span<const CommandDef> pubsub_commands() { return kCommands; }

}  // namespace conduit::kv
