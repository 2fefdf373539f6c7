// shm:// specifics: handshake, socket file handling, options, peer death, half-close,
// wakeups with both sides sleeping, busy polling, descriptor hygiene.  The transport-
// independent contract is checked by tests/conformance/.
#include <gtest/gtest.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "shm/shm.h"
#include "shm/shm_wire.h"
#include "transport/ring_test_util.h"
#include "verbs/child_process.h"

namespace conduit::transport {
namespace {

using conduit::testing::ByteStream;
using conduit::testing::ChildProcess;
using conduit::testing::kSanitized;
using conduit::testing::Rng;
using reactor::EventLoop;

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

int count_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream itself
}

// A private directory for this test process's socket files (also XDG_RUNTIME_DIR).
const std::string& test_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/conduit-shm-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d != nullptr ? d : "/tmp");
  }();
  return dir;
}

// Removes the directory (and sockets left by killed children) after the last test.
class TestDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (test_dir() == "/tmp") return;
    if (DIR* d = opendir(test_dir().c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') unlink((test_dir() + "/" + e->d_name).c_str());
      closedir(d);
    }
    rmdir(test_dir().c_str());
  }
};
[[maybe_unused]] ::testing::Environment* const cleanup_env = ::testing::AddGlobalTestEnvironment(new TestDirCleanup);

// Mappings of shared regions in this process (each connection end maps one).
int count_shm_mappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  int n = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != nullptr)
    if (std::strstr(line, "conduit-shm") != nullptr) ++n;
  fclose(f);
  return n;
}

std::string unique_name(const std::string& tag) {
  static std::atomic<int> counter{0};
  return tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Drives a loop with blocking waits (so a lost wakeup really blocks) until pred holds; a
// watchdog timer bounds the wait.  False on timeout.  Written the way an application would
// (`while (!done) run_once(-1)`): handlers that run in the transport's before-sleep hook
// must not leave the loop blocked with `done` already true.
bool run_until(EventLoop& loop, const std::function<bool()>& pred, int timeout_ms = 20000) {
  bool expired = false;
  const reactor::TimerId watchdog = loop.run_after(uint64_t(timeout_ms) * 1'000'000, [&] { expired = true; });
  while (!pred() && !expired) {
    if (!loop.run_once(-1).ok()) break;
  }
  loop.cancel(watchdog);
  // Satisfied only because the watchdog woke the loop counts as a failure: that is what a
  // lost wakeup looks like.
  return !expired && pred();
}

class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("XDG_RUNTIME_DIR", test_dir().c_str(), 1);
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop = std::move(l).value();
  }
  void TearDown() override {
    for (auto& c : accepted) c->close();
    accepted.clear();
  }

  // Listens on `url` collecting accepted connections; then connects to it and runs the loop
  // until both ends are up.
  std::unique_ptr<Connection> connect_pair(const std::string& listen_url, const std::string& connect_url = "") {
    if (!listener) {
      auto l = listen(*loop, listen_url, [this](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
      EXPECT_TRUE(l.ok()) << l.status().to_string();
      if (!l.ok()) return nullptr;
      listener = std::move(l).value();
    }
    const size_t before = accepted.size();
    Status connect_status = Status(Code::kInProgress, "");
    auto c = connect(*loop, connect_url.empty() ? listener->url() : connect_url,
                     [&](Connection&, Status s) { connect_status = s; });
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) return nullptr;
    EXPECT_TRUE(run_until(*loop, [&] { return !connect_status.in_progress() && accepted.size() > before; }));
    EXPECT_TRUE(connect_status.ok()) << connect_status.to_string();
    return std::move(c).value();
  }

  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<Listener> listener;
  std::vector<std::unique_ptr<Connection>> accepted;
};

// Reads everything available into `out`; returns the last non-data outcome.
Status drain(Connection& c, std::string* out) {
  uint8_t buf[4096];
  for (;;) {
    auto r = c.read(buf);
    if (!r.ok()) return r.status();
    if (*r == 0) return Status(Code::kClosed, "eof");
    out->append(reinterpret_cast<char*>(buf), *r);
  }
}

