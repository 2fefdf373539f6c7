// The ACL command (Redis 7.0's aclCommand) and what a change of users does to clients: the
// check before a command with its NOPERM texts and log entry, pub/sub clients whose
// channels were revoked, clients of a deleted user, ACL LOAD / SAVE.  The users themselves,
// their rules and the check live in acl.cc.
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>

#include "acl.h"
#include "conduit/base/log.h"
#include "glob.h"
#include "numbers.h"
#include "server_impl.h"
#include "sha256.h"
#include "text.h"

namespace conduit::kv {

// --- ServerImpl: the check before a command, and the clients a change affects -------------------

std::string ServerImpl::acl_check_locked(ClientState& client, const CommandEntry* entry,
                                         std::span<const std::string_view> argv, bool exec) {
  size_t pos = 0;
  const AclResult r = acl_.check(*client.user, entry, argv, &pos);
  if (r == AclResult::kOk) return "";
  acl_log_locked(client, r, r == AclResult::kDeniedCmd ? entry->fullname : std::string(argv[pos]), client.user->name,
                 exec || client.in_multi);
  if (exec) {
    return std::string("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. "
                       "This command is no longer allowed for the following reason: ") +
           (r == AclResult::kDeniedCmd   ? "no permission to execute the command or subcommand"
            : r == AclResult::kDeniedKey ? "no permission to touch the specified keys"
                                         : "no permission to access one of the channels used as arguments");
  }
  switch (r) {
    case AclResult::kDeniedCmd: return "NOPERM this user has no permissions to run the '" + entry->fullname + "' command";
    case AclResult::kDeniedKey: return "NOPERM this user has no permissions to access one of the keys used as arguments";
    default: return "NOPERM this user has no permissions to access one of the channels used as arguments";
  }
}

void ServerImpl::acl_log_locked(ClientState& client, AclResult reason, std::string object, std::string username,
                                bool multi) {
  std::string info = client.conn != nullptr ? client_list_line(*client.conn) : std::string();
  acl_.log(reason, multi, std::move(object), std::move(username), std::move(info), wall_ms(), options_.acllog_max_len);
}

void ServerImpl::acl_user_changed(const std::shared_ptr<AclUser>& u, const AclUser& before, ClientState& caller) {
  if (u->allchannels) return;
  // Nothing revoked: every channel pattern the user had, it still has.
  bool superset = !before.allchannels;
  for (const std::string& c : before.channels)
    if (superset && std::find(u->channels.begin(), u->channels.end(), c) == u->channels.end()) superset = false;
  if (superset) return;
  std::vector<uint64_t> victims;
  for (const ClientConn* cc : clients()) {
    const ClientState& s = cc->state;
    if (s.user != u || s.subscriptions() == 0) continue;
    bool kill = false;
    for (const auto& p : s.patterns) kill = kill || !Acl::channel_allowed(u->channels, p, true);
    for (const auto& ch : s.channels) kill = kill || !Acl::channel_allowed(u->channels, ch, false);
    if (kill) victims.push_back(s.id);
  }
  for (uint64_t id : victims) {
    ClientConn* cc = find_client(id);
    if (cc == nullptr) continue;
    if (cc == caller.conn)
      caller.close_after_reply = true;
    else
      kill_client(cc);
  }
}

std::string ServerImpl::acl_file_path() const {
  const std::string& f = options_.aclfile;
  return f.empty() || f[0] == '/' ? f : options_.dir + "/" + f;
}

std::string ServerImpl::acl_load_file(ClientState* caller) {
  const std::string path = acl_file_path();
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr)
    return "ERR Error loading ACLs, opening file '" + path + "': " + std::string(std::strerror(errno));
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  std::vector<std::shared_ptr<AclUser>> removed;
  const std::string err = acl_.load_text(text, options_.aclfile, &removed);
  if (!err.empty()) return "ERR " + err;
  // The users that were replaced are gone: their clients are disconnected (Redis'
  // ACLFreeUsersSet), the caller after its reply.
  ClientState dummy;
  for (const auto& u : removed) acl_user_deleted(u, caller != nullptr ? *caller : dummy);
  return "";
}

std::string ServerImpl::acl_save_file() {
  const std::string path = acl_file_path(), tmp = path + ".tmp-acl";
  const std::string text = acl_.save_text();
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr && std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
            ::fsync(fileno(f)) == 0;
  if (f != nullptr) std::fclose(f);
  ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    CONDUIT_LOG(kWarn) << "conduit-kv: ACL SAVE to '" << path << "' failed: " << std::strerror(errno);
    std::remove(tmp.c_str());
    return "ERR There was an error trying to save the ACLs. Please check the server logs for more information";
  }
  return "";
}

