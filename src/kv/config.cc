// conduit-kv's settings: one row per setting with its redis.conf name, whether CONFIG SET
// may change it while the server runs, a line of documentation, how to print it and how
// to parse and validate it.  CONFIG GET/SET and conduit-kv's command line both go
// through this table, so they accept exactly the same values (--hz 0 was accepted on the
// command line and refused by CONFIG SET).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include "conduit/kv/server.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

// Redis' memtoull: "100", "1k" (1000), "1kb" (1024), "1m", "1mb", "1g", "1gb".
bool parse_memory_value(std::string_view s, uint64_t* out) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0) return false;
  int64_t v;
  if (!string2ll(s.substr(0, i), &v) || v < 0) return false;
  const std::string_view unit = s.substr(i);
  uint64_t mul = 1;
  if (unit.empty() || eq_nocase(unit, "b")) mul = 1;
  else if (eq_nocase(unit, "k")) mul = 1000;
  else if (eq_nocase(unit, "kb")) mul = 1024;
  else if (eq_nocase(unit, "m")) mul = 1000 * 1000;
  else if (eq_nocase(unit, "mb")) mul = 1024 * 1024;
  else if (eq_nocase(unit, "g")) mul = 1000ull * 1000 * 1000;
  else if (eq_nocase(unit, "gb")) mul = 1024ull * 1024 * 1024;
  else return false;
  if (static_cast<uint64_t>(v) > UINT64_MAX / mul) return false;
  *out = static_cast<uint64_t>(v) * mul;
  return true;
}

