// The kv client's reconnect (ReconnectOptions): over TCP on the host, against the real
// conduit-kv binary killed and restarted on the same port, and against a scripted server
// that swallows a command and drops the connection (to prove that an unanswered
// non-idempotent command fails instead of being re-sent).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/kv/client.h"
#include "kv_process.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::ServerProcess;
using testing::TempDir;

std::string port_of(const std::string& url) { return url.substr(url.rfind(':') + 1); }

ReconnectOptions fast_reconnect() {
  ReconnectOptions r;
  r.enabled = true;
  r.initial_backoff_ms = 20;
  r.max_backoff_ms = 200;
  return r;
}

TEST(KvClientReconnect, ServerKilledAndRestartedFromItsAof) {
  TempDir dir;
  auto args = [&](const std::string& port) {
    return std::vector<std::string>{"--port", port, "--appendonly", "yes", "--appendfsync", "always",
                                    "--dir", dir.path(), "--requirepass", "s3cret", "--loglevel", "warning"};
  };
  auto server = std::make_unique<ServerProcess>(args("0"));
  ASSERT_FALSE(server->url().empty()) << server->log();
  const std::string url = server->url();
  std::vector<ClientState> seen;
  ClientOptions co;
  co.password = "s3cret";  // AUTH must be re-sent on the new connection
  co.reconnect = fast_reconnect();
  co.on_event = [&](const ClientEvent& e) { seen.push_back(e.state); };
  co.timeout_ms = 20000;
  auto c = Client::connect(url, co);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_TRUE((*c)->command({"SET", "k", "before"}).ok());

  server->kill(SIGKILL);
  // The loss is seen (EOF) and the client backs off and retries while nobody listens.
  const uint64_t deadline = monotonic_ns() + 5'000'000'000ull;
  while ((*c)->async().state() == ClientState::kReady && monotonic_ns() < deadline) (void)(*c)->loop().run_once(10);
  EXPECT_NE((*c)->async().state(), ClientState::kReady);
  server = std::make_unique<ServerProcess>(args(port_of(url)));
  ASSERT_EQ(server->url(), url) << server->log();

  // Issued while disconnected: queued, sent after the reconnect (and AUTH).
  auto r = (*c)->command({"GET", "k"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->str, "before");
  EXPECT_EQ((*c)->async().reconnects(), 1u);
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen.front(), ClientState::kReady);
  EXPECT_NE(std::find(seen.begin(), seen.end(), ClientState::kBackoff), seen.end());
  EXPECT_EQ(seen.back(), ClientState::kReady);
}

TEST(KvClientReconnect, OffByDefaultTheLossIsFinal) {
  auto server = std::make_unique<ServerProcess>(std::vector<std::string>{"--port", "0", "--loglevel", "warning"});
  ASSERT_FALSE(server->url().empty());
  auto c = Client::connect(server->url());
  ASSERT_TRUE(c.ok());
  server->kill(SIGKILL);
  auto r = (*c)->command({"PING"});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ((*c)->async().state(), ClientState::kClosed);
}

TEST(KvClientReconnect, GivesUpAfterMaxAttempts) {
  auto server = std::make_unique<ServerProcess>(std::vector<std::string>{"--port", "0", "--loglevel", "warning"});
  ASSERT_FALSE(server->url().empty());
  ClientOptions co;
  co.reconnect = fast_reconnect();
  co.reconnect.max_attempts = 3;
  uint32_t last_attempt = 0;
  co.on_event = [&](const ClientEvent& e) { last_attempt = std::max(last_attempt, e.attempt); };
  auto c = Client::connect(server->url(), co);
  ASSERT_TRUE(c.ok());
  server->kill(SIGKILL);  // and never comes back
  auto r = (*c)->command({"PING"});
  ASSERT_FALSE(r.ok());
  if (r.status().to_string().find("gave up") == std::string::npos) {
    // The PING went out before the client saw the loss: its outcome is unknown and it is
    // not re-sent (that error); the next call meets the reconnect attempts.
    EXPECT_NE(r.status().to_string().find("may have executed"), std::string::npos) << r.status().to_string();
    r = (*c)->command({"PING"});
    ASSERT_FALSE(r.ok());
  }
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find("gave up after 3 attempts"), std::string::npos) << r.status().to_string();
  EXPECT_EQ((*c)->async().state(), ClientState::kClosed);
  EXPECT_EQ(last_attempt, 3u);
}

// A scripted RESP server on 127.0.0.1: the first connection reads until it has seen
// `swallow` and then closes without answering; every later connection answers each
// command it reads with `answer`, and records what it received.
class ScriptedServer {
 public:
  ScriptedServer(std::string swallow, std::string answer) : swallow_(std::move(swallow)), answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  std::string second_connection_input() {
    std::lock_guard<std::mutex> lock(mu_);
    return second_;
  }

