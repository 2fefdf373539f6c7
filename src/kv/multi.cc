// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH with Redis 7.0's rules.
//
// - Commands after MULTI are queued (+QUEUED) after the same checks a command gets when it
//   runs (unknown command, arity, AUTH, OOM ...); one that fails them marks the transaction
//   and EXEC answers EXECABORT without running anything.
// - EXEC runs the queue as one unit under the server lock (no other client's command runs
//   in between, on any io thread), and blocked clients whose keys it fed are served after
//   the whole transaction.
// - WATCH: any write to a watched key (by a command, an expiry, FLUSHDB/FLUSHALL/SWAPDB)
//   makes the client's next EXEC fail with a null reply.  A key that was already logically
//   expired when WATCHed does not fail it by being deleted (Redis 7.0).
// - In the AOF a transaction with writes is wrapped in MULTI ... EXEC, so it loads all or
//   nothing.
#include <algorithm>

#include "server_impl.h"

namespace conduit::kv {

void ServerImpl::watch(ClientState& c, std::string_view key) {
  for (const WatchedKey& w : c.watched)
    if (w.db == c.db && w.key == key) return;
  Database& d = db(c.db);
  const Entry* e = d.find(key);
  const bool expired = e != nullptr && e->expire_ms >= 0 && e->expire_ms < now_ms();
  c.watched.push_back({c.db, std::string(key), expired});
  auto& list = watched_keys_[static_cast<size_t>(c.db)][std::string(key)];
  if (list.empty() || std::find(list.begin(), list.end(), &c) == list.end()) list.push_back(&c);
  if (c.watched.size() == 1) ++watching_clients_;
}

void ServerImpl::unwatch_all(ClientState& c) {
  for (const WatchedKey& w : c.watched) {
    auto& m = watched_keys_[static_cast<size_t>(w.db)];
    auto it = m.find(w.key);
    if (it == m.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), &c), v.end());
    if (v.empty()) m.erase(it);
  }
  if (!c.watched.empty()) --watching_clients_;
  c.watched.clear();
  c.dirty_cas = false;
}

void ServerImpl::signal_key(int d, std::string_view key, const ClientState* by) {
  if (tracking_active()) tracking_invalidate_key(key, by);
  if (watching_clients_ > 0) {
    auto& m = watched_keys_[static_cast<size_t>(d)];
    auto it = m.find(key);
    if (it != m.end()) {
      const bool exists = db(d).find(key) != nullptr;
      for (ClientState* c : it->second) {
        for (WatchedKey& w : c->watched) {
          if (w.db != d || w.key != key) continue;
          // Watched while already expired and now deleted: logically nothing changed.
          if (w.expired_at_watch && !exists) {
            w.expired_at_watch = false;
            break;
          }
          c->dirty_cas = true;
          break;
        }
      }
    }
  }
  if (blocked_count_ > 0) {
    auto& b = blocking_keys_[static_cast<size_t>(d)];
    if (b.find(key) != b.end()) {
      const auto k = std::make_pair(d, std::string(key));
      if (std::find(ready_keys_.begin(), ready_keys_.end(), k) == ready_keys_.end()) ready_keys_.push_back(k);
    }
  }
}

// Redis' touchAllWatchedKeysInDb: a watched key of `emptied` that existed there, or that
// `replaced_with` (SWAPDB's other database, -1 for a flush) brings in, is touched -- except
// where only logically expired keys come or go.
void ServerImpl::signal_flush(int d, int replaced_with) {
  // Client-side caching is not per database: any flush invalidates everything (Redis).
  if (replaced_with < 0) tracking_invalidate_all();
  if (blocked_count_ > 0 && replaced_with < 0)  // XREADGROUPs on emptied keys are answered
    for (int i = 0; i < num_dbs(); ++i)
      if (d < 0 || i == d)
        for (const auto& [key, clients] : blocking_keys_[static_cast<size_t>(i)]) ready_keys_.emplace_back(i, key);
  if (watching_clients_ == 0) return;
  for (int i = 0; i < num_dbs(); ++i) {
    if (d >= 0 && i != d) continue;
    for (auto& [key, clients] : watched_keys_[static_cast<size_t>(i)]) {
      const bool in_emptied = db(i).find(key) != nullptr;
      const Entry* r = replaced_with >= 0 ? db(replaced_with).find(key) : nullptr;
      if (!in_emptied && r == nullptr) continue;
      const bool r_expired = r != nullptr && r->expire_ms >= 0 && r->expire_ms < now_ms();
      for (ClientState* c : clients) {
        for (WatchedKey& w : c->watched) {
          if (w.db != i || w.key != key) continue;
          if (w.expired_at_watch) {
            if (r == nullptr) {
              w.expired_at_watch = false;  // the expired key is now deleted: no logical change
              break;
            }
            if (r_expired) break;  // expired, and still expired
          } else if (!in_emptied && r_expired) {
            w.expired_at_watch = true;  // nothing replaced with an expired key
            break;
          }
          c->dirty_cas = true;
          break;
        }
      }
    }
  }
}