namespace {

std::string yesno(bool b) { return b ? "yes" : "no"; }

std::string set_yesno(bool* dst, std::string_view v) {
  if (eq_nocase(v, "yes")) *dst = true;
  else if (eq_nocase(v, "no")) *dst = false;
  else return "argument must be 'yes' or 'no'";
  return "";
}

template <typename T>
std::string set_int(T* dst, std::string_view v, int64_t min, int64_t max) {
  int64_t n;
  if (!string2ll(v, &n)) return "argument couldn't be parsed into an integer";
  if (n < min || n > max)
    return "argument must be between " + std::to_string(min) + " and " + std::to_string(max) + " inclusive";
  *dst = static_cast<T>(n);
  return "";
}

std::string set_mem(uint64_t* dst, std::string_view v, uint64_t min = 0, const char* min_text = nullptr) {
  uint64_t n;
  if (!parse_memory_value(v, &n)) return "argument must be a memory value";
  if (n < min) return std::string("argument must be a memory value of at least ") + min_text;
  *dst = n;
  return "";
}

// client-output-buffer-limit: "<class> <hard> <soft> <seconds>" groups (normal, pubsub,
// replica/slave), all validated before any is applied.
std::string set_output_limit(ServerOptions& o, std::string_view v) {
  const std::vector<std::string> w = split_words(v, " ");
  if (w.empty() || w.size() % 4 != 0) return "Wrong number of arguments in buffer limit configuration.";
  ServerOptions c = o;
  for (size_t i = 0; i < w.size(); i += 4) {
    uint64_t hard, soft;
    int64_t secs;
    if (!parse_memory_value(w[i + 1], &hard) || !parse_memory_value(w[i + 2], &soft) || !string2ll(w[i + 3], &secs) ||
        secs < 0 || secs > INT32_MAX)
      return "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
    if (eq_nocase(w[i], "normal")) {
      c.output_hard_limit = hard, c.output_soft_limit = soft, c.output_soft_seconds = static_cast<uint32_t>(secs);
    } else if (eq_nocase(w[i], "pubsub")) {
      c.pubsub_hard_limit = hard, c.pubsub_soft_limit = soft, c.pubsub_soft_seconds = static_cast<uint32_t>(secs);
    } else if (eq_nocase(w[i], "replica") || eq_nocase(w[i], "slave")) {
      c.replica_output_limit = w[i + 1] + " " + w[i + 2] + " " + w[i + 3];
    } else {
      return "Invalid client class specified in buffer limit configuration.";
    }
  }
  o = std::move(c);
  return "";
}

std::string get_output_limit(const ServerOptions& o) {
  uint64_t rh = 268435456, rs = 67108864;
  int64_t rt = 60;
  const auto r = split_words(o.replica_output_limit, " ");
  if (r.size() == 3) (void)(parse_memory_value(r[0], &rh) && parse_memory_value(r[1], &rs) && string2ll(r[2], &rt));
  return "normal " + std::to_string(o.output_hard_limit) + " " + std::to_string(o.output_soft_limit) + " " +
         std::to_string(o.output_soft_seconds) + " slave " + std::to_string(rh) + " " + std::to_string(rs) + " " +
         std::to_string(rt) + " pubsub " + std::to_string(o.pubsub_hard_limit) + " " +
         std::to_string(o.pubsub_soft_limit) + " " + std::to_string(o.pubsub_soft_seconds);
}

constexpr const char* kPolicyNames[] = {"noeviction",  "allkeys-lru",    "volatile-lru",    "allkeys-lfu",
                                        "volatile-lfu", "allkeys-random", "volatile-random", "volatile-ttl"};

// Whether CONFIG SET may change a setting while the server runs.
enum class Runtime : uint8_t {
  kYes,        // changes at once
  kImmutable,  // as in Redis: only at start (CONFIG SET answers "can't set immutable config")
  kSameValue,  // Redis changes it at run time, conduit-kv cannot yet: CONFIG SET accepts the
               // current value (so tools that write back CONFIG GET's values work) and
               // refuses a change with a clear error (docs/KV.md's generated "Settings" lists these)
  kProtected,  // as Redis' PROTECTED_CONFIG: CONFIG SET only when enable-protected-configs is
               // yes (or local, from a loopback client), else "can't set protected config"
};

struct ConfigRow {
  const char* name;
  Runtime runtime;
  const char* doc;
  std::string (*get)(const ServerOptions&);
  std::string (*set)(ServerOptions&, std::string_view);  // "" or why the value is refused
  const char* runtime_why = nullptr;  // kSameValue: why conduit-kv cannot change it yet (docs)
};

using O = ServerOptions;
using V = std::string_view;

// Ranges: Redis' where it has one; hz and maxclients refuse 0 (Redis clamps hz to 1..500
// silently; a clear error is better than a value that is not used).
const ConfigRow kRows[] = {
    {"bind", Runtime::kSameValue, "addresses of the tcp listener (space-separated; also rdma with --rdma-port)",
     [](const O& o) { return o.bind; }, [](O& o, V v) { return o.bind = std::string(v), std::string(); },
     "the listeners are opened once per io thread at start; replacing them needs a hand-over between workers "
     "(see \"Runtime CONFIG SET port\" above)"},
    {"port", Runtime::kSameValue, "TCP port (0 = any free port)", [](const O& o) { return std::to_string(o.port); },
     [](O& o, V v) { return set_int(&o.port, v, 0, 65535); }, "as bind"},
    {"aclfile", Runtime::kImmutable, "ACL users file (ACL LOAD / ACL SAVE); relative paths are inside dir",
     [](const O& o) { return o.aclfile; }, [](O& o, V v) { return o.aclfile = std::string(v), std::string(); }},
    {"acllog-max-len", Runtime::kYes, "entries ACL LOG keeps (the oldest go first)",
     [](const O& o) { return std::to_string(o.acllog_max_len); },
     [](O& o, V v) { return set_int(&o.acllog_max_len, v, 0, LONG_MAX); }},
    {"acl-pubsub-default", Runtime::kYes, "allchannels | resetchannels: the channels of a new (or reset) ACL user",
     [](const O& o) { return std::string(o.acl_pubsub_allchannels ? "allchannels" : "resetchannels"); },
     [](O& o, V v) {
       if (eq_nocase(v, "allchannels")) return o.acl_pubsub_allchannels = true, std::string();
       if (eq_nocase(v, "resetchannels")) return o.acl_pubsub_allchannels = false, std::string();
       return std::string("argument(s) must be one of the following: allchannels, resetchannels");
     }},
    {"requirepass", Runtime::kYes, "the default ACL user's password (\"\" = nopass); clients must AUTH with it",
     [](const O& o) { return o.requirepass; }, [](O& o, V v) { return o.requirepass = std::string(v), std::string(); }},
    {"protected-mode", Runtime::kYes, "yes: without a password only loopback (and shm) clients",
     [](const O& o) { return yesno(o.protected_mode); }, [](O& o, V v) { return set_yesno(&o.protected_mode, v); }},
    {"maxclients", Runtime::kYes, "maximum simultaneous clients (1 .. 1000000)",
     [](const O& o) { return std::to_string(o.maxclients); },
     [](O& o, V v) { return set_int(&o.maxclients, v, 1, 1000000); }},
    {"maxmemory", Runtime::kYes, "memory limit (bytes, or 100mb, 1gb ...; 0 = none): maxmemory-policy applies above it",
     [](const O& o) { return std::to_string(o.maxmemory); }, [](O& o, V v) { return set_mem(&o.maxmemory, v); }},
    {"maxmemory-policy", Runtime::kYes,
     "noeviction | allkeys-lru | volatile-lru | allkeys-lfu | volatile-lfu | allkeys-random | volatile-random | volatile-ttl",
     [](const O& o) { return std::string(kPolicyNames[static_cast<size_t>(o.maxmemory_policy)]); },
     [](O& o, V v) {
       for (size_t i = 0; i < std::size(kPolicyNames); ++i)
         if (eq_nocase(v, kPolicyNames[i])) {
           o.maxmemory_policy = static_cast<MaxmemoryPolicy>(i);
           return std::string();
         }
       return std::string("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, "
                          "volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction");
     }},
    {"maxmemory-samples", Runtime::kYes, "keys sampled per eviction (1 .. 64)",
     [](const O& o) { return std::to_string(o.maxmemory_samples); },
     [](O& o, V v) { return set_int(&o.maxmemory_samples, v, 1, 64); }},
    {"lfu-log-factor", Runtime::kYes, "LFU counter logarithm factor", [](const O& o) { return std::to_string(o.lfu_log_factor); },
     [](O& o, V v) { return set_int(&o.lfu_log_factor, v, 0, INT32_MAX); }},
    {"lfu-decay-time", Runtime::kYes, "minutes per LFU counter decay step", [](const O& o) { return std::to_string(o.lfu_decay_time); },
     [](O& o, V v) { return set_int(&o.lfu_decay_time, v, 0, INT32_MAX); }},
    // A database is a small object, but a million of them is not.
    {"databases", Runtime::kImmutable, "number of databases (1 .. 100000)",
     [](const O& o) { return std::to_string(o.databases); },
     [](O& o, V v) { return set_int(&o.databases, v, 1, 100000); }},
    {"timeout", Runtime::kYes, "close clients idle this many seconds (0 = never)",
     [](const O& o) { return std::to_string(o.timeout); }, [](O& o, V v) { return set_int(&o.timeout, v, 0, INT32_MAX); }},
    {"hz", Runtime::kYes, "background tasks per second: expiry, client checks (1 .. 500)",
     [](const O& o) { return std::to_string(o.hz); }, [](O& o, V v) { return set_int(&o.hz, v, 1, 500); }},
    {"latency-monitor-threshold", Runtime::kYes, "record commands slower than this many ms for LATENCY (0 = off)",
     [](const O& o) { return std::to_string(o.latency_monitor_threshold_ms); },
     [](O& o, V v) { return set_int(&o.latency_monitor_threshold_ms, v, 0, INT64_MAX); }},
    {"tracking-table-max-keys", Runtime::kYes,
     "keys remembered for CLIENT TRACKING (default mode); past it keys are forgotten with an invalidation (0 = no limit)",
     [](const O& o) { return std::to_string(o.tracking_table_max_keys); },
     [](O& o, V v) { return set_int(&o.tracking_table_max_keys, v, 0, INT64_MAX); }},
    {"latency-tracking", Runtime::kYes,
     "yes: per-command latency histograms for LATENCY HISTOGRAM (INFO latencystats' percentiles are not computed)",
     [](const O& o) { return yesno(o.latency_tracking); }, [](O& o, V v) { return set_yesno(&o.latency_tracking, v); }},
    {"notify-keyspace-events", Runtime::kYes,
     "keyspace events published over pub/sub, Redis' class letters: K E g $ l s h z x e t m d n A (\"\" = none)",
     [](const O& o) { return keyspace_events_text(o.notify_keyspace_events); },
     [](O& o, V v) {
       return parse_keyspace_events(v, &o.notify_keyspace_events)
                  ? std::string()
                  : std::string("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.");
     }},
    {"appendonly", Runtime::kYes,
     "yes: log every write to the append-only file; switched on at run time it starts with a rewrite of the "
     "dataset (an older file at its path is replaced)",
     [](const O& o) { return yesno(o.appendonly); }, [](O& o, V v) { return set_yesno(&o.appendonly, v); }},
    {"appendfsync", Runtime::kYes, "always | everysec | no",
     [](const O& o) { return std::string(appendfsync_name(o.appendfsync)); },
     [](O& o, V v) {
       return parse_appendfsync(v, &o.appendfsync) ? std::string()
                                                   : std::string("argument(s) must be one of the following: always, everysec, no");
     }},
    {"dir", Runtime::kProtected,
     "directory of the append-only file (CONFIG SET: an existing directory, only while appendonly is no)", [](const O& o) { return o.dir; },
     [](O& o, V v) { return v.empty() ? std::string("dir can't be empty") : (o.dir = std::string(v), std::string()); }},
    {"appendfilename", Runtime::kImmutable, "append-only file name (a name, not a path)",
     [](const O& o) { return o.appendfilename; },
     [](O& o, V v) {
       if (v.empty() || v.find('/') != V::npos || v == "." || v == "..")
         return std::string("appendfilename can't be a path, just a filename");
       o.appendfilename = std::string(v);
       return std::string();
     }},
    {"aof-load-truncated", Runtime::kYes, "yes: drop a torn last record (a crash mid-write) when loading",
     [](const O& o) { return yesno(o.aof_load_truncated); }, [](O& o, V v) { return set_yesno(&o.aof_load_truncated, v); }},
    {"auto-aof-rewrite-percentage", Runtime::kYes, "rewrite when the file grew by this % (0 = never)",
     [](const O& o) { return std::to_string(o.auto_aof_rewrite_percentage); },
     [](O& o, V v) { return set_int(&o.auto_aof_rewrite_percentage, v, 0, INT32_MAX); }},
    {"auto-aof-rewrite-min-size", Runtime::kYes, "no automatic rewrite below this size",
     [](const O& o) { return std::to_string(o.auto_aof_rewrite_min_size); },
     [](O& o, V v) { return set_mem(&o.auto_aof_rewrite_min_size, v); }},
    {"proto-max-bulk-len", Runtime::kYes, "largest argument a client may send (at least 1mb)",
     [](const O& o) { return std::to_string(o.limits.max_bulk_len); },
     [](O& o, V v) { return set_mem(&o.limits.max_bulk_len, v, 1 << 20, "1mb"); }},
    {"client-query-buffer-limit", Runtime::kYes, "largest unparsed input per client (at least 1mb)",
     [](const O& o) { return std::to_string(o.limits.max_query_buffer); },
     [](O& o, V v) { return set_mem(&o.limits.max_query_buffer, v, 1 << 20, "1mb"); }},
    {"client-output-buffer-limit", Runtime::kYes,
     "\"<class> <hard> <soft> <soft-seconds>\" per class (normal, pubsub, replica): close a client whose unsent "
     "output passes hard (0 = none), or stays above soft for soft-seconds; the first 16 KiB are not counted",
     get_output_limit, [](O& o, V v) { return set_output_limit(o, v); }},
    {"client-output-pause-bytes", Runtime::kYes, "stop running a client's commands while this much output is unsent (at least 1kb)",
     [](const O& o) { return std::to_string(o.output_pause_bytes); },
     [](O& o, V v) { return set_mem(&o.output_pause_bytes, v, 1024, "1kb"); }},
    {"io-threads", Runtime::kImmutable,
     "reactor threads serving connections (1 .. 128); tcp connections are spread over them (SO_REUSEPORT), "
     "shm and rdma stay on the first; commands still run one at a time",
     [](const O& o) { return std::to_string(o.io_threads); }, [](O& o, V v) { return set_int(&o.io_threads, v, 1, 128); }},
    {"save", Runtime::kYes, "accepted for compatibility; only \"\" (no RDB snapshots, use appendonly)",
     [](const O&) { return std::string(); },
     [](O&, V v) { return v.empty() ? std::string() : std::string("RDB snapshots are not supported (use appendonly)"); }},
    {"logfile", Runtime::kImmutable, "where Redis-style log lines go (\"\" = stdout)", [](const O& o) { return o.logfile; },
     [](O& o, V v) { return o.logfile = std::string(v), std::string(); }},
    {"loglevel", Runtime::kYes, "debug | verbose | notice | warning", [](const O& o) { return o.loglevel; },
     [](O& o, V v) {
       for (const char* l : {"debug", "verbose", "notice", "warning", "nothing"})
         if (eq_nocase(v, l)) return o.loglevel = l, std::string();
       return std::string("argument(s) must be one of the following: debug, verbose, notice, warning, nothing");
     }},
    {"always-show-logo", Runtime::kImmutable, "yes: print a start banner with the pid (redis.conf compatibility)",
     [](const O& o) { return yesno(o.always_show_logo); }, [](O& o, V v) { return set_yesno(&o.always_show_logo, v); }},
    {"daemonize", Runtime::kImmutable, "only no: run it under a supervisor", [](const O&) { return std::string("no"); },
     [](O&, V v) { return eq_nocase(v, "no") ? std::string() : std::string("daemonize yes is not supported; run it under a supervisor"); }},
    // No replication: "" (or "no one") is the only value, the one a master has.
    {"replicaof", Runtime::kYes, "only \"\" or \"no one\": conduit-kv has no replication", [](const O&) { return std::string(); },
     [](O&, V v) { return v.empty() || eq_nocase(v, "no one") ? std::string() : std::string("conduit-kv has no replication"); }},
    {"slaveof", Runtime::kYes, "alias of replicaof", [](const O&) { return std::string(); },
     [](O&, V v) { return v.empty() || eq_nocase(v, "no one") ? std::string() : std::string("conduit-kv has no replication"); }},
};

// Redis 7.0 settings conduit-kv accepts, stores and reports (CONFIG GET) without acting on
// them, each with why (docs/KV.md's generated "Settings" lists them).  kFeature rows switch on something
// conduit-kv does not have: only their default (off) is accepted.
// kMemoryPercent: a memory value or Redis' "N%" (N <= 100, a share of maxmemory).
enum class CompatKind : uint8_t { kBool, kInt, kMemory, kMemoryPercent, kEnum, kString };
enum class Why : uint8_t {
  kEncoding,     // memory layout / allocator knobs: conduit-kv's structures are its own (no effect)
  kReplication,  // no replication
  kCluster,      // no cluster mode
  kTls,          // no TLS listener (use a transport URL)
  kRdb,          // no RDB files; the AOF is a plain command log
  kScripting,    // no script engine, no DEBUG / MODULE commands
  kProcess,      // process and logging settings with no meaning here
  kFeature,      // a feature conduit-kv does not implement: only the default
  kDebug,        // Redis' hidden debugging knobs (delays for its own tests)
};
struct CompatRow {
  const char* name;
  const char* def;
  CompatKind kind;
  bool immutable;  // as in Redis
  Why why;
  // As Redis' HIDDEN_CONFIG: CONFIG GET returns it when asked for by its exact name, never
  // for a pattern (CONFIG GET * does not list it).
  bool hidden = false;
  bool protect = false;  // as Redis' PROTECTED_CONFIG (Runtime::kProtected)
};

const CompatRow kCompat[] = {
    {"active-defrag-cycle-max", "25", CompatKind::kInt, false, Why::kEncoding},
    {"active-defrag-cycle-min", "1", CompatKind::kInt, false, Why::kEncoding},
    {"active-defrag-ignore-bytes", "104857600", CompatKind::kMemory, false, Why::kEncoding},
    {"active-defrag-max-scan-fields", "1000", CompatKind::kInt, false, Why::kEncoding},
    {"active-defrag-threshold-lower", "10", CompatKind::kInt, false, Why::kEncoding},
    {"active-defrag-threshold-upper", "100", CompatKind::kInt, false, Why::kEncoding},
    {"active-expire-effort", "1", CompatKind::kInt, false, Why::kEncoding},
    {"activedefrag", "no", CompatKind::kBool, false, Why::kEncoding},
    {"activerehashing", "yes", CompatKind::kBool, false, Why::kEncoding},
    {"aof-disable-auto-gc", "no", CompatKind::kBool, false, Why::kRdb},
    {"aof-rewrite-incremental-fsync", "yes", CompatKind::kBool, false, Why::kRdb},
    {"aof-timestamp-enabled", "no", CompatKind::kBool, false, Why::kRdb},
    {"aof-use-rdb-preamble", "yes", CompatKind::kBool, false, Why::kRdb},
    {"aof_rewrite_cpulist", "", CompatKind::kString, true, Why::kProcess},
    {"appenddirname", "appendonlydir", CompatKind::kString, true, Why::kRdb},
    {"bgsave_cpulist", "", CompatKind::kString, true, Why::kProcess},
    {"bind-source-addr", "", CompatKind::kString, false, Why::kProcess},
    {"bio_cpulist", "", CompatKind::kString, true, Why::kProcess},
    {"busy-reply-threshold", "5000", CompatKind::kInt, false, Why::kScripting},
    {"cluster-allow-pubsubshard-when-down", "yes", CompatKind::kBool, false, Why::kCluster},
    {"cluster-allow-reads-when-down", "no", CompatKind::kBool, false, Why::kCluster},
    {"cluster-allow-replica-migration", "yes", CompatKind::kBool, false, Why::kCluster},
    {"cluster-announce-bus-port", "0", CompatKind::kInt, false, Why::kCluster},
    {"cluster-announce-hostname", "", CompatKind::kString, false, Why::kCluster},
    {"cluster-announce-ip", "", CompatKind::kString, false, Why::kCluster},
    {"cluster-announce-port", "0", CompatKind::kInt, false, Why::kCluster},
    {"cluster-announce-tls-port", "0", CompatKind::kInt, false, Why::kCluster},
    {"cluster-config-file", "nodes.conf", CompatKind::kString, true, Why::kCluster},
    {"cluster-enabled", "no", CompatKind::kBool, true, Why::kCluster},
    {"cluster-link-sendbuf-limit", "0", CompatKind::kMemory, false, Why::kCluster},
    {"cluster-migration-barrier", "1", CompatKind::kInt, false, Why::kCluster},
    {"cluster-node-timeout", "15000", CompatKind::kInt, false, Why::kCluster},
    {"cluster-port", "0", CompatKind::kInt, true, Why::kCluster},
    {"cluster-preferred-endpoint-type", "ip", CompatKind::kEnum, false, Why::kCluster},
    {"cluster-replica-no-failover", "no", CompatKind::kBool, false, Why::kCluster},
    {"cluster-replica-validity-factor", "10", CompatKind::kInt, false, Why::kCluster},
    {"cluster-require-full-coverage", "yes", CompatKind::kBool, false, Why::kCluster},
    {"cluster-slave-no-failover", "no", CompatKind::kString, false, Why::kCluster},
    {"cluster-slave-validity-factor", "10", CompatKind::kString, false, Why::kCluster},
    {"crash-log-enabled", "yes", CompatKind::kBool, false, Why::kProcess},
    {"crash-memcheck-enabled", "yes", CompatKind::kBool, false, Why::kProcess},
    {"dbfilename", "dump.rdb", CompatKind::kString, false, Why::kRdb, false, true},
    {"disable-thp", "yes", CompatKind::kBool, true, Why::kEncoding},
    {"dynamic-hz", "yes", CompatKind::kBool, false, Why::kEncoding},
    {"enable-debug-command", "no", CompatKind::kEnum, true, Why::kScripting},
    {"enable-module-command", "no", CompatKind::kEnum, true, Why::kScripting},
    {"enable-protected-configs", "no", CompatKind::kEnum, true, Why::kScripting},
    {"hash-max-listpack-entries", "512", CompatKind::kInt, false, Why::kEncoding},
    {"hash-max-listpack-value", "64", CompatKind::kInt, false, Why::kEncoding},
    {"hash-max-ziplist-entries", "512", CompatKind::kString, false, Why::kEncoding},
    {"hash-max-ziplist-value", "64", CompatKind::kString, false, Why::kEncoding},
    {"hll-sparse-max-bytes", "3000", CompatKind::kInt, false, Why::kEncoding},
    {"ignore-warnings", "", CompatKind::kString, false, Why::kProcess},
    {"io-threads-do-reads", "no", CompatKind::kBool, true, Why::kEncoding},
    {"jemalloc-bg-thread", "yes", CompatKind::kBool, false, Why::kEncoding},
    {"key-load-delay", "0", CompatKind::kInt, false, Why::kDebug, true},
    {"latency-tracking-info-percentiles", "50 99 99.9", CompatKind::kString, false, Why::kFeature},
    {"lazyfree-lazy-eviction", "no", CompatKind::kBool, false, Why::kEncoding},
    {"lazyfree-lazy-expire", "no", CompatKind::kBool, false, Why::kEncoding},
    {"lazyfree-lazy-server-del", "no", CompatKind::kBool, false, Why::kEncoding},
    {"lazyfree-lazy-user-del", "no", CompatKind::kBool, false, Why::kEncoding},
    {"lazyfree-lazy-user-flush", "no", CompatKind::kBool, false, Why::kEncoding},
    {"list-compress-depth", "0", CompatKind::kInt, false, Why::kEncoding},
    {"loading-process-events-interval-bytes", "2097152", CompatKind::kInt, false, Why::kDebug, true},
    {"list-max-listpack-size", "-2", CompatKind::kInt, false, Why::kEncoding},
    {"list-max-ziplist-size", "-2", CompatKind::kString, false, Why::kEncoding},
    {"lua-enable-deprecated-api", "no", CompatKind::kBool, true, Why::kDebug, true},
    {"lua-time-limit", "5000", CompatKind::kString, false, Why::kScripting},
    {"masterauth", "", CompatKind::kString, false, Why::kReplication},
    {"masteruser", "", CompatKind::kString, false, Why::kReplication},
    {"maxmemory-clients", "0", CompatKind::kMemoryPercent, false, Why::kFeature},
    {"maxmemory-eviction-tenacity", "10", CompatKind::kInt, false, Why::kEncoding},
    {"min-replicas-max-lag", "10", CompatKind::kInt, false, Why::kReplication},
    {"min-replicas-to-write", "0", CompatKind::kInt, false, Why::kReplication},
    {"min-slaves-max-lag", "10", CompatKind::kString, false, Why::kReplication},
    {"min-slaves-to-write", "0", CompatKind::kString, false, Why::kReplication},
    {"no-appendfsync-on-rewrite", "no", CompatKind::kBool, false, Why::kRdb},
    {"oom-score-adj", "no", CompatKind::kEnum, false, Why::kProcess},
    {"oom-score-adj-values", "0 200 800", CompatKind::kString, false, Why::kProcess},
    {"pidfile", "", CompatKind::kString, true, Why::kProcess},
    {"proc-title-template", "{title} {listen-addr} {server-mode}", CompatKind::kString, false, Why::kProcess},
    {"propagation-error-behavior", "ignore", CompatKind::kEnum, false, Why::kReplication},
    {"rdb-del-sync-files", "no", CompatKind::kBool, false, Why::kRdb},
    {"rdb-key-save-delay", "0", CompatKind::kInt, false, Why::kDebug, true},
    {"rdb-save-incremental-fsync", "yes", CompatKind::kBool, false, Why::kRdb},
    {"rdbchecksum", "yes", CompatKind::kBool, true, Why::kRdb},
    {"rdbcompression", "yes", CompatKind::kBool, false, Why::kRdb},
    {"repl-backlog-size", "1048576", CompatKind::kMemory, false, Why::kReplication},
    {"repl-backlog-ttl", "3600", CompatKind::kInt, false, Why::kReplication},
    {"repl-disable-tcp-nodelay", "no", CompatKind::kBool, false, Why::kReplication},
    {"repl-diskless-load", "disabled", CompatKind::kEnum, false, Why::kReplication},
    {"repl-diskless-sync", "yes", CompatKind::kBool, false, Why::kReplication},
    {"repl-diskless-sync-delay", "5", CompatKind::kInt, false, Why::kReplication},
    {"repl-diskless-sync-max-replicas", "0", CompatKind::kInt, false, Why::kReplication},
    {"repl-ping-replica-period", "10", CompatKind::kInt, false, Why::kReplication},
    {"repl-ping-slave-period", "10", CompatKind::kString, false, Why::kReplication},
    {"repl-timeout", "60", CompatKind::kInt, false, Why::kReplication},
    {"replica-announce-ip", "", CompatKind::kString, false, Why::kReplication},
    {"replica-announce-port", "0", CompatKind::kInt, false, Why::kReplication},
    {"replica-announced", "yes", CompatKind::kBool, false, Why::kReplication},
    {"replica-ignore-disk-write-errors", "no", CompatKind::kBool, false, Why::kReplication},
    {"replica-ignore-maxmemory", "yes", CompatKind::kBool, false, Why::kReplication},
    {"replica-lazy-flush", "no", CompatKind::kBool, false, Why::kReplication},
    {"replica-priority", "100", CompatKind::kInt, false, Why::kReplication},
    {"replica-read-only", "yes", CompatKind::kBool, false, Why::kReplication},
    {"replica-serve-stale-data", "yes", CompatKind::kBool, false, Why::kReplication},
    {"sanitize-dump-payload", "no", CompatKind::kEnum, false, Why::kRdb},
    {"server_cpulist", "", CompatKind::kString, true, Why::kProcess},
    {"set-max-intset-entries", "512", CompatKind::kInt, false, Why::kEncoding},
    {"set-proc-title", "yes", CompatKind::kBool, true, Why::kProcess},
    {"shutdown-on-sigint", "default", CompatKind::kEnum, false, Why::kProcess},
    {"shutdown-on-sigterm", "default", CompatKind::kEnum, false, Why::kProcess},
    {"shutdown-timeout", "10", CompatKind::kInt, false, Why::kProcess},
    {"slave-announce-ip", "", CompatKind::kString, false, Why::kReplication},
    {"slave-announce-port", "0", CompatKind::kString, false, Why::kReplication},
    {"slave-ignore-maxmemory", "yes", CompatKind::kString, false, Why::kReplication},
    {"slave-lazy-flush", "no", CompatKind::kString, false, Why::kReplication},
    {"slave-priority", "100", CompatKind::kString, false, Why::kReplication},
    {"slave-read-only", "yes", CompatKind::kString, false, Why::kReplication},
    {"slave-serve-stale-data", "yes", CompatKind::kString, false, Why::kReplication},
    {"slowlog-log-slower-than", "10000", CompatKind::kInt, false, Why::kFeature},
    {"slowlog-max-len", "128", CompatKind::kInt, false, Why::kFeature},
    {"socket-mark-id", "0", CompatKind::kInt, true, Why::kProcess},
    {"stop-writes-on-bgsave-error", "yes", CompatKind::kBool, false, Why::kRdb},
    {"stream-node-max-bytes", "4096", CompatKind::kInt, false, Why::kEncoding},
    {"stream-node-max-entries", "100", CompatKind::kInt, false, Why::kEncoding},
    {"supervised", "no", CompatKind::kEnum, true, Why::kProcess},
    {"syslog-enabled", "no", CompatKind::kBool, true, Why::kProcess},
    {"syslog-facility", "local0", CompatKind::kEnum, true, Why::kProcess},
    {"syslog-ident", "redis", CompatKind::kString, true, Why::kProcess},
    {"tcp-backlog", "511", CompatKind::kInt, true, Why::kProcess},
    {"tcp-keepalive", "300", CompatKind::kInt, false, Why::kProcess},
    {"tls-auth-clients", "yes", CompatKind::kEnum, false, Why::kTls},
    {"tls-ca-cert-dir", "", CompatKind::kString, false, Why::kTls},
    {"tls-ca-cert-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-cert-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-ciphers", "", CompatKind::kString, false, Why::kTls},
    {"tls-ciphersuites", "", CompatKind::kString, false, Why::kTls},
    {"tls-client-cert-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-client-key-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-client-key-file-pass", "", CompatKind::kString, false, Why::kTls},
    {"tls-cluster", "no", CompatKind::kBool, false, Why::kTls},
    {"tls-dh-params-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-key-file", "", CompatKind::kString, false, Why::kTls},
    {"tls-key-file-pass", "", CompatKind::kString, false, Why::kTls},
    {"tls-port", "0", CompatKind::kInt, false, Why::kTls},
    {"tls-prefer-server-ciphers", "no", CompatKind::kBool, false, Why::kTls},
    {"tls-protocols", "", CompatKind::kString, false, Why::kTls},
    {"tls-replication", "no", CompatKind::kBool, false, Why::kTls},
    {"tls-session-cache-size", "20480", CompatKind::kInt, false, Why::kTls},
    {"tls-session-cache-timeout", "300", CompatKind::kInt, false, Why::kTls},
    {"tls-session-caching", "yes", CompatKind::kBool, false, Why::kTls},
    {"unixsocket", "", CompatKind::kString, true, Why::kProcess},
    {"unixsocketperm", "0", CompatKind::kInt, true, Why::kProcess},
    {"use-exit-on-panic", "no", CompatKind::kBool, false, Why::kDebug, true},
    {"watchdog-period", "0", CompatKind::kInt, false, Why::kDebug, true},
    {"zset-max-listpack-entries", "128", CompatKind::kInt, false, Why::kEncoding},
    {"zset-max-listpack-value", "64", CompatKind::kInt, false, Why::kEncoding},
    {"zset-max-ziplist-entries", "128", CompatKind::kString, false, Why::kEncoding},
    {"zset-max-ziplist-value", "64", CompatKind::kString, false, Why::kEncoding},
};

const char* why_text(Why w) {
  switch (w) {
    case Why::kEncoding: return "accepted without effect: conduit-kv's data layout does not use it";
    case Why::kReplication: return "accepted without effect: conduit-kv has no replication";
    case Why::kCluster: return "accepted without effect: conduit-kv has no cluster mode";
    case Why::kTls: return "accepted without effect: conduit-kv has no TLS listener";
    case Why::kRdb: return "accepted without effect: conduit-kv writes no RDB files";
    case Why::kScripting: return "accepted without effect: conduit-kv has no script engine, DEBUG or MODULE";
    case Why::kProcess: return "accepted without effect";
    case Why::kFeature: return "only the default: conduit-kv does not implement this feature";
    case Why::kDebug: return "accepted without effect: a hidden Redis debugging knob (CONFIG GET by exact name only)";
  }
  return "";
}

const CompatRow* find_compat(std::string_view name) {
  for (const CompatRow& r : kCompat)
    if (eq_nocase(name, r.name)) return &r;
  return nullptr;
}

std::string compat_value(const ServerOptions& o, const CompatRow& r) {
  auto it = o.redis_compat.find(r.name);
  return it != o.redis_compat.end() ? it->second : std::string(r.def);
}

std::string set_compat(ServerOptions& o, const CompatRow& r, std::string_view v) {
  std::string value(v);
  switch (r.kind) {
    case CompatKind::kBool:
      if (!eq_nocase(v, "yes") && !eq_nocase(v, "no")) return "argument must be 'yes' or 'no'";
      value = to_lower(v);
      break;
    case CompatKind::kInt: {
      int64_t n;
      if (!string2ll(v, &n)) return "argument couldn't be parsed into an integer";
      break;
    }
    case CompatKind::kMemory: {
      uint64_t n;
      if (!parse_memory_value(v, &n)) return "argument must be a memory value";
      value = std::to_string(n);
      break;
    }
    case CompatKind::kMemoryPercent: {
      // Redis' numericParseString and its bound check: a memory value first, then "N%";
      // "0%" is stored (and reported) as 0, any other percentage as set.
      uint64_t n;
      int64_t pct;
      if (parse_memory_value(v, &n)) {
        value = std::to_string(n);
      } else if (v.size() > 1 && v.back() == '%' && string2ll(v.substr(0, v.size() - 1), &pct) && pct >= 0) {
        if (pct > 100) return "percentage argument must be less or equal to 100";
        value = pct == 0 ? "0" : std::to_string(pct) + "%";
      } else {
        return "argument must be a memory or percent value";
      }
      break;
    }
    case CompatKind::kEnum:
    case CompatKind::kString: break;
  }
  if (r.why == Why::kFeature && value != r.def)
    return std::string("conduit-kv does not implement what '") + r.name + "' switches on; only its default ('" + r.def +
           "') is accepted";
  o.redis_compat[r.name] = value;
  return "";
}

const ConfigRow* find_row(std::string_view name) {
  for (const ConfigRow& r : kRows)
    if (eq_nocase(name, r.name)) return &r;
  return nullptr;
}

}  // namespace

