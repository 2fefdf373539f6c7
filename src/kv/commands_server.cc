// Connection and server commands: PING ECHO QUIT HELLO AUTH INFO CONFIG CLIENT COMMAND
// TIME BGREWRITEAOF SHUTDOWN.
#include <sys/time.h>

#include <algorithm>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

constexpr std::string_view kServerVersion = "7.0.0";  // what we answer as "redis_version"

bool password_matches(std::string_view given, std::string_view want) {
  // Constant time in the length of `want`.
  unsigned diff = given.size() == want.size() ? 0u : 1u;
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned>(static_cast<unsigned char>(want[i]) ^
                                  static_cast<unsigned char>(i < given.size() ? given[i] : 0));
  return diff == 0;
}

std::string unknown_subcommand(std::string_view sub, std::string_view cmd) {
  return "ERR unknown subcommand '" + std::string(sub.substr(0, 128)) + "'. Try " + std::string(cmd) + " HELP.";
}

void ping_cmd(CommandContext& ctx) {
  if (ctx.argc() > 2) return ctx.error(wrong_args("ping"));
  if (ctx.argc() == 2) return ctx.reply.bulk(ctx.arg(1));
  ctx.reply.simple("PONG");
}

void echo_cmd(CommandContext& ctx) { ctx.reply.bulk(ctx.arg(1)); }

void quit_cmd(CommandContext& ctx) {
  ctx.reply.ok();
  ctx.client.close_after_reply = true;
}

// Returns "" if accepted, else the error to reply.
std::string check_auth(CommandContext& ctx, std::string_view user, std::string_view pass, bool user_given) {
  const std::string& want = ctx.server.options_.requirepass;
  if (user_given && user != "default") return "WRONGPASS invalid username-password pair or user is disabled.";
  if (want.empty()) {
    if (!user_given)
      return "ERR AUTH <password> called without any password configured for the default user. Are you sure your "
             "configuration is correct?";
    return "";  // the default user has no password: anything goes
  }
  if (!password_matches(pass, want)) return "WRONGPASS invalid username-password pair or user is disabled.";
  return "";
}

void auth_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  const bool user_given = ctx.argc() == 3;
  const std::string err = check_auth(ctx, user_given ? ctx.arg(1) : "default", ctx.arg(ctx.argc() - 1), user_given);
  if (!err.empty()) return ctx.error(err);
  ctx.client.authenticated = true;
  ctx.reply.ok();
}

bool valid_client_name(std::string_view n) {
  for (char c : n)
    if (c < '!' || c > '~') return false;
  return true;
}

void hello_cmd(CommandContext& ctx) {
  int64_t ver = 0;
  size_t j = 1;
  if (ctx.argc() >= 2) {
    if (!string2ll(ctx.arg(1), &ver)) return ctx.error("ERR Protocol version is not an integer or out of range");
    j = 2;
    if (ver < 2 || ver > 3) return ctx.error("NOPROTO unsupported protocol version");
  }
  std::string_view setname;
  bool has_setname = false;
  for (; j < ctx.argc(); ++j) {
    const size_t more = ctx.argc() - j - 1;
    if (eq_nocase(ctx.arg(j), "auth") && more >= 2) {
      const std::string err = check_auth(ctx, ctx.arg(j + 1), ctx.arg(j + 2), true);
      if (!err.empty()) return ctx.error(err);
      ctx.client.authenticated = true;
      j += 2;
    } else if (eq_nocase(ctx.arg(j), "setname") && more >= 1) {
      setname = ctx.arg(++j);
      has_setname = true;
      if (!valid_client_name(setname))
        return ctx.error("ERR Client names cannot contain spaces, newlines or special characters.");
    } else {
      return ctx.error("ERR Syntax error in HELLO option '" + std::string(ctx.arg(j)) + "'");
    }
  }
  if (!ctx.client.authenticated)
    return ctx.error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> "
        "<pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
  if (has_setname) ctx.client.name = std::string(setname);
  if (ver != 0) {
    ctx.client.resp = ver == 3 ? RespVersion::kResp3 : RespVersion::kResp2;
    ctx.reply.set_version(ctx.client.resp);
  }
  ctx.reply.map(7);
  ctx.reply.bulk("server");
  ctx.reply.bulk("redis");
  ctx.reply.bulk("version");
  ctx.reply.bulk(kServerVersion);
  ctx.reply.bulk("proto");
  ctx.reply.integer(ctx.client.resp == RespVersion::kResp3 ? 3 : 2);
  ctx.reply.bulk("id");
  ctx.reply.integer(static_cast<int64_t>(ctx.client.id));
  ctx.reply.bulk("mode");
  ctx.reply.bulk("standalone");
  ctx.reply.bulk("role");
  ctx.reply.bulk("master");
  ctx.reply.bulk("modules");
  ctx.reply.array(0);
}

