// Client-side caching: CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO with Redis 7.0's
// semantics (its tracking.c), the tracking table and the invalidation messages.
//
// Default mode: after a read-only command of a tracking client the keys it read are
// remembered (key -> client ids); when such a key changes (a write, an expiry, an
// eviction) the key is forgotten and each of those clients gets `>2 invalidate [key]`
// (RESP3), or its REDIRECT client gets it -- a RESP2 redirect client subscribed to
// anything gets the Pub/Sub message `message __redis__:invalidate [key]`.  FLUSHDB and
// FLUSHALL send a null instead of the keys.  A redirect client that is gone turns the
// client's next message into `>2 tracking-redir-broken <id>` (RESP3 only; flag R).
// BCAST: no table; every change of a key under one of the client's prefixes is collected
// and sent once per prefix after the batch of commands (Redis: beforeSleep).
// OPTIN/OPTOUT with CLIENT CACHING: only the next command's keys are (not) remembered.
// NOLOOP: no message for a change the client made itself.
//
// Delivery reuses pub/sub's: bytes for another client go into its inbox and its own io
// thread sends them (deliver_writer/deliver_done, bounded by its output limit); bytes for
// the client whose command is running wait in tracking_pending_ and follow that command's
// reply (after EXEC as a whole), as in Redis 7.0.
//
// Bounded: the table holds at most tracking-table-max-keys keys after each batch (the
// keys of one batch may pass it until the batch ends; forgetting a key sends its
// invalidation); a key's ids are at most the clients that read it; BCAST collects only
// the keys changed by one batch.  Everything runs under ServerImpl::mu_.
#include <algorithm>

#include "server_impl.h"

