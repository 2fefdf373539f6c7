// ACL users (src/kv/acl.cc): SHA-256 vectors, SETUSER rules and their errors, GETUSER /
// LIST descriptions, NOPERM for commands, keys and channels (PUBLISH, SUBSCRIBE,
// PSUBSCRIBE), AUTH and HELLO with users, RESET, DELUSER disconnecting the user's clients,
// requirepass as the default user's password, ACL LOG.  The server runs with 1 and with 4
// io threads: a change made on one thread (DELUSER, SETUSER) reaches clients on others.
#include <gtest/gtest.h>

#include <string>

#include "kv_test_util.h"
#include "sha256.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;

TEST(Sha256, Vectors) {
  // FIPS 180-4 examples, the padding boundaries (55, 56, 64 bytes) and Redis' own hash of
  // "passwd4" from unit/acl.tcl.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  EXPECT_EQ(sha256_hex("passwd4"), "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6");
}

class Acl : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.port = 0;
    o.io_threads = static_cast<uint32_t>(GetParam());
    server_ = std::make_unique<ServerThread>(o);
    ASSERT_TRUE(server_->ok()) << server_->status().to_string();
    url_ = server_->url("tcp");
    admin_ = connect();
    ASSERT_NE(admin_, nullptr);
  }
  std::unique_ptr<Client> connect(const std::string& user = "", const std::string& pass = "") {
    ClientOptions co;
    co.user = user;
    co.password = pass;
    auto c = Client::connect(url_, co);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  std::string run(Client& c, std::vector<std::string> args) { return fmt(c.command(args)); }
  std::string admin(std::vector<std::string> args) { return run(*admin_, std::move(args)); }

  std::unique_ptr<ServerThread> server_;
  std::string url_;
  std::unique_ptr<Client> admin_;
};

TEST_P(Acl, NewUsersStartOffWithNothingAndRulesDescribeBack) {
  EXPECT_EQ(admin({"ACL", "WHOAMI"}), "\"default\"");
  EXPECT_EQ(admin({"ACL", "SETUSER", "newuser"}), "+OK");
  EXPECT_EQ(admin({"ACL", "GETUSER", "newuser"}),
            "[\"flags\", [\"off\"], \"passwords\", [], \"commands\", \"-@all\", \"keys\", \"\", \"channels\", \"\", "
            "\"selectors\", []]");
  EXPECT_EQ(admin({"ACL", "SETUSER", "newuser", "on", ">passwd4", "~foo:*", "%R~r*", "&chan", "+@all", "-@string",
                   "+get", "-client|kill"}),
            "+OK");
  EXPECT_EQ(admin({"ACL", "LIST"}),
            "[\"user default on nopass ~* &* +@all\", \"user newuser on "
            "#34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6 ~foo:* %R~r* resetchannels &chan "
            "+@all -@string +get -client|kill\"]");
  EXPECT_EQ(admin({"ACL", "USERS"}), "[\"default\", \"newuser\"]");
  // Each category alone describes back as itself.
  EXPECT_EQ(admin({"ACL", "SETUSER", "r", "reset", "-@all", "+@set"}), "+OK");
  EXPECT_EQ(fmt(admin_->command({"ACL", "GETUSER", "r"}).value().elements[5]), "\"-@all +@set\"");
  EXPECT_EQ(admin({"ACL", "SETUSER", "r", "+select|0", "+config|get"}), "+OK");
  EXPECT_EQ(fmt(admin_->command({"ACL", "GETUSER", "r"}).value().elements[5]), "\"-@all +@set +select|0 +config|get\"");
  EXPECT_EQ(admin({"ACL", "GETUSER", "nosuchuser"}), "nil");
}

