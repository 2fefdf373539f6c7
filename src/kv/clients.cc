// Client connections: accepting, reading and running a batch of commands, replies held
// for the AOF, output back-pressure, closing and CLIENT KILL across workers, CLIENT LIST.
#include <time.h>

#include <algorithm>
#include <cinttypes>

#include "client_limits.h"
#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "server_impl.h"

namespace conduit::kv {

namespace {

constexpr size_t kQueryReadBytes = 16 * 1024;   // reads into a client's own query buffer
constexpr size_t kKeepBufferBytes = 64 * 1024;  // buffers above this are freed once drained

constexpr std::string_view kDenied =
    "-DENIED conduit-kv is running in protected mode because protected mode is enabled and no password is set for "
    "the default user. In this mode connections are only accepted from the loopback interface. If you want to "
    "connect from external computers, set a password (--requirepass), or disable protected mode with "
    "'CONFIG SET protected-mode no' from the loopback interface (make sure the server is not reachable from the "
    "internet), or restart it with '--protected-mode no'.\r\n";


// A counter with one writer (its worker) and readers anywhere: no read-modify-write needed.
void bump(std::atomic<uint64_t>& a, uint64_t n) { a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

int64_t coarse_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}


}  // namespace

bool is_loopback(const std::string& scheme, const std::string& peer) {
  if (scheme == "shm") return true;  // same host by construction
  return peer.rfind("127.", 0) == 0 || peer.rfind("[::1]", 0) == 0 || peer.rfind("::1", 0) == 0 ||
         peer.rfind("[::ffff:127.", 0) == 0;
}

void ServerImpl::on_accept(Worker& w, std::unique_ptr<transport::Connection> conn) {
  const std::string scheme(conn->caps().transport);
  const std::string peer = conn->peer_address();
  std::string_view refusal;
  bool denied = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.connections_received;
    ++transport_totals_[scheme].connections;
    if (shut_down_) refusal = "-ERR server is shutting down\r\n";
    else if (num_clients_ + handshakes_in_progress() >= options_.maxclients)
      refusal = "-ERR max number of clients reached\r\n";
    else if (options_.protected_mode && acl_.default_user()->nopass && !is_loopback(scheme, peer)) refusal = kDenied, denied = true;
    if (!refusal.empty()) ++stats_.rejected_connections;
  }
  if (!refusal.empty()) {
    if (denied) CONDUIT_LOG(kWarn) << "conduit-kv: protected mode: refused " << scheme << " client " << peer;
    (void)conn->write({reinterpret_cast<const uint8_t*>(refusal.data()), refusal.size()});
    conn->close();
    w.loop->destroy_later(std::move(conn));
    return;
  }
  ClientConn* c = nullptr;
  try {
    c = new ClientConn;
  } catch (const std::bad_alloc&) {
    CONDUIT_LOG(kError) << "conduit-kv: out of memory accepting a " << scheme << " client from " << peer;
    conn->close();
    w.loop->destroy_later(std::move(conn));
    return;
  }
  c->server = this;
  c->worker = &w;
  c->conn = std::move(conn);
  c->scheme = scheme;
  c->peer = peer;
  c->local = c->conn->local_address();
  c->last_write_progress_ms = coarse_now_ms();
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->state.id = next_client_id_++;
    c->state.conn = c;
    clients_by_id_[c->state.id] = c;
    c->state.user = acl_.default_user();
    c->state.authenticated = !acl_.auth_required();
    apply_limits_locked(c);
    c->state.created_ms = c->state.last_interaction_ms = coarse_ms_;
    c->next = w.clients_head;
    if (w.clients_head != nullptr) w.clients_head->prev = c;
    w.clients_head = c;
    ++w.num_clients;
    ++num_clients_;
    stats_.connected_clients = num_clients_;
    c->pinned_counted = c->conn->stats().pinned_bytes;
    client_pinned_bytes_ += c->pinned_counted;
    refresh_registered_locked(w);  // its arena may be new (the first rdma client of this loop)
  }
  bump(w.connections, 1);
  c->conn->set_read_handler([c](transport::Connection&) { c->server->on_readable(c); });
}