void info_cmd(CommandContext& ctx) {
  std::string sections;
  for (size_t j = 1; j < ctx.argc(); ++j) {
    if (j > 1) sections += ' ';
    sections += ctx.arg(j);
  }
  ctx.reply.verbatim(ctx.server.info(sections));
}

void config_cmd(CommandContext& ctx) {
  const std::string_view sub = ctx.arg(1);
  if (eq_nocase(sub, "get")) {
    if (ctx.argc() < 3) return ctx.error(wrong_args("config|get"));
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
    return;
  }
  if (eq_nocase(sub, "set")) {
    if (ctx.argc() < 4 || ctx.argc() % 2 != 0) return ctx.error(wrong_args("config|set"));
    std::vector<std::pair<std::string_view, std::string_view>> pairs;
    for (size_t j = 2; j < ctx.argc(); j += 2) pairs.emplace_back(ctx.arg(j), ctx.arg(j + 1));
    const std::string err = ctx.server.config_set(pairs);
    if (!err.empty()) return ctx.error(err);
    return ctx.reply.ok();
  }
  if (eq_nocase(sub, "resetstat")) {
    if (ctx.argc() != 2) return ctx.error(wrong_args("config|resetstat"));
    ctx.server.reset_stats();
    return ctx.reply.ok();
  }
  if (eq_nocase(sub, "rewrite")) return ctx.error("ERR The server is running without a config file");
  if (eq_nocase(sub, "help")) {
    const char* lines[] = {"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                           "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
                           "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
                           "RESETSTAT", "    Reset statistics reported by the INFO command.",
                           "HELP", "    Print this help."};
    ctx.reply.array(std::size(lines));
    for (const char* l : lines) ctx.reply.simple(l);
    return;
  }
  ctx.error(unknown_subcommand(sub, "CONFIG"));
}

// CLIENT KILL addr | CLIENT KILL <filter> <value> ...: Redis 7.0's clientKillCommand.
// Filters combine with AND; SKIPME (default yes) spares the caller; an unknown filter,
// a filter without a value or a bad SKIPME value is a syntax error, and no filter at all
// is the wrong number of arguments.
void client_kill(CommandContext& ctx) {
  if (ctx.argc() < 3) return ctx.error(wrong_args("client|kill"));
  if (ctx.argc() == 3) {
    // Old form: CLIENT KILL addr:port, the caller included.
    for (const ClientConn* cc : ctx.server.clients())
      if (cc->peer == ctx.arg(2)) {
        if (cc == ctx.client.conn)
          ctx.client.close_after_reply = true;
        else
          ctx.server.kill_client(ctx.server.find_client(cc->state.id));
        return ctx.reply.ok();
      }
    return ctx.error("ERR No such client");
  }
  uint64_t id = 0;
  std::string_view addr, laddr;
  bool have_addr = false, have_laddr = false, skipme = true, type_none = false;
  for (size_t j = 2; j < ctx.argc(); j += 2) {
    const std::string_view k = ctx.arg(j);
    if (j + 1 >= ctx.argc()) return ctx.error(kSyntaxError);
    const std::string_view v = ctx.arg(j + 1);
    if (eq_nocase(k, "id")) {
      int64_t n;
      if (!string2ll(v, &n) || n <= 0) return ctx.error("ERR client-id should be greater than 0");
      id = static_cast<uint64_t>(n);
    } else if (eq_nocase(k, "type")) {
      if (eq_nocase(v, "normal")) type_none = false;
      else if (eq_nocase(v, "master") || eq_nocase(v, "replica") || eq_nocase(v, "slave") || eq_nocase(v, "pubsub"))
        type_none = true;  // no such clients here
      else
        return ctx.error("ERR Unknown client type '" + std::string(v) + "'");
    } else if (eq_nocase(k, "addr")) {
      addr = v, have_addr = true;
    } else if (eq_nocase(k, "laddr")) {
      laddr = v, have_laddr = true;
    } else if (eq_nocase(k, "user")) {
      if (v != "default") return ctx.error("ERR No such user '" + std::string(v) + "'");
    } else if (eq_nocase(k, "skipme")) {
      if (eq_nocase(v, "yes")) skipme = true;
      else if (eq_nocase(v, "no")) skipme = false;
      else return ctx.error(kSyntaxError);
    } else {
      return ctx.error(kSyntaxError);
    }
  }
  int64_t killed = 0;
  std::vector<uint64_t> victims;
  for (const ClientConn* cc : ctx.server.clients()) {
    if (type_none || (id != 0 && cc->state.id != id) || (have_addr && cc->peer != addr) ||
        (have_laddr && cc->local != laddr) || (skipme && cc == ctx.client.conn))
      continue;
    victims.push_back(cc->state.id);
  }
  for (uint64_t vid : victims) {
    ClientConn* cc = ctx.server.find_client(vid);
    if (cc == nullptr || cc->closed) continue;
    if (cc == ctx.client.conn)
      ctx.client.close_after_reply = true;  // the reply goes out first
    else
      ctx.server.kill_client(cc);
    ++killed;
  }
  ctx.reply.integer(killed);
}