TEST_P(Acl, RefusedRulesChangeNothingAndSayWhy) {
  EXPECT_EQ(admin({"ACL", "SETUSER", "a a"}), "-ERR Usernames can't contain spaces or null characters");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "on", "#abc"}),
            "-ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain "
            "only lowercase hexadecimal characters");
  EXPECT_EQ(admin({"ACL", "GETUSER", "u"}), "nil");  // all or nothing: not even created
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "+nosuchcommand"}),
            "-ERR Error in ACL SETUSER modifier '+nosuchcommand': Unknown command or category name in ACL");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "+@nosuchcategory"}),
            "-ERR Error in ACL SETUSER modifier '+@nosuchcategory': Unknown command or category name in ACL");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "+config|get|appendonly"}),
            "-ERR Error in ACL SETUSER modifier '+config|get|appendonly': Allowing first-arg of a subcommand is not "
            "supported");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "allkeys", "~x"}),
            "-ERR Error in ACL SETUSER modifier '~x': Adding a pattern after the * pattern (or the 'allkeys' flag) is "
            "not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "<nope"}),
            "-ERR Error in ACL SETUSER modifier '<nope': The password you are trying to remove from the user does not "
            "exist");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "%X~k"}), "-ERR Error in ACL SETUSER modifier '%X~k': Syntax error");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "(+get ~k)"}),
            "-ERR Error in ACL SETUSER modifier '(+get ~k)': Selectors (rules in parentheses) are not supported by "
            "conduit-kv");
  EXPECT_EQ(admin({"ACL", "SETUSER", "u", "bogus"}), "-ERR Error in ACL SETUSER modifier 'bogus': Syntax error");
  EXPECT_EQ(admin({"ACL", "DELUSER", "default"}), "-ERR The 'default' user cannot be removed");
  EXPECT_EQ(admin({"ACL", "LOAD"}).rfind("-ERR This Redis instance is not configured to use an ACL file.", 0), 0u);
  EXPECT_EQ(admin({"CONFIG", "SET", "aclfile", "users.acl"}).rfind("-ERR", 0), 0u);  // immutable, as in Redis
}

TEST_P(Acl, NopermForCommandsKeysAndChannels) {
  ASSERT_EQ(admin({"ACL", "SETUSER", "bob", "on", ">pw", "+@all", "-@string", "+get", "-client|kill", "~k*", "%R~ro*",
                   "resetchannels", "&news.*"}),
            "+OK");
  auto bob = connect("bob", "pw");
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(run(*bob, {"ACL", "WHOAMI"}), "\"bob\"");
  EXPECT_EQ(run(*bob, {"SET", "k1", "v"}), "-NOPERM this user has no permissions to run the 'set' command");
  EXPECT_EQ(run(*bob, {"CLIENT", "KILL", "ID", "1"}), "-NOPERM this user has no permissions to run the 'client|kill' command");
  EXPECT_EQ(run(*bob, {"CLIENT", "ID"}).rfind(":", 0), 0u);
  EXPECT_EQ(run(*bob, {"GET", "k1"}), "nil");
  EXPECT_EQ(run(*bob, {"GET", "other"}), "-NOPERM this user has no permissions to access one of the keys used as arguments");
  EXPECT_EQ(run(*bob, {"LPUSH", "k2", "a"}), ":1");
  EXPECT_EQ(run(*bob, {"LRANGE", "ro1", "0", "-1"}), "[]");  // %R~: read
  EXPECT_EQ(run(*bob, {"LPUSH", "ro1", "a"}),                // ... not write
            "-NOPERM this user has no permissions to access one of the keys used as arguments");
  EXPECT_EQ(run(*bob, {"PUBLISH", "news.today", "m"}), ":0");
  EXPECT_EQ(run(*bob, {"PUBLISH", "sports", "m"}),
            "-NOPERM this user has no permissions to access one of the channels used as arguments");
  // PSUBSCRIBE's patterns must be listed literally; SUBSCRIBE's channels match the patterns.
  EXPECT_EQ(run(*bob, {"PSUBSCRIBE", "news.t*"}),
            "-NOPERM this user has no permissions to access one of the channels used as arguments");
  EXPECT_EQ(run(*bob, {"SUBSCRIBE", "news.x", "sports"}),
            "-NOPERM this user has no permissions to access one of the channels used as arguments");
  // Refused at queue time inside MULTI, and again at EXEC when the rules changed meanwhile.
  EXPECT_EQ(run(*bob, {"MULTI"}), "+OK");
  EXPECT_EQ(run(*bob, {"SET", "k1", "v"}), "-NOPERM this user has no permissions to run the 'set' command");
  EXPECT_EQ(run(*bob, {"DISCARD"}), "+OK");
  EXPECT_EQ(run(*bob, {"MULTI"}), "+OK");
  EXPECT_EQ(run(*bob, {"LPUSH", "k3", "a"}), "+QUEUED");
  EXPECT_EQ(admin({"ACL", "SETUSER", "bob", "-lpush"}), "+OK");
  EXPECT_EQ(run(*bob, {"EXEC"}),
            "[-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This "
            "command is no longer allowed for the following reason: no permission to execute the command or "
            "subcommand]");
  // DRYRUN answers without running.
  EXPECT_EQ(admin({"ACL", "DRYRUN", "bob", "SET", "k1", "v"}), "\"This user has no permissions to run the 'set' command\"");
  EXPECT_EQ(admin({"ACL", "DRYRUN", "bob", "GET", "zz"}), "\"This user has no permissions to access the 'zz' key\"");
  EXPECT_EQ(admin({"ACL", "DRYRUN", "bob", "PUBLISH", "x", "m"}),
            "\"This user has no permissions to access the 'x' channel\"");
  EXPECT_EQ(admin({"ACL", "DRYRUN", "bob", "GET", "k9"}), "+OK");
  EXPECT_EQ(admin({"ACL", "DRYRUN", "nobody", "GET", "k9"}), "-ERR User 'nobody' not found");
  // The log: newest first, similar events counted together.
  const Reply log = admin_->command({"ACL", "LOG", "1"}).value();
  ASSERT_EQ(log.elements.size(), 1u);
  EXPECT_EQ(fmt(log.elements[0].elements[1]), ":1");
  EXPECT_EQ(fmt(log.elements[0].elements[3]), "\"command\"");
  EXPECT_EQ(fmt(log.elements[0].elements[5]), "\"multi\"");
  EXPECT_EQ(fmt(log.elements[0].elements[7]), "\"lpush\"");
  EXPECT_EQ(fmt(log.elements[0].elements[9]), "\"bob\"");
  EXPECT_EQ(admin({"CONFIG", "SET", "acllog-max-len", "2"}), "+OK");
  for (const char* k : {"a1", "a2", "a3"}) (void)run(*bob, {"GET", k});
  EXPECT_EQ(admin_->command({"ACL", "LOG"}).value().elements.size(), 2u);
  EXPECT_EQ(admin({"ACL", "LOG", "RESET"}), "+OK");
  EXPECT_EQ(admin({"ACL", "LOG"}), "[]");
}

