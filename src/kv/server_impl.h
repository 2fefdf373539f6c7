// Private to the kv layer: the server's state, the command table and what command
// implementations (commands_*.cc) see.
//
// Where things are (src/kv): server.cc (start, listeners, workers, execute), clients.cc
// (connections: read, run a batch, write, close), cron.cc, aof_rewrite.cc, info.cc (one
// function per INFO section), config.cc (the option table), multi.cc (MULTI/EXEC/WATCH),
// blocking.cc (BLPOP & co., CLIENT PAUSE), pubsub.cc (SUBSCRIBE & co., MONITOR), notify.cc
// (keyspace notifications), tracking.cc (CLIENT TRACKING), eviction.cc (maxmemory policies), commands_*.cc (the commands).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "acl.h"
#include "aof.h"
#include "conduit/kv/resp.h"
#include "conduit/kv/server.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "glob.h"
#include "numbers.h"
#include "store.h"
#include "text.h"

namespace conduit::kv {

class ServerImpl;
struct CommandContext;
struct ClientConn;
struct Worker;

enum CommandFlags : uint32_t {
  kCmdWrite = 1u << 0,     // may change data: propagated to the AOF when it did
  kCmdReadonly = 1u << 1,
  kCmdDenyOom = 1u << 2,   // refused with -OOM above maxmemory (after trying to evict)
  kCmdFast = 1u << 3,
  kCmdNoAuth = 1u << 4,    // allowed before AUTH
  kCmdAdmin = 1u << 5,
  kCmdLoading = 1u << 6,
  kCmdStale = 1u << 7,
  kCmdPubsub = 1u << 8,    // allowed in a RESP2 client's subscribed context
  kCmdNoMulti = 1u << 9,   // refused inside MULTI
  kCmdBlocking = 1u << 10, // may block the client (BLPOP ...)
  kCmdSkipMonitor = 1u << 11,  // not shown to MONITOR (AUTH, HELLO: they carry passwords)
  kCmdNoScript = 1u << 12,
  kCmdAllowBusy = 1u << 13,
  kCmdMayReplicate = 1u << 14,
  // The command reports what it writes itself (CommandContext::touched): its key spec
  // also names keys it only reads (SINTERSTORE's sources), which must not fail a WATCH.
  kCmdTouchesOwnKeys = 1u << 15,
  // Its replies are pushes (SUBSCRIBE & co.): sent even under CLIENT REPLY OFF / SKIP, as
  // Redis' CLIENT_PUSHING.
  kCmdPushes = 1u << 16,
};

using CommandFn = void (*)(CommandContext&);
// Appends the argument indices that are keys (commands whose keys are not at fixed
// positions: ZUNIONSTORE dst numkeys k..., LMPOP numkeys k...).
using GetKeysFn = void (*)(std::span<const std::string_view> argv, std::vector<size_t>* out);

struct CommandDef {
  const char* name;  // lower case; a subcommand's own name ("list" of "client|list")
  CommandFn fn;
  int arity;         // > 0 exactly, < 0 at least -arity arguments (name included; a
                     // subcommand's arity counts the container's name too, as in Redis)
  uint32_t flags;
  int first_key, last_key, key_step;  // Redis' legacy key spec; last_key < 0 counts from the end
  const char* group;
  const char* summary;
  const char* since;
  std::span<const CommandDef> subcommands = {};  // a container (CLIENT, CONFIG ...)
  GetKeysFn getkeys = nullptr;                   // when the key spec cannot say it
};

// The command tables, one per source file.
std::span<const CommandDef> string_commands();
std::span<const CommandDef> bit_commands();
std::span<const CommandDef> key_commands();
std::span<const CommandDef> list_commands();
std::span<const CommandDef> hash_commands();
std::span<const CommandDef> set_commands();
std::span<const CommandDef> zset_commands();
std::span<const CommandDef> zset_pop_commands();
std::span<const CommandDef> sort_commands();
std::span<const CommandDef> stream_commands();
std::span<const CommandDef> stream_group_commands();
std::span<const CommandDef> server_commands();
std::span<const CommandDef> connection_commands();
std::span<const CommandDef> multi_commands();
std::span<const CommandDef> pubsub_commands();
// CLIENT TRACKING / CACHING / GETREDIR / TRACKINGINFO (tracking.cc).
void client_tracking_cmd(CommandContext& ctx);
void client_caching_cmd(CommandContext& ctx);
void client_getredir_cmd(CommandContext& ctx);
void client_trackinginfo_cmd(CommandContext& ctx);
std::span<const CommandDef> acl_commands();

// INFO commandstats.
struct CommandStats {
  uint64_t calls = 0, usec = 0, rejected = 0, failed = 0;
  // LATENCY HISTOGRAM: calls by duration in power-of-two buckets, bucket k counting
  // [1024 << (k-1), 1024 << k) ns (bucket 0: below 1024 ns) -- the buckets Redis reports
  // from its hdr_histogram (a log iterator from 1024 ns, factor 2).
  static constexpr int kLatencyBuckets = 40;
  std::array<uint64_t, kLatencyBuckets> latency{};
};

// One row of the server's command table: a command or subcommand with its statistics.
struct CommandEntry {
  const CommandDef* def = nullptr;
  std::string fullname;  // "get", "client|list"
  CommandEntry* parent = nullptr;
  std::vector<CommandEntry*> subs;
  CommandStats stats;
  uint32_t acl_id = 0;          // its bit in AclUser::allowed
  uint32_t acl_categories = 0;  // AclCategory bits (acl_categories_of)
  // Argument indices of the keys of this call (key spec or getkeys).
  void keys(std::span<const std::string_view> argv, std::vector<size_t>* out) const;
  CommandEntry* find_sub(std::string_view name) const;
};

// A command queued by MULTI (owned copies of its arguments).
struct QueuedCommand {
  std::vector<std::string> argv;
  CommandEntry* entry = nullptr;
};

// A key WATCHed by a client: its database, name, and whether it had expired already
// (Redis 7.0: a key that was logically expired at WATCH time does not abort EXEC by
// expiring).
struct WatchedKey {
  int db;
  std::string key;
  bool expired_at_watch;
};

// A client blocked by BLPOP & co.: the command to run again when one of its keys is ready.
struct BlockState {
  enum TimeoutReply : uint8_t { kNullArray, kNullBulk, kZero };  // what a timeout answers
  TimeoutReply on_timeout = kNullArray;
  int db = 0;
  std::vector<std::string> keys;
  std::vector<std::string> argv;  // the blocking command, as sent
  CommandEntry* entry = nullptr;
  int64_t deadline_ms = 0;        // 0 = forever
  reactor::TimerId timer = 0;     // on the client's worker loop
  uint64_t gen = 0;               // which blocking this timer belongs to
  // XREADGROUP: a key deleted or replaced by another type answers "-UNBLOCKED the stream
  // key no longer exists" (Redis 7.0) instead of waiting on.
  bool unblock_on_delete = false;
};

enum class ReplyMode : uint8_t { kOn, kOff, kSkipNext, kSkipThis };

// CLIENT TRACKING's state of one client (tracking.cc).
struct TrackingState {
  bool on = false;
  bool bcast = false;
  bool optin = false;
  bool optout = false;
  bool noloop = false;
  bool caching = false;       // CLIENT CACHING YES (optin) / NO (optout) for the next command
  bool broken_redir = false;  // the redirect client was gone when a message was due
  uint64_t redirect = 0;      // client id, 0 = none
  std::set<std::string, std::less<>> prefixes;  // BCAST
};

// What a command knows about the client that sent it.  The AOF loader uses one with
// `internal` set (no connection).  Guarded by ServerImpl::mu_ (commands run under it).
struct ClientState {
  uint64_t id = 0;
  std::string name;
  int db = 0;
  RespVersion resp = RespVersion::kResp2;
  bool authenticated = false;
  // The ACL user (null only for the AOF loader, which may run anything).  Shared so that a
  // deleted user's clients, closed asynchronously, never see a dangling user.
  std::shared_ptr<AclUser> user;
  bool close_after_reply = false;
  bool internal = false;
  ClientConn* conn = nullptr;
  int64_t created_ms = 0;
  int64_t last_interaction_ms = 0;
  const CommandEntry* last_cmd = nullptr;
  ReplyMode reply_mode = ReplyMode::kOn;
  bool no_evict = false;
  bool monitor = false;
  // MULTI / EXEC
  bool in_multi = false;
  bool multi_error = false;  // a command failed to queue: EXEC answers EXECABORT
  bool in_exec = false;      // running EXEC's commands (blocking commands do not block)
  std::vector<QueuedCommand> queued;
  uint64_t queued_bytes = 0;
  // WATCH
  std::vector<WatchedKey> watched;
  bool dirty_cas = false;  // a watched key changed: EXEC fails
  // Blocking (null when not blocked)
  std::unique_ptr<BlockState> blocked;
  uint64_t block_gen = 0;
  // Pub/sub
  std::set<std::string, std::less<>> channels;
  std::set<std::string, std::less<>> patterns;
  size_t subscriptions() const { return channels.size() + patterns.size(); }
  bool paused_waiting = false;  // held by CLIENT PAUSE until it ends
  TrackingState tracking;
};

struct CommandContext {
  ServerImpl& server;
  ClientState& client;
  Database* db;
  ReplyWriter& reply;
  std::span<const std::string_view> argv;
  const CommandDef* cmd;
  CommandEntry* entry = nullptr;
  uint64_t dirty = 0;     // changes made; > 0 propagates the command
  bool rewritten = false; // propagate prop_args (set by propagate_as) instead of argv
  bool propagated = false; // the command fed the AOF itself (also_propagate): nothing more
  bool blocked = false;    // the command blocked the client (no reply yet)

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
  // A key this command changed in a way argv's key positions do not show (the
  // destination of a computed command, a key it deleted): WATCH and blocked clients see it.
  void touched(std::string_view key, int db = -1);
  // A keyspace event of class `cls` (KeyspaceEvents) for key in this command's database
  // (notify.cc).  One test when notifications are off.
  inline void notify(uint32_t cls, std::string_view event, std::string_view key);
  void notify(uint32_t cls, std::string_view event, std::string_view key, int db_index);
};

// Per-transport counters for INFO (scheme -> totals of closed connections).
struct TransportTotals {
  uint64_t connections = 0;
  transport::ConnStats stats;
};

// One accepted connection.  It belongs to one Worker (the loop its transport connection
// lives on).  Only that worker's thread does I/O on it or touches its buffers, parser and
// flags; other threads (CLIENT LIST/KILL, INFO, PUBLISH, a push that serves a blocked
// client) hold ServerImpl::mu_ and touch only what is written under it (state, closed,
// kill_requested, stats_snap, inbox) or the published atomics.
struct ClientConn {
  ServerImpl* server = nullptr;
  Worker* worker = nullptr;
  std::unique_ptr<transport::Connection> conn;
  ClientState state;
  std::string scheme;      // "tcp", "shm", "rdma"
  std::string peer;        // cached peer address
  std::string local;       // cached local address
  // Its ConnStats::pinned_bytes as counted in ServerImpl::client_pinned_bytes_ (mu_): it can
  // grow after the accept (rdma: the staging area comes with the peer's first
  // RegisterXferMemory), so the cron adds the growth and the close takes exactly this off.
  uint64_t pinned_counted = 0;
  RequestParser parser;
  uint64_t limits_gen = 0; // ServerImpl::limits_gen_ the parser's limits come from
  bool limits_unauth = false;  // the parser has the pre-AUTH limits (client_limits.h)
  ByteBuffer query;        // unparsed input held across reads (empty for most clients)
  ByteBuffer out;          // replies not yet written
  ReplyWriter writer{&out};
  // Replies and messages produced by other threads (under mu_): pub/sub messages, the
  // reply of a blocked command served by another worker's push, MONITOR lines.  The owner
  // moves them to `out` (deliver_inbox) when the posted task runs.
  ByteBuffer inbox;
  bool inbox_posted = false;      // under mu_
  bool write_handler_on = false;
  bool read_paused = false;       // stopped reading: unsent replies above output_pause_bytes
  bool input_held = false;        // blocked or paused: input stays in `query` until resumed
  bool running = false;           // a command of this client is executing (owner thread)
  bool cur_from_scratch = false;  // ... from the worker's read buffer (not `query`)
  size_t cur_qbuf = 0;            // ... with this many input bytes from it to the end
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
// What the transports keep registered on one worker's loop (rdma://'s arenas), summed over
// its devices: conduit/transport/registered_memory.h.  Refreshed on the worker's thread
// (accept, cron) under ServerImpl::mu_, read by INFO under mu_.
struct RegisteredTotals {
  uint64_t arenas = 0;
  uint64_t regions = 0;
  uint64_t bytes_mapped = 0;
  uint64_t bytes_registered = 0;
  uint64_t pool_in_use = 0;  // control slots, staging, Connection::pool() slices
  uint64_t rx_in_use = 0;    // receive areas (scope=mw and scope=shared)
  uint64_t registrations = 0;
  uint64_t register_ns = 0;
  uint64_t would_block = 0;
  RegisteredTotals& operator+=(const RegisteredTotals& o);
};

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
  RegisteredTotals registered;  // under ServerImpl::mu_
  // Counters any thread may read (INFO).
  std::atomic<uint64_t> net_output_bytes{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> writes{0};
};

using EvictionPolicy = MaxmemoryPolicy;

// LATENCY: the latest and worst of an event kind above latency-monitor-threshold.
struct LatencyEvent {
  int64_t last_time = 0;  // unix seconds
  uint64_t latest_ms = 0, max_ms = 0;
  std::deque<std::pair<int64_t, uint64_t>> history;  // (time, ms), at most 160 as Redis
};

// Threading: with io_threads = N the server runs N workers (reactor threads).  Network I/O
// runs on each connection's own worker without locks; everything shared (the keyspace,
// command execution, the AOF, stats, the client lists, CONFIG, the cron, pub/sub, blocked
// clients) is guarded by mu_, and a worker holds it for a whole batch of commands read in
// one go, so every command (and every pipelined batch) is atomic.  Functions named *_locked
// need mu_ held.
class ServerImpl {
 public:
  ServerImpl(reactor::EventLoop& loop, const ServerOptions& options);
  ~ServerImpl();