std::span<const ServerOptionInfo> server_option_list() {
  static const std::vector<ServerOptionInfo> list = [] {
    std::vector<ServerOptionInfo> v;
    for (const ConfigRow& r : kRows) v.push_back({r.name, r.runtime == Runtime::kYes, r.doc});
    return v;
  }();
  return list;
}

std::span<const RedisCompatOption> redis_compat_options() {
  static const std::vector<RedisCompatOption> list = [] {
    std::vector<RedisCompatOption> v;
    for (const CompatRow& r : kCompat) v.push_back({r.name, r.def, why_text(r.why)});
    return v;
  }();
  return list;
}

std::string set_server_option(ServerOptions* o, std::string_view name, std::string_view value) {
  ServerOptions copy = *o;
  std::string err;
  if (const ConfigRow* r = find_row(name)) err = r->set(copy, value);
  else if (const CompatRow* c = find_compat(name)) err = set_compat(copy, *c, value);
  else return "unknown option '" + std::string(name) + "'";
  if (err.empty()) *o = std::move(copy);
  return err;
}

std::optional<std::string> get_server_option(const ServerOptions& o, std::string_view name) {
  if (const ConfigRow* r = find_row(name)) return r->get(o);
  if (const CompatRow* c = find_compat(name)) return compat_value(o, *c);
  return std::nullopt;
}