TEST_F(ShmTest, ConnectAcceptEcho) {
  auto client = connect_pair("shm://" + unique_name("echo"));
  ASSERT_TRUE(client);
  ASSERT_EQ(accepted.size(), 1u);
  Connection& server = *accepted[0];
  EXPECT_EQ(client->state(), ConnState::kConnected);
  EXPECT_EQ(server.state(), ConnState::kConnected);
  EXPECT_EQ(listener->url().rfind("shm://" + test_dir() + "/conduit-echo-", 0), 0u) << listener->url();

  const Caps caps = client->caps();
  EXPECT_EQ(caps.transport, "shm");
  EXPECT_FALSE(caps.cross_host);
  EXPECT_TRUE(caps.half_close);
  EXPECT_FALSE(caps.one_sided);
  EXPECT_EQ(client->peer_address(), listener->url().substr(6));
  EXPECT_EQ(server.local_address(), listener->url().substr(6));
  EXPECT_EQ(server.peer_address(), "pid:" + std::to_string(getpid()));
  EXPECT_NE(client->describe().find("shm pid:"), std::string::npos) << client->describe();

  server.set_read_handler([](Connection& c) {
    uint8_t buf[256];
    for (;;) {
      auto r = c.read(buf);
      if (!r.ok() || *r == 0) return;
      ASSERT_TRUE(c.write(std::span<const uint8_t>(buf, *r)).ok());
    }
  });
  std::string echoed;
  client->set_read_handler([&](Connection& c) { (void)drain(c, &echoed); });
  ASSERT_EQ(*client->write(bytes("hello ")), 6u);
  const std::string part2 = "shared memory";
  const iovec iov[2] = {{const_cast<char*>(part2.data()), 6}, {const_cast<char*>(part2.data()) + 6, 7}};
  ASSERT_EQ(*client->writev(iov), 13u);
  ASSERT_TRUE(run_until(*loop, [&] { return echoed.size() == 19; }));
  EXPECT_EQ(echoed, "hello shared memory");
  EXPECT_EQ(client->stats().bytes_written, 19u);
  EXPECT_EQ(client->stats().writes, 2u);
  EXPECT_EQ(server.stats().bytes_read, 19u);
  EXPECT_EQ(server.stats().bytes_written, 19u);
  EXPECT_EQ(client->stats().bytes_read, 19u);

  // Empty buffers are no-ops; a closed connection says so.
  EXPECT_EQ(*client->read(std::span<uint8_t>()), 0u);
  EXPECT_EQ(*client->write(std::span<const uint8_t>()), 0u);
  client->close();
  EXPECT_EQ(client->state(), ConnState::kClosed);
  EXPECT_EQ(client->read(std::span<uint8_t>()).status().code(), Code::kClosed);
  EXPECT_EQ(client->write(bytes("x")).status().code(), Code::kClosed);
  client->close();  // idempotent
}

// 64 MiB through 4 KiB rings on one loop: the writer fills the ring, stalls, and is resumed
// by the reader's progress; gather writes straddle the wrap.
TEST_F(ShmTest, LargeTransferThroughSmallRing) {
  auto client = connect_pair("shm://" + unique_name("large") + "?ring=4096");
  ASSERT_TRUE(client);
  Connection& server = *accepted[0];
  const uint64_t total = kSanitized ? (uint64_t{16} << 20) : (uint64_t{64} << 20);

  ByteStream out;
  Rng rng(7);
  std::vector<uint8_t> pending;
  size_t pending_off = 0;
  client->set_write_handler([&](Connection& c) {
    for (;;) {
      if (pending_off == pending.size()) {
        const uint64_t left = total - out.position();
        if (left == 0) {
          c.set_write_handler(nullptr);
          return;
        }
        pending.resize(std::min<uint64_t>(rng.range(1, 10000), left));
        out.fill(pending.data(), pending.size());
        pending_off = 0;
      }
      const size_t len = pending.size() - pending_off, a = len / 3, b = len / 2;
      uint8_t* p = pending.data() + pending_off;
      const iovec iov[3] = {{p, a}, {p + a, b - a}, {p + b, len - b}};
      auto r = c.writev(iov);
      if (!r.ok()) {
        ASSERT_TRUE(r.status().would_block()) << r.status().to_string();
        return;
      }
      pending_off += *r;
    }
  });
  ByteStream expect;
  uint64_t got = 0;
  bool mismatch = false;
  server.set_read_handler([&](Connection& c) {
    uint8_t buf[3000];
    for (;;) {
      auto r = c.read(buf);
      if (!r.ok() || *r == 0) return;
      if (expect.check(buf, *r) != *r) mismatch = true;
      got += *r;
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return got == total || mismatch; }, 120000));
  EXPECT_FALSE(mismatch);
  EXPECT_EQ(got, total);
  EXPECT_GT(client->stats().write_would_block, 0u);
  EXPECT_EQ(server.stats().bytes_read, total);
}

