// Private to the kv layer: the server's state, the command table and what command
// implementations (commands_*.cc) see.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aof.h"
#include "conduit/kv/resp.h"
#include "conduit/kv/server.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "store.h"

namespace conduit::kv {

class ServerImpl;
struct CommandContext;
struct ClientConn;
struct Worker;

enum CommandFlags : uint32_t {
  kCmdWrite = 1u << 0,     // may change data: propagated to the AOF when it did
  kCmdReadonly = 1u << 1,
  kCmdDenyOom = 1u << 2,   // refused with -OOM above maxmemory
  kCmdFast = 1u << 3,
  kCmdNoAuth = 1u << 4,    // allowed before AUTH
  kCmdAdmin = 1u << 5,
  kCmdLoading = 1u << 6,
  kCmdStale = 1u << 7,
};

using CommandFn = void (*)(CommandContext&);

struct CommandDef {
  const char* name;  // lower case, as Redis' "fullname"
  CommandFn fn;
  int arity;         // > 0 exactly, < 0 at least -arity arguments (name included)
  uint32_t flags;
  int first_key, last_key, key_step;
  const char* group;
  const char* summary;
  const char* since;
};

// The command tables, one per source file.
std::span<const CommandDef> string_key_commands();
std::span<const CommandDef> collection_commands();
std::span<const CommandDef> server_commands();

// What a command knows about the client that sent it.  The AOF loader uses one with
// `internal` set (no connection).
struct ClientState {
  uint64_t id = 0;
  std::string name;
  int db = 0;
  RespVersion resp = RespVersion::kResp2;
  bool authenticated = false;
  bool close_after_reply = false;
  bool internal = false;
  ClientConn* conn = nullptr;
  int64_t created_ms = 0;
  int64_t last_interaction_ms = 0;
  const CommandDef* last_cmd = nullptr;
};

struct CommandContext {
  ServerImpl& server;
  ClientState& client;
  Database* db;
  ReplyWriter& reply;
  std::span<const std::string_view> argv;
  const CommandDef* cmd;
  uint64_t dirty = 0;     // changes made; > 0 propagates the command
  bool rewritten = false; // propagate prop_args (set by propagate_as) instead of argv
  bool propagated = false; // the command fed the AOF itself (also_propagate): nothing more

