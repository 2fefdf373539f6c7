// Server commands: INFO CONFIG COMMAND TIME LASTSAVE BGREWRITEAOF SAVE SHUTDOWN MEMORY
// LATENCY REPLICAOF, and FUNCTION / SCRIPT as far as they can be honest without a script engine
// (flushing and listing nothing is true; loading or running a script fails clearly).
#include <sys/time.h>

#include <algorithm>
#include <cinttypes>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

void info_cmd(CommandContext& ctx) {
  std::string sections;
  for (size_t j = 1; j < ctx.argc(); ++j) {
    if (j > 1) sections += ' ';
    sections += ctx.arg(j);
  }
  ctx.reply.verbatim(ctx.server.info(sections));
}

// --- CONFIG -------------------------------------------------------------------------------------

void config_get_cmd(CommandContext& ctx) {
  std::vector<std::pair<std::string, std::string>> all;
  for (size_t j = 2; j < ctx.argc(); ++j)
    for (auto& kv : ctx.server.config_get(ctx.arg(j)))
      if (std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.first == kv.first; }) == all.end())
        all.push_back(std::move(kv));
  ctx.reply.map(all.size());
  for (const auto& [k, v] : all) {
    ctx.reply.bulk(k);
    ctx.reply.bulk(v);
  }
}

void config_set_cmd(CommandContext& ctx) {
  if (ctx.argc() % 2 != 0) return ctx.error(wrong_args("config|set"));
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (size_t j = 2; j < ctx.argc(); j += 2) pairs.emplace_back(ctx.arg(j), ctx.arg(j + 1));
  const ClientConn* conn = ctx.client.conn;
  const std::string err = ctx.server.config_set(pairs, conn == nullptr || is_loopback(conn->scheme, conn->peer));
  if (!err.empty()) return ctx.error(err);
  ctx.reply.ok();
}

void config_resetstat_cmd(CommandContext& ctx) {
  ctx.server.reset_stats();
  ctx.reply.ok();
}

void config_rewrite_cmd(CommandContext& ctx) {
  if (ctx.server.options_.config_file.empty()) return ctx.error("ERR The server is running without a config file");
  const std::string err = ctx.server.config_rewrite();
  if (!err.empty()) return ctx.error(err);
  ctx.reply.ok();
}

void config_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "CONFIG",
             {"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
              "SET <directive> <value>", "    Set the configuration <directive> to <value>.", "RESETSTAT",
              "    Reset statistics reported by the INFO command.", "REWRITE",
              "    Rewrite the configuration file."});
}

// --- COMMAND ------------------------------------------------------------------------------------

std::vector<std::string_view> flag_names(uint32_t f) {
  std::vector<std::string_view> v;
  if (f & kCmdWrite) v.push_back("write");
  if (f & kCmdReadonly) v.push_back("readonly");
  if (f & kCmdDenyOom) v.push_back("denyoom");
  if (f & kCmdAdmin) v.push_back("admin");
  if (f & kCmdNoAuth) v.push_back("no_auth");
  if (f & kCmdLoading) v.push_back("loading");
  if (f & kCmdStale) v.push_back("stale");
  if (f & kCmdFast) v.push_back("fast");
  return v;
}

void command_info(CommandContext& ctx, const CommandEntry* e) {
  if (e == nullptr) return ctx.reply.null_array();
  const CommandDef* d = e->def;
  ctx.reply.array(10);
  ctx.reply.bulk(e->fullname);
  ctx.reply.integer(d->arity);
  const auto flags = flag_names(d->flags);
  ctx.reply.set(flags.size());
  for (std::string_view f : flags) ctx.reply.simple(f);
  ctx.reply.integer(d->first_key);
  ctx.reply.integer(d->last_key);
  ctx.reply.integer(d->key_step);
  ctx.reply.set(0);    // ACL categories
  ctx.reply.set(0);    // tips
  ctx.reply.array(0);  // key specs
  ctx.reply.array(e->subs.size());  // subcommands
  for (const CommandEntry* s : e->subs) command_info(ctx, s);
}

