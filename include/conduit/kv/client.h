// conduit::kv clients over any transport URL (tcp://, shm://, rdma://, auto://).
//
//   auto c = kv::Client::connect("tcp://127.0.0.1:6379").value();   // blocking
//   c->command({"SET", "k", "v"});                                   // Result<Reply>
//   kv::Reply r = c->command({"GET", "k"}).value();                  // r.str == "v"
//
//   kv::AsyncClient::connect(loop, "shm://conduit-kv", on_connected) // on an EventLoop
//   client->command({"GET", "k"}, [](Result<Reply> r) { ... });      // in order
//
// Threading: an AsyncClient belongs to its loop's thread; callbacks run there.  A Client
// owns a private loop and may be used from one thread at a time.
//
// Reconnecting (ReconnectOptions::enabled, off by default): once a connection was
// established, losing it (the server died, the network failed, EOF) does not end the
// client.  It reconnects by itself with exponential backoff, re-runs the setup commands
// (AUTH / HELLO / SELECT), then sends what was queued.  What happens to each command:
//   - not yet handed to the transport: kept and sent on the new connection (it never left);
//   - handed over and unanswered: its callback gets kUnavailable ("connection lost before
//     the reply; the server may have executed it"), because re-sending an INCR or an
//     LPUSH could run it twice.  With retry_idempotent, read-only commands (GET, EXISTS,
//     ...; see is_idempotent) are re-sent instead.
// Nothing is re-sent silently otherwise.  Every state change is reported to on_event.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/kv/resp.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::kv {

// One printable state enum for the client's connection state machine.
enum class ClientState : uint8_t {
  kConnecting,  // a transport connect (or the setup commands after it) is under way
  kReady,       // connected and set up: commands go out as they are issued
  kBackoff,     // the connection was lost; waiting before the next attempt (commands queue)
  kClosed,      // final: closed by the application, a setup command failed, or gave up
};
std::string_view client_state_name(ClientState s);

struct ReconnectOptions {
  bool enabled = false;              // off: the first failure is final, every pending call fails
  uint64_t initial_backoff_ms = 100;  // wait before the first attempt after a loss
  uint64_t max_backoff_ms = 5000;     // doubling per failed attempt, capped here
  uint32_t max_attempts = 0;          // consecutive failed attempts before giving up (0 = never)
  bool retry_idempotent = false;      // re-send unanswered read-only commands after a reconnect
};

// What the client reports on every state change (for logs and tools).
struct ClientEvent {
  ClientState state;
  Status cause;             // why the connection was lost or the attempt failed (OK otherwise)
  uint32_t attempt = 0;     // consecutive failed attempts so far
  uint64_t backoff_ms = 0;  // kBackoff: how long until the next attempt
  size_t failed_calls = 0;  // calls failed with kUnavailable at this loss (unknown outcome)
  size_t resent_calls = 0;  // unanswered idempotent calls that will be re-sent
};

// True for commands that only read (GET, MGET, EXISTS, TTL, PING, ...): running one twice
// has the same effect as running it once.  The argument is the command name, any case.
bool is_idempotent(std::string_view command);

struct AsyncClientOptions {
  // Sent first on every connection, before anything else; an error reply makes the
  // client fail for good (kPermissionDenied "AUTH: ...").  The blocking Client fills this
  // from its ClientOptions.
  std::vector<std::vector<std::string>> setup;
  ReconnectOptions reconnect;
  std::function<void(const ClientEvent&)> on_event;
};

class AsyncClient {
 public:
  // Called with the reply, or with a non-OK Status if the connection failed before it
  // arrived (an error *reply* is an OK Result holding a kError Reply).
  using ReplyCallback = std::function<void(Result<Reply>)>;
  using ConnectCallback = std::function<void(Status)>;

  // Starts connecting; on_connect fires from the loop once connected and set up (or with
  // the error; a first connect that fails is not retried).  Commands issued before that
  // are queued and sent once connected.
  static Result<std::unique_ptr<AsyncClient>> connect(reactor::EventLoop& loop, std::string_view url,
                                                      ConnectCallback on_connect = nullptr);
  static Result<std::unique_ptr<AsyncClient>> connect(reactor::EventLoop& loop, std::string_view url,
                                                      AsyncClientOptions options, ConnectCallback on_connect);
  ~AsyncClient();
  AsyncClient(const AsyncClient&) = delete;
  AsyncClient& operator=(const AsyncClient&) = delete;