  size_t argc() const { return argv.size(); }
  std::string_view arg(size_t i) const { return argv[i]; }
  // Wall-clock ms, read at most once per batch of commands and only when needed.
  int64_t now_ms() const;
  void error(std::string_view e) { reply.error(e); }
  // Propagate these arguments instead of argv.  Views must stay valid until the command
  // returns (use own() for computed strings).
  void propagate_as(std::initializer_list<std::string_view> args);
  void propagate_as(std::span<const std::string_view> args);
  // Feeds one of several commands that stand for this one (a huge SPOP COUNT as SREM
  // batches), now, in order; argv is then not propagated.
  void also_propagate(std::span<const std::string_view> args);
  std::string_view own(std::string s);
};

// Per-transport counters for INFO (scheme -> totals of closed connections).
struct TransportTotals {
  uint64_t connections = 0;
  transport::ConnStats stats;
};

// One accepted connection.  It belongs to one Worker (the loop its transport connection
// lives on).  Only that worker's thread does I/O on it or touches its buffers, parser and
// flags; other threads (CLIENT LIST/KILL, INFO) hold ServerImpl::mu_ and read only what is
// written under it (state, closed, kill_requested, stats_snap) or the published atomics.
struct ClientConn {
  ServerImpl* server = nullptr;
  Worker* worker = nullptr;
  std::unique_ptr<transport::Connection> conn;
  ClientState state;
  std::string scheme;      // "tcp", "shm", "rdma"
  std::string peer;        // cached peer address
  std::string local;       // cached local address
  RequestParser parser;
  uint64_t limits_gen = 0; // ServerImpl::limits_gen_ the parser's limits come from
  bool limits_unauth = false;  // the parser has the pre-AUTH limits (client_limits.h)
  ByteBuffer query;        // unparsed input held across reads (empty for most clients)
  ByteBuffer out;          // replies not yet written
  ReplyWriter writer{&out};
  bool write_handler_on = false;
  bool read_paused = false;       // stopped reading: unsent replies above output_pause_bytes
  bool pending_commit = false;    // replies wait for the AOF to be written
  bool closed = false;            // written under mu_ (by the owner thread only)
  bool kill_requested = false;    // CLIENT KILL from another thread (under mu_)
  int64_t soft_limit_since_ms = 0;  // when output first exceeded the soft limit
  int64_t last_write_progress_ms = 0;
  transport::ConnStats stats_snap;  // conn->stats() as of the last batch (under mu_)
  // Buffer sizes for CLIENT LIST / INFO from any thread (published by the owner).
  std::atomic<size_t> pub_qbuf{0}, pub_qbuf_cap{0}, pub_obuf{0}, pub_obuf_cap{0};
  std::atomic<bool> pub_writing{false};
  ClientConn* prev = nullptr;
  ClientConn* next = nullptr;
};

// One reactor thread's share of the server: its loop, its connections and listeners, and
// the replies it holds back until the AOF is written.  Worker 0 runs on the caller's loop;
// workers 1..io_threads-1 on loops and threads the server owns.
struct Worker {
  size_t index = 0;
  reactor::EventLoop* loop = nullptr;
  std::unique_ptr<reactor::EventLoop> owned_loop;  // workers > 0
  std::thread thread;                              // workers > 0
  std::vector<std::unique_ptr<transport::Listener>> listeners;
  std::vector<char> scratch;  // read buffer shared by this worker's clients
  // Under ServerImpl::mu_: the worker's clients (for cron, CLIENT LIST, KILL).
  ClientConn* clients_head = nullptr;
  size_t num_clients = 0;
  // Loop thread only.
  ClientConn* cron_cursor = nullptr;
  std::vector<ClientConn*> pending_commit;
  bool commit_scheduled = false;
  reactor::TimerId commit_timer = 0;
  reactor::TimerId cron_timer = 0;
  // Counters any thread may read (INFO).
  std::atomic<uint64_t> net_output_bytes{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> writes{0};
};

// Threading: with io_threads = N the server runs N workers (reactor threads).  Network I/O
// runs on each connection's own worker without locks; everything shared (the keyspace,
// command execution, the AOF, stats, the client lists, CONFIG, the cron) is guarded by
// mu_, and a worker holds it for a whole batch of commands read in one go, so every
// command (and every pipelined batch) is atomic.  Functions named *_locked need mu_ held.
class ServerImpl {
 public:
  ServerImpl(reactor::EventLoop& loop, const ServerOptions& options);
  ~ServerImpl();

  Status start();
  void shutdown();

  // --- command execution (also used by the AOF loader; mu_ held) -----------------------
  // Runs one command for `client`, writing its reply to `reply`.
  void execute(ClientState& client, std::span<const std::string_view> argv, ReplyWriter& reply);
  const CommandDef* find_command(std::string_view name) const;
  std::span<const CommandDef* const> commands() const { return command_list_; }

  // Lazy expiry: the entry if alive, else deletes it (propagating DEL) and returns null.
  Entry* lookup(Database& db, std::string_view key);
  // Deletes an expired entry: stats, DEL to the AOF.
  void expire_entry(Database& db, Entry* e);
  Database& db(int i) { return *dbs_[static_cast<size_t>(i)]; }
  int num_dbs() const { return static_cast<int>(dbs_.size()); }
  // Precise wall-clock ms, cached until invalidate_time() (each batch of input): a batch
  // that never looks at an expiry never reads the clock.
  int64_t now_ms() {
    if (!time_valid_) refresh_time();
    return now_ms_;
  }
  void refresh_time();
  void invalidate_time();
  bool loading() const { return loading_; }
  uint64_t used_memory();
  // What the transports hold outside the heap for our clients (mu_ held): see server.cc.
  uint64_t transport_memory_locked() const;
  // Handshakes the listeners have in progress (any thread; see server.cc).
  uint64_t handshakes_in_progress() const;
  void propagate(int db, std::span<const std::string_view> args);