  Status start();
  void shutdown();

  // --- command execution (also used by the AOF loader; mu_ held) -----------------------
  // Runs one command for `client`, writing its reply to `reply`: the checks (arity, AUTH,
  // MULTI queueing, pub/sub context, OOM), the call, statistics, propagation, WATCH and
  // blocked-client signals.
  // Returns false when CLIENT PAUSE holds the command: it did not run; run it again later.
  bool execute(ClientState& client, std::span<const std::string_view> argv, ReplyWriter& reply);
  // Runs an already resolved command without the MULTI / context checks (EXEC, a blocked
  // command tried again).  Returns true if the command blocked.
  bool call(ClientState& client, CommandEntry* entry, std::span<const std::string_view> argv, ReplyWriter& reply);
  CommandEntry* find_command(std::string_view name) const;
  // Every command and subcommand, in table order (LATENCY HISTOGRAM).  mu_ held.
  const std::vector<std::unique_ptr<CommandEntry>>& command_entries() const { return command_store_; }
  // The command or subcommand argv names, or null (with *unknown_sub set when the
  // container exists but not the subcommand).
  CommandEntry* resolve(std::span<const std::string_view> argv, bool* unknown_sub) const;
  std::span<CommandEntry* const> commands() const { return command_list_; }

  // Lazy expiry: the entry if alive, else deletes it (propagating DEL) and returns null.
  // touch false: Redis' LOOKUP_NOTOUCH (the key's LRU/LFU access is left as it was).
  Entry* lookup(Database& db, std::string_view key, bool touch = true);
  // Deletes an expired entry: stats, DEL to the AOF, WATCH.
  void expire_entry(Database& db, Entry* e);
  Database& db(int i) { return *dbs_[static_cast<size_t>(i)]; }
  int num_dbs() const { return static_cast<int>(dbs_.size()); }
  // Precise wall-clock ms, cached until invalidate_time() (each batch of input): a batch
  // that never looks at an expiry never reads the clock.
  int64_t now_ms() {
    if (!time_valid_) refresh_time();
    return now_ms_;
  }
  int64_t coarse_ms() const { return coarse_ms_; }
  void refresh_time();
  void invalidate_time();
  bool loading() const { return loading_; }
  uint64_t used_memory();
  // What the transports hold outside the heap for our clients (mu_ held): see server.cc.
  uint64_t transport_memory_locked() const;
  // Re-reads w's registered memory (w's loop thread, mu_ held); the sum over the workers.
  void refresh_registered_locked(Worker& w);
  RegisteredTotals registered_locked() const;
  // Handshakes the listeners have in progress (any thread; see server.cc).
  uint64_t handshakes_in_progress() const;
  void propagate(int db, std::span<const std::string_view> args);

