#include "conduit/kv/server.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <condition_variable>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "client_limits.h"
#include "numbers.h"
#include "server_impl.h"

extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace conduit::kv {

namespace {

constexpr size_t kScratchBytes = 64 * 1024;     // one read per readable event, at most this
constexpr size_t kQueryReadBytes = 16 * 1024;   // reads into a client's own query buffer
constexpr size_t kKeepBufferBytes = 64 * 1024;  // buffers above this are freed once drained

int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string human_bytes(uint64_t n) {
  char buf[64];
  const double d = static_cast<double>(n);
  if (n < 1024) std::snprintf(buf, sizeof buf, "%" PRIu64 "B", n);
  else if (n < (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2fK", d / 1024);
  else if (n < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2fM", d / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.2fG", d / (1ull << 30));
  return buf;
}

bool is_loopback(const std::string& scheme, const std::string& peer) {
  if (scheme == "shm") return true;  // same host by construction
  return peer.rfind("127.", 0) == 0 || peer.rfind("[::1]", 0) == 0 || peer.rfind("::1", 0) == 0 ||
         peer.rfind("[::ffff:127.", 0) == 0;
}

std::string host_for_url(const std::string& host) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
  return host;
}

constexpr std::string_view kDenied =
    "-DENIED conduit-kv is running in protected mode because protected mode is enabled and no password is set for "
    "the default user. In this mode connections are only accepted from the loopback interface. If you want to "
    "connect from external computers, set a password (--requirepass), or disable protected mode with "
    "'CONFIG SET protected-mode no' from the loopback interface (make sure the server is not reachable from the "
    "internet), or restart it with '--protected-mode no'.\r\n";

// One INFO line.
__attribute__((format(printf, 2, 3))) void appendf(std::string* out, const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0) out->append(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
  out->append("\r\n");
}

}  // namespace

// --- lifecycle ----------------------------------------------------------------------------------

ServerImpl::ServerImpl(reactor::EventLoop& loop, const ServerOptions& options) : options_(options), loop_(loop) {
  for (uint32_t i = 0; i < std::max<uint32_t>(options_.databases, 1); ++i)
    dbs_.push_back(std::make_unique<Database>(static_cast<int>(i)));
  build_command_table();
  rewrite_watch_.s = this;
  uint64_t seed = 0;
  if (::getentropy(&seed, sizeof seed) == 0 && seed != 0) rng_state_ = seed;
  start_time_ms_ = wall_ms();
  start_mono_ns_ = monotonic_ns();
  refresh_time();
}

ServerImpl::~ServerImpl() { shutdown(); }

uint64_t ServerImpl::random64() {
  // xorshift64*
  uint64_t x = rng_state_;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state_ = x;
  return x * 0x2545F4914F6CDD1Dull;
}

void ServerImpl::refresh_time() {
  now_ms_ = wall_ms();
  time_valid_ = true;
  coarse_ms_ = now_ms_;
}

void ServerImpl::invalidate_time() {
  time_valid_ = false;
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  coarse_ms_ = static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void ServerImpl::build_command_table() {
  for (auto table : {string_key_commands(), collection_commands(), server_commands()})
    for (const CommandDef& d : table) command_list_.push_back(&d);
  size_t cap = 16;
  while (cap < command_list_.size() * 4) cap *= 2;
  command_slots_.assign(cap, {std::string_view(), nullptr});
  for (const CommandDef* d : command_list_) {
    const std::string_view n = d->name;
    size_t i = hash_key(n) & (cap - 1);
    while (command_slots_[i].second != nullptr) i = (i + 1) & (cap - 1);
    command_slots_[i] = {n, d};
  }
}

const CommandDef* ServerImpl::find_command(std::string_view name) const {
  char lower[32];
  if (name.empty() || name.size() > sizeof lower) return nullptr;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    lower[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  }
  const std::string_view n(lower, name.size());
  const size_t mask = command_slots_.size() - 1;
  for (size_t i = hash_key(n) & mask;; i = (i + 1) & mask) {
    const auto& [slot_name, d] = command_slots_[i];
    if (d == nullptr) return nullptr;
    if (n == slot_name) return d;
  }
}

Status ServerImpl::start() {
  if (options_.io_threads < 1 || options_.io_threads > 128)
    return Status(Code::kInvalidArgument, "conduit-kv: io-threads must be between 1 and 128");
  // Replay the append-only file before anyone can connect.
  if (options_.appendonly) {
    const std::string path = options_.dir + "/" + options_.appendfilename;
    ClientState loader;
    loader.internal = true;
    loader.authenticated = true;
    ByteBuffer sink;
    ReplyWriter w(&sink);
    loading_ = true;
    const uint64_t t0 = monotonic_ns();
    std::lock_guard<std::mutex> lock(mu_);
    auto r = load_aof(path, options_.aof_load_truncated,
                      [&](std::span<const std::string_view> args) -> Status {
                        sink.clear();
                        execute(loader, args, w);
                        if (w.failed()) return Status(Code::kResourceExhausted, "out of memory while loading");
                        if (!sink.empty() && sink.data()[0] == '-')
                          return Status(Code::kProtocolError, "command '" + std::string(args[0].substr(0, 64)) +
                                                                  "' failed: " +
                                                                  std::string(sink.data() + 1, std::min<size_t>(sink.size() - 1, 200)));
                        return {};
                      });
    loading_ = false;
    if (!r.ok()) return r.status();
    if (r->commands > 0 || r->truncated_bytes > 0)
      CONDUIT_LOG(kInfo) << "aof: loaded " << r->commands << " commands (" << r->bytes << " bytes) from " << path
                         << " in " << (monotonic_ns() - t0) / 1'000'000 << " ms";
    CONDUIT_ASSIGN_OR_RETURN(aof_, Aof::open(path, options_.appendfsync));
  }
  refresh_time();

  // Worker 0 is the caller's loop; the others get their own loops, started below once their
  // listeners and timers are in place (a loop that no thread runs yet may be set up from here).
  for (uint32_t i = 0; i < options_.io_threads; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    if (i == 0) {
      w->loop = &loop_;
    } else {
      reactor::LoopOptions lo;
      lo.busy_poll_us = options_.io_busy_poll_us;
      CONDUIT_ASSIGN_OR_RETURN(w->owned_loop, reactor::EventLoop::create(lo));
      w->loop = w->owned_loop.get();
    }
    w->scratch.resize(kScratchBytes);
    workers_.push_back(std::move(w));
  }

  std::vector<std::string> urls;
  std::vector<std::string> binds;
  {
    std::string cur;
    for (char c : options_.bind + " ") {
      if (c == ' ' || c == ',') {
        if (!cur.empty()) binds.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (binds.empty()) binds.push_back("127.0.0.1");
  }
  if (options_.tcp)
    for (const std::string& b : binds) urls.push_back("tcp://" + host_for_url(b) + ":" + std::to_string(options_.port));
  if (!options_.shm_name.empty())
    urls.push_back("shm://" + options_.shm_name +
                   (options_.shm_busy_poll_us > 0 ? "?busy_poll_us=" + std::to_string(options_.shm_busy_poll_us) : ""));
  if (options_.rdma_port >= 0)
    for (const std::string& b : binds) urls.push_back("rdma://" + host_for_url(b) + ":" + std::to_string(options_.rdma_port));
  for (const std::string& u : options_.extra_listen) urls.push_back(u);
  for (const std::string& u : urls) {
    Worker& w0 = *workers_[0];
    auto ep = transport::Endpoint::parse(u);
    if (!ep.ok()) return ep.status().annotate("conduit-kv: cannot listen on " + u);
    if (ep->scheme != "tcp" || workers_.size() == 1) {
      CONDUIT_RETURN_IF_ERROR(open_listener(w0, u));
      listen_urls_.push_back(w0.listeners.back()->url());
      continue;
    }
    // One tcp listener per worker on the same port: the kernel spreads the connections.
    // shm and rdma listeners stay on worker 0 (their transports cannot share a port).
    ep->options.try_emplace("reuseport", "1");
    CONDUIT_RETURN_IF_ERROR(open_listener(w0, ep->to_string()));
    const std::string bound = w0.listeners.back()->url();  // port 0 resolved
    listen_urls_.push_back(bound);
    auto same = transport::Endpoint::parse(bound);
    if (!same.ok()) return same.status();
    same->options = ep->options;
    for (size_t i = 1; i < workers_.size(); ++i) CONDUIT_RETURN_IF_ERROR(open_listener(*workers_[i], same->to_string()));
  }

  const uint64_t period = 1'000'000'000ull / std::max<uint32_t>(options_.hz, 1);
  cron_timer_ = loop_.run_every(period, [this] { cron(); });
  for (auto& wp : workers_) {
    Worker* w = wp.get();
    w->cron_timer = w->loop->run_every(period, [this, w] { clients_cron(*w); });
  }
  return start_workers();
}

Status ServerImpl::start_workers() {
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    w.thread = std::thread([loop = w.loop, i] {
      if (Status s = loop->run(); !s.ok()) CONDUIT_LOG(kError) << "conduit-kv: io thread " << i << ": " << s.to_string();
    });
  }
  return {};
}

Status ServerImpl::open_listener(Worker& w, const std::string& url) {
  Worker* wp = &w;
  auto l = transport::listen(*w.loop, url,
                             [this, wp](std::unique_ptr<transport::Connection> c) { on_accept(*wp, std::move(c)); });
  if (!l.ok()) return l.status().annotate("conduit-kv: cannot listen on " + url);
  // A transport with a handshake (shm, rdma) asks before it spends a socket, memory or a
  // QP on a new connection: clients plus handshakes in progress stay within maxclients.
  (*l)->set_admission([this] {
    std::lock_guard<std::mutex> lock(mu_);
    return !shut_down_ && num_clients_ + handshakes_in_progress() < options_.maxclients;
  });
  if (w.index == 0) CONDUIT_LOG(kInfo) << "conduit-kv: listening on " << (*l)->url();
  w.listeners.push_back(std::move(l).value());
  return {};
}

void ServerImpl::post_to(Worker& w, std::function<void()> fn) {
  w.loop->post([alive = std::weak_ptr<ServerImpl*>(alive_), fn = std::move(fn)] {
    if (alive.lock()) fn();
  });
}

// On w's loop thread (or any thread when that loop is not running).
void ServerImpl::teardown_worker(Worker& w) {
  if (w.cron_timer != 0) w.loop->cancel(w.cron_timer);
  w.cron_timer = 0;
  for (auto& l : w.listeners) l->close();
  // Replies waiting for the AOF: write it, then send them.
  if (!w.pending_commit.empty()) commit(w);
  if (w.commit_timer != 0) w.loop->cancel(w.commit_timer);
  w.commit_timer = 0;
  w.commit_scheduled = false;
  std::lock_guard<std::mutex> lock(mu_);
  while (w.clients_head != nullptr) close_client_locked(w.clients_head, "server shutdown");
}

void ServerImpl::stop_workers() {
  for (size_t i = 1; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    if (!w.thread.joinable()) {
      teardown_worker(w);  // never ran: nothing else touches it
      continue;
    }
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    post_to(w, [&] {
      teardown_worker(w);
      std::lock_guard<std::mutex> l(m);
      done = true;
      cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return done; });
    }
    w.loop->stop();
    w.thread.join();
  }
}

void ServerImpl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;  // no new clients from here on
  }
  if (cron_timer_ != 0) loop_.cancel(cron_timer_);
  cron_timer_ = 0;
  stop_workers();
  if (!workers_.empty()) teardown_worker(*workers_[0]);
  std::lock_guard<std::mutex> lock(mu_);
  if (aof_) {
    if (rewrite_fd_ >= 0 && loop_.watching(rewrite_fd_)) (void)loop_.remove(rewrite_fd_);
    rewrite_fd_ = -1;
    aof_->abort_rewrite();
    if (Status s = aof_->flush(); !s.ok()) CONDUIT_LOG(kError) << "conduit-kv: final AOF write failed: " << s.to_string();
    aof_.reset();  // fsyncs
  }
  for (auto& w : workers_) w->listeners.clear();
}

void ServerImpl::request_shutdown() {
  // From any worker: the shutdown handler runs on worker 0 (the caller's loop).
  post_to(*workers_[0], [this] {
    if (shutdown_handler_)
      shutdown_handler_();
    else
      loop_.stop();
  });
}

// --- execution ----------------------------------------------------------------------------------

void ServerImpl::execute(ClientState& client, std::span<const std::string_view> argv, ReplyWriter& reply) {
  const CommandDef* cmd = find_command(argv[0]);
  if (cmd == nullptr) {
    std::string args;
    for (size_t j = 1; j < argv.size() && args.size() < 128; ++j) {
      args += '\'';
      args.append(argv[j].substr(0, 128 - args.size()));
      args += "' ";
    }
    reply.error("ERR unknown command '" + std::string(argv[0].substr(0, 128)) + "', with args beginning with: " + args);
    return;
  }
  const int argc = static_cast<int>(argv.size());
  if ((cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity) {
    reply.error(wrong_args(cmd->name));
    return;
  }
  if (!client.authenticated && (cmd->flags & kCmdNoAuth) == 0) {
    if (options_.requirepass.empty()) {
      client.authenticated = true;  // CONFIG SET requirepass "" after connecting
    } else {
      reply.error("NOAUTH Authentication required.");
      return;
    }
  }
  if ((cmd->flags & kCmdDenyOom) && options_.maxmemory > 0 && !loading_ && used_memory() > options_.maxmemory) {
    reply.error("OOM command not allowed when used memory > 'maxmemory'.");
    return;
  }
  if ((cmd->flags & kCmdWrite) && aof_ && !loading_ && !aof_->last_write_status().ok()) {
    reply.error("MISCONF Errors writing to the AOF file: " + std::string(aof_->last_write_status().message()));
    return;
  }
  CommandContext ctx{*this, client, dbs_[static_cast<size_t>(client.db)].get(), reply, argv, cmd};
  client.last_cmd = cmd;
  try {
    cmd->fn(ctx);
    ++stats_.commands_processed;
    if (ctx.dirty > 0) {
      rdb_changes_since_save_ += ctx.dirty;
      if (aof_ && !loading_ && !ctx.propagated) aof_->feed(ctx.db->index(), ctx.rewritten ? std::span<const std::string_view>(prop_args_) : argv);
    }
  } catch (const std::bad_alloc&) {
    out_of_memory_locked(cmd, reply);
  } catch (const std::length_error&) {
    out_of_memory_locked(cmd, reply);
  }
  if (ctx.rewritten) {
    prop_args_.clear();
    prop_storage_.clear();
  }
}

// An allocation failed inside a command.  The process stays up (Redis aborts here): the
// reply is incomplete, so the writer fails and the caller closes that client.  A write
// may have been applied in part and was not logged as it was: the AOF is rewritten from
// memory so that file and memory agree again.
void ServerImpl::out_of_memory_locked(const CommandDef* cmd, ReplyWriter& reply) {
  reply.fail();
  CONDUIT_LOG(kError) << "conduit-kv: out of memory while running " << cmd->name << ": closing that client"
                      << ((cmd->flags & kCmdWrite) && aof_ && !loading_ ? "; rewriting the AOF from memory" : "");
  // Started by the cron, once this command's memory is given back (and after a rewrite
  // already running, whose snapshot predates the change).
  if ((cmd->flags & kCmdWrite) && aof_ && !loading_) rewrite_needed_ = true;
}

Entry* ServerImpl::lookup(Database& db, std::string_view key) {
  Entry* e = db.find(key);
  if (e == nullptr || e->expire_ms < 0 || loading_ || e->expire_ms >= now_ms()) return e;
  expire_entry(db, e);
  return nullptr;
}

void ServerImpl::expire_entry(Database& db, Entry* e) {
  ++stats_.expired_keys;
  if (aof_ && !loading_) {
    const std::string_view args[2] = {"DEL", e->key()};
    aof_->feed(db.index(), args);
  }
  db.remove(e);
}

void ServerImpl::propagate(int db, std::span<const std::string_view> args) {
  if (aof_ && !loading_) aof_->feed(db, args);
}

uint64_t ServerImpl::used_memory() {
  // The allocator's count of bytes in use; cached for a millisecond (mallinfo2 walks the
  // arenas).  Under AddressSanitizer glibc's counters are not used: ask the sanitizer.
  if (used_memory_at_ms_ != coarse_ms_) {
    if (__sanitizer_get_current_allocated_bytes != nullptr) {
      used_memory_ = __sanitizer_get_current_allocated_bytes();
    } else {
      const struct mallinfo2 mi = ::mallinfo2();
      used_memory_ = mi.uordblks + mi.hblkhd;
    }
    used_memory_at_ms_ = coarse_ms_;
  }
  return used_memory_ + transport_memory_locked();
}

// Memory the transports hold for clients outside the heap, which malloc's counters (and,
// until touched, RSS) do not show: shm rings, rdma registered buffers (issue 9, item 5).
// A client's part (ConnStats::pinned_bytes) is fixed once it is connected, so it is counted
// on accept and uncounted on close; handshakes in progress are asked of the listeners.  In
// used_memory, so INFO shows it and maxmemory applies to it.  (Redis has no such memory.)
// Accepted connections whose handshake is still running (shm, rdma; tcp has none) hold
// descriptors and memory like clients, so maxclients counts them too.  Listener::stats()
// may be read from any thread; the listener lists are fixed once the server started.
uint64_t ServerImpl::handshakes_in_progress() const {
  uint64_t n = 0;
  for (const auto& w : workers_)
    for (const auto& l : w->listeners) n += l->stats().handshakes;
  return n;
}

uint64_t ServerImpl::transport_memory_locked() const {
  uint64_t n = client_pinned_bytes_;
  for (const auto& w : workers_)
    for (const auto& l : w->listeners) n += l->stats().handshake_bytes;
  return n;
}

// --- connections --------------------------------------------------------------------------------

namespace {

// A counter with one writer (its worker) and readers anywhere: no read-modify-write needed.
void bump(std::atomic<uint64_t>& a, uint64_t n) { a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

int64_t coarse_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

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
    else if (options_.protected_mode && options_.requirepass.empty() && !is_loopback(scheme, peer)) refusal = kDenied, denied = true;
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
    c->state.authenticated = options_.requirepass.empty();
    apply_limits_locked(c);
    c->state.created_ms = c->state.last_interaction_ms = coarse_ms_;
    c->next = w.clients_head;
    if (w.clients_head != nullptr) w.clients_head->prev = c;
    w.clients_head = c;
    ++w.num_clients;
    ++num_clients_;
    stats_.connected_clients = num_clients_;
    client_pinned_bytes_ += c->conn->stats().pinned_bytes;
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
  process_input_locked(c, data, len, from_query);
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
    if (c->out.size() >= options_.output_pause_bytes) {
      c->read_paused = true;
      break;
    }
    if (c->limits_unauth != unauthenticated(c)) apply_limits_locked(c);  // AUTH just succeeded
    size_t consumed = 0;
    const auto outcome = c->parser.parse(data + off, len - off, &consumed);
    if (outcome == RequestParser::Outcome::kCommand) {
      execute(st, c->parser.args(), c->writer);
      off += consumed;
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

void ServerImpl::close_client_locked(ClientConn* c, std::string_view why) {
  if (c->closed) return;
  c->closed = true;
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
  client_pinned_bytes_ -= s.pinned_bytes;
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
  for (const auto& w : workers_)
    for (ClientConn* c = w->clients_head; c != nullptr; c = c->next)
      if (c->state.id == id && !c->kill_requested) return c;
  return nullptr;
}

std::string ServerImpl::client_list_line(const ClientConn& c) const {
  char buf[1024];
  const ClientState& s = c.state;
  constexpr auto r = std::memory_order_relaxed;
  const size_t qbuf = c.pub_qbuf.load(r), qcap = c.pub_qbuf_cap.load(r);
  const size_t obuf = c.pub_obuf.load(r), ocap = c.pub_obuf_cap.load(r);
  std::snprintf(buf, sizeof buf,
                "id=%" PRIu64 " addr=%s laddr=%s fd=-1 name=%s age=%" PRId64 " idle=%" PRId64
                " flags=N db=%d sub=0 psub=0 ssub=0 multi=-1 qbuf=%zu qbuf-free=%zu argv-mem=0 multi-mem=0 rbs=%zu "
                "rbp=0 obl=%zu oll=0 omem=%zu tot-mem=%zu events=r%s cmd=%s user=default redir=-1 resp=%d "
                "transport=%s io-thread=%zu",
                s.id, c.peer.c_str(), c.local.c_str(), s.name.c_str(), (coarse_ms_ - s.created_ms) / 1000,
                (coarse_ms_ - s.last_interaction_ms) / 1000, s.db, qbuf, qcap > qbuf ? qcap - qbuf : 0, qcap, obuf,
                ocap, qcap + ocap + sizeof(ClientConn), c.pub_writing.load(r) ? "w" : "",
                s.last_cmd != nullptr ? s.last_cmd->name : "NULL", s.resp == RespVersion::kResp3 ? 3 : 2,
                c.scheme.c_str(), c.worker->index);
  return buf;
}

uint64_t ServerImpl::net_output_bytes() const {
  uint64_t n = 0;
  for (const auto& w : workers_) n += w->net_output_bytes.load(std::memory_order_relaxed);
  return n - net_output_base_;
}

// --- cron -----------------------------------------------------------------------------------------

// Worker 0: expiry, the AOF, stats.  Each worker checks its own clients (clients_cron).
void ServerImpl::cron() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_time();
  ++cron_loops_;
  update_ops_sample();
  active_expire_cycle_locked();
  aof_cron_locked();
  if (cron_loops_ % 10 == 0)
    for (auto& d : dbs_) d->table().maybe_shrink();
}

void ServerImpl::update_ops_sample() {
  const uint64_t now = monotonic_ns();
  if (ops_last_ns_ != 0 && now > ops_last_ns_) {
    const uint64_t ops = stats_.commands_processed - ops_last_cmds_;
    ops_sample_[ops_sample_idx_] = ops * 1'000'000'000ull / (now - ops_last_ns_);
    ops_sample_idx_ = (ops_sample_idx_ + 1) % kOpsSamples;
  }
  ops_last_ns_ = now;
  ops_last_cmds_ = stats_.commands_processed;
}

void ServerImpl::active_expire_cycle_locked() {
  if (loading_) return;
  // Redis' slow cycle: up to 25% of a tick, 20 keys per sample, another round while more
  // than a quarter of a sample was expired.
  const uint64_t budget_ns = 1'000'000'000ull / std::max<uint32_t>(options_.hz, 1) / 4;
  const uint64_t start = monotonic_ns();
  const int n = num_dbs();
  bool expired_any = false;
  for (int k = 0; k < n; ++k) {
    Database& db = *dbs_[static_cast<size_t>(expire_db_cursor_)];
    expire_db_cursor_ = (expire_db_cursor_ + 1) % n;
    for (int iteration = 0;; ++iteration) {
      if (db.expires() == 0) break;
      int sampled = 0, expired = 0;
      for (int i = 0; i < 20 && db.expires() > 0; ++i) {
        Entry* e = db.random_volatile(random64());
        ++sampled;
        if (e->expire_ms < now_ms()) {
          expire_entry(db, e);
          ++expired;
        } else {
          const int64_t ttl = e->expire_ms - now_ms_;
          db.avg_ttl = db.avg_ttl == 0 ? ttl : (db.avg_ttl / 50) * 49 + ttl / 50;
        }
      }
      expired_any = expired_any || expired > 0;
      if ((iteration & 15) == 15 && monotonic_ns() - start > budget_ns) goto done;
      if (expired * 4 <= sampled) break;
    }
  }
done:
  if (expired_any && aof_ && aof_->has_pending()) schedule_commit(*workers_[0]);
}

void ServerImpl::clients_cron(Worker& w) {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_time();
  // Look at a slice of the clients per tick: all of them within about a second.
  size_t budget = std::max<size_t>(w.num_clients / std::max<uint32_t>(options_.hz, 1) + 1, 50);
  if (w.cron_cursor == nullptr) w.cron_cursor = w.clients_head;
  while (budget-- > 0 && w.cron_cursor != nullptr) {
    ClientConn* c = w.cron_cursor;
    w.cron_cursor = c->next;
    if (c->closed || c->pending_commit) continue;
    const int64_t idle_ms = now_ms_ - c->state.last_interaction_ms;
    if (options_.timeout > 0 && idle_ms > static_cast<int64_t>(options_.timeout) * 1000 && c->out.empty()) {
      close_client_locked(c, "idle timeout");
      continue;
    }
    if (!c->out.empty()) {
      if (options_.output_soft_limit > 0 && counted_output(c->out.size()) > options_.output_soft_limit) {
        if (c->soft_limit_since_ms == 0) c->soft_limit_since_ms = now_ms_;
        if (now_ms_ - c->soft_limit_since_ms > static_cast<int64_t>(options_.output_soft_seconds) * 1000) {
          CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << ": output above the soft limit for "
                             << options_.output_soft_seconds << " s";
          close_client_locked(c, "output soft limit");
          continue;
        }
      } else {
        c->soft_limit_since_ms = 0;
      }
      // A client that reads nothing at all for that long is gone or hostile.
      if (options_.output_soft_seconds > 0 &&
          now_ms_ - c->last_write_progress_ms > static_cast<int64_t>(options_.output_soft_seconds) * 1000) {
        CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << ": no output progress for "
                           << options_.output_soft_seconds << " s";
        close_client_locked(c, "output stalled");
        continue;
      }
    } else if (idle_ms > 2000) {
      // Idle: give the memory back.
      if (c->out.capacity() > 0) c->out.release();
      if (c->query.empty() && c->query.capacity() > 0) c->query.release();
      publish(c);
    }
  }
}

void ServerImpl::aof_cron_locked() {
  if (!aof_) return;
  if (aof_->has_pending()) schedule_commit(*workers_[0]);
  if (aof_->rewrite_in_progress()) return;
  if (rewrite_needed_) {
    rewrite_needed_ = false;
    CONDUIT_LOG(kInfo) << "aof: rewriting the file from memory after a command ran out of memory";
    if (const std::string err = bgrewriteaof(); !err.empty()) CONDUIT_LOG(kError) << "conduit-kv: " << err;
    return;
  }
  const uint64_t pct = options_.auto_aof_rewrite_percentage;
  const uint64_t base = std::max<uint64_t>(aof_->base_size(), 1);
  if (pct > 0 && aof_->size() > options_.auto_aof_rewrite_min_size && (aof_->size() - base) * 100 / base >= pct) {
    CONDUIT_LOG(kInfo) << "aof: " << aof_->size() << " bytes, " << (aof_->size() - base) * 100 / base
                       << "% growth: starting an automatic rewrite";
    (void)bgrewriteaof();
  }
}

// --- AOF rewrite ----------------------------------------------------------------------------------

std::string ServerImpl::bgrewriteaof() {
  if (!aof_) return "ERR Append only file is disabled (appendonly no): nothing to rewrite";
  if (aof_->rewrite_in_progress()) return "ERR Background append only file rewriting already in progress";
  // mu_ is held: no other worker is inside a command while the child's snapshot is forked.
  auto fd = aof_->start_rewrite([this](int out) { return write_snapshot(out); });
  if (!fd.ok()) return "ERR " + std::string(fd.status().message());
  rewrite_fd_ = *fd;
  watch_rewrite(rewrite_fd_);
  ++aof_rewrites_scheduled_;
  return "";
}

// The child holds the pipe's write end: the read end hangs up when it exits.  Watched on
// worker 0's loop.  mu_ held.
void ServerImpl::watch_rewrite(int fd) {
  auto add = [this, fd] {
    if (rewrite_fd_ != fd || loop_.watching(fd)) return;
    if (Status s = loop_.add(fd, reactor::kReadable, &rewrite_watch_); !s.ok())
      CONDUIT_LOG(kWarn) << "aof rewrite: cannot watch the child: " << s.to_string();
  };
  if (loop_.in_loop_thread()) return add();
  post_to(*workers_[0], [this, add] {
    std::lock_guard<std::mutex> lock(mu_);
    add();
  });
}

void ServerImpl::on_rewrite_done() {
  std::lock_guard<std::mutex> lock(mu_);
  if (rewrite_fd_ >= 0 && loop_.watching(rewrite_fd_)) (void)loop_.remove(rewrite_fd_);
  rewrite_fd_ = -1;
  if (aof_) (void)aof_->finish_rewrite();
}
// Runs in the forked child: plain writes, no loop.
bool ServerImpl::write_snapshot(int fd) {
  ByteBuffer buf;
  auto drain = [&](bool force) {
    if (!force && buf.size() < (1 << 20)) return true;
    size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      off += static_cast<size_t>(n);
    }
    buf.clear();
    return true;
  };
  std::vector<std::string_view> args;
  std::vector<std::string> owned;
  bool write_failed = false;
  auto emit_batched = [&](std::string_view cmd, std::string_view key, const auto& items, auto&& add_item) {
    constexpr size_t kBatch = 64;
    size_t in_batch = 0;
    args.clear();
    owned.clear();
    for (const auto& it : items) {
      if (in_batch == 0) {
        args.assign({cmd, key});
        owned.clear();
        owned.reserve(2 * kBatch);
      }
      add_item(it);
      if (++in_batch == kBatch) {
        append_command(&buf, args);
        // Written as it goes: the child's memory is one batch, not the biggest key.
        if (!drain(false)) write_failed = true;
        in_batch = 0;
      }
    }
    if (in_batch > 0) append_command(&buf, args);
  };
  const int64_t now = wall_ms();
  for (const auto& dbp : dbs_) {
    Database& db = *dbp;
    if (db.size() == 0) continue;
    char num[24];
    const std::string_view sel[2] = {"SELECT", std::string_view(num, ll2string(num, db.index()))};
    append_command(&buf, sel);
    bool ok = true;
    db.table().for_each([&](const Entry* e) {
      if (!ok) return;
      if (e->expire_ms >= 0 && e->expire_ms < now) return;
      const std::string_view key = e->key();
      switch (e->type) {
        case Type::kString: {
          const std::string_view a[3] = {"SET", key, e->str};
          append_command(&buf, a);
          break;
        }
        case Type::kList:
          emit_batched("RPUSH", key, e->list->items, [&](const std::string& s) { args.push_back(s); });
          break;
        case Type::kHash:
          emit_batched("HSET", key, e->hash_v->fields, [&](const auto& kv) {
            args.push_back(kv.first);
            args.push_back(kv.second);
          });
          break;
        case Type::kSet:
          emit_batched("SADD", key, e->set->members, [&](const std::string& s) { args.push_back(s); });
          break;
        case Type::kZSet:
          emit_batched("ZADD", key, e->zset->order, [&](const std::pair<double, std::string>& p) {
            char d[128];
            owned.emplace_back(d, d2string(d, sizeof d, p.first));
            args.push_back(owned.back());
            args.push_back(p.second);
          });
          break;
        case Type::kStream: {
          const StreamValue& s = *e->stream;
          for (const auto& [id, fv] : s.entries) {
            const std::string ids = id.to_string();
            args.assign({"XADD", key, ids});
            for (const std::string& f : fv) args.push_back(f);
            append_command(&buf, args);
          }
          if (s.entries.empty()) {
            // Keep an emptied stream (and its last id): add a placeholder, trim it away.
            const std::string ids = s.last_id.to_string();
            const std::string_view a[7] = {"XADD", key, "MAXLEN", "0", ids, "_", "_"};
            append_command(&buf, a);
          }
          break;
        }
      }
      if (e->expire_ms >= 0) {
        char t[24];
        const std::string_view a[3] = {"PEXPIREAT", key, std::string_view(t, ll2string(t, e->expire_ms))};
        append_command(&buf, a);
      }
      ok = drain(false) && !write_failed;
    });
    if (!ok) return false;
  }
  return drain(true);
}

// --- INFO / CONFIG --------------------------------------------------------------------------------

void ServerImpl::reset_stats() {
  const uint64_t clients = stats_.connected_clients;
  stats_ = ServerStats();
  stats_.connected_clients = clients;
  for (auto& [k, t] : transport_totals_) t = TransportTotals();
  net_output_base_ = 0;
  net_output_base_ = net_output_bytes();
  std::fill(std::begin(ops_sample_), std::end(ops_sample_), 0);
}

std::string ServerImpl::info(std::string_view sections_text) {
  refresh_time();
  std::vector<std::string> want;
  {
    std::string cur;
    for (char ch : std::string(sections_text) + " ") {
      if (ch == ' ') {
        if (!cur.empty()) want.push_back(cur);
        cur.clear();
      } else {
        cur += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      }
    }
  }
  const bool all = want.empty() || std::find(want.begin(), want.end(), "all") != want.end() ||
                   std::find(want.begin(), want.end(), "everything") != want.end() ||
                   std::find(want.begin(), want.end(), "default") != want.end();
  auto on = [&](const char* s) { return all || std::find(want.begin(), want.end(), s) != want.end(); };
  std::string out;
  auto section = [&](const char* title) {
    if (!out.empty()) out += "\r\n";
    out += "# ";
    out += title;
    out += "\r\n";
  };
  const int64_t uptime = (now_ms_ - start_time_ms_) / 1000;
  if (on("server")) {
    section("Server");
    utsname u{};
    ::uname(&u);
    appendf(&out, "redis_version:%s", "7.0.0");
    appendf(&out, "conduit_kv_version:%s", "0.1.0");
    appendf(&out, "redis_mode:standalone");
    appendf(&out, "os:%s %s %s", u.sysname, u.release, u.machine);
    appendf(&out, "arch_bits:64");
    appendf(&out, "multiplexing_api:epoll");
    appendf(&out, "process_id:%d", static_cast<int>(::getpid()));
    appendf(&out, "tcp_port:%d", options_.tcp ? options_.port : 0);
    appendf(&out, "server_time_usec:%" PRId64, now_ms_ * 1000);
    appendf(&out, "uptime_in_seconds:%" PRId64, uptime);
    appendf(&out, "uptime_in_days:%" PRId64, uptime / 86400);
    appendf(&out, "hz:%u", options_.hz);
    appendf(&out, "io_threads_active:%d", workers_.size() > 1 ? 1 : 0);
    appendf(&out, "io_threads:%zu", workers_.size());
    for (size_t i = 0; i < listen_urls_.size(); ++i) appendf(&out, "listener%zu:url=%s", i, listen_urls_[i].c_str());
  }
  if (on("clients")) {
    section("Clients");
    size_t max_in = 0, max_out = 0;
    for (const ClientConn* c : clients()) {
      max_in = std::max(max_in, c->pub_qbuf.load(std::memory_order_relaxed));
      max_out = std::max(max_out, c->pub_obuf.load(std::memory_order_relaxed));
    }
    appendf(&out, "connected_clients:%zu", num_clients_);
    appendf(&out, "maxclients:%u", options_.maxclients);
    appendf(&out, "handshakes_in_progress:%" PRIu64, handshakes_in_progress());
    appendf(&out, "client_recent_max_input_buffer:%zu", max_in);
    appendf(&out, "client_recent_max_output_buffer:%zu", max_out);
    appendf(&out, "blocked_clients:0");
    appendf(&out, "tracking_clients:0");
  }
  if (on("memory")) {
    section("Memory");
    used_memory_at_ms_ = -1;
    const uint64_t used = used_memory();
    appendf(&out, "used_memory:%" PRIu64, used);
    appendf(&out, "used_memory_human:%s", human_bytes(used).c_str());
    appendf(&out, "mem_transport_pinned:%" PRIu64, transport_memory_locked());
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    appendf(&out, "used_memory_peak_rss:%ld", ru.ru_maxrss * 1024);
    appendf(&out, "maxmemory:%" PRIu64, options_.maxmemory);
    appendf(&out, "maxmemory_human:%s", human_bytes(options_.maxmemory).c_str());
    appendf(&out, "maxmemory_policy:noeviction");
    appendf(&out, "mem_allocator:libc");
  }
  if (on("persistence")) {
    section("Persistence");
    appendf(&out, "loading:%d", loading_ ? 1 : 0);
    appendf(&out, "async_loading:0");
    appendf(&out, "rdb_changes_since_last_save:%" PRIu64, rdb_changes_since_save_);
    appendf(&out, "rdb_bgsave_in_progress:0");
    appendf(&out, "rdb_last_save_time:%" PRId64, start_time_ms_ / 1000);
    appendf(&out, "aof_enabled:%d", aof_ ? 1 : 0);
    appendf(&out, "aof_rewrite_in_progress:%d", aof_ && aof_->rewrite_in_progress() ? 1 : 0);
    appendf(&out, "aof_rewrite_scheduled:0");
    appendf(&out, "aof_rewrites:%" PRIu64, aof_ ? aof_->rewrites() : 0);
    appendf(&out, "aof_last_bgrewrite_status:%s", !aof_ || aof_->last_rewrite_status().ok() ? "ok" : "err");
    appendf(&out, "aof_last_write_status:%s", !aof_ || aof_->last_write_status().ok() ? "ok" : "err");
    if (aof_) {
      appendf(&out, "aof_current_size:%" PRIu64, aof_->size());
      appendf(&out, "aof_base_size:%" PRIu64, aof_->base_size());
      appendf(&out, "aof_fsync_policy:%s", std::string(appendfsync_name(aof_->policy())).c_str());
    }
  }
  if (on("stats")) {
    section("Stats");
    uint64_t ops = 0;
    for (uint64_t s : ops_sample_) ops += s;
    appendf(&out, "total_connections_received:%" PRIu64, stats_.connections_received);
    appendf(&out, "total_commands_processed:%" PRIu64, stats_.commands_processed);
    appendf(&out, "instantaneous_ops_per_sec:%" PRIu64, ops / kOpsSamples);
    appendf(&out, "total_net_input_bytes:%" PRIu64, stats_.net_input_bytes);
    appendf(&out, "total_net_output_bytes:%" PRIu64, net_output_bytes());
    appendf(&out, "rejected_connections:%" PRIu64, stats_.rejected_connections);
    appendf(&out, "expired_keys:%" PRIu64, stats_.expired_keys);
    appendf(&out, "evicted_keys:0");
    appendf(&out, "keyspace_hits:%" PRIu64, stats_.keyspace_hits);
    appendf(&out, "keyspace_misses:%" PRIu64, stats_.keyspace_misses);
  }
  if (on("replication")) {
    section("Replication");
    appendf(&out, "role:master");
    appendf(&out, "connected_slaves:0");
  }
  if (on("cpu")) {
    section("CPU");
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    appendf(&out, "used_cpu_sys:%ld.%06ld", static_cast<long>(ru.ru_stime.tv_sec), static_cast<long>(ru.ru_stime.tv_usec));
    appendf(&out, "used_cpu_user:%ld.%06ld", static_cast<long>(ru.ru_utime.tv_sec), static_cast<long>(ru.ru_utime.tv_usec));
  }
  if (on("transports")) {
    section("Transports");
    // Closed connections' totals plus the live ones' counters (Connection::stats()).
    std::map<std::string, std::pair<TransportTotals, uint64_t>> t;
    for (const auto& [k, v] : transport_totals_) t[k].first = v;
    for (const ClientConn* c : clients()) {
      auto& [tot, active] = t[c->scheme];
      // Another worker's connection: its counters as of its last batch.
      const transport::ConnStats& s = c->worker->loop->in_loop_thread() ? c->conn->stats() : c->stats_snap;
      tot.stats.bytes_read += s.bytes_read;
      tot.stats.bytes_written += s.bytes_written;
      tot.stats.reads += s.reads;
      tot.stats.writes += s.writes;
      tot.stats.read_would_block += s.read_would_block;
      tot.stats.write_would_block += s.write_would_block;
      tot.stats.wakeups += s.wakeups;
      ++active;
    }
    for (const auto& [scheme, v] : t) {
      const auto& s = v.first.stats;
      appendf(&out, "transport_%s:connections_received=%" PRIu64 ",connected=%" PRIu64 ",bytes_read=%" PRIu64
          ",bytes_written=%" PRIu64 ",reads=%" PRIu64 ",writes=%" PRIu64 ",read_would_block=%" PRIu64
          ",write_would_block=%" PRIu64 ",wakeups=%" PRIu64,
          scheme.c_str(), v.first.connections, v.second, s.bytes_read, s.bytes_written, s.reads, s.writes,
          s.read_would_block, s.write_would_block, s.wakeups);
    }
  }
  if (on("threads")) {
    section("Threads");
    for (const auto& w : workers_) {
      constexpr auto r = std::memory_order_relaxed;
      appendf(&out, "io_thread_%zu:clients=%zu,connections_received=%" PRIu64 ",reads=%" PRIu64 ",writes=%" PRIu64,
              w->index, w->num_clients, w->connections.load(r), w->reads.load(r), w->writes.load(r));
    }
  }
  if (on("keyspace")) {
    section("Keyspace");
    for (const auto& d : dbs_)
      if (d->size() > 0)
        appendf(&out, "db%d:keys=%zu,expires=%zu,avg_ttl=%" PRId64, d->index(), d->size(), d->expires(), d->avg_ttl);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ServerImpl::config_get(std::string_view pattern) const {
  return config_get_matching(options_, pattern);
}

std::string ServerImpl::config_set(std::span<const std::pair<std::string_view, std::string_view>> pairs) {
  const ServerOptions before = options_;
  const std::string err = config_set_all(&options_, pairs);
  if (!err.empty()) return err;
  // What changing an option takes besides the new value.
  if (aof_ && options_.appendfsync != before.appendfsync) aof_->set_policy(options_.appendfsync);
  if (options_.limits.max_bulk_len != before.limits.max_bulk_len ||
      options_.limits.max_multibulk_len != before.limits.max_multibulk_len ||
      options_.limits.max_query_buffer != before.limits.max_query_buffer)
    limits_changed();
  return "";
}

// --- Server (public) --------------------------------------------------------------------------------

Server::Server(std::unique_ptr<ServerImpl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

Result<std::unique_ptr<Server>> Server::create(reactor::EventLoop& loop, const ServerOptions& options) {
  auto impl = std::make_unique<ServerImpl>(loop, options);
  Status s = impl->start();
  if (!s.ok()) {
    impl->shutdown();
    return s;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::vector<std::string> Server::listen_urls() const {
  std::vector<std::string> v;
  for (const std::string& u : impl_->listen_urls_) v.push_back(u);
  return v;
}

void Server::set_shutdown_handler(std::function<void()> fn) { impl_->shutdown_handler_ = std::move(fn); }
void Server::shutdown() { impl_->shutdown(); }
ServerStats Server::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  ServerStats s = impl_->stats_;
  s.net_output_bytes = impl_->net_output_bytes();
  return s;
}
std::string Server::info(const std::string& section) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->info(section);
}

}  // namespace conduit::kv