  // --- server features the commands reach (mu_ held) -------------------------------------
  std::string info(std::string_view sections);
  // CONFIG GET pattern -> (name, value) pairs; CONFIG SET name value ... (all or nothing)
  // -> the error reply or "".
  std::vector<std::pair<std::string, std::string>> config_get(std::string_view pattern) const;
  std::string config_set(std::span<const std::pair<std::string_view, std::string_view>> pairs);
  std::string client_list_line(const ClientConn& c) const;
  // Live clients, oldest first (not those a CLIENT KILL is closing).
  std::vector<const ClientConn*> clients() const;
  ClientConn* find_client(uint64_t id) const;
  // Closes a client now when it is served by the calling thread, else asks its worker to.
  void kill_client(ClientConn* c);
  std::string bgrewriteaof();
  void request_shutdown();
  void reset_stats();
  // Bumped by CONFIG SET of a protocol limit: each client picks up the new limits before
  // its next batch.
  void limits_changed() { ++limits_gen_; }

  ServerOptions options_;
  reactor::EventLoop& loop_;  // worker 0's loop: the cron, AOF rewrite, shutdown
  mutable std::mutex mu_;
  ServerStats stats_;
  std::map<std::string, TransportTotals> transport_totals_;
  std::function<void()> shutdown_handler_;
  int64_t start_time_ms_ = 0;
  uint64_t start_mono_ns_ = 0;
  uint64_t rdb_changes_since_save_ = 0;  // "dirty" in Redis' INFO persistence
  uint64_t aof_rewrites_scheduled_ = 0;
  std::vector<std::string> listen_urls_;  // one per listener URL (worker 0's listeners)
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Aof> aof_;
  std::deque<std::string> prop_storage_;  // own(): cleared after each command
  std::vector<std::string_view> prop_args_;
  uint64_t rng_state_ = 0x853c49e6748fea9bull;
  uint64_t random64();

 private:
  friend class Server;
  friend struct ClientConnOps;
  void build_command_table();
  Status open_listener(Worker& w, const std::string& url);
  Status start_workers();
  void stop_workers();
  void teardown_worker(Worker& w);
  // Runs fn on w's loop thread, unless the server is gone by then.
  void post_to(Worker& w, std::function<void()> fn);
  void on_accept(Worker& w, std::unique_ptr<transport::Connection> conn);
  void on_readable(ClientConn* c);
  // Runs the parsed commands of one read and decides what happens to the replies.
  struct BatchEnd {
    bool wait_for_aof = false;  // replies must wait for the AOF write
    uint64_t hard_limit = 0;    // client-output-buffer-limit hard bytes
    bool unauthenticated = false;
  };
  // requirepass is set and this client has not authenticated: pre-AUTH limits apply.
  bool unauthenticated(const ClientConn* c) const { return !c->state.authenticated && !options_.requirepass.empty(); }
  // Parser limits and reply budget for c's current state (client_limits.h).
  void apply_limits_locked(ClientConn* c);
  void read_and_run(ClientConn* c);
  void out_of_memory_locked(const CommandDef* cmd, ReplyWriter& reply);
  BatchEnd run_batch_locked(ClientConn* c, const char* data, size_t len, bool from_query);
  void process_input_locked(ClientConn* c, const char* data, size_t len, bool from_query);
  void after_batch(ClientConn* c, BatchEnd end);
  void resume_paused(ClientConn* c);
  bool flush_client(ClientConn* c);  // false if the client was closed
  void publish(ClientConn* c);
  void on_writable(ClientConn* c);
  void close_client(ClientConn* c, std::string_view why);
  void close_client_locked(ClientConn* c, std::string_view why);
  void schedule_commit(Worker& w);
  void commit(Worker& w);
  void cron();
  void active_expire_cycle_locked();
  void clients_cron(Worker& w);
  void aof_cron_locked();
  bool write_snapshot(int fd);
  void watch_rewrite(int fd);
  void on_rewrite_done();
  void update_ops_sample();
  uint64_t net_output_bytes() const;