namespace {

// Markdown table cells: no line breaks, '|' escaped.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

std::string code_or_empty(std::string_view v) { return v.empty() ? "\"\"" : "`" + std::string(v) + "`"; }

}  // namespace

std::string config_reference_markdown() {
  const ServerOptions defaults;
  std::string md;
  md += "### conduit-kv's settings\n\n";
  md += "Command line `--name value`, a redis.conf-style file, CONFIG GET and CONFIG SET all use these names "
        "and this table (src/kv/config.cc). \"CONFIG SET\" says whether a running server takes a new value: "
        "*immutable* settings are refused as Redis 7.0 refuses them (\"can't set immutable config\"); "
        "*current value only* settings Redis changes at run time and conduit-kv does not yet, so CONFIG SET "
        "accepts the value they have and refuses any other (\"conduit-kv cannot change ... while it runs\"); "
        "*protected* settings, as in Redis 7.0, only when `enable-protected-configs` is `yes` (or `local`, "
        "from a loopback or shm client), else \"can't set protected config\".\n\n";
  md += "| setting | default | CONFIG SET | what |\n| --- | --- | --- | --- |\n";
  for (const ConfigRow& r : kRows) {
    std::string rt;
    switch (r.runtime) {
      case Runtime::kYes: rt = "yes"; break;
      case Runtime::kImmutable: rt = "no: immutable (also in Redis)"; break;
      case Runtime::kSameValue: rt = std::string("current value only: ") + r.runtime_why; break;
      case Runtime::kProtected: rt = "protected"; break;
    }
    md += "| `" + std::string(r.name) + "` | " + code_or_empty(r.get(defaults)) + " | " + cell(rt) + " | " + cell(r.doc) +
          " |\n";
  }
  md += "\n### Redis settings accepted without effect\n\n";
  md += "Redis 7.0 settings conduit-kv accepts (command line, file, CONFIG SET) and reports (CONFIG GET) "
        "without acting on them, so a stock redis.conf or a tool that writes back CONFIG GET's values works. "
        "Those that would switch on a feature conduit-kv lacks take only their default. Hidden ones are returned "
        "by CONFIG GET of their exact name only, never for a pattern, as in Redis.\n\n";
  md += "| setting | default | CONFIG SET | why |\n| --- | --- | --- | --- |\n";
  for (const CompatRow& r : kCompat) {
    std::string rt = r.immutable ? "no: immutable (also in Redis)" : r.protect ? "protected" : "yes";
    if (r.why == Why::kFeature && !r.immutable) rt += ", the default only";
    if (r.hidden) rt += "; hidden";
    md += "| `" + std::string(r.name) + "` | " + code_or_empty(r.def) + " | " + rt + " | " + cell(why_text(r.why)) +
          " |\n";
  }
  return md;
}

