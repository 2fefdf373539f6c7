// Blocking commands (BLPOP & co., WAIT), CLIENT UNBLOCK and CLIENT PAUSE.
//
// A blocking command that finds nothing calls block(): the client is queued on each of its
// keys (in arrival order), its remaining input is held, and a timer on its own worker
// fires the timeout.  A write that changes a key with waiters (call() signals every key it
// wrote) makes the key ready; after the command -- after the whole EXEC for a transaction
// -- serve_ready_keys() runs the blocked command again for each waiter in order, under the
// same lock, so the waiter gets the element the write produced (a BLPOP served by an LPUSH
// sees it before any other client's command).  A re-run that still finds nothing keeps the
// client blocked; a key of another type serves nobody and a deleted key leaves its waiters
// blocked (nothing to pop), as Redis 7.0.
//
// The reply of a served client is written into its inbox (under the lock) and its worker
// sends it: with io-threads the push may run on another thread than the waiter's.
#include <algorithm>

#include "conduit/base/log.h"
#include "server_impl.h"

namespace conduit::kv {

bool ServerImpl::can_block(const CommandContext& ctx) const {
  if (serving_client_ == &ctx.client) return true;
  return !ctx.client.in_exec && !ctx.client.internal && ctx.client.conn != nullptr && !loading_;
}

void ServerImpl::block(CommandContext& ctx, std::span<const std::string_view> keys, int64_t deadline_ms,
                       BlockState::TimeoutReply on_timeout) {
  ctx.blocked = true;
  ClientState& c = ctx.client;
  if (serving_client_ == &c) return;  // tried again for a waiter: it stays queued as it was
  auto b = std::make_unique<BlockState>();
  b->db = ctx.db->index();
  b->argv.assign(ctx.argv.begin(), ctx.argv.end());
  b->entry = ctx.entry;
  b->deadline_ms = deadline_ms;
  b->on_timeout = on_timeout;
  b->gen = ++c.block_gen;
  auto& waiters = blocking_keys_[static_cast<size_t>(b->db)];
  for (std::string_view k : keys) {
    if (std::find(b->keys.begin(), b->keys.end(), k) != b->keys.end()) continue;  // BLPOP k k 0
    b->keys.emplace_back(k);
    waiters[std::string(k)].push_back(&c);
  }
  total_blocking_keys_ += b->keys.size();
  c.blocked = std::move(b);
  ++blocked_count_;
  if (c.conn != nullptr) {
    c.conn->input_held = true;
    arm_block_timer(c.conn);
  }
}

// On the client's own worker (it is running its own command).
void ServerImpl::arm_block_timer(ClientConn* c) {
  BlockState* b = c->state.blocked.get();
  if (b->deadline_ms <= 0) return;
  const int64_t wait = std::max<int64_t>(b->deadline_ms - now_ms(), 0);
  Worker* w = c->worker;
  const uint64_t id = c->state.id, gen = b->gen;
  b->timer = w->loop->run_after(static_cast<uint64_t>(wait) * 1'000'000ull, [this, w, id, gen] {
    std::lock_guard<std::mutex> lock(mu_);
    for (ClientConn* x = w->clients_head; x != nullptr; x = x->next) {
      if (x->state.id != id) continue;
      if (x->state.blocked && x->state.blocked->gen == gen) {
        x->state.blocked->timer = 0;
        unblock(x->state, true);
      }
      return;
    }
  });
}

void ServerImpl::unblock(ClientState& c, bool timed_out, std::string_view error) {
  std::unique_ptr<BlockState> b = std::move(c.blocked);
  if (!b) return;
  auto& waiters = blocking_keys_[static_cast<size_t>(b->db)];
  for (const std::string& k : b->keys) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), &c), v.end());
    if (v.empty()) waiters.erase(it);
  }
  total_blocking_keys_ -= b->keys.size();
  --blocked_count_;
  ClientConn* conn = c.conn;
  if (conn == nullptr) return;
  if (b->timer != 0 && conn->worker->loop->in_loop_thread()) conn->worker->loop->cancel(b->timer);
  if (timed_out || !error.empty()) {
    ReplyWriter w = deliver_writer(conn);
    if (!error.empty()) {
      w.error(error);
    } else if (b->on_timeout == BlockState::kNullBulk) {
      w.null();
    } else if (b->on_timeout == BlockState::kZero) {
      w.integer(0);
    } else {
      w.null_array();
    }
    deliver_done(conn);
  }
  conn->input_held = c.paused_waiting;
  resume_held_later(conn);
}

