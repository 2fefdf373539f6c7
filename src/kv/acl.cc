// ACL users: Redis 7.0's acl.c for the root selector (selectors in parentheses are
// refused).  The rules, their errors, GETUSER/LIST's description (the same best-fit over
// categories as ACLDescribeSelectorCommandRules), the check before a command and the log.
#include "acl.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>

#include "conduit/base/log.h"
#include "glob.h"
#include "numbers.h"
#include "server_impl.h"
#include "sha256.h"
#include "text.h"

namespace conduit::kv {
namespace {

struct CategoryName {
  const char* name;
  uint32_t flag;
};
constexpr CategoryName kCategories[] = {
    {"keyspace", kAclKeyspace},   {"read", kAclRead},         {"write", kAclWrite},
    {"set", kAclSet},             {"sortedset", kAclSortedset}, {"list", kAclList},
    {"hash", kAclHash},           {"string", kAclString},     {"bitmap", kAclBitmap},
    {"hyperloglog", kAclHyperloglog}, {"geo", kAclGeo},       {"stream", kAclStream},
    {"pubsub", kAclPubsub},       {"admin", kAclAdmin},       {"fast", kAclFast},
    {"slow", kAclSlow},           {"blocking", kAclBlocking}, {"dangerous", kAclDangerous},
    {"connection", kAclConnection}, {"transaction", kAclTransaction}, {"scripting", kAclScripting},
};

uint32_t category_by_name(std::string_view n) {
  for (const auto& c : kCategories)
    if (eq_nocase(n, c.name)) return c.flag;
  return 0;
}

bool has_spaces(std::string_view s) {
  for (char c : s)
    if (std::isspace(static_cast<unsigned char>(c)) || c == 0) return true;
  return false;
}

bool valid_hash(std::string_view h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if ((c < 'a' || c > 'f') && (c < '0' || c > '9')) return false;
  return true;
}

bool same_hash(std::string_view a, std::string_view b) {  // both 64 chars: time independent
  unsigned diff = 0;
  for (size_t i = 0; i < 64; ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

std::string pattern_text(const AclUser::KeyPattern& p) {
  if (p.flags == (AclUser::kRead | AclUser::kWrite)) return "~" + p.pattern;
  return (p.flags == AclUser::kRead ? "%R~" : "%W~") + p.pattern;
}

// Redis' errno texts (ACLSetUserStringError).
constexpr const char* kUnknownName = "Unknown command or category name in ACL";
constexpr const char* kSyntax = "Syntax error";

}  // namespace

uint32_t acl_categories_of(const CommandDef& d, const CommandDef* parent) {
  static constexpr std::pair<const char*, uint32_t> kGroups[] = {
      {"generic", kAclKeyspace},  {"string", kAclString},         {"bitmap", kAclBitmap},
      {"list", kAclList},         {"hash", kAclHash},             {"set", kAclSet},
      {"sorted_set", kAclSortedset}, {"stream", kAclStream},      {"pubsub", kAclPubsub},
      {"transactions", kAclTransaction}, {"connection", kAclConnection}, {"hyperloglog", kAclHyperloglog},
      {"geo", kAclGeo},           {"scripting", kAclScripting},
  };
  uint32_t c = 0;
  // A pure container (CLIENT, CONFIG) has only the implicit categories, as in Redis.
  if (d.fn != nullptr)
    for (const auto& [g, f] : kGroups)
      if (std::strcmp(d.group, g) == 0) c |= f;
  // Redis files COMMAND (and its subcommands) under @connection, outside its group.
  if (std::strcmp(parent != nullptr ? parent->name : d.name, "command") == 0) c |= kAclConnection;
  if (d.flags & kCmdWrite) c |= kAclWrite;
  if (d.flags & kCmdReadonly) c |= kAclRead;
  if (d.flags & kCmdAdmin) c |= kAclAdmin | kAclDangerous;
  if (d.flags & kCmdBlocking) c |= kAclBlocking;
  c |= (d.flags & kCmdFast) ? kAclFast : kAclSlow;
  return c;
}

// --- users -------------------------------------------------------------------------------------

void Acl::init(std::span<CommandEntry* const> commands, uint32_t num_ids, bool pubsub_allchannels) {
  commands_.assign(commands.begin(), commands.end());
  num_ids_ = num_ids;
  pubsub_allchannels_ = pubsub_allchannels;
  default_ = make_user("default");
  std::string why;
  for (std::string_view op : {"+@all", "~*", "&*", "on", "nopass"}) (void)apply(*default_, op, &why);
  users_.emplace("default", default_);
}

std::shared_ptr<AclUser> Acl::make_user(std::string_view name) const {
  auto u = std::make_shared<AclUser>();
  u->name = std::string(name);
  u->allowed.assign(num_ids_ + 1, false);
  u->allchannels = pubsub_allchannels_;
  return u;
}

std::shared_ptr<AclUser> Acl::find(std::string_view name) const {
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : it->second;
}

const CommandEntry* Acl::lookup(std::string_view name) const {
  const size_t bar = name.find('|');
  const std::string_view base = name.substr(0, bar);
  const CommandEntry* e = nullptr;
  for (const CommandEntry* c : commands_)
    if (eq_nocase(c->def->name, base)) e = c;
  if (e == nullptr || bar == std::string_view::npos) return e;
  const std::string_view sub = name.substr(bar + 1);
  if (sub.find('|') != std::string_view::npos || e->subs.empty()) return nullptr;
  return e->find_sub(sub);
}

void Acl::change_perm(AclUser& u, const CommandEntry* e, bool allow) const {
  u.allowed[e->acl_id] = allow;
  if (!allow) u.allcommands = false;
  u.firstargs.erase(e->acl_id);
  for (const CommandEntry* s : e->subs) {
    u.allowed[s->acl_id] = allow;
    if (!allow) u.allcommands = false;
  }
}

void Acl::set_category(AclUser& u, uint32_t cat, std::span<CommandEntry* const> cmds, bool allow) const {
  for (const CommandEntry* e : cmds) {
    if (e->acl_categories & cat) change_perm(u, e, allow);
    if (!e->subs.empty()) set_category(u, cat, e->subs, allow);
  }
}

void Acl::count_category(const AclUser& u, uint32_t cat, std::span<CommandEntry* const> cmds, size_t* on,
                         size_t* off) const {
  for (const CommandEntry* e : cmds) {
    if (e->acl_categories & cat) ++(u.allowed[e->acl_id] ? *on : *off);
    if (!e->subs.empty()) count_category(u, cat, e->subs, on, off);
  }
}

// One rule (Redis' ACLSetUser + ACLSetSelector for the root selector).
bool Acl::apply(AclUser& u, std::string_view op, std::string* why) const {
  auto fail = [&](const char* w) { return *why = w, false; };
  if (op.empty()) return true;
  if (eq_nocase(op, "on")) {
    u.enabled = true;
  } else if (eq_nocase(op, "off")) {
    u.enabled = false;
  } else if (eq_nocase(op, "skip-sanitize-payload")) {
    u.skip_sanitize_payload = true, u.sanitize_payload = false;
  } else if (eq_nocase(op, "sanitize-payload")) {
    u.skip_sanitize_payload = false, u.sanitize_payload = true;
  } else if (eq_nocase(op, "nopass")) {
    u.nopass = true;
    u.passwords.clear();
  } else if (eq_nocase(op, "resetpass")) {
    u.nopass = false;
    u.passwords.clear();
  } else if (op[0] == '>' || op[0] == '#') {
    std::string h;
    if (op[0] == '>') {
      h = sha256_hex(op.substr(1));
    } else {
      if (!valid_hash(op.substr(1)))
        return fail("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters");
      h = std::string(op.substr(1));
    }
    if (std::find(u.passwords.begin(), u.passwords.end(), h) == u.passwords.end()) u.passwords.push_back(h);
    u.nopass = false;
  } else if (op[0] == '<' || op[0] == '!') {
    std::string h;
    if (op[0] == '<') {
      h = sha256_hex(op.substr(1));
    } else {
      if (!valid_hash(op.substr(1)))
        return fail("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters");
      h = std::string(op.substr(1));
    }
    auto it = std::find(u.passwords.begin(), u.passwords.end(), h);
    if (it == u.passwords.end()) return fail("The password you are trying to remove from the user does not exist");
    u.passwords.erase(it);
  } else if (op[0] == '(') {
    return fail("Selectors (rules in parentheses) are not supported by conduit-kv");
  } else if (eq_nocase(op, "clearselectors")) {
    // No selector besides the root one can exist: nothing to clear.
  } else if (eq_nocase(op, "reset")) {
    for (std::string_view r : {"resetpass", "resetkeys", "resetchannels"}) (void)apply(u, r, why);
    if (pubsub_allchannels_) (void)apply(u, "allchannels", why);
    for (std::string_view r : {"off", "sanitize-payload", "clearselectors", "-@all"}) (void)apply(u, r, why);
  } else if (eq_nocase(op, "allkeys") || op == "~*") {
    u.allkeys = true;
    u.keys.clear();
  } else if (eq_nocase(op, "resetkeys")) {
    u.allkeys = false;
    u.keys.clear();
  } else if (eq_nocase(op, "allchannels") || op == "&*") {
    u.allchannels = true;
    u.channels.clear();
  } else if (eq_nocase(op, "resetchannels")) {
    u.allchannels = false;
    u.channels.clear();
  } else if (eq_nocase(op, "allcommands") || eq_nocase(op, "+@all")) {
    u.allowed.assign(num_ids_ + 1, true);
    u.allcommands = true;
    u.firstargs.clear();
  } else if (eq_nocase(op, "nocommands") || eq_nocase(op, "-@all")) {
    u.allowed.assign(num_ids_ + 1, false);
    u.allcommands = false;
    u.firstargs.clear();
  } else if (op[0] == '~' || op[0] == '%') {
    if (u.allkeys)
      return fail("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any "
                  "effect. Try 'resetkeys' to start with an empty list of patterns");
    uint8_t flags = 0;
    size_t off = 1;
    if (op[0] == '%') {
      bool ok = true;
      for (; off < op.size(); ++off) {
        const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(op[off])));
        if (c == 'R' && !(flags & AclUser::kRead)) {
          flags |= AclUser::kRead;
        } else if (c == 'W' && !(flags & AclUser::kWrite)) {
          flags |= AclUser::kWrite;
        } else if (op[off] == '~') {
          ++off;
          break;
        } else {
          ok = false;
          break;
        }
      }
      if (flags == 0 || !ok) return fail(kSyntax);
    } else {
      flags = AclUser::kRead | AclUser::kWrite;
    }
    const std::string_view pat = op.substr(std::min(off, op.size()));
    if (has_spaces(pat)) return fail(kSyntax);
    auto it = std::find_if(u.keys.begin(), u.keys.end(), [&](const AclUser::KeyPattern& k) { return k.pattern == pat; });
    if (it == u.keys.end())
      u.keys.push_back({std::string(pat), flags});
    else
      it->flags |= flags;
    u.allkeys = false;
  } else if (op[0] == '&') {
    if (u.allchannels)
      return fail("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any "
                  "effect. Try 'resetchannels' to start with an empty list of channels");
    const std::string_view pat = op.substr(1);
    if (has_spaces(pat)) return fail(kSyntax);
    if (std::find(u.channels.begin(), u.channels.end(), pat) == u.channels.end()) u.channels.emplace_back(pat);
    u.allchannels = false;
  } else if (op[0] == '+' && (op.size() < 2 || op[1] != '@')) {
    const std::string_view name = op.substr(1);
    const size_t bar = name.rfind('|');
    if (bar == std::string_view::npos) {
      const CommandEntry* e = lookup(name);
      if (e == nullptr) return fail(kUnknownName);
      change_perm(u, e, true);
    } else {
      const CommandEntry* e = lookup(name.substr(0, bar));
      const std::string_view sub = name.substr(bar + 1);
      if (e == nullptr) return fail(kUnknownName);
      if (e->parent != nullptr) return fail("Allowing first-arg of a subcommand is not supported");
      if (sub.empty()) return fail(kSyntax);
      if (!e->subs.empty()) {
        e = lookup(name);
        if (e == nullptr) return fail(kUnknownName);
        change_perm(u, e, true);
      } else {
        // SELECT|0, as Redis' allowed_firstargs (deprecated there, kept for compatibility).
        auto& args = u.firstargs[e->acl_id];
        if (std::none_of(args.begin(), args.end(), [&](const std::string& a) { return eq_nocase(a, sub); }))
          args.emplace_back(sub);
      }
    }
  } else if (op[0] == '-' && (op.size() < 2 || op[1] != '@')) {
    const CommandEntry* e = lookup(op.substr(1));
    if (e == nullptr) return fail(kUnknownName);
    change_perm(u, e, false);
  } else if ((op[0] == '+' || op[0] == '-') && op[1] == '@') {
    const uint32_t cat = category_by_name(op.substr(2));
    if (cat == 0) return fail(kUnknownName);
    set_category(u, cat, commands_, op[0] == '+');
  } else {
    return fail(kSyntax);
  }
  u.update_unrestricted();
  return true;
}

std::string Acl::set_user(std::string_view name, std::span<const std::string_view> rules,
                          std::shared_ptr<AclUser>* user, AclUser* before) {
  std::shared_ptr<AclUser> u = find(name);
  AclUser temp = u != nullptr ? *u : *make_user(name);
  for (std::string_view r : rules) {
    std::string why;
    if (!apply(temp, r, &why)) return "ERR Error in ACL SETUSER modifier '" + std::string(r) + "': " + why;
  }
  if (u == nullptr) {
    u = std::make_shared<AclUser>();
    users_.emplace(std::string(name), u);
  }
  if (before != nullptr) *before = *u;
  *u = std::move(temp);
  *user = u;
  return "";
}

std::shared_ptr<AclUser> Acl::remove(std::string_view name) {
  auto it = users_.find(name);
  if (it == users_.end() || it->second == default_) return nullptr;
  std::shared_ptr<AclUser> u = it->second;
  users_.erase(it);
  // Its clients are being closed; until then they may run nothing.
  std::string why;
  (void)apply(*u, "reset", &why);
  u->allchannels = false;
  u->update_unrestricted();
  return u;
}

void Acl::set_default_password(std::string_view pass) {
  std::string why;
  (void)apply(*default_, "resetpass", &why);
  if (pass.empty())
    (void)apply(*default_, "nopass", &why);
  else
    (void)apply(*default_, ">" + std::string(pass), &why);
}

std::string Acl::add_config_users(const std::vector<std::string>& lines) {
  std::vector<std::string> seen;
  for (const std::string& line : lines) {
    const std::vector<std::string> words = split_words(line, " ");
    if (words.empty()) continue;
    if (std::find(seen.begin(), seen.end(), words[0]) != seen.end())
      return "Error in user declaration '" + words[0] + "': Duplicate user found. A user can only be defined once in "
             "config files";
    seen.push_back(words[0]);
    if (has_spaces(words[0])) return "Error in user declaration '" + words[0] + "': Usernames can't contain spaces";
    // The default user exists already: as Redis, its line starts from "reset".
    std::vector<std::string_view> rules{"reset"};
    rules.insert(rules.end(), words.begin() + 1, words.end());
    std::shared_ptr<AclUser> u;
    AclUser before;
    std::string err = set_user(words[0], rules, &u, &before);
    if (!err.empty()) return "Error in user declaration '" + words[0] + "': " + err.substr(4);
  }
  return "";
}

std::string Acl::load_text(std::string_view text, const std::string& filename,
                           std::vector<std::shared_ptr<AclUser>>* removed) {
  std::map<std::string, std::shared_ptr<AclUser>, std::less<>> fresh;
  std::string errors;
  size_t linenum = 0, pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++linenum;
    while (!line.empty() && std::strchr(" \t\r\n", line.front()) != nullptr) line.remove_prefix(1);
    while (!line.empty() && std::strchr(" \t\r\n", line.back()) != nullptr) line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<std::string_view> argv;
    for (size_t i = 0;;) {  // Redis splits on single spaces (empty words are no-ops)
      const size_t sp = line.find(' ', i);
      argv.push_back(line.substr(i, sp == std::string_view::npos ? std::string_view::npos : sp - i));
      if (sp == std::string_view::npos) break;
      i = sp + 1;
    }
    const std::string where = filename + ":" + std::to_string(linenum);
    if (argv[0] != "user" || argv.size() < 2) {
      errors += where + " should start with user keyword followed by the username. ";
      continue;
    }
    if (has_spaces(argv[1])) {
      errors += "'" + where + ": username '" + std::string(argv[1]) + "' contains invalid characters. ";
      continue;
    }
    if (fresh.count(argv[1]) != 0) {
      errors += "WARNING: Duplicate user '" + std::string(argv[1]) + "' found on line " + std::to_string(linenum) + ". ";
      continue;
    }
    auto u = make_user(argv[1]);
    fresh.emplace(std::string(argv[1]), u);
    bool syntax_reported = false;
    for (size_t j = 2; j < argv.size(); ++j) {
      std::string why;
      if (apply(*u, argv[j], &why)) continue;
      if (why == kUnknownName) {
        errors += where + ": Error in applying operation '" + std::string(argv[j]) + "': " + why + ". ";
      } else if (!syntax_reported) {
        errors += where + ": " + why + ". ";
        syntax_reported = true;
      }
    }
  }
  if (!errors.empty())
    return errors + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
  std::shared_ptr<AclUser> nd;
  if (auto it = fresh.find("default"); it != fresh.end()) {
    nd = it->second;
  } else {
    nd = make_user("default");
    std::string why;
    for (std::string_view op : {"+@all", "~*", "&*", "on", "nopass"}) (void)apply(*nd, op, &why);
  }
  *default_ = *nd;
  fresh["default"] = default_;
  for (auto& [name, u] : users_)
    if (u != default_) removed->push_back(u);
  users_ = std::move(fresh);
  return "";
}