TEST_P(Acl, AuthAndHelloWithUsersAndReset) {
  ASSERT_EQ(admin({"ACL", "SETUSER", "u1", ">p1", ">p2", "+@all", "~*"}), "+OK");
  auto c = connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(run(*c, {"AUTH", "u1", "p1"}), "-WRONGPASS invalid username-password pair or user is disabled.");  // off
  ASSERT_EQ(admin({"ACL", "SETUSER", "u1", "on", "<p1"}), "+OK");
  EXPECT_EQ(run(*c, {"AUTH", "u1", "p1"}), "-WRONGPASS invalid username-password pair or user is disabled.");
  EXPECT_EQ(run(*c, {"AUTH", "u1", "p2"}), "+OK");
  EXPECT_EQ(run(*c, {"ACL", "WHOAMI"}), "\"u1\"");
  EXPECT_NE(run(*c, {"CLIENT", "INFO"}).find(" user=u1 "), std::string::npos);
  EXPECT_EQ(run(*c, {"RESET"}), "+RESET");
  EXPECT_EQ(run(*c, {"ACL", "WHOAMI"}), "\"default\"");
  // A user name longer than CLIENT LIST's line buffer is shown whole.
  const std::string longname(3000, 'n');
  ASSERT_EQ(admin({"ACL", "SETUSER", longname, "on", "nopass", "+@all"}), "+OK");
  EXPECT_EQ(run(*c, {"AUTH", longname, "x"}), "+OK");
  EXPECT_NE(run(*c, {"CLIENT", "INFO"}).find(" user=" + longname + " redir=-1 resp=2 transport=tcp"), std::string::npos);
  EXPECT_EQ(run(*c, {"RESET"}), "+RESET");
  const std::string hello = run(*c, {"HELLO", "3", "AUTH", "u1", "p2"});
  EXPECT_EQ(hello.rfind("{\"server\": \"redis\"", 0), 0u) << hello;
  EXPECT_EQ(run(*c, {"ACL", "WHOAMI"}), "\"u1\"");
  EXPECT_EQ(run(*c, {"HELLO", "3", "AUTH", "u1", "bad"}), "-WRONGPASS invalid username-password pair or user is disabled.");
  // A failed AUTH is logged with the user name it tried.
  const Reply log = admin_->command({"ACL", "LOG", "1"}).value();
  ASSERT_EQ(log.elements.size(), 1u);
  EXPECT_EQ(fmt(log.elements[0].elements[3]), "\"auth\"");
  EXPECT_EQ(fmt(log.elements[0].elements[7]), "\"HELLO\"");
  EXPECT_EQ(fmt(log.elements[0].elements[9]), "\"u1\"");
  // requirepass is the default user's password.
  EXPECT_EQ(admin({"CONFIG", "SET", "requirepass", "secret"}), "+OK");
  EXPECT_EQ(fmt(admin_->command({"ACL", "GETUSER", "default"}).value().elements[3]), "[\"" + sha256_hex("secret") + "\"]");
  auto d = connect();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(run(*d, {"GET", "x"}), "-NOAUTH Authentication required.");
  EXPECT_EQ(run(*d, {"AUTH", "default", "secret"}), "+OK");
  EXPECT_EQ(run(*d, {"GET", "x"}), "nil");
  EXPECT_EQ(run(*d, {"RESET"}), "+RESET");  // back to the default user, not authenticated
  EXPECT_EQ(run(*d, {"GET", "x"}), "-NOAUTH Authentication required.");
  EXPECT_EQ(run(*d, {"AUTH", "secret"}), "+OK");
  EXPECT_EQ(admin({"CONFIG", "SET", "requirepass", ""}), "+OK");
  EXPECT_EQ(fmt(admin_->command({"ACL", "GETUSER", "default"}).value().elements[1]), "[\"on\", \"nopass\"]");
  EXPECT_EQ(run(*d, {"AUTH", "x"}),
            "-ERR AUTH <password> called without any password configured for the default user. Are you sure your "
            "configuration is correct?");
  // The default user off: new connections must authenticate.
  EXPECT_EQ(admin({"ACL", "SETUSER", "default", "off"}), "+OK");
  auto e = connect();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(run(*e, {"PING"}), "-NOAUTH Authentication required.");
  EXPECT_EQ(admin({"ACL", "SETUSER", "default", "on"}), "+OK");
}