// Echoes everything it reads, with backpressure: while the echo cannot be written it stops
// reading (uninstalls the read handler) and waits for the write handler.
class Echo {
 public:
  explicit Echo(std::unique_ptr<Connection> c) : conn_(std::move(c)) { want_read(); }
  Connection& conn() { return *conn_; }

 private:
  void want_read() {
    reading_ = true;
    conn_->set_write_handler(nullptr);
    conn_->set_read_handler([this](Connection&) { pump(); });
  }
  void want_write() {
    reading_ = false;
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler([this](Connection&) { pump(); });
  }
  void pump() {
    for (;;) {
      if (off_ < len_) {
        auto w = conn_->write(std::span<const uint8_t>(buf_ + off_, len_ - off_));
        if (!w.ok()) {
          if (w.status().would_block()) want_write();
          return;
        }
        off_ += *w;
        continue;
      }
      if (!reading_) want_read();
      auto r = conn_->read(buf_);
      if (!r.ok() || *r == 0) return;
      off_ = 0;
      len_ = *r;
    }
  }
  std::unique_ptr<Connection> conn_;
  uint8_t buf_[1500];
  size_t off_ = 0, len_ = 0;
  bool reading_ = true;
};

// A listener on its own loop thread whose connections echo.
class EchoServer {
 public:
  explicit EchoServer(const std::string& url) {
    loop_ = std::move(EventLoop::create()).value();
    auto l = listen(*loop_, url, [this](std::unique_ptr<Connection> c) {
      echoes_.push_back(std::make_unique<Echo>(std::move(c)));
    });
    EXPECT_TRUE(l.ok()) << l.status().to_string();
    if (l.ok()) listener_ = std::move(l).value();
    thread_ = std::thread([this] {
      (void)loop_->run();
      for (auto& e : echoes_) {
        wakeups_ += e->conn().stats().wakeups;
        e->conn().close();
      }
      echoes_.clear();
      listener_.reset();
    });
  }
  ~EchoServer() { stop(); }
  std::string url() const { return listener_ ? listener_->url() : ""; }
  void stop() {
    if (!thread_.joinable()) return;
    loop_->stop();
    thread_.join();
  }
  uint64_t wakeups() const { return wakeups_; }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Echo>> echoes_;
  std::thread thread_;
  uint64_t wakeups_ = 0;
};

std::unique_ptr<Connection> connect_and_wait(EventLoop& loop, const std::string& url) {
  Status st = Status(Code::kInProgress, "");
  auto c = connect(loop, url, [&](Connection&, Status s) { st = s; });
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE(run_until(loop, [&] { return !st.in_progress(); }));
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? std::move(c).value() : nullptr;
}

// Both ends on their own loop thread, neither busy polling: every stall is a real sleep in
// epoll, and progress depends entirely on doorbell wakeups in both directions (data for a
// sleeping reader, space for a writer blocked on a full ring).  Many small messages through
// 4 KiB rings; a lost wakeup stalls the stream until the watchdog fails the test.
TEST_F(ShmTest, TwoThreadsBothSidesSleepingStream) {
  EchoServer server("shm://" + unique_name("sleepers") + "?ring=4096");
  auto client = connect_and_wait(*loop, server.url() + "?ring=4096");
  ASSERT_TRUE(client);
  const uint64_t messages = kSanitized ? 30'000 : 200'000;
  uint64_t total = 0;
  {
    Rng rng(11);
    for (uint64_t i = 0; i < messages; ++i) total += rng.range(1, 100);
  }
  ByteStream out, expect;
  Rng rng(11);
  uint8_t msg[100];
  size_t msg_len = 0, msg_off = 0;
  uint64_t sent_messages = 0, got = 0;
  bool mismatch = false;
  client->set_write_handler([&](Connection& c) {
    for (;;) {
      if (msg_off == msg_len) {
        if (sent_messages == messages) {
          c.set_write_handler(nullptr);
          return;
        }
        msg_len = rng.range(1, 100);
        out.fill(msg, msg_len);
        msg_off = 0;
        ++sent_messages;
      }
      auto w = c.write(std::span<const uint8_t>(msg + msg_off, msg_len - msg_off));
      if (!w.ok()) return;
      msg_off += *w;
    }
  });
  client->set_read_handler([&](Connection& c) {
    uint8_t buf[700];
    for (;;) {
      auto r = c.read(buf);
      if (!r.ok() || *r == 0) return;
      if (expect.check(buf, *r) != *r) mismatch = true;
      got += *r;
    }
  });
  const uint64_t t0 = monotonic_ns();
  EXPECT_TRUE(run_until(*loop, [&] { return got == total || mismatch; }, 120000))
      << "stalled at " << got << " of " << total << " bytes: lost wakeup?";
  const double secs = double(monotonic_ns() - t0) / 1e9;
  EXPECT_FALSE(mismatch);
  client->close();
  server.stop();
  std::printf("%llu messages, %llu bytes echoed in %.2f s; doorbell writes: client %llu, server %llu\n",
              static_cast<unsigned long long>(messages), static_cast<unsigned long long>(total), secs,
              static_cast<unsigned long long>(client->stats().wakeups),
              static_cast<unsigned long long>(server.wakeups()));
  EXPECT_GT(client->stats().wakeups, 0u);
  EXPECT_GT(server.wakeups(), 0u);
}

