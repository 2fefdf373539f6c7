// shm:// setup: names and socket files, options, the hello exchange against raw clients and
// fake servers, cancelling a handshake.
#include "transport/shm_test_util.h"

namespace conduit::transport {
namespace {

Status connect_failure(EventLoop& loop, const std::string& url) {
  std::optional<Status> st;
  auto c = connect(loop, url, [&](Connection&, Status s) { st = s; });
  if (!c.ok()) return Status(Code::kInternal, "connect() itself failed: " + c.status().to_string());
  EXPECT_EQ((*c)->state(), ConnState::kConnecting);
  EXPECT_FALSE(st.has_value()) << "callback ran inside connect()";
  EXPECT_TRUE(run_until(loop, [&] { return st.has_value(); }, 2000));
  EXPECT_EQ((*c)->state(), ConnState::kError);
  EXPECT_EQ((*c)->error(), st.value_or(Status()));
  return st.value_or(Status(Code::kInternal, "no callback"));
}

TEST_F(ShmTest, ConnectToMissingOrDeadName) {
  const std::string name = unique_name("nobody");
  Status s = connect_failure(*loop, "shm://" + name);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.to_string();
  EXPECT_NE(std::string(s.message()).find("conduit-" + name + ".sock"), std::string::npos) << s.to_string();

  // A socket file nobody listens on (a crashed server's leftover).
  const std::string path = test_dir() + "/" + unique_name("dead") + ".sock";
  {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    close(fd);
  }
  s = connect_failure(*loop, "shm://" + path);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.to_string();
  unlink(path.c_str());

  // Destroying such a connection before the loop ran cancels the report.
  bool fired = false;
  auto c = connect(*loop, "shm://" + name, [&](Connection&, Status) { fired = true; });
  ASSERT_TRUE(c.ok());
  c->reset();
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);
  EXPECT_FALSE(fired);
}

TEST_F(ShmTest, BadOptionsAndNames) {
  auto on_accept = [](std::unique_ptr<Connection>) {};
  auto on_connect = [](Connection&, Status) {};
  const std::string base = "shm://" + unique_name("opts");
  for (const char* q : {"?bogus=1", "?ring=5000", "?ring=2048", "?ring=2147483648", "?ring=lots", "?mode=0999",
                        "?mode=rw", "?mode=07777", "?busy_poll_us=abc", "?busy_poll_us=2000000",
                        "?connect_timeout_ms=0"}) {
    auto l = listen(*loop, base + q, on_accept);
    ASSERT_FALSE(l.ok()) << q;
    EXPECT_EQ(l.status().code(), Code::kInvalidArgument) << q << ": " << l.status().to_string();
    auto c = connect(*loop, base + q, on_connect);
    ASSERT_FALSE(c.ok()) << q;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << q;
  }
  auto l = listen(*loop, base + "?bogus=1", on_accept);
  EXPECT_NE(std::string(l.status().message()).find("bogus"), std::string::npos);
  for (const char* name : {"shm://a/b", "shm://with space", "shm://../up"}) {
    auto bad = listen(*loop, name, on_accept);
    ASSERT_FALSE(bad.ok()) << name;
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << name;
  }
  auto too_long = listen(*loop, "shm:///" + std::string(200, 'x'), on_accept);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), Code::kInvalidArgument);
  // Valid edge values.
  auto ok = listen(*loop, base + "?ring=4096&busy_poll_us=0&mode=0660&connect_timeout_ms=1", on_accept);
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST_F(ShmTest, SocketFilePlacementAndMode) {
  auto on_accept = [](std::unique_ptr<Connection>) {};
  const std::string name = unique_name("mode");
  auto l = listen(*loop, "shm://" + name, on_accept);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  const std::string path = test_dir() + "/conduit-" + name + ".sock";
  EXPECT_EQ((*l)->url(), "shm://" + path);
  EXPECT_TRUE(S_ISSOCK(file_mode(path)));
  EXPECT_EQ(file_mode(path) & 07777, 0600u);
  (*l)->close();
  EXPECT_EQ(file_mode(path), 0u) << "the listener must unlink its socket file";

  auto l2 = listen(*loop, "shm://" + name + "?mode=0660", on_accept);
  ASSERT_TRUE(l2.ok());
  EXPECT_EQ(file_mode(path) & 07777, 0660u);
  l2->reset();
  EXPECT_EQ(file_mode(path), 0u);

  // Absolute names are used as is (where bare names go without XDG_RUNTIME_DIR:
  // shm_access_test.cc).
  const std::string abs = test_dir() + "/custom.sock";
  auto l3 = listen(*loop, "shm://" + abs, on_accept);
  ASSERT_TRUE(l3.ok());
  EXPECT_TRUE(S_ISSOCK(file_mode(abs)));
}

