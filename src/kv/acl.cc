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

constexpr AclCategoryName kCategories[] = {
    {"keyspace", kAclKeyspace},   {"read", kAclRead},         {"write", kAclWrite},
    {"set", kAclSet},             {"sortedset", kAclSortedset}, {"list", kAclList},
    {"hash", kAclHash},           {"string", kAclString},     {"bitmap", kAclBitmap},
    {"hyperloglog", kAclHyperloglog}, {"geo", kAclGeo},       {"stream", kAclStream},
    {"pubsub", kAclPubsub},       {"admin", kAclAdmin},       {"fast", kAclFast},
    {"slow", kAclSlow},           {"blocking", kAclBlocking}, {"dangerous", kAclDangerous},
    {"connection", kAclConnection}, {"transaction", kAclTransaction}, {"scripting", kAclScripting},
};

std::span<const AclCategoryName> acl_category_names() { return kCategories; }

uint32_t acl_category_by_name(std::string_view n) {
  for (const auto& c : kCategories)
    if (eq_nocase(n, c.name)) return c.flag;
  return 0;
}

bool acl_name_has_spaces(std::string_view s) {
  for (char c : s)
    if (std::isspace(static_cast<unsigned char>(c)) || c == 0) return true;
  return false;
}

namespace {

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
    if (acl_name_has_spaces(pat)) return fail(kSyntax);
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
    if (acl_name_has_spaces(pat)) return fail(kSyntax);
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
    const uint32_t cat = acl_category_by_name(op.substr(2));
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
    if (acl_name_has_spaces(words[0])) return "Error in user declaration '" + words[0] + "': Usernames can't contain spaces";
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
    if (acl_name_has_spaces(argv[1])) {
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

}  // namespace conduit::kv
