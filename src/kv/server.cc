#include "conduit/kv/server.h"

#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <condition_variable>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "conduit/transport/registered_memory.h"
#include "server_impl.h"

extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace conduit::kv {

namespace {

constexpr size_t kScratchBytes = 64 * 1024;     // one read per readable event, at most this

std::string host_for_url(const std::string& host) {
  if (host.find(':') != std::string::npos && host.front() != '[') return "[" + host + "]";
  return host;
}

}  // namespace

// --- lifecycle ----------------------------------------------------------------------------------

ServerImpl::ServerImpl(reactor::EventLoop& loop, const ServerOptions& options) : options_(options), loop_(loop) {
  for (uint32_t i = 0; i < std::max<uint32_t>(options_.databases, 1); ++i)
    dbs_.push_back(std::make_unique<Database>(static_cast<int>(i)));
  watched_keys_.resize(dbs_.size());   // WATCH (multi.cc), per database
  blocking_keys_.resize(dbs_.size());  // blocked clients (blocking.cc), per database
  build_command_table();
  rewrite_watch_.s = this;
  uint64_t seed = 0;
  if (::getentropy(&seed, sizeof seed) == 0 && seed != 0) rng_state_ = seed;
  start_time_ms_ = wall_ms();
  last_save_time_ = start_time_ms_ / 1000;
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

void ServerImpl::add_command(const CommandDef& d, CommandEntry* parent) {
  auto e = std::make_unique<CommandEntry>();
  e->def = &d;
  e->acl_id = static_cast<uint32_t>(command_store_.size());
  e->acl_categories = acl_categories_of(d, parent != nullptr ? parent->def : nullptr);
  e->parent = parent;
  e->fullname = parent != nullptr ? parent->fullname + "|" + d.name : std::string(d.name);
  CommandEntry* ep = e.get();
  command_store_.push_back(std::move(e));
  if (parent != nullptr) {
    parent->subs.push_back(ep);
  } else {
    command_list_.push_back(ep);
  }
  for (const CommandDef& sub : d.subcommands) add_command(sub, ep);
}

void ServerImpl::build_command_table() {
  for (auto table : {string_commands(), bit_commands(), key_commands(), list_commands(), hash_commands(), set_commands(),
                     zset_commands(), zset_pop_commands(), sort_commands(), stream_commands(), stream_group_commands(),
                     server_commands(), connection_commands(), multi_commands(), pubsub_commands(), acl_commands()})
    for (const CommandDef& d : table) add_command(d, nullptr);
  acl_.init(command_list_, static_cast<uint32_t>(command_store_.size()), options_.acl_pubsub_allchannels);
  acl_.set_default_password(options_.requirepass);
  size_t cap = 16;
  while (cap < command_list_.size() * 4) cap *= 2;
  command_slots_.assign(cap, {std::string_view(), nullptr});
  for (CommandEntry* d : command_list_) {
    const std::string_view n = d->def->name;
    size_t i = hash_key(n) & (cap - 1);
    while (command_slots_[i].second != nullptr) i = (i + 1) & (cap - 1);
    command_slots_[i] = {n, d};
  }
}

CommandEntry* ServerImpl::find_command(std::string_view name) const {
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

CommandEntry* CommandEntry::find_sub(std::string_view name) const {
  for (CommandEntry* s : subs)
    if (eq_nocase(name, s->def->name)) return s;
  return nullptr;
}

void CommandEntry::keys(std::span<const std::string_view> argv, std::vector<size_t>* out) const {
  if (def->getkeys != nullptr) return def->getkeys(argv, out);
  if (def->first_key <= 0) return;
  const int argc = static_cast<int>(argv.size());
  int last = def->last_key < 0 ? argc + def->last_key : def->last_key;
  if (last >= argc) last = argc - 1;
  const int step = std::max(def->key_step, 1);
  for (int i = def->first_key; i <= last; i += step) out->push_back(static_cast<size_t>(i));
}

CommandEntry* ServerImpl::resolve(std::span<const std::string_view> argv, bool* unknown_sub) const {
  *unknown_sub = false;
  CommandEntry* e = find_command(argv[0]);
  if (e == nullptr || e->subs.empty() || argv.size() < 2) return e;
  CommandEntry* sub = e->find_sub(argv[1]);
  if (sub == nullptr) *unknown_sub = true;
  return sub != nullptr ? sub : e;
}

Status ServerImpl::start() {
  if (options_.io_threads < 1 || options_.io_threads > 128)
    return Status(Code::kInvalidArgument, "conduit-kv: io-threads must be between 1 and 128");
  {
    // ACL users from the config file or the ACL file (Redis' ACLLoadUsersAtStartup).
    std::lock_guard<std::mutex> lock(mu_);
    if (!options_.users.empty() && !options_.aclfile.empty())
      return Status(Code::kInvalidArgument, "conduit-kv: Configuring Redis with users defined in redis.conf and at the "
                                            "same setting an ACL file path is invalid. This setup is very likely to "
                                            "lead to configuration errors and security holes, please define either "
                                            "an ACL file or declare users directly in your redis.conf, but not both.");
    if (std::string err = acl_.add_config_users(options_.users); !err.empty())
      return Status(Code::kInvalidArgument, "conduit-kv: " + err);
    if (!options_.aclfile.empty())
      if (std::string err = acl_load_file(nullptr); !err.empty())
        return Status(Code::kInvalidArgument, "conduit-kv: Aborting Redis startup because of ACL errors: " + err.substr(4));
  }
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
    if (loader.in_multi) discard_multi(loader);  // a transaction without EXEC: never ran
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

  const std::vector<std::string> urls = listener_urls();
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

// bind/port give the tcp listeners (one per bind address, as redis-server); options_.listen
// adds any transport URL.
std::vector<std::string> ServerImpl::listener_urls() const {
  std::vector<std::string> urls;
  std::vector<std::string> binds = split_words(options_.bind, " ,");
  if (binds.empty()) binds.push_back("127.0.0.1");
  if (options_.tcp)
    for (const std::string& b : binds) urls.push_back("tcp://" + host_for_url(b) + ":" + std::to_string(options_.port));
  for (const std::string& u : options_.listen) urls.push_back(u);
  return urls;
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
    if (aof_->awaiting_first_rewrite()) {
      // Switched on at run time and its first file not written yet: the data would be lost
      // (Redis refuses SHUTDOWN here); write it now and wait.
      CONDUIT_LOG(kWarn) << "aof: writing the initial AOF before exiting";
      Status s;
      if (!aof_->rewrite_in_progress()) s = aof_->start_rewrite([this](int out) { return write_snapshot(out); }).status();
      if (s.ok()) s = aof_->wait_rewrite();
      if (!s.ok()) CONDUIT_LOG(kError) << "conduit-kv: the initial AOF was not written: " << s.to_string();
    }
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

namespace {

bool arity_ok(const CommandDef* d, size_t argc) {
  const int n = static_cast<int>(argc);
  return (d->arity > 0 && d->arity == n) || (d->arity < 0 && n >= -d->arity);
}

// What MULTI does not queue.
bool runs_in_multi(const CommandEntry* e) {
  const std::string_view n = e->def->name;
  return n == "exec" || n == "discard" || n == "multi" || n == "watch" || n == "quit" || n == "reset";
}

}  // namespace

// Redis' processCommand: resolve, check (arity, AUTH, pub/sub context, MULTI, memory, AOF
// health, CLIENT PAUSE), then queue (MULTI) or call.
bool ServerImpl::execute(ClientState& client, std::span<const std::string_view> argv, ReplyWriter& reply) {
  bool unknown_sub = false;
  CommandEntry* entry = resolve(argv, &unknown_sub);
  // The running client (CLIENT TRACKING's deliveries); CLIENT CACHING's flag lasts for
  // one command, or one transaction (Redis' resetClient).
  struct Current {
    ServerImpl& s;
    ClientState& c;
    const CommandEntry* e;
    ClientState* prev_client;
    ReplyWriter* prev_reply;
    ~Current() {
      s.cur_client_ = prev_client;
      s.cur_reply_ = prev_reply;
      const CommandEntry* top = e != nullptr && e->parent != nullptr ? e->parent : e;
      if (!c.in_multi && (top == nullptr || top->fullname != "client")) c.tracking.caching = false;
    }
  } current{*this, client, entry, cur_client_, cur_reply_};
  cur_client_ = &client;
  cur_reply_ = &reply;
  auto reject = [&](CommandEntry* e, std::string_view err) {
    if (client.in_multi) client.multi_error = true;
    if (e != nullptr) ++e->stats.rejected;
    reply.error(err);
    const auto taken = reply.take_errors();
    error_stats_[std::string(taken.code)] += taken.count;
    total_error_replies_ += taken.count;
    return true;
  };
  if (entry == nullptr) {
    std::string args;
    for (size_t j = 1; j < argv.size() && args.size() < 128; ++j) {
      args += '\'';
      args.append(argv[j].substr(0, 128 - args.size()));
      args += "' ";
    }
    return reject(nullptr, "ERR unknown command '" + std::string(argv[0].substr(0, 128)) +
                               "', with args beginning with: " + args);
  }
  if (unknown_sub) {
    std::string upper(entry->def->name);
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return reject(nullptr, unknown_subcommand(argv[1], upper));
  }
  const CommandDef* cmd = entry->def;
  if (!arity_ok(cmd, argv.size())) return reject(entry, wrong_args(entry->fullname));
  if (!client.authenticated && (cmd->flags & kCmdNoAuth) == 0) {
    if (!acl_.auth_required()) {
      client.authenticated = true;  // CONFIG SET requirepass "" after connecting
    } else {
      return reject(entry, "NOAUTH Authentication required.");
    }
  }
  // The default user may run anything: one flag test.
  if (client.user != nullptr && !client.user->unrestricted) [[unlikely]] {
    std::string err = acl_check_locked(client, entry, argv, false);
    if (!err.empty()) return reject(entry, err);
  }
  if (client.resp == RespVersion::kResp2 && client.subscriptions() > 0 && (cmd->flags & kCmdPubsub) == 0)
    return reject(entry, "ERR Can't execute '" + entry->fullname +
                             "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context");
  if (client.in_multi && (cmd->flags & kCmdNoMulti)) return reject(entry, "ERR Command not allowed inside a transaction");
  if (options_.maxmemory > 0 && !loading_ && !client.internal) {
    const bool over = !evict_locked();
    if (over && (cmd->flags & kCmdDenyOom) != 0)
      return reject(entry, "OOM command not allowed when used memory > 'maxmemory'.");
    // An EXEC whose queue holds a command that may use memory (Redis: mstate.cmd_flags).
    if (over && client.in_multi && std::string_view(cmd->name) == "exec" &&
        std::any_of(client.queued.begin(), client.queued.end(),
                    [](const QueuedCommand& q) { return (q.entry->def->flags & kCmdDenyOom) != 0; })) {
      discard_multi(client);
      return reject(entry, "EXECABORT Transaction discarded because of: OOM command not allowed when used memory > "
                           "'maxmemory'.");
    }
  }
  if ((cmd->flags & kCmdWrite) && aof_ && !loading_ && !aof_->last_write_status().ok())
    return reject(entry, "MISCONF Errors writing to the AOF file: " + std::string(aof_->last_write_status().message()));
  // Before queueing, as Redis: under PAUSE WRITE a write sent inside MULTI waits, and so
  // does an EXEC whose queue holds one (paused_for looks at it).
  if (paused_for(client, entry)) {
    if (!client.paused_waiting && client.conn != nullptr) paused_clients_.push_back(client.id);
    client.paused_waiting = client.conn != nullptr;
    return client.conn == nullptr;  // the AOF loader is never paused (paused_for says so)
  }
  if (client.in_multi && !runs_in_multi(entry)) {
    QueuedCommand q;
    q.entry = entry;
    q.argv.assign(argv.begin(), argv.end());
    for (const auto& a : argv) client.queued_bytes += a.size();
    client.queued.push_back(std::move(q));
    reply.simple("QUEUED");
    return true;
  }
  call(client, entry, argv, reply);
  if (!ready_keys_.empty() && !client.in_exec && !serving_ready_) serve_ready_keys();
  return true;
}

bool ServerImpl::call(ClientState& client, CommandEntry* entry, std::span<const std::string_view> argv, ReplyWriter& reply) {
  const CommandDef* cmd = entry->def;
  CommandContext ctx{*this, client, dbs_[static_cast<size_t>(client.db)].get(), reply, argv, cmd, entry};
  client.last_cmd = entry;
  ClientState* const saved_client = cur_client_;
  ReplyWriter* const saved_reply = cur_reply_;
  if (call_depth_++ == 0) {
    cur_client_ = &client;
    cur_reply_ = &reply;
  }
  ByteBuffer* saved = nullptr;
  ByteBuffer discard;
  if (client.reply_mode != ReplyMode::kOn && (cmd->flags & kCmdPushes) != 0) {
    if (client.reply_mode == ReplyMode::kSkipNext) client.reply_mode = ReplyMode::kOn;  // skipped nothing
  } else if (client.reply_mode != ReplyMode::kOn) {
    if (client.reply_mode == ReplyMode::kSkipNext) client.reply_mode = ReplyMode::kSkipThis;
    saved = reply.buffer();
    reply.set_buffer(&discard);
  }
  const uint64_t t0 = monotonic_ns();
  try {
    cmd->fn(ctx);
    ++stats_.commands_processed;
    if (ctx.dirty > 0) {
      rdb_changes_since_save_ += ctx.dirty;
      if (aof_ && !loading_ && !ctx.propagated) {
        if (exec_active_) begin_exec_propagation();
        aof_->feed(ctx.db->index(), ctx.rewritten ? std::span<const std::string_view>(prop_args_) : argv);
      }
      if ((watching_clients_ > 0 || blocked_count_ > 0 || tracking_active()) && (cmd->flags & kCmdTouchesOwnKeys) == 0) {
        std::vector<size_t> keys;
        entry->keys(argv, &keys);
        for (size_t k : keys) signal_key(ctx.db->index(), argv[k], &client);
      }
    }
  } catch (const std::bad_alloc&) {
    out_of_memory_locked(cmd, reply);
  } catch (const std::length_error&) {
    out_of_memory_locked(cmd, reply);
  }
  for (const auto& [d, k] : extra_touched_) signal_key(d, k, &client);
  extra_touched_.clear();
  // CLIENT TRACKING: the keys a read-only command looked at (Redis' call()).
  if ((cmd->flags & kCmdReadonly) != 0 && client.tracking.on && !client.tracking.bcast) {
    try {
      tracking_remember_keys(client, entry, argv);
    } catch (const std::bad_alloc&) {
      out_of_memory_locked(cmd, reply);
    }
  }
  // As Redis 7.0's call(): MONITOR sees a command once it ran, so the commands of an EXEC
  // come between MULTI and EXEC (queued ones are not shown when queued); a blocked
  // command tried again for its waiter is not shown twice.
  if (!monitors_.empty() && !loading_ && serving_client_ != &client && (cmd->flags & (kCmdSkipMonitor | kCmdAdmin)) == 0)
    feed_monitors(client, argv);
  const uint64_t ns = monotonic_ns() - t0;
  const uint64_t us = ns / 1000;
  if (!ctx.blocked) {
    ++entry->stats.calls;
    entry->stats.usec += us;
    if (options_.latency_tracking) {
      const int bucket = ns < 1024 ? 0 : 64 - __builtin_clzll(ns >> 10);
      ++entry->stats.latency[static_cast<size_t>(std::min(bucket, CommandStats::kLatencyBuckets - 1))];
    }
  }
  if (us >= 1000 && options_.latency_monitor_threshold_ms > 0 && us / 1000 >= options_.latency_monitor_threshold_ms)
    record_latency((cmd->flags & kCmdFast) ? "fast-command" : "command", us / 1000);
  const auto taken = reply.take_errors();
  if (taken.count > 0) {
    ++entry->stats.failed;
    total_error_replies_ += taken.count;
    if (error_stats_.size() < 128 || error_stats_.count(std::string(taken.code)) != 0)
      error_stats_[std::string(taken.code)] += taken.count;
  }
  if (saved != nullptr) {
    reply.set_buffer(saved);
    // CLIENT REPLY ON answers OK although replies were off when it started.
    if (client.reply_mode == ReplyMode::kOn) saved->append(discard.data(), discard.size());
    if (client.reply_mode == ReplyMode::kSkipThis) client.reply_mode = ReplyMode::kOn;
  }
  if (ctx.rewritten) {
    prop_args_.clear();
    prop_storage_.clear();
  }
  if (--call_depth_ == 0) {
    // Invalidations for this client follow its reply (EXEC's as a whole), as Redis 7.0.
    if (tracking_pending_.size() > 0) {
      reply.raw(std::string_view(tracking_pending_.data(), tracking_pending_.size()));
      tracking_pending_.clear();
    }
    cur_client_ = saved_client;
    cur_reply_ = saved_reply;
  }
  return ctx.blocked;
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

Entry* ServerImpl::lookup(Database& db, std::string_view key, bool touch) {
  Entry* e = db.find(key);
  if (e == nullptr) return nullptr;
  if (e->expire_ms < 0 || loading_ || e->expire_ms >= now_ms()) {
    if (touch) record_access(e);
    return e;
  }
  expire_entry(db, e);
  return nullptr;
}

void ServerImpl::expire_entry(Database& db, Entry* e) {
  ++stats_.expired_keys;
  const std::string_view args[2] = {"DEL", e->key()};
  propagate(db.index(), args);
  if (watching_clients_ == 0 && !tracking_active() && (options_.notify_keyspace_events & kNotifyExpired) == 0)
    return db.remove(e);
  const std::string key(e->key());
  db.remove(e);
  notify(kNotifyExpired, "expired", key, db.index());
  signal_key(db.index(), key);
}

void ServerImpl::propagate(int db, std::span<const std::string_view> args) {
  if (!aof_ || loading_) return;
  if (exec_active_) begin_exec_propagation();
  aof_->feed(db, args);
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
// A client's part (ConnStats::pinned_bytes) is counted on accept, its growth by the cron (an
// rdma client's staging area arrives after the accept) and exactly what was counted is
// uncounted on close; handshakes in progress are asked of the listeners.  In
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

RegisteredTotals& RegisteredTotals::operator+=(const RegisteredTotals& o) {
  arenas += o.arenas;
  regions += o.regions;
  bytes_mapped += o.bytes_mapped;
  bytes_registered += o.bytes_registered;
  pool_in_use += o.pool_in_use;
  rx_in_use += o.rx_in_use;
  registrations += o.registrations;
  register_ns += o.register_ns;
  would_block += o.would_block;
  return *this;
}

// The arenas of a worker's loop: created there by its rdma connections, so read there.
void ServerImpl::refresh_registered_locked(Worker& w) {
  RegisteredTotals t;
  for (const transport::RegisteredMemory& m : transport::registered_memory(*w.loop)) {
    ++t.arenas;
    for (const memory::PoolStats* p : {&m.pool, &m.rx, &m.rx_shared}) {
      t.regions += p->regions;
      t.bytes_mapped += p->bytes_mapped;
      t.bytes_registered += p->bytes_registered;
      t.registrations += p->registrations;
      t.register_ns += p->register_ns;
      t.would_block += p->would_block;
    }
    t.pool_in_use += m.pool.bytes_in_use;
    t.rx_in_use += m.rx.bytes_in_use + m.rx_shared.bytes_in_use;
  }
  w.registered = t;
}

RegisteredTotals ServerImpl::registered_locked() const {
  RegisteredTotals t;
  for (const auto& w : workers_) t += w->registered;
  return t;
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