  // Queues a command (copied into the output buffer) and writes it out.  Cost: one copy
  // of the arguments; one write per call unless corked.
  void command(std::span<const std::string_view> args, ReplyCallback cb);
  void command(std::initializer_list<std::string_view> args, ReplyCallback cb) {
    command(std::span<const std::string_view>(args.begin(), args.size()), std::move(cb));
  }
  // Raw bytes (inline commands, tests); `replies` callbacks expected for them.
  void send_raw(std::string_view bytes, std::vector<ReplyCallback> replies);
  // While corked, command() only buffers; uncork() writes everything at once.
  void cork() { corked_ = true; }
  void uncork();

  bool connected() const;
  ClientState state() const { return state_; }
  size_t pending() const { return pending_.size(); }
  uint64_t reconnects() const { return reconnects_; }  // successful reconnections so far
  // Fails every pending callback with kClosed.  Not from inside a callback of this client.
  void close();
  const Status& error() const { return error_; }
  transport::Connection* connection() { return conn_.get(); }

 private:
  // One issued command (or raw chunk) waiting for its reply.
  struct Pending {
    ReplyCallback cb;
    uint64_t start = 0;     // where its bytes begin in this connection's output stream
    uint64_t end = 0;       // ... and end
    std::string bytes;      // kept while reconnecting is enabled: to send it again
    bool setup = false;     // one of options_.setup (its reply is checked here)
    bool idempotent = false;
    bool continuation = false;  // a further reply of the raw chunk before it
  };
  AsyncClient(reactor::EventLoop& loop, AsyncClientOptions o) : loop_(loop), options_(std::move(o)) {}
  Status start_connect();
  void on_connected(Status s);
  void on_setup_reply(size_t index, Result<Reply> r);
  void on_readable();
  void flush();
  void fail(Status s);
  void lose_connection(Status cause);
  void schedule_reconnect(Status cause, size_t failed, size_t resent);
  void set_state(ClientState s, const Status& cause, size_t failed = 0, size_t resent = 0);
  void queue(std::string_view bytes, ReplyCallback cb, bool idempotent);

  reactor::EventLoop& loop_;
  AsyncClientOptions options_;
  std::string url_;
  std::unique_ptr<transport::Connection> conn_;
  ConnectCallback on_connect_;
  std::deque<Pending> pending_;
  ByteBuffer out_;
  ByteBuffer in_;
  ReplyScanner scanner_;
  Status error_;
  ClientState state_ = ClientState::kConnecting;
  uint64_t appended_ = 0;  // bytes queued on this connection (offsets of Pending::end)
  uint64_t sent_ = 0;      // of which the transport accepted this many
  size_t setup_left_ = 0;  // setup replies still awaited on this connection
  uint32_t attempt_ = 0;
  uint64_t backoff_ms_ = 0;
  uint64_t reconnects_ = 0;
  reactor::TimerId retry_timer_ = 0;
  bool corked_ = false;
  bool writing_ = false;  // write handler installed
  bool established_ = false;
  bool ever_ready_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

struct ClientOptions {
  std::string password;                      // AUTH after connecting ("" = none)
  std::string user;                          // AUTH user (with password), "" = default
  RespVersion resp = RespVersion::kResp2;    // kResp3 sends HELLO 3
  int db = 0;                                // SELECT after connecting when != 0
  uint64_t timeout_ms = 10000;               // bound on connect and on each call (a call that
                                             // times out has an unknown outcome)
  ReconnectOptions reconnect;                // off by default (see the top of this file)
  std::function<void(const ClientEvent&)> on_event;  // state changes, on the calling thread
};

// Blocking client: a private EventLoop driven until each reply arrives.
class Client {
 public:
  static Result<std::unique_ptr<Client>> connect(std::string_view url, const ClientOptions& options = {});
  ~Client();

  Result<Reply> command(std::span<const std::string_view> args);
  Result<Reply> command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }
  Result<Reply> command(const std::vector<std::string>& args);
  // All commands in one write; replies in order.
  Result<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string>>& commands);
  // Sends raw bytes and waits for `replies` replies.
  Result<std::vector<Reply>> raw(std::string_view bytes, size_t replies);
  AsyncClient& async() { return *client_; }
  reactor::EventLoop& loop() { return *loop_; }

 private:
  Client() = default;
  Status wait(const std::function<bool()>& done);
  ClientOptions options_;
  std::unique_ptr<reactor::EventLoop> loop_;
  std::unique_ptr<AsyncClient> client_;
};

}  // namespace conduit::kv