void command_docs(CommandContext& ctx, const CommandEntry* e) {
  const CommandDef* d = e->def;
  ctx.reply.bulk(e->fullname);
  ctx.reply.map(3);
  ctx.reply.bulk("summary");
  ctx.reply.bulk(d->summary);
  ctx.reply.bulk("since");
  ctx.reply.bulk(d->since);
  ctx.reply.bulk("group");
  ctx.reply.bulk(d->group);
}

void command_cmd(CommandContext& ctx) {
  const auto all = ctx.server.commands();
  ctx.reply.array(all.size());
  for (const CommandEntry* d : all) command_info(ctx, d);
}

void command_count_cmd(CommandContext& ctx) { ctx.reply.integer(static_cast<int64_t>(ctx.server.commands().size())); }

void command_info_cmd(CommandContext& ctx) {
  const auto all = ctx.server.commands();
  if (ctx.argc() == 2) {
    ctx.reply.array(all.size());
    for (const CommandEntry* d : all) command_info(ctx, d);
    return;
  }
  ctx.reply.array(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) {
    bool unknown;
    const std::string_view name = ctx.arg(j);
    const size_t bar = name.find('|');
    CommandEntry* e = ctx.server.find_command(name.substr(0, bar));
    if (e != nullptr && bar != std::string_view::npos) {
      e = e->find_sub(name.substr(bar + 1));
    }
    (void)unknown;
    command_info(ctx, e);
  }
}

void command_docs_cmd(CommandContext& ctx) {
  std::vector<const CommandEntry*> want;
  if (ctx.argc() == 2) {
    for (const CommandEntry* d : ctx.server.commands()) want.push_back(d);
  } else {
    for (size_t j = 2; j < ctx.argc(); ++j)
      if (const CommandEntry* d = ctx.server.find_command(ctx.arg(j))) want.push_back(d);
  }
  ctx.reply.map(want.size());
  for (const CommandEntry* d : want) command_docs(ctx, d);
}

void command_list_cmd(CommandContext& ctx) {
  std::string_view pattern;
  if (ctx.argc() == 5 && eq_nocase(ctx.arg(2), "filterby") && eq_nocase(ctx.arg(3), "pattern")) pattern = ctx.arg(4);
  else if (ctx.argc() != 2) return ctx.error(kSyntaxError);
  std::vector<std::string_view> names;
  for (const CommandEntry* d : ctx.server.commands()) {
    if (pattern.empty() || glob_match(pattern, d->fullname, true)) names.push_back(d->fullname);
    for (const CommandEntry* s : d->subs)
      if (!pattern.empty() && glob_match(pattern, s->fullname, true)) names.push_back(s->fullname);
  }
  ctx.reply.array(names.size());
  for (std::string_view n : names) ctx.reply.bulk(n);
}

void command_getkeys_cmd(CommandContext& ctx) {
  bool unknown;
  const auto argv = ctx.argv.subspan(2);
  CommandEntry* e = ctx.server.resolve(argv, &unknown);
  if (e == nullptr || unknown) return ctx.error("ERR Invalid command specified");
  const int n = static_cast<int>(argv.size());
  if ((e->def->arity > 0 && e->def->arity != n) || n < -e->def->arity)
    return ctx.error("ERR Invalid number of arguments specified for command");
  std::vector<size_t> keys;
  e->keys(argv, &keys);
  if (keys.empty()) return ctx.error("ERR The command has no key arguments");
  ctx.reply.array(keys.size());
  for (size_t k : keys) ctx.reply.bulk(argv[k]);
}

void command_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "COMMAND",
             {"(no subcommand)", "    Return details about all Redis commands.", "COUNT",
              "    Return the total number of commands in this Redis server.", "LIST [FILTERBY PATTERN <pattern>]",
              "    Return a list of all commands in this Redis server.", "INFO [<command-name> ...]",
              "    Return details about multiple Redis commands.", "DOCS [<command-name> ...]",
              "    Return documentation details about multiple Redis commands.", "GETKEYS <full-command>",
              "    Return the keys from a full Redis command."});
}

// --- time, persistence, shutdown ----------------------------------------------------------------