TEST_F(ShmTest, StaleSocketReplacedLiveOneNot) {
  auto on_accept = [](std::unique_ptr<Connection>) {};
  const std::string path = test_dir() + "/" + unique_name("stale") + ".sock";
  {
    // A crashed server's leftover: bound, never unlinked.
    const int s = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    close(s);
  }
  auto l = listen(*loop, "shm://" + path, on_accept);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  // A live listener is not replaced.
  auto l2 = listen(*loop, "shm://" + path, on_accept);
  ASSERT_FALSE(l2.ok());
  EXPECT_EQ(l2.status().code(), Code::kUnavailable);
  EXPECT_NE(std::string(l2.status().message()).find("address in use"), std::string::npos) << l2.status().to_string();
  EXPECT_TRUE(S_ISSOCK(file_mode(path)));
  l->reset();
  // Something that is not a socket is never removed.
  const std::string file = test_dir() + "/" + unique_name("file") + ".sock";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  auto l3 = listen(*loop, "shm://" + file, on_accept);
  EXPECT_FALSE(l3.ok());
  EXPECT_TRUE(S_ISREG(file_mode(file)));
  unlink(file.c_str());
}

// --- handshake --------------------------------------------------------------------------

TEST_F(ShmTest, ServerRejectsIncompatibleClientHello) {
  auto l = listen(*loop, "shm://" + unique_name("hs"), [this](std::unique_ptr<Connection> c) {
    accepted.push_back(std::move(c));
  });
  ASSERT_TRUE(l.ok());
  const std::string path = (*l)->url().substr(6);
  struct Case {
    uint32_t magic;
    uint16_t version;
    uint64_t ring;
    shm::RejectReason reason;
  };
  for (const Case& k : {Case{shm::kHelloMagic, 99, 0, shm::RejectReason::kVersion},
                        Case{0x12345678, shm::kProtocolVersion, 0, shm::RejectReason::kMalformed},
                        Case{shm::kHelloMagic, shm::kProtocolVersion, 5000, shm::RejectReason::kRingSize}}) {
    const int s = raw_connect(path);
    ASSERT_GE(s, 0);
    shm::Hello h;
    h.magic = k.magic;
    h.version = k.version;
    h.type = static_cast<uint16_t>(shm::HelloType::kClientHello);
    h.ring_bytes = k.ring;
    ASSERT_EQ(send(s, &h, sizeof h, 0), ssize_t(sizeof h));
    ASSERT_TRUE(run_until(*loop, [&] { return readable(s); }, 5000));
    shm::Hello r;
    ASSERT_EQ(recv(s, &r, sizeof r, MSG_WAITALL), ssize_t(sizeof r));
    EXPECT_EQ(r.magic, shm::kHelloMagic);
    EXPECT_EQ(r.version, shm::kProtocolVersion);
    EXPECT_EQ(r.type, static_cast<uint16_t>(shm::HelloType::kReject));
    EXPECT_EQ(r.reason, static_cast<uint32_t>(k.reason));
    close(s);
  }
  // A client that connects and says nothing is dropped after the handshake timeout.
  EXPECT_TRUE(accepted.empty());
}

// A fake server: accepts, checks the client's hello, answers with `reply`.
Status connect_to_fake_server(EventLoop& loop, const std::string& query, const shm::Hello* reply,
                              shm::Hello* client_hello = nullptr, bool hang_up = false) {
  return against_fake_server(
      loop,
      [&](int& sock, const shm::Hello& h) {
        if (client_hello != nullptr) *client_hello = h;
        if (reply != nullptr) (void)!send(sock, reply, sizeof *reply, 0);
        if (hang_up) {
          close(sock);
          sock = -1;
        }
      },
      query);
}