void client_cmd(CommandContext& ctx) {
  const std::string_view sub = ctx.arg(1);
  ClientState& c = ctx.client;
  if (eq_nocase(sub, "id") && ctx.argc() == 2) return ctx.reply.integer(static_cast<int64_t>(c.id));
  if (eq_nocase(sub, "getname") && ctx.argc() == 2) return c.name.empty() ? ctx.reply.null() : ctx.reply.bulk(c.name);
  if (eq_nocase(sub, "setname")) {
    if (ctx.argc() != 3) return ctx.error(wrong_args("client|setname"));
    if (!valid_client_name(ctx.arg(2)))
      return ctx.error("ERR Client names cannot contain spaces, newlines or special characters.");
    c.name = std::string(ctx.arg(2));
    return ctx.reply.ok();
  }
  if (eq_nocase(sub, "setinfo")) {
    if (ctx.argc() != 4) return ctx.error(wrong_args("client|setinfo"));
    if (!eq_nocase(ctx.arg(2), "lib-name") && !eq_nocase(ctx.arg(2), "lib-ver"))
      return ctx.error("ERR Unrecognized option '" + std::string(ctx.arg(2)) + "'");
    return ctx.reply.ok();
  }
  if (eq_nocase(sub, "no-evict") || eq_nocase(sub, "no-touch")) {
    if (ctx.argc() != 3) return ctx.error(wrong_args("client|" + std::string(sub)));
    // Accepted and ignored (there is no client eviction), but only with Redis' values.
    if (!eq_nocase(ctx.arg(2), "on") && !eq_nocase(ctx.arg(2), "off")) return ctx.error(kSyntaxError);
    return ctx.reply.ok();
  }
  if (eq_nocase(sub, "list")) {
    std::vector<uint64_t> ids;
    for (size_t j = 2; j < ctx.argc(); ++j) {
      if (eq_nocase(ctx.arg(j), "type") && j + 1 < ctx.argc()) {
        const std::string_view t = ctx.arg(++j);
        if (!eq_nocase(t, "normal") && !eq_nocase(t, "master") && !eq_nocase(t, "replica") && !eq_nocase(t, "pubsub"))
          return ctx.error("ERR Unknown client type '" + std::string(t) + "'");
        if (!eq_nocase(t, "normal")) return ctx.reply.verbatim("");
      } else if (eq_nocase(ctx.arg(j), "id") && j + 1 < ctx.argc()) {
        for (++j; j < ctx.argc(); ++j) {
          int64_t id;
          if (!string2ll(ctx.arg(j), &id) || id <= 0) return ctx.error("ERR Invalid client ID");
          ids.push_back(static_cast<uint64_t>(id));
        }
      } else {
        return ctx.error(kSyntaxError);
      }
    }
    std::string out;
    for (const ClientConn* cc : ctx.server.clients()) {
      if (!ids.empty() && std::find(ids.begin(), ids.end(), cc->state.id) == ids.end()) continue;
      out += ctx.server.client_list_line(*cc);
      out += '\n';
    }
    return ctx.reply.verbatim(out);
  }
  if (eq_nocase(sub, "info") && ctx.argc() == 2) {
    if (c.conn == nullptr) return ctx.reply.verbatim("");
    return ctx.reply.verbatim(ctx.server.client_list_line(*c.conn) + "\n");
  }
  if (eq_nocase(sub, "kill")) return client_kill(ctx);
  if (eq_nocase(sub, "help")) {
    const char* lines[] = {"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "ID", "GETNAME",
                           "SETNAME <name>", "LIST [TYPE normal] [ID <id> ...]", "INFO", "KILL ID <id> | ADDR <ip:port>",
                           "HELP"};
    ctx.reply.array(std::size(lines));
    for (const char* l : lines) ctx.reply.simple(l);
    return;
  }
  if (eq_nocase(sub, "id") || eq_nocase(sub, "getname") || eq_nocase(sub, "info"))
    return ctx.error(wrong_args("client|" + std::string(sub)));
  ctx.error(unknown_subcommand(sub, "CLIENT"));
}

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

void command_info(CommandContext& ctx, const CommandDef* d) {
  if (d == nullptr) return ctx.reply.null_array();
  ctx.reply.array(10);
  ctx.reply.bulk(d->name);
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
  ctx.reply.array(0);  // subcommands
}