void ServerImpl::discard_multi(ClientState& c) {
  c.in_multi = false;
  c.multi_error = false;
  c.queued.clear();
  c.queued_bytes = 0;
  unwatch_all(c);
}

void ServerImpl::begin_exec_propagation() {
  if (exec_multi_fed_ || !aof_) return;
  exec_multi_fed_ = true;
  const std::string_view multi[1] = {"MULTI"};
  aof_->feed(-1, multi);
}

namespace {

void multi_cmd(CommandContext& ctx) {
  if (ctx.client.in_multi) return ctx.error("ERR MULTI calls can not be nested");
  ctx.client.in_multi = true;
  ctx.reply.ok();
}

void discard_cmd(CommandContext& ctx) {
  if (!ctx.client.in_multi) return ctx.error("ERR DISCARD without MULTI");
  ctx.server.discard_multi(ctx.client);
  ctx.reply.ok();
}

void exec_cmd(CommandContext& ctx) {
  ClientState& c = ctx.client;
  ServerImpl& s = ctx.server;
  if (!c.in_multi) return ctx.error("ERR EXEC without MULTI");
  // A watched key that expired since WATCH (and was not expired then) fails it too.
  bool expired_watch = false;
  for (const WatchedKey& w : c.watched) {
    if (w.expired_at_watch) continue;
    const Entry* e = s.db(w.db).find(w.key);
    if (e != nullptr && e->expire_ms >= 0 && e->expire_ms < s.now_ms()) expired_watch = true;
  }
  if (c.multi_error) {
    s.discard_multi(c);
    return ctx.error("EXECABORT Transaction discarded because of previous errors.");
  }
  if (c.dirty_cas || expired_watch) {
    s.discard_multi(c);
    return ctx.reply.null_array();
  }
  std::vector<QueuedCommand> queue = std::move(c.queued);
  s.discard_multi(c);  // unwatches: the keys we write must not fail our own EXEC
  ctx.reply.array(queue.size());
  c.in_exec = true;
  s.exec_active_ = true;
  s.exec_multi_fed_ = false;
  std::vector<std::string_view> argv;
  for (QueuedCommand& q : queue) {
    argv.assign(q.argv.begin(), q.argv.end());
    // Checked again at EXEC time as Redis does for the AUTH state and memory: a command
    // that queued fine may still be refused now.
    if (!c.authenticated && s.acl_.auth_required() && (q.entry->def->flags & kCmdNoAuth) == 0) {
      ctx.error("NOAUTH Authentication required.");
      continue;
    }
    if (c.user != nullptr && !c.user->unrestricted) {
      const std::string err = s.acl_check_locked(c, q.entry, argv, true);
      if (!err.empty()) {
        ctx.error(err);
        continue;
      }
    }
    s.call(c, q.entry, argv, ctx.reply);
    if (c.db != ctx.db->index()) ctx.db = &s.db(c.db);
  }
  c.in_exec = false;
  s.exec_active_ = false;
  if (s.exec_multi_fed_) {
    s.exec_multi_fed_ = false;
    const std::string_view exec[1] = {"EXEC"};
    s.propagate(ctx.db->index(), exec);
  }
  // EXEC itself is not propagated (its commands were, inside MULTI ... EXEC).
  ctx.dirty = 0;
}

void watch_cmd(CommandContext& ctx) {
  if (ctx.client.in_multi) return ctx.error("ERR WATCH inside MULTI is not allowed");
  for (size_t j = 1; j < ctx.argc(); ++j) ctx.server.watch(ctx.client, ctx.arg(j));
  ctx.reply.ok();
}

void unwatch_cmd(CommandContext& ctx) {
  ctx.server.unwatch_all(ctx.client);
  ctx.reply.ok();
}

constexpr uint32_t kF = kCmdFast, kL = kCmdLoading, kS = kCmdStale, kNS = kCmdNoScript, kB = kCmdAllowBusy;

const CommandDef kCommands[] = {
    {"multi", multi_cmd, 1, kF | kL | kS | kNS | kB, 0, 0, 0, "transactions", "Starts a transaction.", "1.2.0"},
    {"exec", exec_cmd, 1, kL | kS | kNS, 0, 0, 0, "transactions", "Executes all commands in a transaction.", "1.2.0"},
    {"discard", discard_cmd, 1, kF | kL | kS | kNS | kB, 0, 0, 0, "transactions", "Discards a transaction.", "2.0.0"},
    {"watch", watch_cmd, -2, kF | kL | kS | kNS | kB, 1, -1, 1, "transactions", "Monitors changes to keys to determine the execution of a transaction.", "2.2.0"},
    {"unwatch", unwatch_cmd, 1, kF | kL | kS | kNS | kB, 0, 0, 0, "transactions", "Forgets about watched keys of a transaction.", "2.2.0"},
};

}  // namespace

std::span<const CommandDef> multi_commands() { return kCommands; }

}  // namespace conduit::kv