// Redis 7.0's configSetCommand: every name is checked first (unknown, immutable,
// duplicated), then all values are set on a copy, which replaces the options only when
// every one was accepted -- all or nothing.
std::string config_set_all(ServerOptions* o, std::span<const std::pair<std::string_view, std::string_view>> pairs,
                           bool local_client) {
  struct Target {
    const ConfigRow* row;
    const CompatRow* compat;
  };
  std::vector<Target> targets;
  auto failed = [](std::string_view name, const std::string& why) {
    return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " + why;
  };
  for (const auto& [name, value] : pairs) {
    Target t{find_row(name), nullptr};
    if (t.row == nullptr) t.compat = find_compat(name);
    if (t.row == nullptr && t.compat == nullptr)
      return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(name) + "'";
    const bool immutable = t.row ? t.row->runtime == Runtime::kImmutable : t.compat->immutable;
    if (immutable) return failed(name, "can't set immutable config");
    const bool protect = t.row ? t.row->runtime == Runtime::kProtected : t.compat->protect;
    if (protect) {
      const std::string allow = compat_value(*o, *find_compat("enable-protected-configs"));
      if (!eq_nocase(allow, "yes") && !(eq_nocase(allow, "local") && local_client))
        return failed(name, "can't set protected config");
    }
    for (const Target& x : targets)
      if (x.row == t.row && x.compat == t.compat) return failed(name, "duplicate parameter");
    targets.push_back(t);
  }
  ServerOptions copy = *o;
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string_view name = pairs[i].first, value = pairs[i].second;
    std::string err;
    if (targets[i].row != nullptr) {
      const ConfigRow& r = *targets[i].row;
      const std::string before = r.get(copy);
      err = r.set(copy, value);
      if (err.empty() && r.runtime == Runtime::kSameValue && r.get(copy) != before)
        err = std::string("conduit-kv cannot change '") + r.name + "' while it runs (restart it with --" + r.name + ")";
    } else {
      err = set_compat(copy, *targets[i].compat, value);
    }
    if (!err.empty()) return failed(name, err);
  }
  *o = std::move(copy);
  return "";
}