std::string Acl::save_text() const {
  std::string s;
  for (const auto& [name, u] : users_) s += "user " + name + " " + describe(*u) + "\n";
  return s;
}

std::shared_ptr<AclUser> Acl::authenticate(std::string_view name, std::string_view pass) const {
  std::shared_ptr<AclUser> u = find(name);
  if (u == nullptr || !u->enabled) return nullptr;
  if (u->nopass) return u;
  const std::string h = sha256_hex(pass);
  bool ok = false;
  for (const std::string& p : u->passwords) ok |= same_hash(h, p);
  return ok ? u : nullptr;
}

// --- the check -------------------------------------------------------------------------------

bool Acl::channel_allowed(const std::vector<std::string>& list, std::string_view channel, bool is_pattern) {
  for (const std::string& p : list)
    if (is_pattern ? p == channel : glob_match(p, channel)) return true;
  return false;
}

AclResult Acl::check(const AclUser& u, const CommandEntry* e, std::span<const std::string_view> argv, size_t* pos) const {
  const CommandDef* d = e->def;
  if (!u.allcommands && (d->flags & kCmdNoAuth) == 0 && !u.allowed[e->acl_id]) {
    auto it = u.firstargs.find(e->acl_id);
    const size_t idx = e->parent != nullptr ? 2 : 1;
    if (it == u.firstargs.end() || argv.size() <= idx ||
        std::none_of(it->second.begin(), it->second.end(), [&](const std::string& a) { return eq_nocase(a, argv[idx]); }))
      return AclResult::kDeniedCmd;
  }
  if (!u.allkeys && (d->first_key != 0 || d->getkeys != nullptr)) {
    std::vector<size_t> keys;
    e->keys(argv, &keys);
    // Write commands need write access to their keys, read-only ones read access (Redis
    // refines this per key spec; see docs/KV.md).
    uint8_t need = 0;
    if (d->flags & kCmdWrite) need |= AclUser::kWrite;
    if (d->flags & kCmdReadonly) need |= AclUser::kRead;
    for (size_t k : keys) {
      bool ok = false;
      for (const auto& p : u.keys)
        if ((p.flags & need) == need && glob_match(p.pattern, argv[k])) {
          ok = true;
          break;
        }
      if (!ok) {
        *pos = k;
        return AclResult::kDeniedKey;
      }
    }
  }
  if (!u.allchannels && (e->acl_categories & kAclPubsub) && e->parent == nullptr) {
    const std::string_view n = d->name;
    const bool publish = n == "publish", subscribe = n == "subscribe", psubscribe = n == "psubscribe";
    if (publish || subscribe || psubscribe) {
      const size_t last = publish ? 2 : argv.size();
      for (size_t i = 1; i < last && i < argv.size(); ++i)
        if (!channel_allowed(u.channels, argv[i], psubscribe)) {
          *pos = i;
          return AclResult::kDeniedChannel;
        }
    }
  }
  return AclResult::kOk;
}