void ServerImpl::on_readable(ClientConn* c) {
  if (c->closed) return;
  try {
    read_and_run(c);
  } catch (const std::bad_alloc&) {
    // Growing this client's query buffer failed: close it, keep everyone else.
    CONDUIT_LOG(kError) << "conduit-kv: out of memory for the input of client " << c->peer << " (query buffer "
                        << c->query.size() << " bytes): closing it";
    c->query.release();
    close_client(c, "out of memory");
  }
}

void ServerImpl::read_and_run(ClientConn* c) {
  Worker& w = *c->worker;
  transport::Connection& conn = *c->conn;
  // The read runs outside the lock: the workers' I/O goes on in parallel.
  const char* data;
  size_t len;
  size_t n;
  bool from_query;
  if (c->query.empty()) {
    // The common case: read into the worker's buffer and run the commands in place; only a
    // partial command at the end is copied into the client's own buffer.
    auto r = conn.read({reinterpret_cast<uint8_t*>(w.scratch.data()), w.scratch.size()});
    if (!r.ok()) {
      if (r.status().would_block()) return;
      return close_client(c, r.status().to_string());
    }
    if (*r == 0) return close_client(c, "client closed the connection");
    n = *r;
    data = w.scratch.data();
    len = n;
    from_query = false;
  } else {
    // Read a big argument in large steps, but grow at most 2x per read: memory follows the
    // bytes that actually arrived, not the length a client announced.
    size_t want = kQueryReadBytes;
    const size_t hint = c->parser.bytes_hint();
    if (hint > c->query.size())
      want = std::max(want, std::min(hint - c->query.size(), std::max(c->query.size(), kQueryReadBytes)));
    char* dst = c->query.prepare(want);
    auto r = conn.read({reinterpret_cast<uint8_t*>(dst), want});
    if (!r.ok()) {
      if (r.status().would_block()) return;
      return close_client(c, r.status().to_string());
    }
    if (*r == 0) return close_client(c, "client closed the connection");
    n = *r;
    c->query.commit(n);
    data = c->query.data();
    len = c->query.size();
    from_query = true;
  }
  bump(w.reads, 1);
  BatchEnd end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.net_input_bytes += n;
    end = run_batch_locked(c, data, len, from_query);
  }
  after_batch(c, end);
}

ServerImpl::BatchEnd ServerImpl::run_batch_locked(ClientConn* c, const char* data, size_t len, bool from_query) {
  BatchEnd end;
  if (c->closed) return end;
  if (c->kill_requested) {
    close_client_locked(c, "killed by CLIENT KILL");
    return end;
  }
  invalidate_time();
  apply_limits_locked(c);
  // Messages that reached c before this input (another client's PUBLISH, an invalidation)
  // go out before its replies.
  if (!c->inbox.empty()) {
    c->out.append(c->inbox.data(), c->inbox.size());
    c->inbox.clear();
  }
  process_input_locked(c, data, len, from_query);
  if (tracking_active()) tracking_after_batch_locked();
  c->stats_snap = c->conn->stats();
  const bool unauth = unauthenticated(c);
  if (!c->closed && c->query.size() > query_buffer_limit(options_.limits, unauth)) {
    CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << " that reached max query buffer length ("
                       << c->query.size() << " bytes)";
    c->writer.error("ERR Protocol error: query buffer limit (client-query-buffer-limit) exceeded");
    c->state.close_after_reply = true;
    c->query.release();
    c->parser.reset();
  }
  // These replies may show data the AOF does not hold yet (this batch's writes or another
  // worker's): then they go out only after the AOF write (and fsync under `always`).
  // (While the AOF cannot be written -- a full disk -- writes are refused with MISCONF and
  // nothing new enters the buffer; reads are answered at once rather than held until the
  // disk has room, and the cron keeps retrying the write.)
  end.wait_for_aof = aof_ && aof_->has_pending() && aof_->last_write_status().ok();
  end.hard_limit = options_.output_hard_limit;
  end.unauthenticated = unauth;
  return end;
}