// The type a blocked command pops from: its command group's.
Type ServerImpl::blocked_on_type(const BlockState& b) {
  const std::string_view group = b.entry->def->group;
  if (group == "sorted_set") return Type::kZSet;
  if (group == "stream") return Type::kStream;
  return Type::kList;
}

void ServerImpl::serve_blocked_client(ClientConn* c) {
  ClientState& st = c->state;
  BlockState* b = st.blocked.get();
  std::vector<std::string> argv_owned = b->argv;  // the command may unblock (and free) b
  std::vector<std::string_view> argv(argv_owned.begin(), argv_owned.end());
  ReplyWriter w = deliver_writer(c);
  const int saved_db = st.db;
  st.db = b->db;
  serving_client_ = &st;
  const bool still_blocked = call(st, b->entry, argv, w);
  serving_client_ = nullptr;
  st.db = saved_db;
  if (!still_blocked) unblock(st, false);
  deliver_done(c);
}

void ServerImpl::serve_ready_keys() {
  serving_ready_ = true;
  while (!ready_keys_.empty()) {
    std::vector<std::pair<int, std::string>> keys;
    keys.swap(ready_keys_);
    for (const auto& [d, key] : keys) {
      auto& waiters = blocking_keys_[static_cast<size_t>(d)];
      auto it = waiters.find(key);
      if (it == waiters.end()) continue;
      const std::vector<ClientState*> queue = it->second;  // serving changes the list
      for (ClientState* c : queue) {
        if (!c->blocked || c->conn == nullptr || c->conn->closed) continue;
        Entry* e = db(d).find(key);
        const bool gone = e == nullptr || (e->expire_ms >= 0 && e->expire_ms < now_ms());  // consumed or gone
        // As Redis 7.0: a key of another type (LPUSH, DEL, SET in one EXEC) serves nobody;
        // its waiters stay blocked until it is a list (sorted set, stream) again -- except
        // XREADGROUP's, whose group went with the key.
        if (gone || e->type != blocked_on_type(*c->blocked)) {
          if (c->blocked->unblock_on_delete) unblock(*c, false, "UNBLOCKED the stream key no longer exists");
          continue;
        }
        serve_blocked_client(c->conn);
      }
    }
  }
  serving_ready_ = false;
}

void ServerImpl::swapped_dbs(int a, int b) {
  if (blocked_count_ == 0) return;
  // Every key with waiters: those that now exist are served, XREADGROUPs whose key went
  // away are answered (serve_ready_keys).
  for (int d : {a, b})
    for (const auto& [key, clients] : blocking_keys_[static_cast<size_t>(d)]) ready_keys_.emplace_back(d, key);
}

// --- CLIENT PAUSE -----------------------------------------------------------------------------

bool ServerImpl::paused_for(const ClientState& c, const CommandEntry* e) const {
  if (pause_until_ms_ == 0 || c.internal || coarse_ms_ >= pause_until_ms_) return false;
  if (!pause_writes_only_) return true;
  uint32_t f = e->def->flags;
  if (std::string_view(e->def->name) == "exec")
    for (const QueuedCommand& q : c.queued) f |= q.entry->def->flags;
  return (f & (kCmdWrite | kCmdMayReplicate)) != 0;
}

void ServerImpl::pause_clients(int64_t until_ms, bool writes_only) {
  // A later or stricter pause wins, as in Redis.
  if (pause_until_ms_ == 0 || !writes_only) pause_writes_only_ = writes_only;
  pause_until_ms_ = std::max(pause_until_ms_, until_ms);
  const int64_t until = pause_until_ms_;
  post_to(*workers_[0], [this, until] {
    std::lock_guard<std::mutex> lock(mu_);
    if (pause_timer_ != 0) loop_.cancel(pause_timer_);
    const int64_t wait = std::max<int64_t>(until - wall_ms(), 0);
    pause_timer_ = loop_.run_after(static_cast<uint64_t>(wait) * 1'000'000ull + 1'000'000ull, [this] {
      std::lock_guard<std::mutex> l(mu_);
      pause_timer_ = 0;
      if (pause_until_ms_ != 0 && wall_ms() >= pause_until_ms_) unpause_clients();
    });
  });
}

void ServerImpl::unpause_clients() {
  pause_until_ms_ = 0;
  pause_writes_only_ = false;
  std::vector<uint64_t> ids;
  ids.swap(paused_clients_);
  for (uint64_t id : ids) {
    ClientConn* c = find_client(id);
    if (c == nullptr) continue;
    c->state.paused_waiting = false;
    c->input_held = c->state.blocked != nullptr;
    resume_held_later(c);
  }
}

}  // namespace conduit::kv