// Ping-pong of 64-byte messages across two threads, sleeping and busy polling.  The times are
// informational (unit tests don't benchmark); the wakeup counts are the point: with busy
// polling the peer is awake and no doorbell is written.
void ping_pong(EventLoop& loop, Connection& c, int rounds, double* mean_us) {
  uint8_t msg[64] = {1};
  int done = 0;
  size_t got = 0;
  c.set_read_handler([&](Connection& conn) {
    uint8_t buf[256];
    for (;;) {
      auto r = conn.read(buf);
      if (!r.ok() || *r == 0) return;
      got += *r;
      if (got == sizeof msg) {
        got = 0;
        if (++done < rounds) {
          ASSERT_EQ(*conn.write(msg), sizeof msg);
        }
      }
    }
  });
  const uint64_t t0 = monotonic_ns();
  ASSERT_EQ(*c.write(msg), sizeof msg);
  ASSERT_TRUE(run_until(loop, [&] { return done == rounds; }, 120000)) << "stalled after " << done << " round trips";
  *mean_us = double(monotonic_ns() - t0) / 1e3 / rounds / 2;
  c.set_read_handler(nullptr);
}

TEST_F(ShmTest, PingPongSleepingAndBusyPolling) {
  const int rounds = kSanitized ? 2000 : 20000;
  {
    EchoServer server("shm://" + unique_name("pp"));
    auto client = connect_and_wait(*loop, server.url());
    ASSERT_TRUE(client);
    double one_way = 0;
    ping_pong(*loop, *client, rounds, &one_way);
    client->close();
    server.stop();
    std::printf("sleeping: %.2f us one-way (mean), doorbell writes client %llu server %llu for %d round trips\n",
                one_way, static_cast<unsigned long long>(client->stats().wakeups),
                static_cast<unsigned long long>(server.wakeups()), rounds);
    EXPECT_GT(client->stats().wakeups, uint64_t(rounds) / 10);  // pings found the server asleep
  }
  {
    EchoServer server("shm://" + unique_name("pp-busy") + "?busy_poll_us=20000");
    auto client = connect_and_wait(*loop, server.url() + "?busy_poll_us=20000");
    ASSERT_TRUE(client);
    double one_way = 0;
    ping_pong(*loop, *client, rounds, &one_way);
    client->close();
    server.stop();
    std::printf("busy polling: %.2f us one-way (mean), doorbell writes client %llu server %llu for %d round trips\n",
                one_way, static_cast<unsigned long long>(client->stats().wakeups),
                static_cast<unsigned long long>(server.wakeups()), rounds);
    // On a loaded 2-core machine a spinning side can be descheduled past its window, so a few
    // doorbells are fine; one per message is not.
    EXPECT_LT(client->stats().wakeups + server.wakeups(), uint64_t(rounds) / 4);
  }
}