void ServerImpl::acl_user_deleted(const std::shared_ptr<AclUser>& u, ClientState& caller) {
  std::vector<uint64_t> victims;
  for (const ClientConn* cc : clients())
    if (cc->state.user == u) victims.push_back(cc->state.id);
  for (uint64_t id : victims) {
    ClientConn* cc = find_client(id);
    if (cc == nullptr) continue;
    // As Redis: back to the default user, unauthenticated, until the close.
    cc->state.user = acl_.default_user();
    cc->state.authenticated = false;
    if (cc == caller.conn)
      caller.close_after_reply = true;  // the reply goes out first
    else
      kill_client(cc);
  }
}

// --- ACL ------------------------------------------------------------------------------------

namespace {

Acl& acl_of(CommandContext& ctx) { return ctx.server.acl_; }

// Redis' addReplySubcommandSyntaxError.
std::string subcommand_syntax(CommandContext& ctx) {
  return "ERR unknown subcommand or wrong number of arguments for '" + std::string(ctx.arg(1).substr(0, 128)) +
         "'. Try ACL HELP.";
}

void reply_user_map(CommandContext& ctx, const AclUser& u) {
  Acl& acl = acl_of(ctx);
  ctx.reply.map(6);
  ctx.reply.bulk("flags");
  std::vector<const char*> flags;
  flags.push_back(u.enabled ? "on" : "off");
  if (u.nopass) flags.push_back("nopass");
  if (u.skip_sanitize_payload) flags.push_back("skip-sanitize-payload");
  if (u.sanitize_payload) flags.push_back("sanitize-payload");
  ctx.reply.set(flags.size());
  for (const char* f : flags) ctx.reply.bulk(f);
  ctx.reply.bulk("passwords");
  ctx.reply.array(u.passwords.size());
  for (const auto& p : u.passwords) ctx.reply.bulk(p);
  ctx.reply.bulk("commands");
  ctx.reply.bulk(acl.describe_commands(u));
  ctx.reply.bulk("keys");
  ctx.reply.bulk(acl.keys_text(u));
  ctx.reply.bulk("channels");
  ctx.reply.bulk(acl.channels_text(u));
  ctx.reply.bulk("selectors");
  ctx.reply.array(0);
}

void acl_setuser_cmd(CommandContext& ctx) {
  const std::string_view name = ctx.arg(2);
  if (acl_name_has_spaces(name)) return ctx.error("ERR Usernames can't contain spaces or null characters");
  std::shared_ptr<AclUser> u;
  AclUser before;
  const bool existed = acl_of(ctx).find(name) != nullptr;
  const std::string err = acl_of(ctx).set_user(name, ctx.argv.subspan(3), &u, &before);
  if (!err.empty()) return ctx.error(err);
  if (existed) ctx.server.acl_user_changed(u, before, ctx.client);
  ctx.reply.ok();
}

void acl_deluser_cmd(CommandContext& ctx) {
  for (size_t i = 2; i < ctx.argc(); ++i)
    if (ctx.arg(i) == "default") return ctx.error("ERR The 'default' user cannot be removed");
  int64_t n = 0;
  for (size_t i = 2; i < ctx.argc(); ++i) {
    std::shared_ptr<AclUser> u = acl_of(ctx).remove(ctx.arg(i));
    if (u == nullptr) continue;
    ++n;
    ctx.server.acl_user_deleted(u, ctx.client);
  }
  ctx.reply.integer(n);
}

void acl_getuser_cmd(CommandContext& ctx) {
  std::shared_ptr<AclUser> u = acl_of(ctx).find(ctx.arg(2));
  if (u == nullptr) return ctx.reply.null();
  reply_user_map(ctx, *u);
}

void acl_users_cmd(CommandContext& ctx) {
  const auto& users = acl_of(ctx).users();
  ctx.reply.array(users.size());
  for (const auto& [name, u] : users) ctx.reply.bulk(name);
}

void acl_list_cmd(CommandContext& ctx) {
  const auto& users = acl_of(ctx).users();
  ctx.reply.array(users.size());
  for (const auto& [name, u] : users) ctx.reply.bulk("user " + name + " " + acl_of(ctx).describe(*u));
}

void acl_whoami_cmd(CommandContext& ctx) {
  if (ctx.client.user == nullptr) return ctx.reply.null();
  ctx.reply.bulk(ctx.client.user->name);
}

void acl_load_save_cmd(CommandContext& ctx) {
  if (!ctx.server.options_.aclfile.empty()) {
    const std::string err = eq_nocase(ctx.arg(1), "load") ? ctx.server.acl_load_file(&ctx.client)
                                                          : ctx.server.acl_save_file();
    if (!err.empty()) return ctx.error(err);
    return ctx.reply.ok();
  }
  ctx.error("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL "
            "SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in "
            "order to store users in the Redis configuration.");
}

void cat_names(CommandContext& ctx, uint32_t cat, std::span<CommandEntry* const> cmds, std::vector<std::string_view>* out) {
  for (const CommandEntry* e : cmds) {
    if (e->acl_categories & cat) out->push_back(e->fullname);
    if (!e->subs.empty()) cat_names(ctx, cat, e->subs, out);
  }
}

void acl_cat_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(subcommand_syntax(ctx));
  if (ctx.argc() == 2) {
    ctx.reply.array(acl_category_names().size());
    for (const auto& c : acl_category_names()) ctx.reply.bulk(c.name);
    return;
  }
  const uint32_t cat = acl_category_by_name(ctx.arg(2));
  if (cat == 0) return ctx.error("ERR Unknown category '" + std::string(ctx.arg(2).substr(0, 128)) + "'");
  std::vector<std::string_view> names;
  cat_names(ctx, cat, acl_of(ctx).commands(), &names);
  ctx.reply.array(names.size());
  for (auto n : names) ctx.reply.bulk(n);
}