  // --- keys changed: WATCH and blocked clients (multi.cc, blocking.cc; mu_ held) -------
  // A write changed `key` of `db`: watchers' EXEC fails, clients blocked on it are served
  // after the command.  Cheap when nobody watches or blocks.
  // `by`: the client whose command changed it (null: an expiry, an eviction), for
  // CLIENT TRACKING's NOLOOP.
  void signal_key(int db, std::string_view key, const ClientState* by = nullptr);
  // FLUSHDB / FLUSHALL (db -1 = all) / SWAPDB (replaced_with = the other db): the watched
  // keys of db that existed, or that replaced_with brings in.
  void signal_flush(int db, int replaced_with = -1);
  // SWAPDB: clients blocked on keys of a or b whose keys now exist are served.
  void swapped_dbs(int a, int b);
  void watch(ClientState& c, std::string_view key);
  void unwatch_all(ClientState& c);
  void discard_multi(ClientState& c);
  // Blocks the calling client on `keys` until one is ready or the deadline (ms, 0 =
  // never) passes.  The current command gives no reply now.
  void block(CommandContext& ctx, std::span<const std::string_view> keys, int64_t deadline_ms,
             BlockState::TimeoutReply on_timeout);
  // Whether the command may block: not inside EXEC, not for the AOF loader, and not when
  // it is being tried again for a blocked client (then it just reports "still nothing").
  bool can_block(const CommandContext& ctx) const;
  // Unblocks c: with `reply_null` the blocked command answers its timeout reply, with
  // `error` that error (CLIENT UNBLOCK ... ERROR), else nothing (the command ran).
  void unblock(ClientState& c, bool timed_out, std::string_view error = {});
  // Serves clients blocked on keys made ready by the last command (after each command,
  // and after EXEC as a whole).
  void serve_ready_keys();
  size_t blocked_clients() const { return blocked_count_; }
  bool watching_clients_active() const { return watching_clients_ > 0; }
  // CLIENT PAUSE: holds every client's commands (or writes) until `until_ms`.
  void pause_clients(int64_t until_ms, bool writes_only);
  void unpause_clients();
  bool paused_for(const ClientState& c, const CommandEntry* e) const;