// The peer process is killed: data it wrote stays readable, then reads fail (kClosed, state
// kError) rather than hanging, writes fail, and nothing leaks.
void peer_death_test(bool orderly_close) {
  const std::string path = test_dir() + "/" + unique_name(orderly_close ? "closer" : "victim") + ".sock";
  const std::string url = "shm://" + path;
  const uint32_t payload = 300'000;
  ChildProcess child([&](int wfd) -> int {
    auto loop = std::move(EventLoop::create()).value();
    std::unique_ptr<Connection> conn;
    auto l = listen(*loop, url, [&](std::unique_ptr<Connection> c) { conn = std::move(c); });
    if (!l.ok()) return 2;
    ChildProcess::send_value(wfd, 1);
    const uint64_t deadline = monotonic_ns() + 20'000'000'000ull;
    while (!conn && monotonic_ns() < deadline) (void)loop->run_once(100);
    if (!conn) return 3;
    std::vector<uint8_t> data(payload);
    ByteStream().fill(data.data(), data.size());
    auto w = conn->write(data);  // fits in the default 1 MiB ring
    if (!w.ok() || *w != payload) return 4;
    ChildProcess::send_value(wfd, 2);
    if (orderly_close) {
      conn->close();
      return 0;
    }
    for (;;) pause();
  });
  ASSERT_TRUE(child.started());
  uint32_t v = 0;
  ASSERT_TRUE(child.receive_value(&v));
  ASSERT_EQ(v, 1u);

  auto loop = std::move(EventLoop::create()).value();
  const int fds_before = count_fds();
  auto conn = connect_and_wait(*loop, url);
  ASSERT_TRUE(conn);
  ASSERT_TRUE(child.receive_value(&v));
  ASSERT_EQ(v, 2u);
  if (!orderly_close) kill(child.pid(), SIGKILL);
  EXPECT_EQ(child.wait(), orderly_close ? 0 : -1);  // exited / killed

  ByteStream expect;
  uint64_t got = 0;
  bool mismatch = false;
  std::optional<Status> end;
  conn->set_read_handler([&](Connection& c) {
    uint8_t buf[8192];
    for (;;) {
      auto r = c.read(buf);
      if (!r.ok()) {
        if (!r.status().would_block()) end = r.status();
        return;
      }
      if (*r == 0) {
        end = Status();
        c.set_read_handler(nullptr);
        return;
      }
      if (expect.check(buf, *r) != *r) mismatch = true;
      got += *r;
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return end.has_value(); }, 10000));
  EXPECT_FALSE(mismatch);
  EXPECT_EQ(got, payload);  // everything written before the death is delivered first
  if (orderly_close) {
    EXPECT_TRUE(end->ok()) << "expected EOF, got " << end->to_string();
    EXPECT_EQ(conn->state(), ConnState::kConnected);
  } else {
    EXPECT_EQ(end->code(), Code::kClosed) << end->to_string();
    EXPECT_EQ(conn->state(), ConnState::kError);
    EXPECT_NE(std::string(conn->error().message()).find("went away"), std::string::npos) << conn->error().to_string();
  }
  auto w = conn->write(bytes("anyone there?"));
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Code::kClosed) << w.status().to_string();
  conn->close();
  conn.reset();
  EXPECT_EQ(count_fds(), fds_before);
  EXPECT_EQ(count_shm_mappings(), 0);
}

TEST(ShmPeerDeath, PeerKilledWithSigkill) { peer_death_test(false); }
TEST(ShmPeerDeath, PeerClosedThenExited) { peer_death_test(true); }

TEST_F(ShmTest, HalfClose) {
  auto client = connect_pair("shm://" + unique_name("half"));
  ASSERT_TRUE(client);
  Connection& server = *accepted[0];
  ASSERT_EQ(*client->write(bytes("request")), 7u);
  ASSERT_TRUE(client->shutdown_write().ok());
  ASSERT_TRUE(client->shutdown_write().ok());  // idempotent
  EXPECT_EQ(client->write(bytes("more")).status().code(), Code::kClosed);

  std::string req;
  bool server_eof = false;
  server.set_read_handler([&](Connection& c) {
    if (drain(c, &req).code() == Code::kClosed) {
      server_eof = true;
      c.set_read_handler(nullptr);
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return server_eof; }));
  EXPECT_EQ(req, "request");
  EXPECT_EQ(server.state(), ConnState::kConnected);
  // The other direction still works.
  ASSERT_EQ(*server.write(bytes("response")), 8u);
  ASSERT_TRUE(server.shutdown_write().ok());
  std::string resp;
  bool client_eof = false;
  client->set_read_handler([&](Connection& c) {
    if (drain(c, &resp).code() == Code::kClosed) {
      client_eof = true;
      c.set_read_handler(nullptr);
    }
  });
  ASSERT_TRUE(run_until(*loop, [&] { return client_eof; }));
  EXPECT_EQ(resp, "response");
  // EOF is sticky.
  uint8_t buf[4];
  EXPECT_EQ(*client->read(buf), 0u);
}