// --- descriptions --------------------------------------------------------------------------

void Acl::describe_singles(const AclUser& u, AclUser& fake, std::string& rules, std::span<CommandEntry* const> cmds) const {
  for (const CommandEntry* e : cmds) {
    const bool userbit = u.allowed[e->acl_id];
    if (userbit != fake.allowed[e->acl_id]) {
      rules += userbit ? '+' : '-';
      rules += e->fullname;
      rules += ' ';
      change_perm(fake, e, userbit);
    }
    if (!e->subs.empty()) describe_singles(u, fake, rules, e->subs);
    auto it = u.firstargs.find(e->acl_id);
    if (!userbit && it != u.firstargs.end())
      for (const std::string& a : it->second) rules += "+" + e->fullname + "|" + a + " ";
  }
}

std::string Acl::describe_commands(const AclUser& u) const {
  const bool additive = !u.allowed[num_ids_];
  std::string rules = additive ? "-@all " : "+@all ";
  AclUser fake;
  fake.allowed.assign(num_ids_ + 1, !additive);
  AclUser temp;
  temp.allowed = u.allowed;
  bool applied[std::size(kCategories)] = {};
  while (true) {
    int best = -1;
    size_t mindiff = INT_MAX, maxsame = 0;
    for (size_t j = 0; j < std::size(kCategories); ++j) {
      if (applied[j]) continue;
      size_t on = 0, off = 0;
      count_category(temp, kCategories[j].flag, commands_, &on, &off);
      const size_t diff = additive ? off : on, same = additive ? on : off;
      if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
        best = static_cast<int>(j);
        mindiff = diff;
        maxsame = same;
      }
    }
    if (best == -1) break;
    set_category(fake, kCategories[best].flag, commands_, additive);
    set_category(temp, kCategories[best].flag, commands_, !additive);
    rules += std::string(additive ? "+@" : "-@") + kCategories[best].name + " ";
    applied[best] = true;
  }
  describe_singles(u, fake, rules, commands_);
  rules.pop_back();
  return rules;
}