  // --- pub/sub and MONITOR (pubsub.cc; mu_ held) -------------------------------------------
  int64_t publish_message(std::string_view channel, std::string_view message);
  void subscribe(ClientState& c, std::string_view channel, bool pattern);
  void unsubscribe(ClientState& c, std::string_view channel, bool pattern, bool notify);
  void unsubscribe_all(ClientState& c, bool pattern, bool notify);
  size_t num_patterns() const;  // distinct patterns (PUBSUB NUMPAT), not subscriptions
  std::vector<std::string> active_channels(std::string_view pattern) const;
  size_t channel_subscribers(std::string_view channel) const;
  void feed_monitors(const ClientState& c, std::span<const std::string_view> argv);
  // Keyspace notifications (notify.cc): publishes event `event` of class `cls` for `key`
  // of database `db` when notify-keyspace-events has the class on.
  void notify(uint32_t cls, std::string_view event, std::string_view key, int db) {
    if ((options_.notify_keyspace_events & cls) != 0) [[unlikely]]
      publish_keyspace_event(event, key, db);
  }
  void publish_keyspace_event(std::string_view event, std::string_view key, int db);
  // Bytes for c produced on another thread (or while c's own input is held): appended
  // under mu_ and handed to c's worker, which sends them.  The writer must write into the
  // returned writer's buffer.
  ReplyWriter deliver_writer(ClientConn* c);
  void deliver_done(ClientConn* c);

