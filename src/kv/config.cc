// conduit-kv's settings: one row per setting with its redis.conf name, whether CONFIG SET
// may change it while the server runs, a line of documentation, how to print it and how
// to parse and validate it.  CONFIG GET/SET and conduit-kv's command line both go
// through this table, so they accept exactly the same values (--hz 0 was accepted on the
// command line and refused by CONFIG SET).
#include <algorithm>
#include <climits>
#include <mutex>

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

std::string set_output_limit(ServerOptions& o, std::string_view v) {
  std::vector<std::string> w;
  std::string cur;
  for (char ch : std::string(v) + " ") {
    if (ch == ' ') {
      if (!cur.empty()) w.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (w.size() != 4 || !eq_nocase(w[0], "normal")) return "expected 'normal <hard> <soft> <soft-seconds>'";
  uint64_t hard, soft;
  int64_t secs;
  if (!parse_memory_value(w[1], &hard) || !parse_memory_value(w[2], &soft) || !string2ll(w[3], &secs) || secs < 0 ||
      secs > INT32_MAX)
    return "invalid client-output-buffer-limit values";
  o.output_hard_limit = hard;
  o.output_soft_limit = soft;
  o.output_soft_seconds = static_cast<uint32_t>(secs);
  return "";
}

struct ConfigRow {
  ServerOptionInfo info;
  std::string (*get)(const ServerOptions&);
  std::string (*set)(ServerOptions&, std::string_view);  // "" or why the value is refused
};

using O = ServerOptions;
using V = std::string_view;

// Ranges: Redis' where it has one; hz and maxclients refuse 0 (Redis clamps hz to 1..500
// silently; a clear error is better than a value that is not used).
const ConfigRow kRows[] = {
    {{"bind", false, "addresses of the tcp and rdma listeners (space-separated)"},
     [](const O& o) { return o.bind; }, [](O& o, V v) { return o.bind = std::string(v), std::string(); }},
    {{"port", false, "TCP port (0 = any free port)"}, [](const O& o) { return std::to_string(o.port); },
     [](O& o, V v) { return set_int(&o.port, v, 0, 65535); }},
    {{"shm-name", false, "also listen on shm://NAME (same-host shared memory)"},
     [](const O& o) { return o.shm_name; }, [](O& o, V v) { return o.shm_name = std::string(v), std::string(); }},
    {{"shm-busy-poll-us", false, "shm connections poll the rings this long before sleeping (0 .. 1000000)"},
     [](const O& o) { return std::to_string(o.shm_busy_poll_us); },
     [](O& o, V v) { return set_int(&o.shm_busy_poll_us, v, 0, 1000000); }},
    {{"rdma-port", false, "also listen on rdma://BIND:PORT (-1 = off, 0 = any free port)"},
     [](const O& o) { return std::to_string(o.rdma_port); },
     [](O& o, V v) { return set_int(&o.rdma_port, v, -1, 65535); }},
    {{"requirepass", true, "password clients must AUTH with (\"\" = none)"},
     [](const O& o) { return o.requirepass; }, [](O& o, V v) { return o.requirepass = std::string(v), std::string(); }},
    {{"protected-mode", true, "yes: without a password only loopback (and shm) clients"},
     [](const O& o) { return yesno(o.protected_mode); }, [](O& o, V v) { return set_yesno(&o.protected_mode, v); }},
    {{"maxclients", true, "maximum simultaneous clients (1 .. 1000000)"},
     [](const O& o) { return std::to_string(o.maxclients); },
     [](O& o, V v) { return set_int(&o.maxclients, v, 1, 1000000); }},
    {{"maxmemory", true, "memory limit (bytes, or 100mb, 1gb ...; 0 = none); writes get -OOM above it"},
     [](const O& o) { return std::to_string(o.maxmemory); }, [](O& o, V v) { return set_mem(&o.maxmemory, v); }},
    {{"maxmemory-policy", true, "only noeviction"}, [](const O&) { return std::string("noeviction"); },
     [](O&, V v) { return eq_nocase(v, "noeviction") ? std::string() : std::string("only 'noeviction' is supported"); }},
    // A database is a small object, but a million of them is not.
    {{"databases", false, "number of databases (1 .. 100000)"},
     [](const O& o) { return std::to_string(o.databases); },
     [](O& o, V v) { return set_int(&o.databases, v, 1, 100000); }},
    {{"timeout", true, "close clients idle this many seconds (0 = never)"},
     [](const O& o) { return std::to_string(o.timeout); }, [](O& o, V v) { return set_int(&o.timeout, v, 0, INT32_MAX); }},
    {{"hz", true, "background tasks per second: expiry, client checks (1 .. 500)"},
     [](const O& o) { return std::to_string(o.hz); }, [](O& o, V v) { return set_int(&o.hz, v, 1, 500); }},
    {{"appendonly", false, "yes: log every write to the append-only file"},
     [](const O& o) { return yesno(o.appendonly); }, [](O& o, V v) { return set_yesno(&o.appendonly, v); }},
    {{"appendfsync", true, "always | everysec | no"},
     [](const O& o) { return std::string(appendfsync_name(o.appendfsync)); },
     [](O& o, V v) {
       return parse_appendfsync(v, &o.appendfsync) ? std::string()
                                                   : std::string("argument(s) must be one of the following: always, everysec, no");
     }},
    {{"dir", false, "directory of the append-only file"}, [](const O& o) { return o.dir; },
     [](O& o, V v) { return v.empty() ? std::string("dir can't be empty") : (o.dir = std::string(v), std::string()); }},
    {{"appendfilename", false, "append-only file name (a name, not a path)"},
     [](const O& o) { return o.appendfilename; },
     [](O& o, V v) {
       if (v.empty() || v.find('/') != V::npos || v == "." || v == "..")
         return std::string("appendfilename can't be a path, just a filename");
       o.appendfilename = std::string(v);
       return std::string();
     }},
    {{"aof-load-truncated", true, "yes: drop a torn last record (a crash mid-write) when loading"},
     [](const O& o) { return yesno(o.aof_load_truncated); }, [](O& o, V v) { return set_yesno(&o.aof_load_truncated, v); }},
    {{"auto-aof-rewrite-percentage", true, "rewrite when the file grew by this % (0 = never)"},
     [](const O& o) { return std::to_string(o.auto_aof_rewrite_percentage); },
     [](O& o, V v) { return set_int(&o.auto_aof_rewrite_percentage, v, 0, INT32_MAX); }},
    {{"auto-aof-rewrite-min-size", true, "no automatic rewrite below this size"},
     [](const O& o) { return std::to_string(o.auto_aof_rewrite_min_size); },
     [](O& o, V v) { return set_mem(&o.auto_aof_rewrite_min_size, v); }},
    {{"proto-max-bulk-len", true, "largest argument a client may send (at least 1mb)"},
     [](const O& o) { return std::to_string(o.limits.max_bulk_len); },
     [](O& o, V v) { return set_mem(&o.limits.max_bulk_len, v, 1 << 20, "1mb"); }},
    {{"client-query-buffer-limit", true, "largest unparsed input per client (at least 1mb)"},
     [](const O& o) { return std::to_string(o.limits.max_query_buffer); },
     [](O& o, V v) { return set_mem(&o.limits.max_query_buffer, v, 1 << 20, "1mb"); }},
    {{"client-output-buffer-limit", true,
      "\"normal <hard> <soft> <soft-seconds>\": close a client whose unsent replies pass hard (0 = none), or "
      "stay above soft for soft-seconds; the first 16 KiB are not counted"},
     [](const O& o) {
       return "normal " + std::to_string(o.output_hard_limit) + " " + std::to_string(o.output_soft_limit) + " " +
              std::to_string(o.output_soft_seconds);
     },
     [](O& o, V v) { return set_output_limit(o, v); }},
    {{"client-output-pause-bytes", true, "stop running a client's commands while this much output is unsent (at least 1kb)"},
     [](const O& o) { return std::to_string(o.output_pause_bytes); },
     [](O& o, V v) { return set_mem(&o.output_pause_bytes, v, 1024, "1kb"); }},
    {{"io-threads", false,
      "reactor threads serving connections (1 .. 128); tcp connections are spread over them (SO_REUSEPORT), "
      "shm and rdma stay on the first; commands still run one at a time"},
     [](const O& o) { return std::to_string(o.io_threads); }, [](O& o, V v) { return set_int(&o.io_threads, v, 1, 128); }},
    {{"save", true, "accepted for compatibility; only \"\" (no RDB snapshots, use appendonly)"},
     [](const O&) { return std::string(); },
     [](O&, V v) { return v.empty() ? std::string() : std::string("RDB snapshots are not supported (use appendonly)"); }},
    {{"logfile", false, "accepted for compatibility; logs go to stderr"}, [](const O& o) { return o.logfile; },
     [](O& o, V v) { return o.logfile = std::string(v), std::string(); }},
};

const ConfigRow* find_row(std::string_view name) {
  for (const ConfigRow& r : kRows)
    if (eq_nocase(name, r.info.name)) return &r;
  return nullptr;
}

}  // namespace

std::span<const ServerOptionInfo> server_option_list() {
  static const std::vector<ServerOptionInfo> list = [] {
    std::vector<ServerOptionInfo> v;
    for (const ConfigRow& r : kRows) v.push_back(r.info);
    return v;
  }();
  return list;
}

std::string set_server_option(ServerOptions* o, std::string_view name, std::string_view value) {
  const ConfigRow* r = find_row(name);
  if (r == nullptr) return "unknown option '" + std::string(name) + "'";
  ServerOptions copy = *o;
  std::string err = r->set(copy, value);
  if (err.empty()) *o = std::move(copy);
  return err;
}

std::optional<std::string> get_server_option(const ServerOptions& o, std::string_view name) {
  const ConfigRow* r = find_row(name);
  if (r == nullptr) return std::nullopt;
  return r->get(o);
}

// Redis 7.0's configSetCommand: every name is checked first (unknown, immutable,
// duplicated), then all values are set on a copy, which replaces the options only when
// every one was accepted -- all or nothing.
std::string config_set_all(ServerOptions* o, std::span<const std::pair<std::string_view, std::string_view>> pairs) {
  std::vector<const ConfigRow*> rows;
  for (const auto& [name, value] : pairs) {
    const ConfigRow* r = find_row(name);
    if (r == nullptr) return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(name) + "'";
    if (!r->info.runtime)
      return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - can't set immutable config";
    if (std::find(rows.begin(), rows.end(), r) != rows.end())
      return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - duplicate parameter";
    rows.push_back(r);
  }
  ServerOptions copy = *o;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string err = rows[i]->set(copy, pairs[i].second);
    if (!err.empty())
      return "ERR CONFIG SET failed (possibly related to argument '" + std::string(rows[i]->info.name) + "') - " + err;
  }
  *o = std::move(copy);
  return "";
}

std::vector<std::pair<std::string, std::string>> config_get_matching(const ServerOptions& o, std::string_view pattern) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ConfigRow& r : kRows)
    if (glob_match(pattern, r.info.name, true)) out.emplace_back(r.info.name, r.get(o));
  return out;
}

}  // namespace conduit::kv