std::string Acl::keys_text(const AclUser& u) const {
  if (u.allkeys) return "~*";
  std::string s;
  for (const auto& k : u.keys) s += (s.empty() ? "" : " ") + pattern_text(k);
  return s;
}

std::string Acl::channels_text(const AclUser& u) const {
  if (u.allchannels) return "&*";
  std::string s;
  for (const auto& c : u.channels) s += (s.empty() ? "&" : " &") + c;
  return s;
}

std::string Acl::describe(const AclUser& u) const {
  std::string s = u.enabled ? "on " : "off ";
  if (u.nopass) s += "nopass ";
  if (u.skip_sanitize_payload) s += "skip-sanitize-payload ";
  if (u.sanitize_payload) s += "sanitize-payload ";
  for (const auto& p : u.passwords) s += "#" + p + " ";
  if (u.allkeys) {
    s += "~* ";
  } else {
    for (const auto& k : u.keys) s += pattern_text(k) + " ";
  }
  if (u.allchannels) {
    s += "&* ";
  } else {
    s += "resetchannels ";
    for (const auto& c : u.channels) s += "&" + c + " ";
  }
  return s + describe_commands(u);
}

// --- the log ---------------------------------------------------------------------------------

void Acl::log(AclResult reason, bool multi, std::string object, std::string username, std::string client_info,
              int64_t now_ms, size_t max_len) {
  // As Redis: a similar entry among the 10 newest within 60 s is counted instead.
  for (size_t i = 0; i < log_.size() && i < 10; ++i) {
    LogEntry& e = log_[i];
    if (e.reason == reason && e.multi == multi && std::abs(e.ctime_ms - now_ms) <= 60000 && e.object == object &&
        e.username == username) {
      LogEntry m = std::move(e);
      log_.erase(log_.begin() + static_cast<std::ptrdiff_t>(i));
      m.client_info = std::move(client_info);
      m.ctime_ms = now_ms;
      ++m.count;
      log_.push_front(std::move(m));
      return;
    }
  }
  LogEntry e;
  e.reason = reason;
  e.multi = multi;
  e.object = std::move(object);
  e.username = std::move(username);
  e.client_info = std::move(client_info);
  e.ctime_ms = now_ms;
  log_.push_front(std::move(e));
  while (log_.size() > max_len) log_.pop_back();
}

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
  if (has_spaces(name)) return ctx.error("ERR Usernames can't contain spaces or null characters");
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
    ctx.reply.array(std::size(kCategories));
    for (const auto& c : kCategories) ctx.reply.bulk(c.name);
    return;
  }
  const uint32_t cat = category_by_name(ctx.arg(2));
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