void command_docs(CommandContext& ctx, const CommandDef* d) {
  ctx.reply.bulk(d->name);
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
  if (ctx.argc() == 1) {
    ctx.reply.array(all.size());
    for (const CommandDef* d : all) command_info(ctx, d);
    return;
  }
  const std::string_view sub = ctx.arg(1);
  if (eq_nocase(sub, "count")) {
    if (ctx.argc() != 2) return ctx.error(wrong_args("command|count"));
    return ctx.reply.integer(static_cast<int64_t>(all.size()));
  }
  if (eq_nocase(sub, "info")) {
    if (ctx.argc() == 2) {
      ctx.reply.array(all.size());
      for (const CommandDef* d : all) command_info(ctx, d);
      return;
    }
    ctx.reply.array(ctx.argc() - 2);
    for (size_t j = 2; j < ctx.argc(); ++j) command_info(ctx, ctx.server.find_command(ctx.arg(j)));
    return;
  }
  if (eq_nocase(sub, "docs")) {
    std::vector<const CommandDef*> want;
    if (ctx.argc() == 2) {
      want.assign(all.begin(), all.end());
    } else {
      for (size_t j = 2; j < ctx.argc(); ++j)
        if (const CommandDef* d = ctx.server.find_command(ctx.arg(j))) want.push_back(d);
    }
    ctx.reply.map(want.size());
    for (const CommandDef* d : want) command_docs(ctx, d);
    return;
  }
  if (eq_nocase(sub, "list")) {
    ctx.reply.array(all.size());
    for (const CommandDef* d : all) ctx.reply.bulk(d->name);
    return;
  }
  if (eq_nocase(sub, "help")) {
    const char* lines[] = {"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)",
                           "COUNT", "DOCS [<command-name> ...]", "INFO [<command-name> ...]", "LIST", "HELP"};
    ctx.reply.array(std::size(lines));
    for (const char* l : lines) ctx.reply.simple(l);
    return;
  }
  ctx.error(unknown_subcommand(sub, "COMMAND"));
}

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

void lastsave_cmd(CommandContext& ctx) { ctx.reply.integer(ctx.server.start_time_ms_ / 1000); }

constexpr uint32_t kW = kCmdWrite, kR = kCmdReadonly, kF = kCmdFast, kA = kCmdAdmin, kN = kCmdNoAuth,
                   kL = kCmdLoading, kS = kCmdStale;

const CommandDef kCommands[] = {
    {"ping", ping_cmd, -1, kF | kS, 0, 0, 0, "connection", "Returns the server's liveliness response.", "1.0.0"},
    {"echo", echo_cmd, 2, kF | kL | kS, 0, 0, 0, "connection", "Returns the given string.", "1.0.0"},
    {"quit", quit_cmd, -1, kN | kL | kS | kF, 0, 0, 0, "connection", "Closes the connection.", "1.0.0"},
    {"hello", hello_cmd, -1, kN | kL | kS | kF, 0, 0, 0, "connection", "Handshakes with the Redis server.", "6.0.0"},
    {"auth", auth_cmd, -2, kN | kL | kS | kF, 0, 0, 0, "connection", "Authenticates the connection.", "1.0.0"},
    {"info", info_cmd, -1, kL | kS, 0, 0, 0, "server", "Returns information and statistics about the server.", "1.0.0"},
    {"config", config_cmd, -2, kA | kL | kS, 0, 0, 0, "server", "A container for server configuration commands.", "2.0.0"},
    {"client", client_cmd, -2, kL | kS, 0, 0, 0, "connection", "A container for client connection commands.", "2.4.0"},
    {"command", command_cmd, -1, kL | kS, 0, 0, 0, "server", "Returns detailed information about all commands.", "2.8.13"},
    {"time", time_cmd, 1, kL | kS | kF, 0, 0, 0, "server", "Returns the server time.", "2.6.0"},
    {"bgrewriteaof", bgrewriteaof_cmd, 1, kA, 0, 0, 0, "server", "Asynchronously rewrites the append-only file to disk.", "1.0.0"},
    {"shutdown", shutdown_cmd, -1, kA | kL | kS, 0, 0, 0, "server", "Synchronously saves the database(s) to disk and shuts down the Redis server.", "1.0.0"},
    {"save", save_cmd, 1, kA, 0, 0, 0, "server", "Synchronously saves the database(s) to disk.", "1.0.0"},
    {"bgsave", save_cmd, -1, kA, 0, 0, 0, "server", "Asynchronously saves the database(s) to disk.", "1.0.0"},
    {"lastsave", lastsave_cmd, 1, kL | kS | kF, 0, 0, 0, "server", "Returns the Unix timestamp of the last successful save to disk.", "1.0.0"},
};

// Silence "unused" for flags kept for documentation symmetry.
[[maybe_unused]] constexpr uint32_t kUnused = kW | kR;

}  // namespace

std::span<const CommandDef> server_commands() { return kCommands; }

}  // namespace conduit::kv