std::vector<std::pair<std::string, std::string>> config_get_matching(const ServerOptions& o, std::string_view pattern) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ConfigRow& r : kRows)
    if (glob_match(pattern, r.name, true)) out.emplace_back(r.name, r.get(o));
  for (const CompatRow& r : kCompat)
    if (r.hidden ? eq_nocase(pattern, r.name) : glob_match(pattern, r.name, true))
      out.emplace_back(r.name, compat_value(o, r));
  return out;
}

// --- redis.conf-style files ----------------------------------------------------------------

std::string load_config_text(ServerOptions* o, std::string_view text, std::vector<std::string>* warnings) {
  std::map<std::string, std::string> values;  // directive -> value (repeats of save / bind / coblimit join)
  std::vector<std::string> order;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> args;
    std::vector<std::string> storage;
    storage.reserve(line.size());
    auto fatal = [&](const std::string& why) {
      return "*** FATAL CONFIG FILE ERROR (conduit-kv, Redis 7.0 compatible) ***\nReading the configuration file, at "
             "line " + std::to_string(line_no) + "\n>>> '" + std::string(line) + "'\n" + why;
    };
    if (!split_inline_args(line, &args, &storage)) return fatal("Unbalanced quotes in configuration line");
    if (args.empty()) continue;
    const std::string name = to_lower(args[0]);
    std::string value;
    for (size_t i = 1; i < args.size(); ++i) {
      if (i > 1) value += ' ';
      value += args[i];
    }
    if (args.size() < 2 && name != "save") return fatal("wrong number of arguments");
    if (name == "user") {  // repeated: one ACL user per line, set up at start (acl.cc)
      o->users.push_back(value);
      continue;
    }
    if (!find_row(name) && !find_compat(name)) return fatal("Bad directive or wrong number of arguments");
    auto [it, fresh] = values.emplace(name, value);
    if (!fresh && (name == "save" || name == "client-output-buffer-limit")) it->second += " " + value;
    else if (!fresh) it->second = value;
    if (fresh) order.push_back(name);
  }
  for (const std::string& name : order) {
    const std::string& value = values[name];
    const std::string err = set_server_option(o, name, value);
    if (err.empty()) continue;
    // What the file switches on that conduit-kv does not have (RDB snapshots ...) is
    // reported and left off, so a stock redis.conf starts; a value that is simply wrong
    // stops the start, as in Redis.
    const CompatRow* c = find_compat(name);
    if (name == "save" || (c != nullptr && c->why == Why::kFeature)) {
      warnings->push_back("'" + name + " " + value + "' ignored: " + err);
      continue;
    }
    return "*** FATAL CONFIG FILE ERROR (conduit-kv, Redis 7.0 compatible) ***\n'" + name + " " + value + "': " + err;
  }
  return "";
}