void acl_genpass_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(subcommand_syntax(ctx));
  int64_t bits = 256;
  if (ctx.argc() == 3 && !get_ll(ctx, ctx.arg(2), &bits)) return;
  if (bits <= 0 || bits > 4096)
    return ctx.error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up "
                     "to 4096");
  const size_t chars = static_cast<size_t>((bits + 3) / 4);
  std::string raw((chars + 1) / 2, '\0');
  size_t got = 0;
  while (got < raw.size()) {
    const ssize_t r = getrandom(raw.data() + got, raw.size() - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ctx.error("ERR ACL GENPASS: the system's random source failed");
    }
    got += static_cast<size_t>(r);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  out.resize(chars);
  ctx.reply.bulk(out);
}

void acl_log_cmd(CommandContext& ctx) {
  if (ctx.argc() > 3) return ctx.error(subcommand_syntax(ctx));
  auto& log = acl_of(ctx).log_entries();
  int64_t count = 10;
  if (ctx.argc() == 3) {
    if (eq_nocase(ctx.arg(2), "reset")) {
      log.clear();
      return ctx.reply.ok();
    }
    if (!get_ll(ctx, ctx.arg(2), &count)) return;
    if (count < 0) count = 0;
  }
  const size_t n = std::min(static_cast<size_t>(count), log.size());
  ctx.reply.array(n);
  const int64_t now = wall_ms();
  for (size_t i = 0; i < n; ++i) {
    const Acl::LogEntry& e = log[i];
    ctx.reply.map(7);
    ctx.reply.bulk("count");
    ctx.reply.integer(static_cast<int64_t>(e.count));
    ctx.reply.bulk("reason");
    ctx.reply.bulk(e.reason == AclResult::kDeniedCmd       ? "command"
                   : e.reason == AclResult::kDeniedKey     ? "key"
                   : e.reason == AclResult::kDeniedChannel ? "channel"
                                                           : "auth");
    ctx.reply.bulk("context");
    ctx.reply.bulk(e.multi ? "multi" : "toplevel");
    ctx.reply.bulk("object");
    ctx.reply.bulk(e.object);
    ctx.reply.bulk("username");
    ctx.reply.bulk(e.username);
    ctx.reply.bulk("age-seconds");
    ctx.reply.dbl(static_cast<double>(now - e.ctime_ms) / 1000);
    ctx.reply.bulk("client-info");
    ctx.reply.bulk(e.client_info);
  }
}

