// conduit-kv: a Redis-protocol key-value server over any Conduit transport.
//
//   auto loop = reactor::EventLoop::create().value();
//   kv::ServerOptions o;                 // redis-server's defaults: 127.0.0.1:6379, ...
//   o.port = 0;                          // any free port (listen_urls() tells which)
//   auto server = kv::Server::create(*loop, o).value();
//   loop->run();                         // until SHUTDOWN, or loop->stop()
//
// Listeners are opened through the transport URL front door (tcp://, shm://, rdma://), so
// every transport runs the same server code.  Commands run one at a time on the loop
// thread.  With io_threads = N > 1 the server starts N-1 more loops on its own threads and
// opens N tcp listeners on the same port (SO_REUSEPORT), one per loop, so the kernel
// spreads TCP connections over the N loops; shm and rdma listeners stay on the caller's
// loop.  Reads, parsing of partial input and reply writes run in parallel on the loops;
// commands run under one server-wide lock, a whole batch (one read's worth of pipelined
// commands) at a time, so every command stays atomic.
//
// Threading: create(), the destructor and every method run on the caller's loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/kv/append_fsync.h"
#include "conduit/kv/resp.h"
#include "conduit/reactor/event_loop.h"

namespace conduit::kv {

// Redis' memory values: "100", "1k" (1000), "1kb" (1024), "1m", "1mb", "1g", "1gb".
bool parse_memory_value(std::string_view s, uint64_t* out);

struct ServerOptions;

// The options by their redis.conf names, as CONFIG GET/SET and conduit-kv's command line
// see them.  One table (src/kv/config.cc) parses and validates for both, so they accept
// exactly the same values.  Any thread; no allocation beyond the strings returned.
struct ServerOptionInfo {
  std::string_view name;  // "maxclients"
  bool runtime;           // CONFIG SET may change it while the server runs
  std::string_view doc;   // one line for --help
};
std::span<const ServerOptionInfo> server_option_list();
// Redis 7.0 options conduit-kv accepts and reports without acting on them (encoding knobs,
// replication, RDB, TLS ...), each with its default and why: docs and --help list them.
struct RedisCompatOption {
  std::string_view name;
  std::string_view default_value;
  std::string_view why;
};
std::span<const RedisCompatOption> redis_compat_options();
// docs/KV.md's settings section, generated from the same tables (`conduit-kv
// --help-config-markdown` prints it; kv_config_docs_test fails when the file differs):
// every setting, its default, whether and why CONFIG SET may not change it at run time,
// and the Redis settings accepted without effect, by name with the reason.
std::string config_reference_markdown();
// Reads a redis.conf-style text (directive args..., # comments, quoting as redis.conf) into
// *o through the same table.  Returns "" or the fatal error (Redis' wording, with the line);
// settings that switch on what conduit-kv lacks (save 900 1) are left off with a warning
// in *warnings.
std::string load_config_text(ServerOptions* o, std::string_view text, std::vector<std::string>* warnings);
// Sets option `name` of *o from text (also options CONFIG SET may not change: this is
// for before Server::create).  Returns "" or why the value was refused (*o unchanged).
std::string set_server_option(ServerOptions* o, std::string_view name, std::string_view value);
// The value as CONFIG GET prints it; nullopt for an unknown name.
std::optional<std::string> get_server_option(const ServerOptions& o, std::string_view name);

// Every option has redis-server's name (CONFIG GET/SET use it) and default.
// maxmemory-policy: what goes when used memory passes maxmemory (Redis' names and sampled
// approximations: maxmemory-samples keys are looked at per eviction).
enum class MaxmemoryPolicy : uint8_t {
  kNoEviction, kAllKeysLru, kVolatileLru, kAllKeysLfu, kVolatileLfu, kAllKeysRandom, kVolatileRandom, kVolatileTtl,
};

// notify-keyspace-events: which keyspace events are published over pub/sub, as Redis 7.0's
// NOTIFY_* bits (the letter of each is its class in the option's text).  K and E choose the
// channels (__keyspace@<db>__:<key> with the event as message, __keyevent@<db>__:<event>
// with the key as message); the others choose the events.  docs/KV.md lists every event.
enum KeyspaceEvents : uint32_t {
  kNotifyKeyspace = 1u << 0,  // K
  kNotifyKeyevent = 1u << 1,  // E
  kNotifyGeneric = 1u << 2,   // g: del expire rename_from rename_to move_from copy_to persist ...
  kNotifyString = 1u << 3,    // $: set setrange incrby incrbyfloat append setbit
  kNotifyList = 1u << 4,      // l: lpush rpush lpop rpop linsert lset ltrim lrem
  kNotifySet = 1u << 5,       // s: sadd srem spop sinterstore sunionstore sdiffstore
  kNotifyHash = 1u << 6,      // h: hset hdel hincrby hincrbyfloat
  kNotifyZset = 1u << 7,      // z: zadd zincr zrem zrembyscore ... zunionstore zrangestore
  kNotifyExpired = 1u << 8,   // x: expired (lazy and active expiry)
  kNotifyEvicted = 1u << 9,   // e: evicted (maxmemory-policy)
  kNotifyStream = 1u << 10,   // t: xadd xdel
  kNotifyKeyMiss = 1u << 11,  // m: keymiss (a read of a missing key; not in A)
  kNotifyModule = 1u << 13,   // d: module events (conduit-kv has no modules: none)
  kNotifyNew = 1u << 14,      // n: new (a key created; not in A)
  // A: every class but K, E, m and n.
  kNotifyAll = kNotifyGeneric | kNotifyString | kNotifyList | kNotifySet | kNotifyHash | kNotifyZset |
               kNotifyExpired | kNotifyEvicted | kNotifyStream | kNotifyModule,
};
// Redis' keyspaceEventsStringToFlags / FlagsToString: false for a letter outside
// "Ag$lshzxeKEtmdn"; the text CONFIG GET prints ("AKE" for "KEA").
bool parse_keyspace_events(std::string_view text, uint32_t* flags);
std::string keyspace_events_text(uint32_t flags);

// Every option has redis-server's name (CONFIG GET/SET use it) and default.
struct ServerOptions {
  std::string bind = "127.0.0.1";    // bind: the address(es) of the tcp listener (space-separated)
  uint16_t port = 6379;              // port: tcp listener; 0 = pick a free port
  bool tcp = true;                   // false: no tcp listener from bind/port at all
  // More listeners, as transport URLs (shm://name, rdma://host:port, tcp://[::1]:6380 ...):
  // a new transport needs no change here.  conduit-kv's --shm-name and --rdma-port add to it.
  std::vector<std::string> listen;