void ServerImpl::apply_limits_locked(ClientConn* c) {
  const bool unauth = unauthenticated(c);
  if (c->limits_gen != limits_gen_ || c->limits_unauth != unauth) {
    if (c->parser.in_progress()) return;  // a command half read keeps the limits it began with
    c->parser.set_limits(request_limits(options_.limits, unauth));
    c->limits_gen = limits_gen_;
    c->limits_unauth = unauth;
  }
  c->writer.set_limit(output_budget(options_.output_hard_limit, unauth));
}

void ServerImpl::process_input_locked(ClientConn* c, const char* data, size_t len, bool from_query) {
  ClientState& st = c->state;
  size_t off = 0;
  while (off < len) {
    if (st.close_after_reply || c->closed) {
      off = len;  // Redis drops what follows QUIT or a protocol error
      break;
    }
    if (c->input_held) break;  // blocked or paused: the rest waits in the query buffer
    if (c->out.size() >= options_.output_pause_bytes) {
      c->read_paused = true;
      break;
    }
    if (c->limits_unauth != unauthenticated(c)) apply_limits_locked(c);  // AUTH just succeeded
    size_t consumed = 0;
    const auto outcome = c->parser.parse(data + off, len - off, &consumed);
    if (outcome == RequestParser::Outcome::kCommand) {
      c->running = true;
      c->cur_qbuf = len - off;
      c->cur_from_scratch = !from_query;
      const bool ran = execute(st, c->parser.args(), c->writer);
      c->running = false;
      if (!ran) {
        // CLIENT PAUSE holds this command: it runs (parsed again) when the pause ends.
        c->input_held = true;
        break;
      }
      off += consumed;
      if (st.blocked) c->input_held = true;
      if (c->writer.failed()) {
        // The reply would pass client-output-buffer-limit (or memory ran out, logged by
        // out_of_memory_locked): it is incomplete, so the client goes now, without it.
        if (c->writer.failed_over_limit())
          CONDUIT_LOG(kWarn) << "conduit-kv: closing " << c->scheme << " client id=" << st.id << " " << c->peer
                             << ": the reply to " << c->parser.args()[0].substr(0, 32)
                             << " would exceed client-output-buffer-limit"
                             << (unauthenticated(c) ? " for unauthenticated clients (1kb)" : "") << " with "
                             << c->out.size() << " bytes already queued";
        c->out.release();
        close_client_locked(c, "output buffer limit");
        off = len;
        break;
      }
    } else if (outcome == RequestParser::Outcome::kEmpty) {
      off += consumed;
    } else if (outcome == RequestParser::Outcome::kNeedMore) {
      break;
    } else {
      CONDUIT_LOG(kInfo) << "conduit-kv: protocol error from " << c->scheme << " client " << c->peer << ": "
                         << c->parser.error();
      c->writer.error(c->parser.error());
      st.close_after_reply = true;
      off = len;
      c->parser.reset();
      break;
    }
  }
  st.last_interaction_ms = coarse_ms_;
  if (from_query) {
    c->query.consume(off);
    if (c->query.empty() && c->query.capacity() > kKeepBufferBytes) c->query.release();
  } else if (off < len) {
    c->query.append(data + off, len - off);
  }
}

void ServerImpl::after_batch(ClientConn* c, BatchEnd end) {
  Worker& w = *c->worker;
  for (;;) {
    if (c->closed) return;
    if (over_hard_limit(c->out.size(), end.hard_limit, end.unauthenticated)) {
      CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << ": output buffer " << c->out.size()
                         << " bytes exceeds client-output-buffer-limit " << end.hard_limit;
      return close_client(c, "output buffer limit");
    }
    if (end.wait_for_aof) {
      if (!c->pending_commit) {
        c->pending_commit = true;
        w.pending_commit.push_back(c);
      }
      schedule_commit(w);
      break;
    }
    if (!flush_client(c)) return;
    if (!c->read_paused || !c->out.empty()) break;
    // Paused for output and it all went out: run the commands still queued.
    c->read_paused = false;
    std::lock_guard<std::mutex> lock(mu_);
    end = run_batch_locked(c, c->query.data(), c->query.size(), true);
  }
  if (c->closed) return;
  if (c->read_paused) c->conn->set_read_handler(nullptr);
  publish(c);
}

