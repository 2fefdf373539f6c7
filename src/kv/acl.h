// ACL users (Redis 7.0's acl.c, the root selector only): users with passwords (SHA-256),
// command / category / first-arg rules, key patterns (~, %R~, %W~) and channel patterns
// (&), the permission check before a command runs, ACL LOG.  Everything here is guarded
// by ServerImpl::mu_ (commands run under it).  docs/KV.md describes what is supported.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::kv {

struct CommandDef;
struct CommandEntry;

// Redis' ACL categories, in Redis' order (ACL CAT lists them so).
enum AclCategory : uint32_t {
  kAclKeyspace = 1u << 0, kAclRead = 1u << 1, kAclWrite = 1u << 2, kAclSet = 1u << 3, kAclSortedset = 1u << 4,
  kAclList = 1u << 5, kAclHash = 1u << 6, kAclString = 1u << 7, kAclBitmap = 1u << 8, kAclHyperloglog = 1u << 9,
  kAclGeo = 1u << 10, kAclStream = 1u << 11, kAclPubsub = 1u << 12, kAclAdmin = 1u << 13, kAclFast = 1u << 14,
  kAclSlow = 1u << 15, kAclBlocking = 1u << 16, kAclDangerous = 1u << 17, kAclConnection = 1u << 18,
  kAclTransaction = 1u << 19, kAclScripting = 1u << 20,
};
// A command's categories: its group gives the data-type category (Redis' json files name
// them the same way), its flags the implicit ones (Redis' setImplicitACLCategories).
// `parent`: the container of a subcommand, else null.
uint32_t acl_categories_of(const CommandDef& d, const CommandDef* parent);
// The categories by name, in ACL CAT's order; a name's flag (case-insensitive), 0 if none.
struct AclCategoryName {
  const char* name;
  uint32_t flag;
};
std::span<const AclCategoryName> acl_category_names();
uint32_t acl_category_by_name(std::string_view name);
// Redis refuses user names with spaces or NULs.
bool acl_name_has_spaces(std::string_view s);

enum class AclResult : uint8_t { kOk, kDeniedCmd, kDeniedKey, kDeniedChannel, kDeniedAuth };

struct AclUser {
  static constexpr uint8_t kRead = 1, kWrite = 2;
  struct KeyPattern {
    std::string pattern;
    uint8_t flags;  // kRead | kWrite
  };
  std::string name;
  bool enabled = false;     // on / off
  bool nopass = false;
  bool sanitize_payload = false, skip_sanitize_payload = false;  // shown, no effect (no RESTORE)
  std::vector<std::string> passwords;  // SHA-256 hex, in the order added
  bool allkeys = false, allchannels = false, allcommands = false;
  std::vector<KeyPattern> keys;
  std::vector<std::string> channels;
  // By command id (CommandEntry::acl_id); the last bit is set only by +@all: "future
  // commands" (Redis' reserved bit), which decides whether GETUSER starts with +@all.
  std::vector<bool> allowed;
  std::map<uint32_t, std::vector<std::string>> firstargs;  // +select|0: command id -> first args
  // Any command, key and channel: the check before a command is this one flag.
  bool unrestricted = false;
  void update_unrestricted() { unrestricted = allcommands && allkeys && allchannels; }
};

// The users and the ACL log.  Owned by ServerImpl; all calls under its mu_.
class Acl {
 public:
  // `commands`: the top-level command table (entries with their subcommands); ids are
  // CommandEntry::acl_id, all below `num_ids`.
  void init(std::span<CommandEntry* const> commands, uint32_t num_ids, bool pubsub_allchannels);

  const std::shared_ptr<AclUser>& default_user() const { return default_; }
  std::shared_ptr<AclUser> find(std::string_view name) const;
  const std::map<std::string, std::shared_ptr<AclUser>, std::less<>>& users() const { return users_; }
  // Clients need AUTH: the default user has a password, or is off.
  bool auth_required() const { return !default_->nopass || !default_->enabled; }