TEST_P(Acl, DeluserDisconnectsTheUsersClientsOnAnyThread) {
  ASSERT_EQ(admin({"ACL", "SETUSER", "gone", "on", "nopass", "+@all", "~*", "&*"}), "+OK");
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 6; ++i) {
    clients.push_back(connect("gone", "x"));
    ASSERT_NE(clients.back(), nullptr);
  }
  auto bystander = connect();
  EXPECT_EQ(admin({"ACL", "DELUSER", "gone", "nosuchuser"}), ":1");
  for (auto& c : clients) EXPECT_FALSE(c->command({"PING"}).ok());
  EXPECT_EQ(run(*bystander, {"PING"}), "+PONG");
  // The caller itself gets its reply first, then is closed.
  ASSERT_EQ(admin({"ACL", "SETUSER", "self", "on", "nopass", "+acl"}), "+OK");
  auto self = connect("self", "x");
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(run(*self, {"ACL", "DELUSER", "self"}), ":1");
  EXPECT_FALSE(self->command({"PING"}).ok());
  EXPECT_EQ(admin({"ACL", "USERS"}), "[\"default\"]");
}

TEST_P(Acl, RevokedChannelsDisconnectTheirSubscribers) {
  ASSERT_EQ(admin({"ACL", "SETUSER", "ps", "on", "nopass", "+@all", "resetchannels", "&foo:*", "&bar"}), "+OK");
  auto sub = connect("ps", "x");
  auto keep = connect("ps", "x");
  ASSERT_NE(sub, nullptr);
  ASSERT_NE(keep, nullptr);
  EXPECT_EQ(run(*sub, {"PSUBSCRIBE", "foo:*"}), "[\"psubscribe\", \"foo:*\", :1]");
  EXPECT_EQ(run(*keep, {"SUBSCRIBE", "bar"}), "[\"subscribe\", \"bar\", :1]");
  // Gaining patterns keeps everyone; losing foo:* closes the PSUBSCRIBE client only.
  EXPECT_EQ(admin({"ACL", "SETUSER", "ps", "&baz"}), "+OK");
  EXPECT_EQ(run(*sub, {"PING"}), "[\"pong\", \"\"]");
  EXPECT_EQ(admin({"ACL", "SETUSER", "ps", "resetchannels", "&bar"}), "+OK");
  EXPECT_FALSE(sub->command({"PING"}).ok());
  EXPECT_EQ(run(*keep, {"PING"}), "[\"pong\", \"\"]");
}