void ServerImpl::publish(ClientConn* c) {
  constexpr auto r = std::memory_order_relaxed;
  c->pub_qbuf.store(c->query.size(), r);
  c->pub_qbuf_cap.store(c->query.capacity(), r);
  c->pub_obuf.store(c->out.size(), r);
  c->pub_obuf_cap.store(c->out.capacity(), r);
  c->pub_writing.store(c->write_handler_on, r);
}

void ServerImpl::schedule_commit(Worker& w) {
  if (w.commit_scheduled) return;
  w.commit_scheduled = true;
  // A zero-delay timer runs at the end of this loop iteration, after every connection
  // served in it (fd events and transport hooks alike): one AOF write (and fsync) covers
  // all their commands, like Redis' beforeSleep.
  Worker* wp = &w;
  w.commit_timer = w.loop->run_after(0, [this, wp] {
    wp->commit_timer = 0;
    commit(*wp);
  });
}

void ServerImpl::commit(Worker& w) {
  w.commit_scheduled = false;
  Status s;
  bool always = false;
  {
    // Everything fed so far, by any worker, is written (and fsynced under `always`) by the
    // time this returns OK: whichever worker flushes first covers the others' bytes too.
    std::lock_guard<std::mutex> lock(mu_);
    if (aof_) {
      s = aof_->flush();
      always = aof_->policy() == AppendFsync::kAlways;
    }
  }
  std::vector<ClientConn*> list;
  list.swap(w.pending_commit);
  for (ClientConn* c : list) {
    c->pending_commit = false;
    if (c->closed) continue;
    if (!s.ok() && always) {
      // Under `always` a reply promises durability: withhold it.
      close_client(c, "AOF write failed: " + std::string(s.message()));
      continue;
    }
    resume_paused(c);
  }
}

// Sends what is queued; a client paused for output whose replies all went out runs the
// commands still in its query buffer.
void ServerImpl::resume_paused(ClientConn* c) {
  const bool paused = c->read_paused;
  if (!flush_client(c)) return;
  if (paused && c->out.empty()) {
    c->read_paused = false;
    c->conn->set_read_handler([c](transport::Connection&) { c->server->on_readable(c); });
    BatchEnd end;
    {
      std::lock_guard<std::mutex> lock(mu_);
      end = run_batch_locked(c, c->query.data(), c->query.size(), true);
    }
    after_batch(c, end);
    return;
  }
  publish(c);
}

// c was unblocked or unpaused: run the input it held (on c's worker).
void ServerImpl::resume_held(ClientConn* c) {
  if (c->closed || c->input_held) return;
  if (c->query.empty()) return resume_paused(c);
  BatchEnd end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = run_batch_locked(c, c->query.data(), c->query.size(), true);
  }
  after_batch(c, end);
}

// mu_ held, any thread.
void ServerImpl::resume_held_later(ClientConn* c) {
  Worker* w = c->worker;
  const uint64_t id = c->state.id;
  post_to(*w, [this, w, id] {
    ClientConn* x = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (ClientConn* y = w->clients_head; y != nullptr; y = y->next)
        if (y->state.id == id) x = y;
    }
    if (x != nullptr) resume_held(x);
  });
}

bool ServerImpl::flush_client(ClientConn* c) {
  Worker& w = *c->worker;
  while (!c->out.empty()) {
    auto r = c->conn->write({reinterpret_cast<const uint8_t*>(c->out.data()), c->out.size()});
    if (r.ok()) {
      c->out.consume(*r);
      bump(w.net_output_bytes, *r);
      bump(w.writes, 1);
      c->last_write_progress_ms = coarse_now_ms();
      continue;
    }
    if (r.status().would_block()) {
      if (!c->write_handler_on) {
        c->write_handler_on = true;
        c->conn->set_write_handler([c](transport::Connection&) { c->server->on_writable(c); });
      }
      return true;
    }
    close_client(c, r.status().to_string());
    return false;
  }
  if (c->write_handler_on) {
    c->write_handler_on = false;
    c->conn->set_write_handler(nullptr);
  }
  c->soft_limit_since_ms = 0;
  if (c->out.capacity() > kKeepBufferBytes) c->out.release();
  if (c->state.close_after_reply) {
    close_client(c, "closed after reply");
    return false;
  }
  return true;
}