void time_cmd(CommandContext& ctx) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  ctx.reply.array(2);
  ctx.reply.bulk(std::to_string(tv.tv_sec));
  ctx.reply.bulk(std::to_string(tv.tv_usec));
}

void bgrewriteaof_cmd(CommandContext& ctx) {
  const std::string err = ctx.server.bgrewriteaof();
  if (!err.empty()) return ctx.error(err);
  ctx.reply.simple("Background append only file rewriting started");
}

void shutdown_cmd(CommandContext& ctx) {
  for (size_t j = 1; j < ctx.argc(); ++j) {
    const std::string_view o = ctx.arg(j);
    if (!eq_nocase(o, "nosave") && !eq_nocase(o, "save") && !eq_nocase(o, "now") && !eq_nocase(o, "force") &&
        !eq_nocase(o, "abort"))
      return ctx.error(kSyntaxError);
    if (eq_nocase(o, "abort")) return ctx.error("ERR No shutdown in progress.");
  }
  ctx.server.request_shutdown();
  ctx.client.close_after_reply = true;
}

void save_cmd(CommandContext& ctx) {
  ctx.error("ERR conduit-kv has no RDB snapshots; use appendonly yes (and BGREWRITEAOF) for persistence");
}



void lastsave_cmd(CommandContext& ctx) { ctx.reply.integer(ctx.server.last_save_time_); }

// REPLICAOF / SLAVEOF: conduit-kv is always a master.  NO ONE asks for what already is (Redis
// answers OK too); following another server is refused rather than accepted and ignored.
void replicaof_cmd(CommandContext& ctx) {
  if (eq_nocase(ctx.arg(1), "no") && eq_nocase(ctx.arg(2), "one")) return ctx.reply.ok();
  int64_t port;
  if (!string2ll(ctx.arg(2), &port) || port < 0 || port > 65535) return ctx.error("ERR Invalid master port");
  ctx.error("ERR conduit-kv has no replication: it cannot become a replica of " + std::string(ctx.arg(1)) + ":" +
            std::string(ctx.arg(2)) + " (REPLICAOF NO ONE is accepted; it is always a master)");
}

// --- MEMORY -------------------------------------------------------------------------------------

void memory_usage_cmd(CommandContext& ctx) {
  if (ctx.argc() != 3 && !(ctx.argc() == 5 && eq_nocase(ctx.arg(3), "samples"))) return ctx.error(kSyntaxError);
  if (ctx.argc() == 5) {
    int64_t n;
    if (!get_ll(ctx, ctx.arg(4), &n)) return;
    if (n < 0) return ctx.error(kSyntaxError);
  }
  Entry* e = ctx.db->find(ctx.arg(2));
  if (e == nullptr || (e->expire_ms >= 0 && e->expire_ms < ctx.now_ms())) return ctx.reply.null();
  // An estimate from the value's real sizes (store.cc estimate_bytes): the entry, the key,
  // each element with its container overhead.
  ctx.reply.integer(static_cast<int64_t>(estimate_bytes(e)));
}

void memory_doctor_cmd(CommandContext& ctx) {
  ctx.reply.verbatim("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.");
}

void memory_purge_cmd(CommandContext& ctx) { ctx.reply.ok(); }

void memory_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "MEMORY",
             {"DOCTOR", "    Return memory problems reports.", "PURGE", "    Attempt to purge dirty pages for reclamation by the allocator.",
              "USAGE <key> [SAMPLES <count>]", "    Return memory in bytes used by <key> and its value."});
}

// --- LATENCY ------------------------------------------------------------------------------------

void latency_latest_cmd(CommandContext& ctx) {
  const auto& ev = ctx.server.latency_;
  ctx.reply.array(ev.size());
  for (const auto& [name, e] : ev) {
    ctx.reply.array(4);
    ctx.reply.bulk(name);
    ctx.reply.integer(e.last_time);
    ctx.reply.integer(static_cast<int64_t>(e.latest_ms));
    ctx.reply.integer(static_cast<int64_t>(e.max_ms));
  }
}

