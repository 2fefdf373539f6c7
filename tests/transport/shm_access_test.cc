// Who may bind and who may answer (issue 9, item 7): bare names live in a private
// directory of this uid that is checked, not trusted; both sides check the other's uid
// with SO_PEERCRED against allow_uids.  The tests with a second uid run as root and fork
// a child that becomes `nobody`; they skip (saying so) otherwise.
#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>

#include "transport/shm_test_util.h"

namespace conduit::transport {
namespace {

// Sets (or with nullptr unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A fresh directory (mode 0700) under the test's private directory.
std::string fresh_dir(const std::string& tag) {
  const std::string d = test_dir() + "/" + unique_name(tag);
  EXPECT_EQ(mkdir(d.c_str(), 0700), 0) << d;
  return d;
}

std::string own_dir(const std::string& base) { return base + "/conduit-" + std::to_string(geteuid()); }

TEST_F(ShmTest, BareNameLivesInAPrivateDirectoryOfThisUid) {
  const std::string base = fresh_dir("tmp");
  ScopedEnv no_xdg("XDG_RUNTIME_DIR", nullptr);
  ScopedEnv tmp("TMPDIR", base.c_str());
  const std::string name = unique_name("private");
  auto client = connect_pair("shm://" + name);
  ASSERT_TRUE(client);
  const std::string dir = own_dir(base);
  EXPECT_EQ(listener->url(), "shm://" + dir + "/conduit-" + name + ".sock");
  struct stat st{};
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  // A second listener reuses the directory; a client of a name nobody serves is told so.
  auto l2 = listen(*loop, "shm://" + unique_name("second"), [](std::unique_ptr<Connection>) {});
  ASSERT_TRUE(l2.ok()) << l2.status().to_string();
  std::optional<Status> st2;
  auto c = connect(*loop, "shm://" + unique_name("nobody-here"), [&](Connection&, Status s) { st2 = s; });
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(run_until(*loop, [&] { return st2.has_value(); }, 5000));
  EXPECT_EQ(st2->code(), Code::kNotFound) << st2->to_string();
}

TEST_F(ShmTest, XdgRuntimeDirIsUsedOnlyWhenSane) {
  const std::string base = fresh_dir("tmp");
  ScopedEnv tmp("TMPDIR", base.c_str());
  const std::string fallback = own_dir(base) + "/conduit-n.sock";
  const std::string good = fresh_dir("xdg");
  const std::string open_dir = fresh_dir("xdg-open");
  chmod(open_dir.c_str(), 0755);
  const std::string link = test_dir() + "/" + unique_name("xdg-link");
  ASSERT_EQ(symlink(good.c_str(), link.c_str()), 0);
  struct Case {
    const char* xdg;
    std::string want;
  };
  for (const Case& k : {Case{good.c_str(), good + "/conduit-n.sock"}, Case{open_dir.c_str(), fallback},
                        Case{link.c_str(), fallback}, Case{"relative/dir", fallback},
                        Case{"/nonexistent-xdg-dir", fallback}, Case{"", fallback}}) {
    ScopedEnv xdg("XDG_RUNTIME_DIR", k.xdg);
    auto p = shm_socket_path("n", /*create_dir=*/true);
    ASSERT_TRUE(p.ok()) << k.xdg << ": " << p.status().to_string();
    EXPECT_EQ(*p, k.want) << "XDG_RUNTIME_DIR=" << k.xdg;
  }
}

// Before: without XDG_RUNTIME_DIR a bare name was /tmp/conduit-NAME.sock, and whoever bound
// it first -- any user -- was "the server".  Now the directory must be ours and private, or
// neither side uses it.
TEST_F(ShmTest, SquattedPrivateDirectoryIsRefused) {
  ScopedEnv no_xdg("XDG_RUNTIME_DIR", nullptr);
  auto on_accept = [](std::unique_ptr<Connection>) {};
  auto expect_refused = [&](const std::string& why_part) {
    const std::string url = "shm://" + unique_name("squat");
    auto l = listen(*loop, url, on_accept);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), Code::kPermissionDenied) << l.status().to_string();
    EXPECT_NE(l.status().to_string().find(why_part), std::string::npos) << l.status().to_string();
    auto c = connect(*loop, url, [](Connection&, Status) {});
    ASSERT_FALSE(c.ok()) << "a client used a directory another user may control";
    EXPECT_EQ(c.status().code(), Code::kPermissionDenied) << c.status().to_string();
  };
  {
    const std::string base = fresh_dir("tmp");
    ScopedEnv tmp("TMPDIR", base.c_str());
    ASSERT_EQ(mkdir(own_dir(base).c_str(), 0755), 0);
    chmod(own_dir(base).c_str(), 0755);
    expect_refused("mode 0755");
  }
  {
    const std::string base = fresh_dir("tmp");
    ScopedEnv tmp("TMPDIR", base.c_str());
    ASSERT_EQ(symlink(fresh_dir("elsewhere").c_str(), own_dir(base).c_str()), 0);
    expect_refused("symbolic link");
  }
  {
    // A parent everyone may write in, without the sticky bit /tmp has: our directory
    // could be renamed away and replaced.
    const std::string base = fresh_dir("tmp");
    chmod(base.c_str(), 0777);
    ScopedEnv tmp("TMPDIR", base.c_str());
    expect_refused("writable by everyone and not sticky");
  }
  if (geteuid() != 0) {
    GTEST_SKIP() << "the case of a directory created by another user needs root (chown)";
  }
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  const std::string base = fresh_dir("tmp");
  ScopedEnv tmp("TMPDIR", base.c_str());
  ASSERT_EQ(mkdir(own_dir(base).c_str(), 0700), 0);
  ASSERT_EQ(chown(own_dir(base).c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  expect_refused("belongs to uid " + std::to_string(nobody->pw_uid));
}

// --- a second uid ------------------------------------------------------------------------

// A child process that becomes `nobody` and serves two echo listeners in `dir`: a.sock
// (allow_uids=<our uid>) and b.sock (its own uid only).
class NobodyServer {
 public:
  NobodyServer(const std::string& dir, uid_t uid, gid_t gid, uid_t parent_uid)
      : child_([=](int out) {
          if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) return 2;
          auto loop = EventLoop::create();
          if (!loop.ok()) return 3;
          std::vector<std::unique_ptr<Connection>> conns;
          auto on_accept = [&](std::unique_ptr<Connection> c) {
            c->set_read_handler([](Connection& x) {
              uint8_t buf[256];
              auto r = x.read(buf);
              if (r.ok() && *r > 0) (void)x.write({buf, *r});
            });
            conns.push_back(std::move(c));
          };
          auto a = listen(**loop, "shm://" + dir + "/a.sock?mode=0666&allow_uids=" + std::to_string(parent_uid),
                          on_accept);
          auto b = listen(**loop, "shm://" + dir + "/b.sock?mode=0666", on_accept);
          if (!a.ok() || !b.ok()) return 4;
          ChildProcess::send_value(out, 1);
          const uint64_t end = monotonic_ns() + 60'000'000'000ull;  // killed long before
          while (monotonic_ns() < end) (void)(*loop)->run_once(100);
          return 0;
        }) {}
  bool ready() {
    uint32_t v = 0;
    return child_.started() && child_.receive_value(&v, 10000) && v == 1;
  }

 private:
  ChildProcess child_;
};

Status connect_status(EventLoop& loop, const std::string& url, std::unique_ptr<Connection>* out) {
  Status st = Status(Code::kInProgress, "");
  auto c = connect(loop, url, [&](Connection&, Status s) { st = s; });
  if (!c.ok()) return c.status();
  if (!run_until(loop, [&] { return !st.in_progress(); }, 10000)) return Status(Code::kTimedOut, "no callback");
  *out = std::move(c).value();
  return st;
}

TEST_F(ShmTest, BothSidesCheckThePeersUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run a peer as the user nobody (fork + setuid)";
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr) << "no user nobody";
  const uid_t nobody_uid = nobody->pw_uid;
  // A directory both users can create sockets in (the test's own directory is 0700 root).
  char tmpl[] = "/tmp/conduit-shm-xuid-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(chmod(dir.c_str(), 01777), 0);
  NobodyServer server(dir, nobody_uid, nobody->pw_gid, geteuid());
  ASSERT_TRUE(server.ready()) << "the nobody server did not start";

  // The server is another user: by default the client refuses it before saying anything
  // (a squatter answering our path would otherwise be "the server").
  std::unique_ptr<Connection> c;
  Status s = connect_status(*loop, "shm://" + dir + "/a.sock", &c);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.to_string();
  EXPECT_NE(s.to_string().find("uid " + std::to_string(nobody_uid)), std::string::npos) << s.to_string();

  // Allowed on both sides: a working connection.
  s = connect_status(*loop, "shm://" + dir + "/a.sock?allow_uids=" + std::to_string(nobody_uid), &c);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::string got;
  c->set_read_handler([&](Connection& x) { (void)drain(x, &got); });
  ASSERT_EQ(*c->write(bytes("ping")), 4u);
  EXPECT_TRUE(run_until(*loop, [&] { return got == "ping"; }, 10000));
  c->close();

  // The server does not allow us: refused before our hello is read.
  s = connect_status(*loop, "shm://" + dir + "/b.sock?allow_uids=" + std::to_string(nobody_uid), &c);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.to_string();
  EXPECT_NE(s.to_string().find("not allowed"), std::string::npos) << s.to_string();

  unlink((dir + "/a.sock").c_str());
  unlink((dir + "/b.sock").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace conduit::transport