void ServerImpl::on_writable(ClientConn* c) {
  if (c->closed) return;
  resume_paused(c);
}

void ServerImpl::close_client(ClientConn* c, std::string_view why) {
  std::lock_guard<std::mutex> lock(mu_);
  close_client_locked(c, why);
}

void ServerImpl::forget_client_locked(ClientState& c) {
  ClientConn* conn = c.conn;
  if (c.blocked) {
    c.conn = nullptr;  // no reply, no resume: the connection is going
    unblock(c, false);
    c.conn = conn;
  }
  if (c.paused_waiting && conn != nullptr)
    paused_clients_.erase(std::remove(paused_clients_.begin(), paused_clients_.end(), c.id), paused_clients_.end());
  unwatch_all(c);
  tracking_disable(c);
  c.queued.clear();
  unsubscribe_all(c, false, false);
  unsubscribe_all(c, true, false);
  if (c.monitor) monitors_.erase(std::remove(monitors_.begin(), monitors_.end(), c.conn), monitors_.end());
  c.monitor = false;
}

void ServerImpl::close_client_locked(ClientConn* c, std::string_view why) {
  if (c->closed) return;
  c->closed = true;
  c->state.conn = c;
  forget_client_locked(c->state);
  clients_by_id_.erase(c->state.id);
  Worker& w = *c->worker;
  CONDUIT_LOG(kDebug) << "conduit-kv: closing client id=" << c->state.id << " " << c->peer << ": " << why;
  if (c->prev != nullptr) c->prev->next = c->next;
  else w.clients_head = c->next;
  if (c->next != nullptr) c->next->prev = c->prev;
  if (w.cron_cursor == c) w.cron_cursor = c->next;
  --w.num_clients;
  --num_clients_;
  stats_.connected_clients = num_clients_;
  if (c->pending_commit) {
    auto it = std::find(w.pending_commit.begin(), w.pending_commit.end(), c);
    if (it != w.pending_commit.end()) w.pending_commit.erase(it);
    c->pending_commit = false;
  }
  TransportTotals& t = transport_totals_[c->scheme];
  const transport::ConnStats& s = c->conn->stats();
  client_pinned_bytes_ -= c->pinned_counted;
  c->pinned_counted = 0;
  t.stats.bytes_read += s.bytes_read;
  t.stats.bytes_written += s.bytes_written;
  t.stats.reads += s.reads;
  t.stats.writes += s.writes;
  t.stats.read_would_block += s.read_would_block;
  t.stats.write_would_block += s.write_would_block;
  t.stats.wakeups += s.wakeups;
  c->conn->close();
  // We may be inside the connection's own handler: destroy it after this dispatch.
  w.loop->destroy_later(std::unique_ptr<ClientConn>(c));
}

void ServerImpl::kill_client(ClientConn* c) {
  if (c == nullptr || c->closed || c->kill_requested) return;
  Worker* w = c->worker;
  if (w->loop->in_loop_thread()) {
    close_client_locked(c, "killed by CLIENT KILL");
    return;
  }
  // Its worker may be reading or writing it right now: that thread closes it.
  c->kill_requested = true;
  const uint64_t id = c->state.id;
  post_to(*w, [this, w, id] {
    std::lock_guard<std::mutex> lock(mu_);
    for (ClientConn* x = w->clients_head; x != nullptr; x = x->next)
      if (x->state.id == id) return close_client_locked(x, "killed by CLIENT KILL");
  });
}

std::vector<const ClientConn*> ServerImpl::clients() const {
  std::vector<const ClientConn*> v;
  v.reserve(num_clients_);
  for (const auto& w : workers_)
    for (const ClientConn* c = w->clients_head; c != nullptr; c = c->next)
      if (!c->kill_requested) v.push_back(c);
  // Oldest first, like Redis.
  std::sort(v.begin(), v.end(), [](const ClientConn* a, const ClientConn* b) { return a->state.id < b->state.id; });
  return v;
}