  std::string requirepass;           // requirepass: the default ACL user's password, "" = nopass
  uint64_t acllog_max_len = 128;     // acllog-max-len: ACL LOG entries kept
  bool acl_pubsub_allchannels = false;  // acl-pubsub-default: allchannels (true) / resetchannels
  // aclfile: users loaded at start and by ACL LOAD, written by ACL SAVE ("" = none; a
  // relative path is taken inside `dir`).  Excludes `user` lines in the config file.
  std::string aclfile;
  std::vector<std::string> users;    // the config file's `user <name> <rules...>` lines (name + rules)
  bool protected_mode = true;        // protected-mode: no password => loopback clients only
  uint32_t maxclients = 10000;       // maxclients
  uint64_t maxmemory = 0;            // maxmemory in bytes, 0 = no limit
  MaxmemoryPolicy maxmemory_policy = MaxmemoryPolicy::kNoEviction;  // maxmemory-policy
  uint32_t maxmemory_samples = 5;    // maxmemory-samples: keys sampled per eviction
  uint32_t lfu_log_factor = 10;      // lfu-log-factor
  uint32_t lfu_decay_time = 1;       // lfu-decay-time (minutes)
  uint32_t databases = 16;           // databases
  uint32_t timeout = 0;              // timeout: close clients idle this many seconds (0 = never)
  uint32_t hz = 10;                  // hz: cron frequency (active expiry, client checks)
  uint64_t latency_monitor_threshold_ms = 0;  // latency-monitor-threshold (0 = off)
  bool latency_tracking = true;      // latency-tracking: per-command LATENCY HISTOGRAM
  uint32_t notify_keyspace_events = 0;  // notify-keyspace-events: KeyspaceEvents bits (0 = off)
  // tracking-table-max-keys: keys remembered for CLIENT TRACKING's default mode; past it
  // keys are forgotten with an invalidation (0 = no limit, as in Redis).
  uint64_t tracking_table_max_keys = 1000000;