  // --- client-side caching: CLIENT TRACKING (tracking.cc; mu_ held) -----------------------
  // Whether a key change has anything to do: keys remembered or BCAST prefixes.
  bool tracking_active() const { return !tracking_table_.empty() || !prefix_table_.empty(); }
  struct TrackingOptions {
    bool bcast = false, optin = false, optout = false, noloop = false;
  };
  // CLIENT TRACKING ON (options already checked, prefixes free of overlaps) / OFF.
  void tracking_enable(ClientState& c, uint64_t redirect, TrackingOptions o, std::span<const std::string_view> prefixes);
  void tracking_disable(ClientState& c);
  // A BCAST prefix overlapping one of c's or another of `prefixes`: Redis' error, else "".
  std::string tracking_prefix_collision(const ClientState& c, std::span<const std::string_view> prefixes) const;
  // After a read-only command of a tracking client: remembers the keys it read.
  void tracking_remember_keys(ClientState& c, const CommandEntry* e, std::span<const std::string_view> argv);
  // `key` changed (by the command of client `by`, or by expiry/eviction when null);
  // `bcast` false: forgotten by the table's bound (BCAST clients are not told).
  void tracking_invalidate_key(std::string_view key, const ClientState* by, bool bcast = true);
  // FLUSHDB / FLUSHALL: a null invalidation to every tracking client, the table emptied.
  void tracking_invalidate_all();
  // After a batch of commands and in the cron (Redis' beforeSleep): BCAST messages for the
  // keys changed since, and the table brought back under tracking-table-max-keys.
  void tracking_after_batch_locked();
  uint64_t tracking_clients() const { return tracking_ids_.size(); }
  uint64_t tracking_keys() const { return tracking_table_.size(); }
  uint64_t tracking_items() const { return tracking_items_; }
  uint64_t tracking_prefixes() const { return prefix_table_.size(); }
  // --- ACL (acl.cc holds the users; these touch clients; mu_ held) ---------------------------
  // Whether client may run entry with argv; if not, logs it (ACL LOG) and returns the
  // NOPERM error to reply ("" = allowed).  `exec`: EXEC re-checking a queued command.
  std::string acl_check_locked(ClientState& client, const CommandEntry* entry, std::span<const std::string_view> argv,
                               bool exec);
  void acl_log_locked(ClientState& client, AclResult reason, std::string object, std::string username, bool multi);
  // ACL SETUSER changed u: its pub/sub clients whose channels are no longer allowed are
  // disconnected (Redis' ACLKillPubsubClientsIfNeeded).
  void acl_user_changed(const std::shared_ptr<AclUser>& u, const AclUser& before, ClientState& caller);
  // ACL DELUSER removed u: its clients are disconnected (the caller after its reply).
  void acl_user_deleted(const std::shared_ptr<AclUser>& u, ClientState& caller);
  // aclfile (inside dir when relative); ACL LOAD (the replaced users' clients are closed,
  // `caller` after its reply; null at start) and ACL SAVE: "" or the error reply.
  std::string acl_file_path() const;
  std::string acl_load_file(ClientState* caller);
  std::string acl_save_file();
  Acl acl_;