void acl_dryrun_cmd(CommandContext& ctx) {
  std::shared_ptr<AclUser> u = acl_of(ctx).find(ctx.arg(2));
  if (u == nullptr) return ctx.error("ERR User '" + std::string(ctx.arg(2)) + "' not found");
  const auto argv = ctx.argv.subspan(3);
  bool unknown_sub = false;
  const CommandEntry* e = ctx.server.resolve(argv, &unknown_sub);
  if (e == nullptr || unknown_sub) return ctx.error("ERR Command '" + std::string(argv[0]) + "' not found");
  const int arity = e->def->arity, n = static_cast<int>(argv.size());
  if ((arity > 0 && arity != n) || n < -arity)
    return ctx.error("ERR wrong number of arguments for '" + e->fullname + "' command");
  size_t pos = 0;
  switch (acl_of(ctx).check(*u, e, argv, &pos)) {
    case AclResult::kOk: return ctx.reply.ok();
    case AclResult::kDeniedCmd:
      return ctx.reply.bulk("This user has no permissions to run the '" + e->fullname + "' command");
    case AclResult::kDeniedKey:
      return ctx.reply.bulk("This user has no permissions to access the '" + std::string(argv[pos]) + "' key");
    default:
      return ctx.reply.bulk("This user has no permissions to access the '" + std::string(argv[pos]) + "' channel");
  }
}

void acl_help_cmd(CommandContext& ctx) {
  reply_help(ctx, "ACL",
             {"CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
              "    when no category is specified.", "DELUSER <username> [<username> ...]", "    Delete a list of users.",
              "DRYRUN <username> <command> [<arg> ...]",
              "    Returns whether the user can execute the given command without executing the command.",
              "GETUSER <username>", "    Get the user's details.", "GENPASS [<bits>]",
              "    Generate a secure 256-bit user password. The optional `bits` argument can",
              "    be used to specify a different size.", "LIST", "    Show users details in config file format.",
              "LOAD", "    Reload users from the ACL file.", "LOG [<count> | RESET]", "    Show the ACL log entries.",
              "SAVE", "    Save the current config to the ACL file.",
              "SETUSER <username> <attribute> [<attribute> ...]",
              "    Create or modify a user with the specified attributes.", "USERS",
              "    List all the registered usernames.", "WHOAMI", "    Return the current connection username."});
}

constexpr uint32_t kAd = kCmdAdmin, kNS = kCmdNoScript, kL = kCmdLoading, kS = kCmdStale;

const CommandDef kAclSubs[] = {
    {"cat", acl_cat_cmd, -2, kNS | kL | kS, 0, 0, 0, "server", "Lists the ACL categories, or the commands inside a category.", "6.0.0"},
    {"deluser", acl_deluser_cmd, -3, kAd | kNS | kL | kS, 0, 0, 0, "server", "Deletes ACL users, and terminates their connections.", "6.0.0"},
    {"dryrun", acl_dryrun_cmd, -4, kAd | kNS | kL | kS, 0, 0, 0, "server", "Simulates the execution of a command by a user, without executing the command.", "7.0.0"},
    {"genpass", acl_genpass_cmd, -2, kNS | kL | kS, 0, 0, 0, "server", "Generates a pseudorandom, secure password that can be used to identify ACL users.", "6.0.0"},
    {"getuser", acl_getuser_cmd, 3, kAd | kNS | kL | kS, 0, 0, 0, "server", "Lists the ACL rules of a user.", "6.0.0"},
    {"help", acl_help_cmd, 2, kL | kS, 0, 0, 0, "server", "Returns helpful text about the different subcommands.", "6.0.0"},
    {"list", acl_list_cmd, 2, kAd | kNS | kL | kS, 0, 0, 0, "server", "Dumps the effective rules in ACL file format.", "6.0.0"},
    {"load", acl_load_save_cmd, 2, kAd | kNS | kL | kS, 0, 0, 0, "server", "Reloads the rules from the configured ACL file.", "6.0.0"},
    {"log", acl_log_cmd, -2, kAd | kNS | kL | kS, 0, 0, 0, "server", "Lists recent security events generated due to ACL rules.", "6.0.0"},
    {"save", acl_load_save_cmd, 2, kAd | kNS | kL | kS, 0, 0, 0, "server", "Saves the effective ACL rules in the configured ACL file.", "6.0.0"},
    {"setuser", acl_setuser_cmd, -3, kAd | kNS | kL | kS, 0, 0, 0, "server", "Creates and modifies an ACL user and its rules.", "6.0.0"},
    {"users", acl_users_cmd, 2, kAd | kNS | kL | kS, 0, 0, 0, "server", "Lists all ACL users.", "6.0.0"},
    {"whoami", acl_whoami_cmd, 2, kNS | kL | kS, 0, 0, 0, "server", "Returns the authenticated username of the current connection.", "6.0.0"},
};

const CommandDef kCommands[] = {
    {"acl", nullptr, -2, kS, 0, 0, 0, "server", "A container for Access List Control commands.", "6.0.0", kAclSubs},
};

}  // namespace

std::span<const CommandDef> acl_commands() { return kCommands; }

}  // namespace conduit::kv