  bool appendonly = false;           // appendonly
  AppendFsync appendfsync = AppendFsync::kEverysec;  // appendfsync
  std::string dir = ".";             // dir: where the append-only file lives
  std::string appendfilename = "appendonly.aof";     // appendfilename
  bool aof_load_truncated = true;    // aof-load-truncated: drop a torn last record on load
  // auto-aof-rewrite-percentage / -min-size: rewrite when the file grew this much.
  uint32_t auto_aof_rewrite_percentage = 100;
  uint64_t auto_aof_rewrite_min_size = 64ull << 20;

  ProtocolLimits limits;             // proto-max-bulk-len, client-query-buffer-limit, ...
  // client-output-buffer-limit (normal class): a client whose unsent replies exceed
  // `hard` bytes is disconnected at once (checked while a reply is built); one above `soft`
  // bytes for `soft_seconds` too.  The first 16 KiB are not counted (as in Redis).  Redis'
  // default is no limit (0 0 0); ours is 256 MB so that one command (an MGET of 18k names
  // of a 1 MiB value) cannot take the server's memory: see docs/KV.md.
  uint64_t output_hard_limit = 256ull << 20;
  uint64_t output_soft_limit = 64ull << 20;
  uint32_t output_soft_seconds = 60;
  // The pubsub class (Redis' default 32mb 8mb 60): a subscriber that does not read its
  // messages is disconnected, it never grows the server without limit.
  uint64_t pubsub_hard_limit = 32ull << 20;
  uint64_t pubsub_soft_limit = 8ull << 20;
  uint32_t pubsub_soft_seconds = 60;
  // The replica class: accepted and shown (conduit-kv has no replicas).
  std::string replica_output_limit = "256mb 64mb 60";
  // Stop running a client's pipelined commands while this many reply bytes are unsent
  // (resume when they drain): a client that does not read cannot grow memory unboundedly.
  uint64_t output_pause_bytes = 1ull << 20;
  uint32_t io_threads = 1;           // io-threads: reactor threads serving connections (1..128)
  uint32_t io_busy_poll_us = 0;      // busy polling of the extra io-thread loops (LoopOptions)
  std::string logfile;               // logfile: "" = stdout (Redis' log lines, see docs/KV.md)
  std::string loglevel = "notice";   // loglevel: debug | verbose | notice | warning
  bool always_show_logo = false;     // always-show-logo: a banner with the pid at start
  std::string config_file;           // the redis.conf-style file read at start ("" = none)
  // Redis options conduit-kv accepts and reports without acting on them (encodings,
  // replication, RDB, ... : src/kv/config.cc lists each with its reason): name -> value.
  std::map<std::string, std::string> redis_compat;
};

struct ServerStats {
  uint64_t connections_received = 0;
  uint64_t connected_clients = 0;
  uint64_t rejected_connections = 0;
  uint64_t commands_processed = 0;
  uint64_t expired_keys = 0;
  uint64_t keyspace_hits = 0, keyspace_misses = 0;
  uint64_t net_input_bytes = 0, net_output_bytes = 0;
};

class ServerImpl;

class Server {
 public:
  // Loads the append-only file (when appendonly) and opens the listeners.  Fails, with a
  // message naming the offset, on a corrupt append-only file.
  static Result<std::unique_ptr<Server>> create(reactor::EventLoop& loop, const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // URLs a client can connect to, one per listener ("tcp://127.0.0.1:6379", ...).
  std::vector<std::string> listen_urls() const;
  // Called (on the loop thread) when a client sends SHUTDOWN; by default stops the loop.
  void set_shutdown_handler(std::function<void()> fn);
  // Flushes and fsyncs the append-only file, closes listeners and clients.  Idempotent.
  void shutdown();
  ServerStats stats() const;
  // The INFO text, as a client would get it ("" sections = default set).
  std::string info(const std::string& section = "") const;

 private:
  explicit Server(std::unique_ptr<ServerImpl> impl);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace conduit::kv
