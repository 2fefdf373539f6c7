// Connection commands: PING ECHO QUIT HELLO AUTH RESET and CLIENT's subcommands.
#include <algorithm>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {
namespace {

void ping_cmd(CommandContext& ctx) {
  if (ctx.argc() > 2) return ctx.error(wrong_args("ping"));
  // A RESP2 subscriber gets ["pong", msg] (Redis' subscribed-context form).
  if (ctx.client.resp == RespVersion::kResp2 && ctx.client.subscriptions() > 0) {
    ctx.reply.array(2);
    ctx.reply.bulk("pong");
    return ctx.reply.bulk(ctx.argc() == 2 ? ctx.arg(1) : "");
  }
  if (ctx.argc() == 2) return ctx.reply.bulk(ctx.arg(1));
  ctx.reply.simple("PONG");
}

void echo_cmd(CommandContext& ctx) { ctx.reply.bulk(ctx.arg(1)); }

void quit_cmd(CommandContext& ctx) {
  ctx.reply.ok();
  ctx.client.close_after_reply = true;
}

// AUTH / HELLO AUTH: authenticates the client as `user` (Redis' ACLAuthenticateUser); a
// failure is logged (ACL LOG, reason "auth").  Returns "" if accepted, else the error.
std::string authenticate(CommandContext& ctx, std::string_view user, std::string_view pass) {
  std::shared_ptr<AclUser> u = ctx.server.acl_.authenticate(user, pass);
  if (u == nullptr) {
    ctx.server.acl_log_locked(ctx.client, AclResult::kDeniedAuth, std::string(ctx.arg(0)), std::string(user),
                              ctx.client.in_multi);
    return "WRONGPASS invalid username-password pair or user is disabled.";
  }
  ctx.client.authenticated = true;
  ctx.client.user = std::move(u);
  return "";
}

void auth_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(kSyntaxError);
  if (ctx.argc() == 2 && ctx.server.acl_.default_user()->nopass)
    return ctx.error("ERR AUTH <password> called without any password configured for the default user. Are you sure "
                     "your configuration is correct?");
  const std::string err = authenticate(ctx, ctx.argc() == 3 ? ctx.arg(1) : "default", ctx.arg(ctx.argc() - 1));
  if (!err.empty()) return ctx.error(err);
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
      const std::string err = authenticate(ctx, ctx.arg(j + 1), ctx.arg(j + 2));
      if (!err.empty()) return ctx.error(err);
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
  if (!ctx.client.authenticated && ctx.server.acl_.auth_required())
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
  ctx.reply.bulk("7.0.15");
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


// --- CLIENT -------------------------------------------------------------------------------------

// CLIENT KILL addr | CLIENT KILL <filter> <value> ...: Redis 7.0's clientKillCommand.
// Filters combine with AND; SKIPME (default yes) spares the caller; an unknown filter,
// a filter without a value or a bad SKIPME value is a syntax error.
void client_kill_cmd(CommandContext& ctx) {
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
  bool have_addr = false, have_laddr = false, skipme = true;
  std::shared_ptr<AclUser> user;
  int type = -1;  // -1 any, 0 normal, 1 pubsub, 2 none (master/replica)
  for (size_t j = 2; j < ctx.argc(); j += 2) {
    const std::string_view k = ctx.arg(j);
    if (j + 1 >= ctx.argc()) return ctx.error(kSyntaxError);
    const std::string_view v = ctx.arg(j + 1);
    if (eq_nocase(k, "id")) {
      int64_t n;
      if (!string2ll(v, &n) || n <= 0) return ctx.error("ERR client-id should be greater than 0");
      id = static_cast<uint64_t>(n);
    } else if (eq_nocase(k, "type")) {
      if (eq_nocase(v, "normal")) type = 0;
      else if (eq_nocase(v, "pubsub")) type = 1;
      else if (eq_nocase(v, "master") || eq_nocase(v, "replica") || eq_nocase(v, "slave")) type = 2;
      else return ctx.error("ERR Unknown client type '" + std::string(v) + "'");
    } else if (eq_nocase(k, "addr")) {
      addr = v, have_addr = true;
    } else if (eq_nocase(k, "laddr")) {
      laddr = v, have_laddr = true;
    } else if (eq_nocase(k, "user")) {
      user = ctx.server.acl_.find(v);
      if (user == nullptr) return ctx.error("ERR No such user '" + std::string(v) + "'");
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
    const int ct = cc->state.subscriptions() > 0 ? 1 : 0;
    if ((type >= 0 && type != ct) || (id != 0 && cc->state.id != id) || (have_addr && cc->peer != addr) ||
        (have_laddr && cc->local != laddr) || (user != nullptr && cc->state.user != user) ||
        (skipme && cc == ctx.client.conn))
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

void client_id_cmd(CommandContext& ctx) { ctx.reply.integer(static_cast<int64_t>(ctx.client.id)); }

void client_getname_cmd(CommandContext& ctx) {
  ctx.client.name.empty() ? ctx.reply.null() : ctx.reply.bulk(ctx.client.name);
}

void client_setname_cmd(CommandContext& ctx) {
  if (!valid_client_name(ctx.arg(2)))
    return ctx.error("ERR Client names cannot contain spaces, newlines or special characters.");
  ctx.client.name = std::string(ctx.arg(2));
  ctx.reply.ok();
}

void client_no_evict_cmd(CommandContext& ctx) {
  // There is no client eviction (maxmemory-clients is accepted without effect): the flag
  // is kept and shown (CLIENT LIST flags=e), with Redis' values only.
  if (eq_nocase(ctx.arg(2), "on")) ctx.client.no_evict = true;
  else if (eq_nocase(ctx.arg(2), "off")) ctx.client.no_evict = false;
  else return ctx.error(kSyntaxError);
  ctx.reply.ok();
}

void client_list_cmd(CommandContext& ctx) {
  std::vector<uint64_t> ids;
  int type = -1;
  for (size_t j = 2; j < ctx.argc(); ++j) {
    if (eq_nocase(ctx.arg(j), "type") && j + 1 < ctx.argc()) {
      const std::string_view t = ctx.arg(++j);
      if (eq_nocase(t, "normal")) type = 0;
      else if (eq_nocase(t, "pubsub")) type = 1;
      else if (eq_nocase(t, "master") || eq_nocase(t, "replica") || eq_nocase(t, "slave")) type = 2;
      else return ctx.error("ERR Unknown client type '" + std::string(t) + "'");
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
    const int ct = cc->state.subscriptions() > 0 ? 1 : 0;
    if (type >= 0 && type != ct) continue;
    out += ctx.server.client_list_line(*cc);
    out += '\n';
  }
  ctx.reply.verbatim(out);
}

void client_info_cmd(CommandContext& ctx) {
  if (ctx.client.conn == nullptr) return ctx.reply.verbatim("");
  ctx.reply.verbatim(ctx.server.client_list_line(*ctx.client.conn) + "\n");
}

void client_reply_cmd(CommandContext& ctx) {
  const std::string_view m = ctx.arg(2);
  if (eq_nocase(m, "on")) {
    ctx.client.reply_mode = ReplyMode::kOn;
    // This reply is written even though the mode was off while the command started.
    ctx.reply.ok();
  } else if (eq_nocase(m, "off")) {
    ctx.client.reply_mode = ReplyMode::kOff;
  } else if (eq_nocase(m, "skip")) {
    if (ctx.client.reply_mode == ReplyMode::kOn) ctx.client.reply_mode = ReplyMode::kSkipNext;
  } else {
    ctx.error(kSyntaxError);
  }
}

void client_pause_cmd(CommandContext& ctx) {
  int64_t ms;
  if (!get_ll(ctx, ctx.arg(2), &ms, "ERR timeout is not an integer or out of range")) return;
  if (ms < 0) return ctx.error("ERR timeout is negative");
  bool writes_only = false;
  if (ctx.argc() == 4) {
    if (eq_nocase(ctx.arg(3), "write")) writes_only = true;
    else if (!eq_nocase(ctx.arg(3), "all")) return ctx.error("ERR CLIENT PAUSE mode must be WRITE or ALL");
  } else if (ctx.argc() > 4) {
    return ctx.error(kSyntaxError);
  }
  ctx.server.pause_clients(wall_ms() + ms, writes_only);
  ctx.reply.ok();
}

void client_unpause_cmd(CommandContext& ctx) {
  ctx.server.unpause_clients();
  ctx.reply.ok();
}

void client_unblock_cmd(CommandContext& ctx) {
  int64_t id;
  if (!get_ll(ctx, ctx.arg(2), &id)) return;
  bool error = false;
  if (ctx.argc() == 4) {
    if (eq_nocase(ctx.arg(3), "error")) error = true;
    else if (!eq_nocase(ctx.arg(3), "timeout"))
      return ctx.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
  }
  ClientConn* c = id > 0 ? ctx.server.find_client(static_cast<uint64_t>(id)) : nullptr;
  if (c == nullptr || !c->state.blocked) return ctx.reply.integer(0);
  if (error)
    ctx.server.unblock(c->state, false, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
  else
    ctx.server.unblock(c->state, true);
  ctx.reply.integer(1);
}

void client_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "CLIENT",
             {"CACHING (YES|NO)", "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
              "GETREDIR", "    Return the client ID we are redirecting to when tracking is enabled.",
              "GETNAME", "    Return the name of the current connection.", "ID", "    Return the ID of the current connection.",
              "INFO", "    Return information about the current client connection.",
              "KILL <ip:port>", "    Kill connection made from <ip:port>.", "KILL <option> <value> [<option> <value> [...]]",
              "    Kill connections. Options are: ID, TYPE, USER, ADDR, LADDR, SKIPME.",
              "LIST [options ...]", "    Return information about client connections. Options: TYPE, ID.",
              "UNPAUSE", "    Stop the current client pause, resuming traffic.", "PAUSE <timeout> [WRITE|ALL]",
              "    Suspend all, or just write, clients for <timeout> milliseconds.", "REPLY (ON|OFF|SKIP)",
              "    Control the replies sent to the current connection.", "SETNAME <name>",
              "    Assign the name <name> to the current connection.", "UNBLOCK <clientid> [TIMEOUT|ERROR]",
              "    Unblock the specified blocked client.",
              "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]", "         [OPTIN] [OPTOUT] [NOLOOP]",
              "    Control server assisted client side caching.", "TRACKINGINFO",
              "    Report tracking status for the current connection.", "NO-EVICT (ON|OFF)",
              "    Protect current client connection from eviction."});
}

// RESET: the connection as it was after connecting (Redis 7.0 resetCommand).
void reset_cmd(CommandContext& ctx) {
  ClientState& c = ctx.client;
  ServerImpl& s = ctx.server;
  if (c.in_multi) s.discard_multi(c);
  s.unwatch_all(c);
  s.tracking_disable(c);
  s.unsubscribe_all(c, false, false);
  s.unsubscribe_all(c, true, false);
  if (c.monitor) {
    c.monitor = false;
    auto& m = s.monitors_;
    m.erase(std::remove(m.begin(), m.end(), c.conn), m.end());
  }
  c.db = 0;
  ctx.db = &s.db(0);
  c.resp = RespVersion::kResp2;
  ctx.reply.set_version(RespVersion::kResp2);
  c.name.clear();
  c.reply_mode = ReplyMode::kOn;
  c.no_evict = false;
  c.user = s.acl_.default_user();
  c.authenticated = !s.acl_.auth_required();
  ctx.reply.simple("RESET");
}

constexpr uint32_t kF = kCmdFast, kA = kCmdAdmin, kN = kCmdNoAuth, kL = kCmdLoading, kS = kCmdStale,
                   kNS = kCmdNoScript, kB = kCmdAllowBusy;

const CommandDef kClientSubs[] = {
    {"id", client_id_cmd, 2, kNS | kL | kS, 0, 0, 0, "connection", "Returns the unique client ID of the connection.", "5.0.0"},
    {"getname", client_getname_cmd, 2, kNS | kL | kS, 0, 0, 0, "connection", "Returns the name of the connection.", "2.6.9"},
    {"setname", client_setname_cmd, 3, kNS | kL | kS, 0, 0, 0, "connection", "Sets the connection name.", "2.6.9"},
    {"list", client_list_cmd, -2, kA | kNS | kL | kS, 0, 0, 0, "connection", "Lists open connections.", "2.4.0"},
    {"info", client_info_cmd, 2, kNS | kL | kS, 0, 0, 0, "connection", "Returns information about the connection.", "6.2.0"},
    {"kill", client_kill_cmd, -3, kA | kNS | kL | kS, 0, 0, 0, "connection", "Terminates open connections.", "2.4.0"},
    {"reply", client_reply_cmd, 3, kNS | kL | kS, 0, 0, 0, "connection", "Instructs the server whether to reply to commands.", "3.2.0"},
    {"pause", client_pause_cmd, -3, kA | kNS | kL | kS, 0, 0, 0, "connection", "Suspends commands processing.", "3.0.0"},
    {"unpause", client_unpause_cmd, 2, kA | kNS | kL | kS, 0, 0, 0, "connection", "Resumes processing commands from paused clients.", "6.2.0"},
    {"unblock", client_unblock_cmd, -3, kA | kNS | kL | kS, 0, 0, 0, "connection", "Unblocks a client blocked by a blocking command from a different connection.", "5.0.0"},
    {"no-evict", client_no_evict_cmd, 3, kA | kNS | kL | kS, 0, 0, 0, "connection", "Sets the client eviction mode of the connection.", "7.0.0"},
    {"getredir", client_getredir_cmd, 2, kNS | kL | kS, 0, 0, 0, "connection", "Returns the client ID to which the connection's tracking notifications are redirected.", "6.0.0"},
    {"tracking", client_tracking_cmd, -3, kNS | kL | kS, 0, 0, 0, "connection", "Controls server-assisted client-side caching for the connection.", "6.0.0"},
    {"caching", client_caching_cmd, 3, kNS | kL | kS, 0, 0, 0, "connection", "Instructs the server whether to track the keys in the next request.", "6.0.0"},
    {"trackinginfo", client_trackinginfo_cmd, 2, kNS | kL | kS, 0, 0, 0, "connection", "Returns information about server-assisted client-side caching for the connection.", "6.2.0"},
    {"help", client_help_cmd, 2, kL | kS, 0, 0, 0, "connection", "Returns helpful text about the different subcommands.", "5.0.0"},
};

const CommandDef kCommands[] = {
    {"ping", ping_cmd, -1, kF | kS | kCmdPubsub, 0, 0, 0, "connection", "Returns the server's liveliness response.", "1.0.0"},
    {"echo", echo_cmd, 2, kF | kL | kS, 0, 0, 0, "connection", "Returns the given string.", "1.0.0"},
    {"quit", quit_cmd, -1, kN | kL | kS | kF | kCmdPubsub | kB, 0, 0, 0, "connection", "Closes the connection.", "1.0.0"},
    {"hello", hello_cmd, -1, kN | kL | kS | kF | kNS | kCmdSkipMonitor | kB, 0, 0, 0, "connection", "Handshakes with the Redis server.", "6.0.0"},
    {"auth", auth_cmd, -2, kN | kL | kS | kF | kNS | kCmdSkipMonitor | kB, 0, 0, 0, "connection", "Authenticates the connection.", "1.0.0"},
    {"reset", reset_cmd, 1, kN | kL | kS | kF | kNS | kCmdPubsub | kB, 0, 0, 0, "connection", "Resets the connection.", "6.2.0"},
    {"client", nullptr, -2, kS, 0, 0, 0, "connection", "A container for client connection commands.", "2.4.0", kClientSubs},
};

}  // namespace

std::span<const CommandDef> connection_commands() { return kCommands; }

}  // namespace conduit::kv