 private:
  void serve() {
    for (int n = 0; !stop_; ++n) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string got;
      char buf[4096];
      for (;;) {
        const ssize_t k = ::read(c, buf, sizeof buf);
        if (k <= 0) break;
        got.append(buf, static_cast<size_t>(k));
        if (n == 0) {
          if (got.find(swallow_) != std::string::npos) break;  // "executed", never answered
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          second_ = got;
        }
        // One answer per command read (each command starts with '*').
        size_t cmds = 0;
        for (char ch : std::string(buf, static_cast<size_t>(k))) cmds += ch == '*' ? 1 : 0;
        for (size_t i = 0; i < cmds; ++i)
          if (::write(c, answer_.data(), answer_.size()) < 0) break;
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string swallow_, answer_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string second_;
};

Result<Reply> run_async(reactor::EventLoop& loop, AsyncClient& c, std::initializer_list<std::string_view> cmd) {
  bool done = false;
  Result<Reply> out = Status(Code::kInternal, "no reply");
  c.command(cmd, [&](Result<Reply> r) {
    out = std::move(r);
    done = true;
  });
  const uint64_t deadline = monotonic_ns() + 10'000'000'000ull;
  while (!done && monotonic_ns() < deadline) (void)loop.run_once(10);
  return done ? std::move(out) : Result<Reply>(Status(Code::kTimedOut, "test: no callback"));
}

void wait_ready(reactor::EventLoop& loop, AsyncClient& c) {
  const uint64_t deadline = monotonic_ns() + 10'000'000'000ull;
  while (c.state() != ClientState::kReady && monotonic_ns() < deadline) (void)loop.run_once(10);
}

TEST(KvClientReconnect, UnansweredNonIdempotentCommandFailsAndIsNotResent) {
  ScriptedServer server("INCR", ":1\r\n");
  auto loop = reactor::EventLoop::create().value();
  AsyncClientOptions o;
  o.reconnect = fast_reconnect();
  o.reconnect.retry_idempotent = true;  // even so: INCR is not idempotent
  size_t failed_calls = 0;
  o.on_event = [&](const ClientEvent& e) { failed_calls += e.failed_calls; };
  auto c = AsyncClient::connect(*loop, server.url(), std::move(o), nullptr).value();
  wait_ready(*loop, *c);
  auto r = run_async(*loop, *c, {"INCR", "n"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().to_string().find("may have executed"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(failed_calls, 1u);
  // The client is reconnecting by itself; the next command goes over the new connection.
  auto p = run_async(*loop, *c, {"PING"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(c->reconnects(), 1u);
  const std::string second = server.second_connection_input();
  EXPECT_NE(second.find("PING"), std::string::npos);
  EXPECT_EQ(second.find("INCR"), std::string::npos) << "INCR was re-sent: " << second;
}

TEST(KvClientReconnect, UnansweredReadIsResentWhenAllowed) {
  ScriptedServer server("GET", "$1\r\nv\r\n");
  auto loop = reactor::EventLoop::create().value();
  AsyncClientOptions o;
  o.reconnect = fast_reconnect();
  o.reconnect.retry_idempotent = true;
  size_t resent = 0;
  o.on_event = [&](const ClientEvent& e) { resent += e.resent_calls; };
  auto c = AsyncClient::connect(*loop, server.url(), std::move(o), nullptr).value();
  wait_ready(*loop, *c);
  auto r = run_async(*loop, *c, {"GET", "k"});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->str, "v");
  EXPECT_EQ(resent, 1u);
  EXPECT_NE(server.second_connection_input().find("GET"), std::string::npos);
}

TEST(KvClientReconnect, UnansweredReadFailsWithoutTheRetryPolicy) {
  ScriptedServer server("GET", "$1\r\nv\r\n");
  auto loop = reactor::EventLoop::create().value();
  AsyncClientOptions o;
  o.reconnect = fast_reconnect();
  auto c = AsyncClient::connect(*loop, server.url(), std::move(o), nullptr).value();
  wait_ready(*loop, *c);
  auto r = run_async(*loop, *c, {"GET", "k"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

TEST(KvClientReconnect, IdempotentCommandTable) {
  EXPECT_TRUE(is_idempotent("get"));
  EXPECT_TRUE(is_idempotent("MGET"));
  EXPECT_TRUE(is_idempotent("Ping"));
  EXPECT_FALSE(is_idempotent("INCR"));
  EXPECT_FALSE(is_idempotent("SET"));
  EXPECT_FALSE(is_idempotent("LPUSH"));
  EXPECT_FALSE(is_idempotent(""));
  EXPECT_EQ(client_state_name(ClientState::kBackoff), "backoff");
}

}  // namespace
}  // namespace conduit::kv