void latency_history_cmd(CommandContext& ctx) {
  auto it = ctx.server.latency_.find(std::string(ctx.arg(2)));
  if (it == ctx.server.latency_.end()) return ctx.reply.array(0);
  ctx.reply.array(it->second.history.size());
  for (const auto& [t, ms] : it->second.history) {
    ctx.reply.array(2);
    ctx.reply.integer(t);
    ctx.reply.integer(static_cast<int64_t>(ms));
  }
}

void latency_reset_cmd(CommandContext& ctx) {
  auto& ev = ctx.server.latency_;
  if (ctx.argc() == 2) {
    const int64_t n = static_cast<int64_t>(ev.size());
    ev.clear();
    return ctx.reply.integer(n);
  }
  int64_t n = 0;
  for (size_t j = 2; j < ctx.argc(); ++j) n += static_cast<int64_t>(ev.erase(std::string(ctx.arg(j))));
  ctx.reply.integer(n);
}

// LATENCY HISTOGRAM [command ...]: per command (or subcommand) that ran since the last
// CONFIG RESETSTAT, its calls and the cumulative count per bucket upper bound in
// microseconds, as Redis 7.0 (buckets with no new calls are left out).  A container
// command's name covers its subcommands; unknown names are skipped.
void reply_latency_histogram(CommandContext& ctx, const CommandEntry& e) {
  const CommandStats& st = e.stats;
  ctx.reply.bulk(e.fullname);
  ctx.reply.map(2);
  ctx.reply.bulk("calls");
  ctx.reply.integer(static_cast<int64_t>(st.calls));
  ctx.reply.bulk("histogram_usec");
  size_t samples = 0;
  for (uint64_t n : st.latency) samples += n > 0;
  ctx.reply.map(samples);
  uint64_t cumulative = 0;
  for (size_t k = 0; k < st.latency.size(); ++k) {
    if (st.latency[k] == 0) continue;
    cumulative += st.latency[k];
    ctx.reply.integer(static_cast<int64_t>(((1024ull << k) - 1) / 1000));  // bucket's top, us
    ctx.reply.integer(static_cast<int64_t>(cumulative));
  }
}

void latency_histogram_cmd(CommandContext& ctx) {
  std::vector<const CommandEntry*> out;
  auto add = [&](const CommandEntry* e) {
    // As Redis: a command with no histogram (none of its calls was tracked) is left out.
    const bool tracked = std::any_of(e->stats.latency.begin(), e->stats.latency.end(), [](uint64_t n) { return n > 0; });
    if (tracked && std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  };
  if (ctx.argc() == 2) {
    for (const auto& e : ctx.server.command_entries()) add(e.get());
  } else {
    for (size_t j = 2; j < ctx.argc(); ++j) {
      const std::string_view name = ctx.arg(j);
      const size_t bar = name.find('|');
      const CommandEntry* e = ctx.server.find_command(name.substr(0, bar));
      if (e != nullptr && bar != std::string_view::npos) e = e->find_sub(name.substr(bar + 1));
      if (e == nullptr) continue;
      add(e);
      if (bar == std::string_view::npos)
        for (const CommandEntry* sub : e->subs) add(sub);
    }
  }
  ctx.reply.map(out.size());
  for (const CommandEntry* e : out) reply_latency_histogram(ctx, *e);
}

// LATENCY DOCTOR: Redis' report is advice prose; this one states what was recorded.
void latency_doctor_cmd(CommandContext& ctx) {
  const auto& ev = ctx.server.latency_;
  std::string text;
  if (ctx.server.options_.latency_monitor_threshold_ms == 0) {
    text = "The latency monitor is disabled (latency-monitor-threshold 0): CONFIG SET latency-monitor-threshold "
           "<milliseconds> to record events slower than that.\n";
  } else if (ev.empty()) {
    text = "No latency spike was observed during the lifetime of this instance (threshold " +
           std::to_string(ctx.server.options_.latency_monitor_threshold_ms) + " ms).\n";
  } else {
    text = "Latency events recorded (threshold " + std::to_string(ctx.server.options_.latency_monitor_threshold_ms) +
           " ms):\n\n";
    int i = 1;
    for (const auto& [name, e] : ev) {
      uint64_t sum = 0;
      for (const auto& h : e.history) sum += h.second;
      text += std::to_string(i++) + ". " + name + ": " + std::to_string(e.history.size()) +
              " latency spikes (average " + std::to_string(e.history.empty() ? 0 : sum / e.history.size()) +
              "ms, worst " + std::to_string(e.max_ms) + "ms, latest " + std::to_string(e.latest_ms) + "ms).\n";
    }
    text += "\nconduit-kv runs commands one at a time: a slow command (a large KEYS, SMEMBERS, or a big value) "
            "delays every client; 'command' and 'fast-command' events name such calls.\n";
  }
  ctx.reply.verbatim(text);
}

void latency_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "LATENCY",
             {"DOCTOR", "    Return a human readable latency analysis report.", "HISTOGRAM [<command> ...]",
              "    Return a cumulative distribution of latencies in the format of a histogram for the specified "
              "command names.",
              "    If no commands are specified then all histograms are replied.",
              "HISTORY <event>", "    Return time-latency samples for the <event> class.", "LATEST",
              "    Return the latest latency samples for all events.", "RESET [<event> ...]",
              "    Reset latency data of one or more <event> classes.", "    (default: reset all data for all event classes)"});
}