// Connecting to nothing fails promptly with a clear status, through the callback (from the
// loop, as for every transport), never by hanging.
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

mode_t file_mode(const std::string& path) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode;
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

  // Absolute names are used as is; without XDG_RUNTIME_DIR names go to /tmp.
  const std::string abs = test_dir() + "/custom.sock";
  auto l3 = listen(*loop, "shm://" + abs, on_accept);
  ASSERT_TRUE(l3.ok());
  EXPECT_TRUE(S_ISSOCK(file_mode(abs)));
  unsetenv("XDG_RUNTIME_DIR");
  auto p = shm_socket_path(name);
  setenv("XDG_RUNTIME_DIR", test_dir().c_str(), 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "/tmp/conduit-" + name + ".sock");
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

TEST_F(ShmTest, ManyConnectCloseCyclesDoNotLeak) {
  // Warm up once (first use allocates loop-internal structures).
  {
    auto c = connect_pair("shm://" + unique_name("cycles"));
    ASSERT_TRUE(c);
    c->close();
    accepted.clear();
  }
  const int fds_before = count_fds();
  const int cycles = kSanitized ? 60 : 200;
  for (int i = 0; i < cycles; ++i) {
    auto c = connect_pair("");
    ASSERT_TRUE(c);
    ASSERT_EQ(accepted.size(), 1u);
    ASSERT_EQ(*c->write(bytes("x")), 1u);
    std::string got;
    ASSERT_TRUE(run_until(*loop, [&] {
      (void)drain(*accepted[0], &got);
      return got == "x";
    }));
    if (i % 2 == 0) {
      c->close();
      accepted[0]->close();
    } else {
      accepted[0]->close();
      // The client learns of it and fails its write; then closes.
      ASSERT_TRUE(run_until(*loop, [&] { return !c->write(bytes("y")).ok(); }));
      c->close();
    }
    accepted.clear();
  }
  // Let deferred destructions run.
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);
  EXPECT_EQ(count_fds(), fds_before);
  EXPECT_EQ(count_shm_mappings(), 0);
}

// --- handshake --------------------------------------------------------------------------

int raw_connect(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return -1;
  }
  return s;
}

int raw_listen(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  unlink(path.c_str());
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 8) != 0) {
    close(s);
    return -1;
  }
  return s;
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

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
  const std::string path = test_dir() + "/" + unique_name("fake") + ".sock";
  const int ls = raw_listen(path);
  if (ls < 0) return Status(Code::kInternal, "raw listen");
  Status st = Status(Code::kInProgress, "");
  auto c = connect(loop, "shm://" + path + query, [&](Connection&, Status s) { st = s; });
  if (!c.ok()) {
    close(ls);
    return c.status();
  }
  int s = accept(ls, nullptr, nullptr);
  shm::Hello h;
  if (recv(s, &h, sizeof h, MSG_WAITALL) != ssize_t(sizeof h)) st = Status(Code::kInternal, "no client hello");
  if (client_hello != nullptr) *client_hello = h;
  if (reply != nullptr) (void)!send(s, reply, sizeof *reply, 0);
  if (hang_up) {
    close(s);
    s = -1;
  }
  if (st.in_progress()) (void)run_until(loop, [&] { return !st.in_progress(); }, 10000);
  if (s >= 0) close(s);
  close(ls);
  unlink(path.c_str());
  EXPECT_EQ((*c)->state(), st.ok() ? ConnState::kConnected : ConnState::kError);
  return st;
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

TEST_F(ShmTest, ClientChoosesRingSize) {
  auto client = connect_pair("shm://" + unique_name("ring") + "?ring=4096", "");
  ASSERT_TRUE(client);
  // The listener's ring applies: 4096 bytes fit, then the ring is full.
  std::vector<uint8_t> big(20000, 7);
  EXPECT_EQ(*client->write(big), 4096u);
  EXPECT_TRUE(client->write(big).status().would_block());
  auto c2 = connect_pair("", listener->url() + "?ring=16384");
  ASSERT_TRUE(c2);
  EXPECT_EQ(*c2->write(big), 16384u);
}