std::string ServerImpl::config_rewrite() {
  // The effective value of every option that differs from its default, one per line.
  const ServerOptions defaults;
  std::string text = "# Written by CONFIG REWRITE (conduit-kv)\n";
  auto quote = [](const std::string& v) {
    std::string q = "\"";
    for (char ch : v) {
      if (ch == '"' || ch == '\\') q += '\\';
      q += ch;
    }
    return q + "\"";
  };
  for (const auto& [name, value] : config_get_matching(options_, "*")) {
    const auto def = get_server_option(defaults, name);
    if (def && *def == value) continue;
    text += name + " " + quote(value) + "\n";
  }
  // The ACL users, as Redis' rewriteConfigUserOption (unless an ACL file holds them).
  if (options_.aclfile.empty())
    for (const auto& [name, u] : acl_.users()) text += "user " + name + " " + acl_.describe(*u) + "\n";
  const std::string tmp = options_.config_file + ".tmp-rewrite";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return "ERR Rewriting config file: " + std::string(std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), options_.config_file.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return "ERR Rewriting config file: " + why;
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> ServerImpl::config_get(std::string_view pattern) const {
  return config_get_matching(options_, pattern);
}

std::string ServerImpl::config_set(std::span<const std::pair<std::string_view, std::string_view>> pairs,
                                   bool local_client) {
  ServerOptions next = options_;
  if (std::string err = config_set_all(&next, pairs, local_client); !err.empty()) return err;
  auto failed = [](std::string_view name, const std::string& why) {
    return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " + why;
  };
  // Checks that need the server's state, before anything changes.
  if (next.dir != options_.dir) {
    if (aof_)
      return failed("dir", "conduit-kv cannot move the append-only file while it appends to it (CONFIG SET "
                           "appendonly no first)");
    struct stat st{};
    if (::stat(next.dir.c_str(), &st) != 0) return failed("dir", std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return failed("dir", std::strerror(ENOTDIR));
  }
  const ServerOptions before = std::exchange(options_, std::move(next));
  if (options_.appendonly && !before.appendonly) {
    if (std::string err = start_aof(); !err.empty()) {
      options_ = before;
      return failed("appendonly", err);
    }
  } else if (!options_.appendonly && before.appendonly) {
    stop_aof();
  }
  // What changing an option takes besides the new value.
  if (aof_ && options_.appendfsync != before.appendfsync) aof_->set_policy(options_.appendfsync);
  // As Redis' updateRequirePass: the default user's password is replaced (any set, any value).
  for (const auto& [name, value] : pairs)
    if (eq_nocase(name, "requirepass")) acl_.set_default_password(options_.requirepass);
  acl_.set_pubsub_default(options_.acl_pubsub_allchannels);
  if (options_.limits.max_bulk_len != before.limits.max_bulk_len ||
      options_.limits.max_multibulk_len != before.limits.max_multibulk_len ||
      options_.limits.max_query_buffer != before.limits.max_query_buffer)
    limits_changed();
  // As Redis' updateMaxmemory: a lower limit evicts now, not at the next command.
  if (options_.maxmemory != before.maxmemory && options_.maxmemory > 0) (void)evict_locked();
  return "";
}

}  // namespace conduit::kv