// --- FUNCTION / SCRIPT: no script engine -----------------------------------------------------

constexpr std::string_view kNoScripts =
    "ERR conduit-kv has no script engine: Lua scripts and functions (EVAL, FUNCTION LOAD, SCRIPT LOAD) are not supported";

bool flush_mode_ok(CommandContext& ctx, size_t at) {
  if (ctx.argc() > at + 1) {
    ctx.error(kSyntaxError);
    return false;
  }
  if (ctx.argc() == at + 1 && !eq_nocase(ctx.arg(at), "async") && !eq_nocase(ctx.arg(at), "sync")) {
    ctx.error(kSyntaxError);
    return false;
  }
  return true;
}

void function_flush_cmd(CommandContext& ctx) {
  if (!flush_mode_ok(ctx, 2)) return;
  ctx.reply.ok();  // there are no functions: flushing them is true
}

void function_list_cmd(CommandContext& ctx) {
  for (size_t j = 2; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "withcode")) continue;
    if (eq_nocase(ctx.arg(j), "libraryname") && j + 1 < ctx.argc()) {
      ++j;
      continue;
    }
    return ctx.error("ERR Unknown argument " + std::string(ctx.arg(j)));
  }
  ctx.reply.array(0);
}

void function_load_cmd(CommandContext& ctx) { ctx.error(kNoScripts); }
void function_delete_cmd(CommandContext& ctx) { ctx.error("ERR Library not found"); }
void function_kill_cmd(CommandContext& ctx) { ctx.error("NOTBUSY No scripts in execution right now."); }
void function_stats_cmd(CommandContext& ctx) {
  ctx.reply.map(2);
  ctx.reply.bulk("running_script");
  ctx.reply.null();
  ctx.reply.bulk("engines");
  ctx.reply.map(0);
}
void function_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "FUNCTION",
             {"LIST [LIBRARYNAME <pattern>] [WITHCODE]", "    Return general information on all the libraries (none: there is no script engine).",
              "FLUSH [ASYNC|SYNC]", "    Delete all the libraries (there are none).", "LOAD, DELETE, DUMP, RESTORE",
              "    Not supported: conduit-kv has no script engine."});
}

void script_flush_cmd(CommandContext& ctx) {
  if (!flush_mode_ok(ctx, 2)) return;
  ctx.reply.ok();
}
void script_exists_cmd(CommandContext& ctx) {
  ctx.reply.array(ctx.argc() - 2);
  for (size_t j = 2; j < ctx.argc(); ++j) ctx.reply.integer(0);
}
void script_load_cmd(CommandContext& ctx) { ctx.error(kNoScripts); }
void script_kill_cmd(CommandContext& ctx) { ctx.error("NOTBUSY No scripts in execution right now."); }
void script_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "SCRIPT",
             {"EXISTS <sha1> [<sha1> ...]", "    Return information about the existence of the scripts (none exist).",
              "FLUSH [ASYNC|SYNC]", "    Flush the Lua scripts cache (it is empty).", "LOAD <script>",
              "    Not supported: conduit-kv has no script engine."});
}

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kF = kCmdFast, kA = kCmdAdmin, kL = kCmdLoading,
                   kS = kCmdStale, kNS = kCmdNoScript;