TEST_F(ShmTest, ClientReportsBadServerAnswers) {
  shm::Hello client_hello;
  shm::Hello r;
  r.magic = 0xdeadbeef;
  Status s = connect_to_fake_server(*loop, "?ring=8192", &r, &client_hello);
  EXPECT_EQ(s.code(), Code::kProtocolError) << s.to_string();
  EXPECT_EQ(client_hello.magic, shm::kHelloMagic);
  EXPECT_EQ(client_hello.version, shm::kProtocolVersion);
  EXPECT_EQ(client_hello.type, static_cast<uint16_t>(shm::HelloType::kClientHello));
  EXPECT_EQ(client_hello.ring_bytes, 8192u);

  r = shm::Hello();
  r.version = 2;
  r.type = static_cast<uint16_t>(shm::HelloType::kAccept);
  s = connect_to_fake_server(*loop, "", &r);
  EXPECT_EQ(s.code(), Code::kNotSupported) << s.to_string();
  EXPECT_NE(std::string(s.message()).find("version 2"), std::string::npos) << s.to_string();

  r = shm::Hello();
  r.type = static_cast<uint16_t>(shm::HelloType::kReject);
  r.reason = static_cast<uint32_t>(shm::RejectReason::kRingSize);
  s = connect_to_fake_server(*loop, "", &r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  EXPECT_NE(std::string(s.message()).find("refused"), std::string::npos) << s.to_string();

  r = shm::Hello();  // "accept" without the descriptors
  r.type = static_cast<uint16_t>(shm::HelloType::kAccept);
  r.ring_bytes = 4096;
  r.region_bytes = shm::region_bytes_for(4096);
  s = connect_to_fake_server(*loop, "", &r);
  EXPECT_EQ(s.code(), Code::kProtocolError) << s.to_string();

  // No answer at all: the handshake times out instead of hanging.
  s = connect_to_fake_server(*loop, "?connect_timeout_ms=200", nullptr);
  EXPECT_EQ(s.code(), Code::kTimedOut) << s.to_string();

  // The server hangs up without answering.
  s = connect_to_fake_server(*loop, "", nullptr, nullptr, true);
  EXPECT_EQ(s.code(), Code::kClosed) << s.to_string();
}

TEST_F(ShmTest, ClientChoosesRingSizeUpToMaxRing) {
  auto client = connect_pair("shm://" + unique_name("ring") + "?ring=4096&max_ring=16384", "");
  ASSERT_TRUE(client);
  // The listener's ring applies: 4096 bytes fit, then the ring is full.
  std::vector<uint8_t> big(20000, 7);
  EXPECT_EQ(*client->write(big), 4096u);
  EXPECT_TRUE(client->write(big).status().would_block());
  auto c2 = connect_pair("", listener->url() + "?ring=16384");
  ASSERT_TRUE(c2);
  EXPECT_EQ(*c2->write(big), 16384u);
  // A listener whose max_ring is below its ring makes no sense.
  auto bad = listen(*loop, "shm://" + unique_name("ring") + "?ring=64K&max_ring=16K", [](std::unique_ptr<Connection>) {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().to_string().find("max_ring"), std::string::npos) << bad.status().to_string();
}

TEST_F(ShmTest, DestroyWhileConnectingAndListenerClose) {
  auto l = listen(*loop, "shm://" + unique_name("cancel"), [this](std::unique_ptr<Connection> c) {
    accepted.push_back(std::move(c));
  });
  ASSERT_TRUE(l.ok());
  const int fds_before = count_fds();
  bool called = false;
  auto c = connect(*loop, (*l)->url(), [&](Connection&, Status) { called = true; });
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->state(), ConnState::kConnecting);
  c->reset();  // cancels
  for (int i = 0; i < 5; ++i) (void)loop->run_once(10);
  EXPECT_FALSE(called);
  EXPECT_TRUE(accepted.empty());  // the server dropped the half-open handshake
  l->reset();
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);
  EXPECT_EQ(count_fds(), fds_before - 1);  // the listening socket is gone too
}


}  // namespace
}  // namespace conduit::transport