  std::vector<std::unique_ptr<Database>> dbs_;
  // Command lookup: open addressing over lower-case names.
  std::vector<std::pair<std::string_view, const CommandDef*>> command_slots_;
  std::vector<const CommandDef*> command_list_;
  std::map<std::string, uint64_t> command_calls_;

  size_t num_clients_ = 0;
  uint64_t next_client_id_ = 1;
  uint64_t limits_gen_ = 0;
  uint64_t net_output_base_ = 0;  // net_output_bytes() at the last CONFIG RESETSTAT
  int64_t now_ms_ = 0;
  bool time_valid_ = false;
  int64_t coarse_ms_ = 0;  // CLOCK_REALTIME_COARSE: idle and progress bookkeeping
  bool loading_ = false;
  bool shut_down_ = false;
  reactor::TimerId cron_timer_ = 0;
  uint64_t cron_loops_ = 0;
  int64_t used_memory_at_ms_ = -1;
  uint64_t used_memory_ = 0;
  uint64_t client_pinned_bytes_ = 0;  // sum of the clients' ConnStats::pinned_bytes (mu_)
  int expire_db_cursor_ = 0;
  // Posted closures hold a weak reference: they do nothing once the server is gone.
  std::shared_ptr<ServerImpl*> alive_ = std::make_shared<ServerImpl*>(this);

  // Rewrite child watch (worker 0's loop).
  struct PipeWatch : reactor::FdHandler {
    ServerImpl* s = nullptr;
    void on_events(uint32_t) override { s->on_rewrite_done(); }
  } rewrite_watch_;
  int rewrite_fd_ = -1;
  bool rewrite_needed_ = false;  // a write ran out of memory: the cron rewrites the AOF

  // instantaneous_ops_per_sec: samples of (time, commands) every cron tick.
  static constexpr int kOpsSamples = 16;
  uint64_t ops_sample_[kOpsSamples] = {};
  int ops_sample_idx_ = 0;
  uint64_t ops_last_cmds_ = 0;
  uint64_t ops_last_ns_ = 0;
};

inline int64_t CommandContext::now_ms() const { return server.now_ms(); }

// Shared helpers for command implementations.
inline constexpr std::string_view kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kSyntaxError = "ERR syntax error";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";

Entry* lookup_read(CommandContext& ctx, std::string_view key);
Entry* lookup_write(CommandContext& ctx, std::string_view key);
// Replies WRONGTYPE and returns false when e is not of type t.
bool check_type(CommandContext& ctx, const Entry* e, Type t);
bool get_ll(CommandContext& ctx, std::string_view s, int64_t* out, std::string_view err = kNotInteger);
bool get_double(CommandContext& ctx, std::string_view s, double* out, std::string_view err = kNotFloat);
bool eq_nocase(std::string_view a, std::string_view b);
std::string wrong_args(std::string_view cmd);
// Redis' stringmatchlen: glob with * ? [...] and \ escapes.
bool glob_match(std::string_view pattern, std::string_view s, bool nocase = false);
// config.cc: CONFIG SET of several options at once, all or nothing, with Redis' errors;
// CONFIG GET by glob pattern.
std::string config_set_all(ServerOptions* o, std::span<const std::pair<std::string_view, std::string_view>> pairs);
std::vector<std::pair<std::string, std::string>> config_get_matching(const ServerOptions& o, std::string_view pattern);
// Deletes the key (a write: the caller counts dirty).
void delete_entry(CommandContext& ctx, Entry* e);

}  // namespace conduit::kv