const CommandDef kConfigSubs[] = {
    {"get", config_get_cmd, -3, kA | kNS | kL | kS, 0, 0, 0, "server", "Returns the effective values of configuration parameters.", "2.0.0"},
    {"set", config_set_cmd, -4, kA | kNS | kL | kS, 0, 0, 0, "server", "Sets configuration parameters in-flight.", "2.0.0"},
    {"resetstat", config_resetstat_cmd, 2, kA | kNS | kL | kS, 0, 0, 0, "server", "Resets the server's statistics.", "2.0.0"},
    {"rewrite", config_rewrite_cmd, 2, kA | kNS | kL | kS, 0, 0, 0, "server", "Persists the effective configuration to file.", "2.8.0"},
    {"help", config_help_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns helpful text about the different subcommands.", "5.0.0"},
};

const CommandDef kCommandSubs[] = {
    {"count", command_count_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns a count of commands.", "2.8.13"},
    {"info", command_info_cmd, -2, kL | kS, 0, 0, 0, "server", "Returns information about one, multiple or all commands.", "2.8.13"},
    {"docs", command_docs_cmd, -2, kL | kS, 0, 0, 0, "server", "Returns documentary information about one, multiple or all commands.", "7.0.0"},
    {"list", command_list_cmd, -2, kL | kS, 0, 0, 0, "server", "Returns a list of command names.", "7.0.0"},
    {"getkeys", command_getkeys_cmd, -3, kL | kS, 0, 0, 0, "server", "Extracts the key names from an arbitrary command.", "2.8.13"},
    {"help", command_help_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns helpful text about the different subcommands.", "5.0.0"},
};

const CommandDef kMemorySubs[] = {
    {"usage", memory_usage_cmd, -3, kR, 2, 2, 1, "server", "Estimates the memory usage of a key.", "4.0.0"},
    {"doctor", memory_doctor_cmd, 2, 0, 0, 0, 0, "server", "Outputs a memory problems report.", "4.0.0"},
    {"purge", memory_purge_cmd, 2, 0, 0, 0, 0, "server", "Asks the allocator to release memory.", "4.0.0"},
    {"help", memory_help_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns helpful text about the different subcommands.", "4.0.0"},
};

const CommandDef kLatencySubs[] = {
    {"latest", latency_latest_cmd, 2, kA | kNS | kL | kS, 0, 0, 0, "server", "Returns the latest latency samples for all events.", "2.8.13"},
    {"history", latency_history_cmd, 3, kA | kNS | kL | kS, 0, 0, 0, "server", "Returns timestamp-latency samples for an event.", "2.8.13"},
    {"reset", latency_reset_cmd, -2, kA | kNS | kL | kS, 0, 0, 0, "server", "Resets the latency data for one or more events.", "2.8.13"},
    {"histogram", latency_histogram_cmd, -2, kA | kNS | kL | kS, 0, 0, 0, "server", "Returns the cumulative distribution of latencies of a subset or all commands.", "7.0.0"},
    {"doctor", latency_doctor_cmd, 2, kA | kNS | kL | kS, 0, 0, 0, "server", "Returns a human-readable latency analysis report.", "2.8.13"},
    {"help", latency_help_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns helpful text about the different subcommands.", "2.8.13"},
};

const CommandDef kFunctionSubs[] = {
    {"flush", function_flush_cmd, -2, kW | kNS, 0, 0, 0, "scripting", "Deletes all libraries and functions.", "7.0.0"},
    {"list", function_list_cmd, -2, kNS, 0, 0, 0, "scripting", "Returns information about all libraries.", "7.0.0"},
    {"load", function_load_cmd, -3, kW | kNS, 0, 0, 0, "scripting", "Creates a library.", "7.0.0"},
    {"delete", function_delete_cmd, 3, kW | kNS, 0, 0, 0, "scripting", "Deletes a library and its functions.", "7.0.0"},
    {"kill", function_kill_cmd, 2, kNS, 0, 0, 0, "scripting", "Terminates a function during execution.", "7.0.0"},
    {"stats", function_stats_cmd, 2, kNS, 0, 0, 0, "scripting", "Returns information about a function during execution.", "7.0.0"},
    {"help", function_help_cmd, 2, kL | kS, 0, 0, 0, "scripting", "Returns helpful text about the different subcommands.", "7.0.0"},
};

const CommandDef kScriptSubs[] = {
    {"flush", script_flush_cmd, -2, kNS, 0, 0, 0, "scripting", "Removes all server-side Lua scripts from the script cache.", "2.6.0"},
    {"exists", script_exists_cmd, -3, kNS, 0, 0, 0, "scripting", "Determines whether server-side Lua scripts exist in the script cache.", "2.6.0"},
    {"load", script_load_cmd, 3, kNS, 0, 0, 0, "scripting", "Loads a server-side Lua script to the script cache.", "2.6.0"},
    {"kill", script_kill_cmd, 2, kNS, 0, 0, 0, "scripting", "Terminates a server-side Lua script during execution.", "2.6.0"},
    {"help", script_help_cmd, 2, kL | kS, 0, 0, 0, "scripting", "Returns helpful text about the different subcommands.", "5.0.0"},
};

const CommandDef kCommands[] = {
    {"info", info_cmd, -1, kL | kS, 0, 0, 0, "server", "Returns information and statistics about the server.", "1.0.0"},
    {"config", nullptr, -2, 0, 0, 0, 0, "server", "A container for server configuration commands.", "2.0.0", kConfigSubs},
    {"command", command_cmd, -1, kL | kS, 0, 0, 0, "server", "Returns detailed information about all commands.", "2.8.13", kCommandSubs},
    {"memory", nullptr, -2, 0, 0, 0, 0, "server", "A container for memory diagnostics commands.", "4.0.0", kMemorySubs},
    {"latency", nullptr, -2, 0, 0, 0, 0, "server", "A container for latency diagnostics commands.", "2.8.13", kLatencySubs},
    {"function", nullptr, -2, 0, 0, 0, 0, "scripting", "A container for function commands.", "7.0.0", kFunctionSubs},
    {"script", nullptr, -2, 0, 0, 0, 0, "scripting", "A container for Lua scripts management commands.", "2.6.0", kScriptSubs},
    {"time", time_cmd, 1, kL | kS | kF, 0, 0, 0, "server", "Returns the server time.", "2.6.0"},
    {"bgrewriteaof", bgrewriteaof_cmd, 1, kA | kNS, 0, 0, 0, "server", "Asynchronously rewrites the append-only file to disk.", "1.0.0"},
    {"shutdown", shutdown_cmd, -1, kA | kNS | kL | kS | kCmdNoMulti, 0, 0, 0, "server", "Synchronously saves the database(s) to disk and shuts down the Redis server.", "1.0.0"},
    {"save", save_cmd, 1, kA | kNS | kCmdNoMulti, 0, 0, 0, "server", "Synchronously saves the database(s) to disk.", "1.0.0"},
    {"bgsave", save_cmd, -1, kA | kNS, 0, 0, 0, "server", "Asynchronously saves the database(s) to disk.", "1.0.0"},
    {"lastsave", lastsave_cmd, 1, kL | kS | kF, 0, 0, 0, "server", "Returns the Unix timestamp of the last successful save to disk.", "1.0.0"},
    {"replicaof", replicaof_cmd, 3, kA | kNS | kS, 0, 0, 0, "server", "Configures a server as replica of another, or promotes it to a master.", "5.0.0"},
    {"slaveof", replicaof_cmd, 3, kA | kNS | kS, 0, 0, 0, "server", "Sets a Redis server as a replica of another, or promotes it to being a master.", "1.0.0"},
};

}  // namespace

std::span<const CommandDef> server_commands() { return kCommands; }

}  // namespace conduit::kv