  // --- server features the commands reach (mu_ held) -------------------------------------
  std::string info(std::string_view sections);
  // CONFIG GET pattern -> (name, value) pairs; CONFIG SET name value ... (all or nothing)
  // -> the error reply or "".
  std::vector<std::pair<std::string, std::string>> config_get(std::string_view pattern) const;
  // local_client: the client is on this host (loopback, shm), for enable-protected-configs local.
  std::string config_set(std::span<const std::pair<std::string_view, std::string_view>> pairs, bool local_client);
  std::string client_list_line(const ClientConn& c) const;
  // Live clients, oldest first (not those a CLIENT KILL is closing).
  std::vector<const ClientConn*> clients() const;
  ClientConn* find_client(uint64_t id) const;
  // Closes a client now when it is served by the calling thread, else asks its worker to.
  void kill_client(ClientConn* c);
  std::string bgrewriteaof();
  // CONFIG SET appendonly yes|no at run time (Redis' startAppendOnly / stopAppendOnly).
  // start: a rewrite of the dataset becomes the new file (an old file at the path is
  // replaced), commands meanwhile are kept for it; "" or why it could not start.
  // stop: writes what is queued, fsyncs and closes the file (a running rewrite is killed).
  std::string start_aof();
  void stop_aof();
  std::string aof_path() const { return options_.dir + "/" + options_.appendfilename; }
  // CONFIG REWRITE: writes the effective configuration back to the config file (config.cc).
  std::string config_rewrite();
  void request_shutdown();
  void reset_stats();
  // Bumped by CONFIG SET of a protocol limit: each client picks up the new limits before
  // its next batch.
  void limits_changed() { ++limits_gen_; }
  // Eviction (eviction.cc): frees memory per maxmemory-policy until used memory is below
  // maxmemory; false if it cannot (noeviction, nothing evictable).
  bool evict_locked();
  bool lfu_policy() const;
  // The LFU counter as OBJECT FREQ reports it (decayed to now).
  uint8_t lfu_counter(const Entry* e) const;
  int64_t idle_seconds(const Entry* e) const;  // OBJECT IDLETIME (LRU clock)
  void record_access(Entry* e);
  void record_latency(const char* event, uint64_t ms);

  ServerOptions options_;
  reactor::EventLoop& loop_;  // worker 0's loop: the cron, AOF rewrite, shutdown
  mutable std::mutex mu_;
  ServerStats stats_;
  std::map<std::string, TransportTotals> transport_totals_;
  std::map<std::string, uint64_t> error_stats_;  // errorstats: code -> count
  uint64_t total_error_replies_ = 0;
  std::map<std::string, LatencyEvent> latency_;
  std::function<void()> shutdown_handler_;
  int64_t start_time_ms_ = 0;
  uint64_t start_mono_ns_ = 0;
  // LASTSAVE / rdb_last_save_time: the server start in seconds (Redis counts the dataset as
  // saved at start; conduit-kv makes no RDB saves that would move it).
  int64_t last_save_time_ = 0;
  uint64_t rdb_changes_since_save_ = 0;  // "dirty" in Redis' INFO persistence
  uint64_t aof_rewrites_scheduled_ = 0;
  uint64_t evicted_keys_ = 0;
  uint64_t total_blocking_keys_ = 0;
  std::vector<std::string> listen_urls_;  // one per listener URL (worker 0's listeners)
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Aof> aof_;
  std::deque<std::string> prop_storage_;  // own(): cleared after each command
  std::vector<std::string_view> prop_args_;
  std::vector<std::pair<int, std::string>> extra_touched_;  // CommandContext::touched
  std::vector<ClientConn*> monitors_;  // MONITOR clients
  // EXEC: the first write of a transaction feeds MULTI to the AOF, EXEC closes it, so a
  // transaction loads all or nothing.
  bool exec_active_ = false;
  bool exec_multi_fed_ = false;
  void begin_exec_propagation();
  uint64_t rng_state_ = 0x853c49e6748fea9bull;
  uint64_t random64();

 private:
  friend class Server;
  friend struct InfoSections;
  void build_command_table();
  void add_command(const CommandDef& d, CommandEntry* parent);
  Status open_listener(Worker& w, const std::string& url);
  std::vector<std::string> listener_urls() const;
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
  bool unauthenticated(const ClientConn* c) const { return !c->state.authenticated && acl_.auth_required(); }
  // Parser limits and reply budget for c's current state (client_limits.h).
  void apply_limits_locked(ClientConn* c);
  void read_and_run(ClientConn* c);
  void out_of_memory_locked(const CommandDef* cmd, ReplyWriter& reply);
  BatchEnd run_batch_locked(ClientConn* c, const char* data, size_t len, bool from_query);
  void process_input_locked(ClientConn* c, const char* data, size_t len, bool from_query);
  void after_batch(ClientConn* c, BatchEnd end);
  void resume_paused(ClientConn* c);
  // Runs c's held input again (it was unblocked or unpaused), on c's worker.
  void resume_held(ClientConn* c);
  void resume_held_later(ClientConn* c);
  void deliver_inbox(ClientConn* c);
  bool flush_client(ClientConn* c);  // false if the client was closed
  void publish(ClientConn* c);
  void on_writable(ClientConn* c);
  void close_client(ClientConn* c, std::string_view why);
  void close_client_locked(ClientConn* c, std::string_view why);
  void forget_client_locked(ClientState& c);  // pub/sub, WATCH, blocking, MONITOR
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
  void arm_block_timer(ClientConn* c);
  void serve_blocked_client(ClientConn* c);
  static Type blocked_on_type(const BlockState& b);
  uint64_t pubsub_budget(const ClientConn* c) const;