namespace conduit::kv {

namespace {

bool overlap(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return a.substr(0, n) == b.substr(0, n);
}

}  // namespace

// Bytes for `to`: after the running command's reply when `to` runs it, straight into its
// reply when it runs a command but is not inside it (an eviction before the command), else
// through its inbox.
template <typename F>
void ServerImpl::tracking_deliver(ClientState& to, F&& write) {
  if (&to == cur_client_ && cur_reply_ != nullptr) {
    if (call_depth_ > 0) {
      ReplyWriter w(&tracking_pending_, to.resp);
      write(w);
    } else {
      write(*cur_reply_);
    }
    return;
  }
  ClientConn* conn = to.conn;
  if (conn == nullptr || conn->closed || conn->kill_requested) return;
  ReplyWriter w = deliver_writer(conn);
  write(w);
  deliver_done(conn);
}

// Redis' sendTrackingMessage: `value` writes the keys part (an array, or a null).
template <typename F>
void ServerImpl::tracking_send(ClientState& c, F&& value) {
  ClientState* to = &c;
  bool redirected = false;
  if (c.tracking.redirect != 0) {
    auto it = clients_by_id_.find(c.tracking.redirect);
    if (it == clients_by_id_.end() || it->second->closed || it->second->kill_requested) {
      c.tracking.broken_redir = true;
      if (c.resp == RespVersion::kResp3) {
        const auto id = static_cast<int64_t>(c.tracking.redirect);
        tracking_deliver(c, [id](ReplyWriter& w) {
          w.push(2);
          w.bulk("tracking-redir-broken");
          w.integer(id);
        });
      }
      return;
    }
    to = &it->second->state;
    redirected = true;
  }
  if (to->resp == RespVersion::kResp3) {
    tracking_deliver(*to, [&](ReplyWriter& w) {
      w.push(2);
      w.bulk("invalidate");
      value(w);
    });
  } else if (redirected && to->subscriptions() > 0) {
    tracking_deliver(*to, [&](ReplyWriter& w) {
      w.push(3);
      w.bulk("message");
      w.bulk("__redis__:invalidate");
      value(w);
    });
  }
  // Else: a RESP2 client without a redirect cannot be told (Redis sends nothing either).
}

void ServerImpl::tracking_enable(ClientState& c, uint64_t redirect, TrackingOptions o,
                                 std::span<const std::string_view> prefixes) {
  tracking_ids_[c.id] = &c;
  TrackingState& t = c.tracking;
  t.on = true;
  t.broken_redir = t.bcast = t.optin = t.optout = t.noloop = false;
  t.redirect = redirect;
  if (o.bcast) {
    t.bcast = true;
    auto add = [&](std::string_view p) {
      if (!t.prefixes.emplace(p).second) return;
      auto& clients = prefix_table_[std::string(p)].clients;
      clients.push_back(&c);
    };
    if (prefixes.empty()) add("");
    for (std::string_view p : prefixes) add(p);
  }
  t.optin = o.optin;
  t.optout = o.optout;
  t.noloop = o.noloop;
}

void ServerImpl::tracking_disable(ClientState& c) {
  TrackingState& t = c.tracking;
  for (const std::string& p : t.prefixes) {
    auto it = prefix_table_.find(p);
    if (it == prefix_table_.end()) continue;
    auto& v = it->second.clients;
    v.erase(std::remove(v.begin(), v.end(), &c), v.end());
    if (v.empty()) prefix_table_.erase(it);
  }
  t.prefixes.clear();
  if (t.on) tracking_ids_.erase(c.id);
  t.on = t.bcast = t.optin = t.optout = t.noloop = t.caching = t.broken_redir = false;
  // The redirect id stays (GETREDIR answers -1 while off; ON sets it again).
}

std::string ServerImpl::tracking_prefix_collision(const ClientState& c, std::span<const std::string_view> prefixes) const {
  for (size_t i = 0; i < prefixes.size(); ++i) {
    for (const std::string& mine : c.tracking.prefixes)
      if (overlap(mine, prefixes[i]))
        return "ERR Prefix '" + std::string(prefixes[i]) + "' overlaps with an existing prefix '" + mine +
               "'. Prefixes for a single client must not overlap.";
    for (size_t j = i + 1; j < prefixes.size(); ++j)
      if (overlap(prefixes[i], prefixes[j]))
        return "ERR Prefix '" + std::string(prefixes[i]) + "' overlaps with another provided prefix '" +
               std::string(prefixes[j]) + "'. Prefixes for a single client must not overlap.";
  }
  return {};
}

void ServerImpl::tracking_remember_keys(ClientState& c, const CommandEntry* e, std::span<const std::string_view> argv) {
  const TrackingState& t = c.tracking;
  if ((t.optin && !t.caching) || (t.optout && t.caching)) return;
  if ((e->def->flags & kCmdPubsub) != 0) return;
  std::vector<size_t> keys;
  e->keys(argv, &keys);
  for (size_t k : keys) {
    auto it = tracking_table_.find(argv[k]);
    if (it == tracking_table_.end()) it = tracking_table_.emplace(std::string(argv[k]), std::vector<uint64_t>()).first;
    auto& ids = it->second;
    // More ids than tracking clients (c is not among them yet): some belong to clients that
    // left or stopped tracking.  Dropped here, so a key read by a stream of short-lived
    // clients holds at most one id per tracking client (Redis keeps them until the key
    // changes).
    if (ids.size() >= tracking_ids_.size()) {
      const size_t before = ids.size();
      ids.erase(std::remove_if(ids.begin(), ids.end(), [&](uint64_t id) { return tracking_ids_.count(id) == 0; }),
                ids.end());
      tracking_items_ -= before - ids.size();
    }
    auto pos = std::lower_bound(ids.begin(), ids.end(), c.id);
    if (pos != ids.end() && *pos == c.id) continue;
    ids.insert(pos, c.id);
    ++tracking_items_;
  }
}

void ServerImpl::tracking_invalidate_key(std::string_view key, const ClientState* by, bool bcast) {
  // BCAST: collected for the broadcast after the batch.
  if (bcast) for (auto& [prefix, bs] : prefix_table_) {
    if (prefix.size() > key.size() || key.compare(0, prefix.size(), prefix) != 0) continue;
    auto it = bs.keys.find(key);
    if (it == bs.keys.end()) bs.keys.emplace(std::string(key), by != nullptr ? by->id : 0);
    else it->second = by != nullptr ? by->id : 0;
  }
  auto it = tracking_table_.find(key);
  if (it == tracking_table_.end()) return;
  // Forgotten first: a message may close a client over its output limit.
  const std::vector<uint64_t> ids = std::move(it->second);
  const std::string name(key);
  tracking_items_ -= ids.size();
  tracking_table_.erase(it);
  for (uint64_t id : ids) {
    auto t = tracking_ids_.find(id);
    if (t == tracking_ids_.end()) continue;
    ClientState& target = *t->second;
    // Keys read before switching to BCAST are not reported (Redis).
    if (target.tracking.bcast) continue;
    if (target.tracking.noloop && &target == cur_client_) continue;
    tracking_send(target, [&](ReplyWriter& w) {
      w.array(1);
      w.bulk(name);
    });
  }
}

void ServerImpl::tracking_invalidate_all() {
  std::vector<uint64_t> ids;
  ids.reserve(tracking_ids_.size());
  for (const auto& [id, c] : tracking_ids_) ids.push_back(id);
  for (uint64_t id : ids) {
    auto t = tracking_ids_.find(id);
    if (t != tracking_ids_.end()) tracking_send(*t->second, [](ReplyWriter& w) { w.null(); });
  }
  tracking_table_.clear();
  tracking_items_ = 0;
}

void ServerImpl::tracking_after_batch_locked() {
  // tracking-table-max-keys: forget keys (with their invalidation) until under it.  Redis
  // walks at random with a bounded effort per call; forgetting all the excess at once keeps
  // the bound strict, and costs what the batch that added the keys cost.
  const uint64_t max = options_.tracking_table_max_keys;
  while (max > 0 && tracking_table_.size() > max) {
    const std::string key = tracking_table_.begin()->first;
    tracking_invalidate_key(key, nullptr, false);
  }
  // BCAST: one message per prefix with the keys changed since, to each of its clients
  // (NOLOOP clients without their own changes).
  for (auto it = prefix_table_.begin(); it != prefix_table_.end();) {
    if (it->second.keys.empty()) {
      ++it;
      continue;
    }
    const std::string prefix = it->first;
    const auto keys = std::move(it->second.keys);
    it->second.keys.clear();
    std::vector<uint64_t> ids;
    for (const ClientState* c : it->second.clients) ids.push_back(c->id);
    for (uint64_t id : ids) {
      auto t = tracking_ids_.find(id);
      if (t == tracking_ids_.end()) continue;
      ClientState& c = *t->second;
      size_t n = keys.size();
      if (c.tracking.noloop) n = static_cast<size_t>(std::count_if(keys.begin(), keys.end(), [&](const auto& k) { return k.second != id; }));
      if (n == 0) continue;
      tracking_send(c, [&](ReplyWriter& w) {
        w.array(n);
        for (const auto& [k, by] : keys)
          if (!c.tracking.noloop || by != id) w.bulk(k);
      });
    }
    // A message may have closed a client, and with it this prefix.
    it = prefix_table_.upper_bound(prefix);
  }
}

// --- commands (listed in CLIENT's table, commands_connection.cc) -----------------------------

void client_tracking_cmd(CommandContext& ctx) {
  ServerImpl& s = ctx.server;
  ClientState& c = ctx.client;
  int64_t redir = 0;
  ServerImpl::TrackingOptions o;
  std::vector<std::string_view> prefixes;
  for (size_t j = 3; j < ctx.argc(); ++j) {
    const bool more = j + 1 < ctx.argc();
    const std::string_view a = ctx.arg(j);
    if (eq_nocase(a, "redirect") && more) {
      ++j;
      if (redir != 0) return ctx.error("ERR A client can only redirect to a single other client");
      if (!get_ll(ctx, ctx.arg(j), &redir)) return;
      if (redir <= 0 || s.find_client(static_cast<uint64_t>(redir)) == nullptr)
        return ctx.error("ERR The client ID you want redirect to does not exist");
    } else if (eq_nocase(a, "bcast")) {
      o.bcast = true;
    } else if (eq_nocase(a, "optin")) {
      o.optin = true;
    } else if (eq_nocase(a, "optout")) {
      o.optout = true;
    } else if (eq_nocase(a, "noloop")) {
      o.noloop = true;
    } else if (eq_nocase(a, "prefix") && more) {
      prefixes.push_back(ctx.arg(++j));
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  if (eq_nocase(ctx.arg(2), "on")) {
    if (!o.bcast && !prefixes.empty()) return ctx.error("ERR PREFIX option requires BCAST mode to be enabled");
    if (c.tracking.on && c.tracking.bcast != o.bcast)
      return ctx.error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then "
                       "re-enabling it with a different mode.");
    if (o.bcast && (o.optin || o.optout)) return ctx.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    if (o.optin && o.optout) return ctx.error("ERR You can't use both OPTIN and OPTOUT");
    if ((o.optin && c.tracking.optout) || (o.optout && c.tracking.optin))
      return ctx.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then "
                       "re-enabling it with a different mode.");
    if (o.bcast) {
      const std::string err = s.tracking_prefix_collision(c, prefixes);
      if (!err.empty()) return ctx.error(err);
    }
    s.tracking_enable(c, static_cast<uint64_t>(redir), o, prefixes);
  } else if (eq_nocase(ctx.arg(2), "off")) {
    s.tracking_disable(c);
  } else {
    return ctx.error(kSyntaxError);
  }
  ctx.reply.ok();
}

void client_caching_cmd(CommandContext& ctx) {
  TrackingState& t = ctx.client.tracking;
  if (!t.on)
    return ctx.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT "
                     "mode enabled");
  if (eq_nocase(ctx.arg(2), "yes")) {
    if (!t.optin) return ctx.error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
  } else if (eq_nocase(ctx.arg(2), "no")) {
    if (!t.optout) return ctx.error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
  } else {
    return ctx.error(kSyntaxError);
  }
  t.caching = true;  // cleared after the next command outside MULTI (ServerImpl::execute)
  ctx.reply.ok();
}