TEST_P(Acl, CategoriesAndGenpass) {
  const std::string cats = admin({"ACL", "CAT"});
  EXPECT_EQ(cats.rfind("[\"keyspace\", \"read\", \"write\"", 0), 0u) << cats;
  const std::string str = admin({"ACL", "CAT", "string"});
  EXPECT_NE(str.find("\"set\""), std::string::npos);
  EXPECT_EQ(str.find("\"lpush\""), std::string::npos);
  EXPECT_EQ(admin({"ACL", "CAT", "nope"}), "-ERR Unknown category 'nope'");
  EXPECT_EQ(admin({"ACL", "GENPASS"}).size(), 64u + 2);
  EXPECT_EQ(admin({"ACL", "GENPASS", "5"}).size(), 2u + 2);
  EXPECT_EQ(admin({"ACL", "GENPASS", "5000"}),
            "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to "
            "4096");
}

// aclfile: users at start, ACL SAVE writes them, ACL LOAD replaces them all or nothing and
// disconnects the replaced users' clients; `user` lines of a config file are refused with one.
TEST(AclFile, LoadSaveAndStart) {
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  testing::write_file(dir + "/users.acl", "user alice on >alice ~* &* +@all\nuser bob on >bob -@all +@set +acl ~set*\n");
  ServerOptions o;
  o.port = 0;
  o.dir = dir;
  o.aclfile = "users.acl";
  ServerThread server(o);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  ClientOptions co;
  co.user = "bob";
  co.password = "bob";
  auto bob = Client::connect(server.url("tcp"), co).value();
  EXPECT_EQ(fmt(bob->command({"SADD", "set1", "a"})), ":1");
  EXPECT_EQ(fmt(bob->command({"SET", "set2", "a"})), "-NOPERM this user has no permissions to run the 'set' command");
  EXPECT_EQ(fmt(bob->command({"ACL", "SETUSER", "eve", "on", ">eve", "+get", "allkeys"})), "+OK");
  EXPECT_EQ(fmt(bob->command({"ACL", "SAVE"})), "+OK");
  EXPECT_NE(testing::read_file(dir + "/users.acl").find("\nuser eve on #" + sha256_hex("eve") + " ~* resetchannels -@all +get\n"),
            std::string::npos)
      << testing::read_file(dir + "/users.acl");
  // A duplicate user: nothing changes.
  testing::write_file(dir + "/users.acl", "\nuser alice on nopass ~* -@all\n", true);
  const std::string err = fmt(bob->command({"ACL", "LOAD"}));
  EXPECT_NE(err.find("Duplicate user 'alice' found"), std::string::npos) << err;
  EXPECT_EQ(fmt(bob->command({"ACL", "WHOAMI"})), "\"bob\"");
  testing::write_file(dir + "/users.acl", "user alice on >alice ~* &* +@all\n");
  EXPECT_EQ(fmt(bob->command({"ACL", "LOAD"})), "+OK");  // bob is gone: the reply, then the close
  EXPECT_FALSE(bob->command({"PING"}).ok());
  co.user = "alice";
  co.password = "alice";
  auto alice = Client::connect(server.url("tcp"), co).value();
  EXPECT_EQ(fmt(alice->command({"ACL", "USERS"})), "[\"alice\", \"default\"]");
  server.stop();
  // A broken file stops the start.
  testing::write_file(dir + "/users.acl", "user carol on +nosuchcommand\n");
  ServerThread bad(o);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("users.acl:1: Error in applying operation '+nosuchcommand'"), std::string::npos)
      << bad.status().to_string();
  o.users.push_back("dave on nopass +@all");
  ServerThread both(o);
  EXPECT_FALSE(both.ok());
}

TEST(AclFile, ConfigUserLines) {
  ServerOptions o;
  o.port = 0;
  std::vector<std::string> warnings;
  ASSERT_EQ(load_config_text(&o, "user default on nopass ~* +@all -flushdb\nuser x on nopass +get ~*\n", &warnings), "");
  ServerThread server(o);
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto c = Client::connect(server.url("tcp")).value();
  EXPECT_EQ(fmt(c->command({"FLUSHDB"})), "-NOPERM this user has no permissions to run the 'flushdb' command");
  EXPECT_EQ(fmt(c->command({"SUBSCRIBE", "ch"})),  // no &* given: resetchannels, as acl-pubsub-default
            "-NOPERM this user has no permissions to access one of the channels used as arguments");
  server.stop();
  o.users.push_back("x on");
  ServerThread dup(o);
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(dup.status().to_string().find("Duplicate user"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Threads, Acl, ::testing::Values(1, 4), [](const auto& p) {
  return "io" + std::to_string(p.param);
});

}  // namespace
}  // namespace conduit::kv