  std::vector<std::unique_ptr<Database>> dbs_;
  // Command lookup: open addressing over lower-case names.
  std::vector<std::unique_ptr<CommandEntry>> command_store_;
  std::vector<std::pair<std::string_view, CommandEntry*>> command_slots_;
  std::vector<CommandEntry*> command_list_;  // top-level commands

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
  uint64_t used_memory_peak_ = 0;
  uint64_t client_pinned_bytes_ = 0;  // sum of the clients' ConnStats::pinned_bytes (mu_)
  int expire_db_cursor_ = 0;
  // Posted closures hold a weak reference: they do nothing once the server is gone.
  std::shared_ptr<ServerImpl*> alive_ = std::make_shared<ServerImpl*>(this);

  // WATCH: per database, key -> the clients watching it.
  using ClientsByKey = std::unordered_map<std::string, std::vector<ClientState*>, StrHash, std::equal_to<>>;
  std::vector<ClientsByKey> watched_keys_;
  size_t watching_clients_ = 0;
  // Blocking: per database, key -> the clients blocked on it, in arrival order; keys that
  // received data and have waiters (served after the command).
  std::vector<ClientsByKey> blocking_keys_;
  std::vector<std::pair<int, std::string>> ready_keys_;
  size_t blocked_count_ = 0;
  bool serving_ready_ = false;
  const ClientState* serving_client_ = nullptr;  // its blocked command is being tried again
  // CLIENT PAUSE
  int64_t pause_until_ms_ = 0;
  bool pause_writes_only_ = false;
  reactor::TimerId pause_timer_ = 0;
  std::vector<uint64_t> paused_clients_;  // ids held by the pause
  // Pub/sub and MONITOR.
  std::unordered_map<std::string, std::vector<ClientConn*>, StrHash, std::equal_to<>> channels_;
  std::vector<std::pair<std::string, ClientConn*>> patterns_;
  uint64_t lfu_clock_base_ = 0;
  // All clients by id (CLIENT TRACKING's REDIRECT, find_client).
  std::unordered_map<uint64_t, ClientConn*> clients_by_id_;
  // CLIENT TRACKING (tracking.cc).  Default mode: key -> ids of the clients that read it
  // (sorted); ids are not removed when a client stops tracking (as Redis: the next
  // invalidation of the key drops them), the table is bounded by tracking-table-max-keys.
  std::unordered_map<std::string, std::vector<uint64_t>, StrHash, std::equal_to<>> tracking_table_;
  uint64_t tracking_items_ = 0;
  // BCAST: prefix -> its clients and the keys changed since the last broadcast (key -> id
  // of the client that changed it last, 0 = none: NOLOOP).
  struct BcastState {
    std::vector<ClientState*> clients;
    std::map<std::string, uint64_t, std::less<>> keys;
  };
  std::map<std::string, BcastState, std::less<>> prefix_table_;
  std::map<uint64_t, ClientState*> tracking_ids_;  // tracking clients, oldest first
  // The client whose command runs (execute/call) and where its replies go: invalidations
  // for it wait in tracking_pending_ until its command (or EXEC) has replied.
  ClientState* cur_client_ = nullptr;
  ReplyWriter* cur_reply_ = nullptr;
  int call_depth_ = 0;
  ByteBuffer tracking_pending_;
  template <typename F>
  void tracking_deliver(ClientState& to, F&& write);
  template <typename F>
  void tracking_send(ClientState& c, F&& value);

  // Rewrite child watch (worker 0's loop).
  struct PipeWatch : reactor::FdHandler {
    ServerImpl* s = nullptr;
    void on_events(uint32_t) override { s->on_rewrite_done(); }
  } rewrite_watch_;
  int rewrite_fd_ = -1;
  int64_t first_rewrite_retry_ms_ = 0;  // an AOF switched on whose first rewrite failed
  bool rewrite_needed_ = false;  // a write ran out of memory: the cron rewrites the AOF