ClientConn* ServerImpl::find_client(uint64_t id) const {
  auto it = clients_by_id_.find(id);
  return it != clients_by_id_.end() && !it->second->kill_requested ? it->second : nullptr;
}

// Redis 7.0's CLIENT LIST line.  qbuf is the client's unparsed input (for the client
// running the command: from its current command on, as Redis' query buffer holds it),
// qbuf-free the room left in the buffer it sits in; omem and tot-mem what its buffers
// really hold.  Other workers' clients: sizes as of their last batch.
std::string ServerImpl::client_list_line(const ClientConn& c) const {
  char buf[1536];
  const ClientState& s = c.state;
  constexpr auto r = std::memory_order_relaxed;
  const bool own = c.worker->loop->in_loop_thread();
  size_t qbuf = c.pub_qbuf.load(r), qcap = c.pub_qbuf_cap.load(r);
  size_t obuf = c.pub_obuf.load(r), ocap = c.pub_obuf_cap.load(r);
  if (own) {
    qbuf = c.running ? c.cur_qbuf : c.query.size();
    qcap = c.running && c.cur_from_scratch ? c.worker->scratch.size() : std::max(c.query.capacity(), qbuf);
    obuf = c.out.size();
    ocap = c.out.capacity();
  }
  std::string flags;
  if (s.monitor) flags += 'O';
  if (s.subscriptions() > 0) flags += 'P';
  if (s.in_multi) flags += 'x';
  if (s.blocked) flags += 'b';
  if (s.tracking.on) flags += 't';
  if (s.tracking.broken_redir) flags += 'R';
  if (s.tracking.bcast) flags += 'B';
  if (s.dirty_cas) flags += 'd';
  if (s.close_after_reply) flags += 'c';
  if (s.no_evict) flags += 'e';
  if (flags.empty()) flags = "N";
  size_t argv_mem = 0;
  if (c.running)
    for (std::string_view a : c.parser.args()) argv_mem += a.size();
  // A long client or user name does not fit buf: the line is printed again at its size.
  auto print = [&](char* dst, size_t cap) {
    return std::snprintf(dst, cap,
                "id=%" PRIu64 " addr=%s laddr=%s fd=-1 name=%s age=%" PRId64 " idle=%" PRId64
                " flags=%s db=%d sub=%zu psub=%zu ssub=0 multi=%lld qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=%" PRIu64
                " rbs=%zu rbp=0 obl=0 oll=0 omem=%zu tot-mem=%zu events=r%s cmd=%s user=%s redir=%lld resp=%d "
                "transport=%s io-thread=%zu",
                s.id, c.peer.c_str(), c.local.c_str(), s.name.c_str(), (coarse_ms_ - s.created_ms) / 1000,
                (coarse_ms_ - s.last_interaction_ms) / 1000, flags.c_str(), s.db, s.channels.size(), s.patterns.size(),
                s.in_multi ? static_cast<long long>(s.queued.size()) : -1LL, qbuf, qcap > qbuf ? qcap - qbuf : 0,
                argv_mem, s.queued_bytes, qcap, obuf, qcap + ocap + c.inbox.capacity() + sizeof(ClientConn),
                (own ? c.write_handler_on : c.pub_writing.load(r)) ? "w" : "",
                s.last_cmd != nullptr ? s.last_cmd->fullname.c_str() : "NULL",
                s.user != nullptr ? s.user->name.c_str() : "default",
                s.tracking.on ? static_cast<long long>(s.tracking.redirect) : -1LL, s.resp == RespVersion::kResp3 ? 3 : 2,
                c.scheme.c_str(), c.worker->index);
  };
  const int n = print(buf, sizeof buf);
  if (n >= 0 && static_cast<size_t>(n) >= sizeof buf) {
    std::string line(static_cast<size_t>(n) + 1, '\0');
    print(line.data(), line.size());
    line.resize(static_cast<size_t>(n));
    return line;
  }
  return buf;
}

uint64_t ServerImpl::net_output_bytes() const {
  uint64_t n = 0;
  for (const auto& w : workers_) n += w->net_output_bytes.load(std::memory_order_relaxed);
  return n - net_output_base_;
}

}  // namespace conduit::kv