void client_getredir_cmd(CommandContext& ctx) {
  const TrackingState& t = ctx.client.tracking;
  ctx.reply.integer(t.on ? static_cast<int64_t>(t.redirect) : -1);
}

void client_trackinginfo_cmd(CommandContext& ctx) {
  const TrackingState& t = ctx.client.tracking;
  std::vector<const char*> flags{t.on ? "on" : "off"};
  if (t.bcast) flags.push_back("bcast");
  if (t.optin) {
    flags.push_back("optin");
    if (t.caching) flags.push_back("caching-yes");
  }
  if (t.optout) {
    flags.push_back("optout");
    if (t.caching) flags.push_back("caching-no");
  }
  if (t.noloop) flags.push_back("noloop");
  if (t.broken_redir) flags.push_back("broken_redirect");
  ctx.reply.map(3);
  ctx.reply.bulk("flags");
  ctx.reply.set(flags.size());
  for (const char* f : flags) ctx.reply.bulk(f);
  ctx.reply.bulk("redirect");
  ctx.reply.integer(t.on ? static_cast<int64_t>(t.redirect) : -1);
  ctx.reply.bulk("prefixes");
  ctx.reply.array(t.prefixes.size());
  for (const std::string& p : t.prefixes) ctx.reply.bulk(p);
}

}  // namespace conduit::kv