  // instantaneous_ops_per_sec: samples of (time, commands) every cron tick.
  static constexpr int kOpsSamples = 16;
  uint64_t ops_sample_[kOpsSamples] = {};
  int ops_sample_idx_ = 0;
  uint64_t ops_last_cmds_ = 0;
  uint64_t ops_last_ns_ = 0;
};

inline int64_t CommandContext::now_ms() const { return server.now_ms(); }
inline void CommandContext::notify(uint32_t cls, std::string_view event, std::string_view key) {
  server.notify(cls, event, key, db->index());
}
inline void CommandContext::notify(uint32_t cls, std::string_view event, std::string_view key, int db_index) {
  server.notify(cls, event, key, db_index);
}

inline int64_t wall_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Shared helpers for command implementations.
inline constexpr std::string_view kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kSyntaxError = "ERR syntax error";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kMustBePositive = "ERR value is out of range, must be positive";

Entry* lookup_read(CommandContext& ctx, std::string_view key);
// As lookup_read (stats, keymiss) without making the key recently used: TTL, TYPE, EXISTS
// (Redis' LOOKUP_NOTOUCH).
Entry* lookup_read_notouch(CommandContext& ctx, std::string_view key);
Entry* lookup_write(CommandContext& ctx, std::string_view key);
// Replies WRONGTYPE and returns false when e is not of type t.
bool check_type(CommandContext& ctx, const Entry* e, Type t);
// The first existing key among `keys` (for writing) into *out and its index into *which;
// *out = nullptr when none exists.  False (WRONGTYPE replied) when that key is not of type t.
bool first_of_type(CommandContext& ctx, std::span<const std::string_view> keys, Type t, Entry** out, size_t* which);
bool get_ll(CommandContext& ctx, std::string_view s, int64_t* out, std::string_view err = kNotInteger);
bool get_double(CommandContext& ctx, std::string_view s, double* out, std::string_view err = kNotFloat);
// A count/index that must be >= 0 ("value is out of range, must be positive").
bool get_positive(CommandContext& ctx, std::string_view s, int64_t* out);
// Redis' timeout argument of blocking commands (seconds, may be fractional): the absolute
// deadline in ms (0 = forever), or false after replying the error.
bool get_timeout(CommandContext& ctx, std::string_view s, int64_t* deadline_ms);
// [B]LMPOP / [B]ZMPOP: `[timeout] numkeys key... <end> [COUNT n]` with numkeys at
// argv[first] and <end> one of end0 / end1 (LEFT RIGHT, MIN MAX).  False after replying
// the error, as Redis words it.
struct MpopArgs {
  int64_t deadline_ms = 0;  // blocking forms
  std::span<const std::string_view> keys;
  bool end0 = true;         // LEFT / MIN
  int64_t count = 1;
};
bool parse_mpop(CommandContext& ctx, size_t first, bool blocking, std::string_view end0, std::string_view end1,
                MpopArgs* out);
// Key positions of a command with numkeys at argv[At] and the keys after it.
template <size_t At>
void numkeys_keys(std::span<const std::string_view> argv, std::vector<size_t>* out) {
  int64_t n;
  if (argv.size() <= At || !string2ll(argv[At], &n) || n <= 0) return;
  for (size_t i = 0; i < static_cast<size_t>(n) && At + 1 + i < argv.size(); ++i) out->push_back(At + 1 + i);
}
std::string wrong_args(std::string_view cmd);
// A client of this host: shm, or a loopback address (protected-mode, protected configs).
bool is_loopback(const std::string& scheme, const std::string& peer);
std::string unknown_subcommand(std::string_view sub, std::string_view cmd);
// A new entry under key (which must be absent): Redis' dbAdd, with its "new" event.
Entry* add_key(CommandContext& ctx, std::string_view key);
// A new entry of type t under key (which must be absent).  `is_new` false: it replaces a
// key the command just deleted (Redis' setKey overwrite): no "new" event.
Entry* create_typed(CommandContext& ctx, std::string_view key, Type t, bool is_new = true);
// The entry for writing, or a new one of type t; null (after replying WRONGTYPE) when the
// key holds another type.
Entry* get_or_create(CommandContext& ctx, std::string_view key, Type t);
// Redis' index normalisation for LRANGE/ZRANGE: false when the range is empty.
bool normalize_range(int64_t* start, int64_t* end, int64_t len);
// Replies a HELP array: "<CMD> <subcommand> [<arg> ...]. Subcommands are:", lines, "HELP".
void reply_help(CommandContext& ctx, std::string_view cmd, std::initializer_list<const char*> lines);
// config.cc: CONFIG SET of several options at once, all or nothing, with Redis' errors;
// CONFIG GET by glob pattern.
std::string config_set_all(ServerOptions* o, std::span<const std::pair<std::string_view, std::string_view>> pairs,
                           bool local_client = false);
std::vector<std::pair<std::string, std::string>> config_get_matching(const ServerOptions& o, std::string_view pattern);
// Deletes the key (a write: the caller counts dirty).
void delete_entry(CommandContext& ctx, Entry* e);
// A copy of a value (COPY, SUNIONSTORE ...): a new entry's value from e's.
void copy_value(const Entry* from, Entry* to);
// Moves the value (and expiry) of `from` (db a) into a new entry `key` of db b.
Entry* move_entry(Database& a, Entry* from, Database& b, std::string_view key);

}  // namespace conduit::kv