  // ACL SETUSER: applies the rules to a copy, then (all or nothing) to the user, created
  // when absent.  "" on success, else the error (without "ERR ").  *before receives the
  // user's state before the change (for revoking pub/sub clients); *user the user.
  std::string set_user(std::string_view name, std::span<const std::string_view> rules,
                       std::shared_ptr<AclUser>* user, AclUser* before);
  // Applies one rule to u; false and *why set when it is refused.
  bool apply(AclUser& u, std::string_view op, std::string* why) const;
  // Removes the user (never "default"); the removed user, its rights revoked, or null.
  std::shared_ptr<AclUser> remove(std::string_view name);
  // requirepass: the default user's password ("" = nopass), as Redis' ACLUpdateDefaultUserPassword.
  void set_default_password(std::string_view pass);
  void set_pubsub_default(bool allchannels) { pubsub_allchannels_ = allchannels; }

  // The config file's `user` lines ("name rule rule ..."), at start: "" or the error.
  std::string add_config_users(const std::vector<std::string>& lines);
  // An ACL file's text (Redis' ACLLoadFromFile): all or nothing.  On success every user is
  // replaced (the default user object keeps its identity, so its clients stay) and
  // *removed receives the users that are gone; else the errors, nothing changed.
  std::string load_text(std::string_view text, const std::string& filename,
                        std::vector<std::shared_ptr<AclUser>>* removed);
  // ACL SAVE's file: one "user <name> <rules>" line per user.
  std::string save_text() const;

  // The user the name and password authenticate, or null.
  std::shared_ptr<AclUser> authenticate(std::string_view name, std::string_view pass) const;
  // Whether u may run e with argv; on a key/channel denial *pos is the argument's index.
  AclResult check(const AclUser& u, const CommandEntry* e, std::span<const std::string_view> argv, size_t* pos) const;
  static bool channel_allowed(const std::vector<std::string>& list, std::string_view channel, bool is_pattern);

  // ACL GETUSER's "commands", ACL LIST's line ("user <name> ...").
  std::string describe_commands(const AclUser& u) const;
  std::string describe(const AclUser& u) const;
  std::string keys_text(const AclUser& u) const;
  std::string channels_text(const AclUser& u) const;
  // The entry of "get" / "config|get" (case-insensitive), or null.
  const CommandEntry* lookup(std::string_view name) const;
  std::span<CommandEntry* const> commands() const { return commands_; }

  // ACL LOG.
  struct LogEntry {
    uint64_t count = 1;
    AclResult reason;
    bool multi = false;  // context: "multi" or "toplevel"
    std::string object, username, client_info;
    int64_t ctime_ms = 0;
  };
  void log(AclResult reason, bool multi, std::string object, std::string username, std::string client_info,
           int64_t now_ms, size_t max_len);
  std::deque<LogEntry>& log_entries() { return log_; }

 private:
  void change_perm(AclUser& u, const CommandEntry* e, bool allow) const;
  void set_category(AclUser& u, uint32_t cat, std::span<CommandEntry* const> cmds, bool allow) const;
  void count_category(const AclUser& u, uint32_t cat, std::span<CommandEntry* const> cmds, size_t* on, size_t* off) const;
  void describe_singles(const AclUser& u, AclUser& fake, std::string& rules, std::span<CommandEntry* const> cmds) const;
  std::shared_ptr<AclUser> make_user(std::string_view name) const;

  std::vector<CommandEntry*> commands_;
  uint32_t num_ids_ = 0;  // the "future commands" bit is allowed[num_ids_]
  bool pubsub_allchannels_ = false;
  std::map<std::string, std::shared_ptr<AclUser>, std::less<>> users_;
  std::shared_ptr<AclUser> default_;
  std::deque<LogEntry> log_;
};

// ACL GETUSER/SETUSER... as a command table (the ACL container).
std::span<const CommandDef> acl_commands();

}  // namespace conduit::kv
