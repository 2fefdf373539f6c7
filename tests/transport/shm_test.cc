// shm:// specifics: handshake, socket file handling, options, peer death, half-close,
// wakeups with both sides sleeping, busy polling, descriptor hygiene.  The transport-
// independent contract is checked by tests/conformance/.
#include "transport/shm_test_util.h"

namespace conduit::transport {
namespace {

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
// 4 KiB rings; a lost wakeup stalls the stream until the watchdog fails the test.  Pure
// event mode (poll_us=0) on both ends: with the default adaptive polling one side may find
// the other always awake and never write a doorbell, which is what this test must see.
TEST_F(ShmTest, TwoThreadsBothSidesSleepingStream) {
  EchoServer server("shm://" + unique_name("sleepers") + "?ring=4096&poll_us=0");
  auto client = connect_and_wait(*loop, server.url() + "?ring=4096&poll_us=0");
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

TEST_F(ShmTest, PingPongSleepingAdaptiveAndBusyPolling) {
  const int rounds = kSanitized ? 2000 : 20000;
  {  // pure event mode on both sides: every exchange may sleep
    EchoServer server("shm://" + unique_name("pp") + "?poll_us=0");
    auto client = connect_and_wait(*loop, server.url() + "?poll_us=0");
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
  {  // default options (adaptive polling): how many exchanges sleep depends on the machine's
     // load (a preempted spin backs off), so only completion is checked; the counts are printed
    EchoServer server("shm://" + unique_name("pp-adaptive"));
    auto client = connect_and_wait(*loop, server.url());
    ASSERT_TRUE(client);
    double one_way = 0;
    ping_pong(*loop, *client, rounds, &one_way);
    client->close();
    server.stop();
    std::printf("adaptive polling: %.2f us one-way (mean), doorbell writes client %llu server %llu for %d round "
                "trips\n",
                one_way, static_cast<unsigned long long>(client->stats().wakeups),
                static_cast<unsigned long long>(server.wakeups()), rounds);
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

// A one-shot read handler (it removes itself when it runs; the reader then reads and writes
// outside the loop's handlers and installs it again before the next wait -- what the
// preload library does for every blocking read and poll) must keep polling like a
// persistent one.  Regression: the idle gap was never ended when the handler that ran had
// removed itself, so the window stayed closed (timed from a stale start) and every exchange
// slept: one doorbell from the server per round trip.
TEST_F(ShmTest, OneShotReadHandlerKeepsPolling) {
  const int rounds = kSanitized ? 2000 : 20000;
  EchoServer server("shm://" + unique_name("pp-oneshot") + "?busy_poll_us=20000");
  auto client = connect_and_wait(*loop, server.url() + "?busy_poll_us=20000");
  ASSERT_TRUE(client);
  uint8_t msg[64] = {7};
  bool readable = false;
  auto arm = [&] {
    client->set_read_handler([&](Connection& c) {
      readable = true;
      c.set_read_handler(nullptr);
    });
  };
  const uint64_t deadline = monotonic_ns() + 120'000'000'000ull;
  for (int done = 0; done < rounds && monotonic_ns() < deadline; ++done) {
    ASSERT_EQ(*client->write(msg), sizeof msg);
    size_t got = 0;
    while (got < sizeof msg && monotonic_ns() < deadline) {
      uint8_t buf[256];
      auto r = client->read(buf);
      if (r.ok() && *r > 0) {
        got += *r;
        continue;
      }
      ASSERT_TRUE(r.ok() || r.status().would_block()) << r.status().to_string();
      readable = false;
      arm();
      while (!readable && monotonic_ns() < deadline) ASSERT_TRUE(loop->run_once(-1).ok());
    }
    ASSERT_EQ(got, sizeof msg) << "stalled after " << done << " round trips";
  }
  client->close();
  server.stop();
  std::printf("one-shot handler, busy polling: doorbell writes client %llu server %llu for %d round trips\n",
              static_cast<unsigned long long>(client->stats().wakeups),
              static_cast<unsigned long long>(server.wakeups()), rounds);
  // As above: a descheduled spinner may miss a few; one per exchange is the regression.
  EXPECT_LT(client->stats().wakeups + server.wakeups(), uint64_t(rounds) / 4);
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

}  // namespace
}  // namespace conduit::transport