// --- reactor integration ------------------------------------------------------------------

TEST_F(ShmTest, PendingDataWaitsForAReadHandler) {
  auto client = connect_pair("shm://" + unique_name("pending"));
  ASSERT_TRUE(client);
  Connection& server = *accepted[0];
  ASSERT_EQ(*client->write(bytes("queued")), 6u);
  for (int i = 0; i < 5; ++i) (void)loop->run_once(0);
  EXPECT_FALSE(server.has_pending_data());  // nobody to deliver it to
  std::string got;
  server.set_read_handler([&](Connection& c) { (void)drain(c, &got); });
  EXPECT_TRUE(server.has_pending_data());
  server.process_pending();
  EXPECT_EQ(got, "queued");
  EXPECT_FALSE(server.has_pending_data());
  // And the hook delivers without process_pending.
  ASSERT_EQ(*client->write(bytes("more")), 4u);
  ASSERT_TRUE(run_until(*loop, [&] { return got == "queuedmore"; }));
}

TEST_F(ShmTest, IdleConnectionLetsTheLoopSleep) {
  auto client = connect_pair("shm://" + unique_name("idle"));
  ASSERT_TRUE(client);
  Connection& server = *accepted[0];
  int calls = 0;
  server.set_read_handler([&](Connection&) { ++calls; });
  client->set_read_handler([&](Connection&) { ++calls; });
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);
  const uint64_t before = loop->iterations();
  const uint64_t t0 = monotonic_ns();
  while (monotonic_ns() - t0 < 300'000'000ull) (void)loop->run_once(50);
  // Blocking 50 ms per iteration allows ~6; a busy loop would do thousands.
  EXPECT_LT(loop->iterations() - before, 20u);
  EXPECT_EQ(calls, 0);
}

// A handler installed on connection B from connection A's handler after B's before-sleep
// hook already ran in this iteration (a proxy pattern): B's data must still be delivered
// without waiting for some unrelated event.
TEST_F(ShmTest, HandlerInstalledFromAnotherConnectionsHook) {
  auto c2 = connect_pair("shm://" + unique_name("proxy"));
  ASSERT_TRUE(c2);
  Connection& s2 = *accepted[0];  // its hook is registered before s1's, so it runs first
  auto c1 = connect_pair("");
  ASSERT_TRUE(c1);
  Connection& s1 = *accepted[1];
  ASSERT_EQ(*c2->write(bytes("for s2")), 6u);
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);  // s2 has no reader: the data waits

  std::string got2;
  s1.set_read_handler([&](Connection& c) {
    std::string ignored;
    (void)drain(c, &ignored);
    s2.set_read_handler([&](Connection& b) { (void)drain(b, &got2); });
  });
  ASSERT_EQ(*c1->write(bytes("go")), 2u);
  EXPECT_TRUE(run_until(*loop, [&] { return got2 == "for s2"; }, 3000)) << "s2's data was never delivered";
}

// The same from a plain before-sleep hook registered after the connection's own (another
// transport's or the application's): the hook installs the handler and lets the loop sleep.
TEST_F(ShmTest, HandlerInstalledFromALaterUserHook) {
  auto c = connect_pair("shm://" + unique_name("userhook"));
  ASSERT_TRUE(c);
  Connection& s = *accepted[0];
  ASSERT_EQ(*c->write(bytes("waiting")), 7u);
  for (int i = 0; i < 3; ++i) (void)loop->run_once(0);
  std::string got;
  bool install = true;
  const EventLoop::HookId hook = loop->add_before_sleep([&] {
    if (install) {
      install = false;
      s.set_read_handler([&](Connection& b) { (void)drain(b, &got); });
    }
    return false;
  });
  EXPECT_TRUE(run_until(*loop, [&] { return got == "waiting"; }, 3000)) << "the data was never delivered";
  loop->remove_before_sleep(hook);
}

TEST_F(ShmTest, WriteFailsOncePeerClosed) {
  auto client = connect_pair("shm://" + unique_name("gone"));
  ASSERT_TRUE(client);
  accepted[0]->close();
  auto w = client->write(bytes("hello?"));  // the close flag is seen without waiting for the hangup
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), Code::kClosed);
  EXPECT_EQ(client->state(), ConnState::kError);
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
